//! Measuring turnwal against its baselines (docs/PERFORMANCE.md).
//!
//! Everything a measurement is made of lives here, in the library, so that
//! the criterion benches (`benches/`) and `turnwal bench` time exactly the
//! same thing and cannot drift apart: the shared [`workload`], the
//! [`fixtures`] it is written into, turnwal's side of every comparison
//! ([`measure`]) and the baselines it is compared with ([`baselines`]). A
//! harness only decides how often to call [`Side::once`] and how to print.
//!
//! A [`Comparison`] is one question ("how fast is a buffered append?")
//! answered by several [`Side`]s on the same input: the first side is
//! turnwal, the others its baselines. Its [`Outcome`] reports, for every
//! side, the median time of a run, events/s and MiB/s, and for every
//! baseline the **ratio**: turnwal's speed over the baseline's speed (the
//! baseline's median time over turnwal's, for the same events), so `0.7`
//! means "turnwal runs at 70% of the baseline's speed" and `12` means
//! "twelve times faster".
//!
//! [`suite`] is the run `turnwal bench` makes.

pub mod baselines;
pub mod cli;
pub mod concurrent;
pub mod feed;
pub mod fixtures;
pub mod live;
pub mod measure;
pub mod postgres;
pub mod reads;
pub mod stats;
pub mod suite;
pub mod workload;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

/// What a measurement step returns: engine errors, I/O errors and SQLite
/// errors all end a bench the same way.
pub type BenchResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Fresh, numbered subdirectories of one side's scratch directory: every
/// run that writes gets an empty one, removed after the run (untimed).
#[derive(Debug)]
pub struct Runs {
    parent: PathBuf,
    n: u64,
}

impl Runs {
    /// Runs in `parent/<name>`.
    pub fn new(parent: &Path, name: &str) -> Runs {
        Runs {
            parent: parent.join(name),
            n: 0,
        }
    }

    /// The next run's directory (created).
    pub fn fresh(&mut self) -> BenchResult<PathBuf> {
        self.n += 1;
        let dir = self.parent.join(self.n.to_string());
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Removes a run's directory.
    pub fn done(dir: PathBuf) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// One side of a comparison: turnwal, or one of its baselines.
pub trait Side {
    /// Its name, as criterion's function id and the table's row.
    fn name(&self) -> &str;

    /// Runs the measured operation once: an untimed setup (a fresh file or
    /// store where the operation writes), the timed operation, an untimed
    /// cleanup. Returns the time of the operation alone.
    fn once(&mut self) -> BenchResult<Duration>;

    /// The bytes one run processes, when they differ from the comparison's
    /// (a JSONL file is larger than the log holding the same events).
    fn bytes(&self) -> Option<u64> {
        None
    }

    /// Per-operation latencies (one commit per turn, say), accumulated over
    /// every run so far; empty when the side has no inner operations.
    fn latencies(&self) -> &[Duration] {
        &[]
    }
}

/// One question answered by turnwal and its baselines on the same input.
pub struct Comparison<'a> {
    /// The name (criterion's group, the table's section).
    pub name: String,
    /// Events processed by one run of each side; 0 when events/s means
    /// nothing (reopening a writer), and `ops` gives the rate instead.
    pub events: u64,
    /// Bytes processed by one run (per side, unless the side says otherwise).
    pub bytes: u64,
    /// Inner operations per run and their unit (`(60, "turns")` for durable
    /// turns), when events/s is not the natural rate.
    pub ops: Option<(u64, &'static str)>,
    /// turnwal first, then its baselines.
    pub sides: Vec<Box<dyn Side + 'a>>,
}

impl<'a> Comparison<'a> {
    /// Runs every side `reps` times, interleaved (turnwal, baseline 1, …,
    /// turnwal, …), so that a burst of noise on a shared machine hits every
    /// side alike rather than one side's whole series.
    pub fn run(&mut self, reps: usize) -> BenchResult<Outcome> {
        let mut samples = vec![Vec::with_capacity(reps); self.sides.len()];
        for _ in 0..reps {
            for (side, samples) in self.sides.iter_mut().zip(&mut samples) {
                samples.push(side.once()?);
            }
        }
        Ok(self.outcome(samples))
    }

    /// The outcome of samples taken by any harness (one list per side, in
    /// the order of [`Comparison::sides`]).
    pub fn outcome(&self, samples: Vec<Vec<Duration>>) -> Outcome {
        let sides = self
            .sides
            .iter()
            .zip(samples)
            .map(|(side, samples)| SideResult {
                name: side.name().to_owned(),
                bytes: side.bytes().unwrap_or(self.bytes),
                samples,
                latencies: side.latencies().to_vec(),
            })
            .collect();
        Outcome {
            name: self.name.clone(),
            events: self.events,
            ops: self.ops,
            sides,
        }
    }
}

/// The measured times of one side.
#[derive(Debug, Clone)]
pub struct SideResult {
    /// The side's name.
    pub name: String,
    /// Bytes one run processes.
    pub bytes: u64,
    /// The time of every run.
    pub samples: Vec<Duration>,
    /// Per-operation latencies over every run.
    pub latencies: Vec<Duration>,
}

impl SideResult {
    /// The median run time.
    pub fn median(&self) -> Duration {
        stats::median(&self.samples)
    }

    /// `count` per second at the median.
    pub fn rate(&self, count: u64) -> f64 {
        count as f64 / self.median().as_secs_f64().max(1e-12)
    }

    /// MiB/s at the median.
    pub fn mib_per_s(&self) -> f64 {
        self.rate(self.bytes) / (1u64 << 20) as f64
    }
}

/// What a comparison measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The comparison's name.
    pub name: String,
    /// Events per run.
    pub events: u64,
    /// Inner operations per run and their unit.
    pub ops: Option<(u64, &'static str)>,
    /// turnwal first, then the baselines.
    pub sides: Vec<SideResult>,
}

impl Outcome {
    /// turnwal's side.
    pub fn turnwal(&self) -> &SideResult {
        &self.sides[0]
    }

    /// The side named `name`.
    pub fn side(&self, name: &str) -> Option<&SideResult> {
        self.sides.iter().find(|s| s.name == name)
    }

    /// turnwal's speed over `baseline`'s: the baseline's median time over
    /// turnwal's (both process the same events). Above 1, turnwal is faster.
    pub fn ratio(&self, baseline: &str) -> f64 {
        let base = self
            .side(baseline)
            .unwrap_or_else(|| panic!("{}: no side {baseline:?}", self.name));
        base.median().as_secs_f64() / self.turnwal().median().as_secs_f64().max(1e-12)
    }

    /// The outcome as JSON: per side the median (seconds), events/s, MiB/s
    /// (null when the side has no byte volume), the ratio (for baselines)
    /// and the latency percentiles (when any).
    pub fn to_json(&self) -> Value {
        let sides: Vec<Value> = self
            .sides
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut v = json!({
                    "name": s.name,
                    "runs": s.samples.len(),
                    "median_s": s.median().as_secs_f64(),
                    "events_per_s": (self.events > 0).then(|| s.rate(self.events)),
                    "bytes": s.bytes,
                    "mib_per_s": (s.bytes > 0).then(|| s.mib_per_s()),
                });
                if let Some((n, unit)) = self.ops {
                    v[format!("{unit}_per_s")] = json!(s.rate(n));
                }
                if !s.latencies.is_empty() {
                    v["p50_ms"] = json!(ms(stats::percentile(&s.latencies, 50.0)));
                    v["p99_ms"] = json!(ms(stats::percentile(&s.latencies, 99.0)));
                }
                if i > 0 {
                    v["turnwal_ratio"] = json!(self.ratio(&s.name));
                }
                v
            })
            .collect();
        json!({ "name": self.name, "events": self.events, "sides": sides })
    }

    /// The outcome as an aligned text table: one row per side with its
    /// median, rates, latency percentiles and (for baselines) turnwal's
    /// ratio to it.
    pub fn table(&self) -> String {
        let mut rows = vec![vec![
            self.name.clone(),
            "median".into(),
            "events/s".into(),
            "MiB/s".into(),
            self.ops.map_or(String::new(), |(_, u)| format!("{u}/s")),
            if self.sides.iter().any(|s| !s.latencies.is_empty()) {
                "p50 / p99".into()
            } else {
                String::new()
            },
            "turnwal ratio".into(),
        ]];
        for (i, s) in self.sides.iter().enumerate() {
            rows.push(vec![
                format!("  {}", s.name),
                human_duration(s.median()),
                if self.events > 0 {
                    human_rate(s.rate(self.events))
                } else {
                    "—".into()
                },
                if s.bytes > 0 {
                    format!("{:.1}", s.mib_per_s())
                } else {
                    "—".into()
                },
                self.ops
                    .map_or(String::new(), |(n, _)| human_rate(s.rate(n))),
                if s.latencies.is_empty() {
                    String::new()
                } else {
                    format!(
                        "{} / {}",
                        human_duration(stats::percentile(&s.latencies, 50.0)),
                        human_duration(stats::percentile(&s.latencies, 99.0))
                    )
                },
                if i == 0 {
                    "—".into()
                } else {
                    format!("{:.2}×", self.ratio(&s.name))
                },
            ]);
        }
        align(&rows)
    }
}

/// Milliseconds as a float.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A duration with a unit that keeps three significant digits.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

/// A rate with a k/M suffix.
pub fn human_rate(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2}M", r / 1e6)
    } else if r >= 1e3 {
        format!("{:.1}k", r / 1e3)
    } else {
        format!("{r:.1}")
    }
}

/// Left-aligns the first column and right-aligns the others; empty columns
/// are dropped.
pub fn align(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = |c: usize| {
        rows.iter()
            .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..cols).map(width).collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if widths[c] == 0 {
                continue;
            }
            let pad = widths[c] - cell.chars().count();
            if c == 0 {
                let _ = write!(line, "{cell}{}", " ".repeat(pad));
            } else {
                let _ = write!(line, "  {}{cell}", " ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A directory of scratch files, removed (with everything in it) when
/// dropped.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// A new, empty directory inside `parent` (created if missing), named
    /// `turnwal-bench-<pid>-<n>`.
    pub fn new_in(parent: &Path) -> std::io::Result<ScratchDir> {
        std::fs::create_dir_all(parent)?;
        let pid = std::process::id();
        for n in 0u32.. {
            let path = parent.join(format!("turnwal-bench-{pid}-{n}"));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(ScratchDir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        unreachable!("some name is free")
    }

    /// A new directory in the system's temp dir.
    pub fn new() -> std::io::Result<ScratchDir> {
        ScratchDir::new_in(&std::env::temp_dir())
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(&'static str, Duration);

    impl Side for Fixed {
        fn name(&self) -> &str {
            self.0
        }
        fn once(&mut self) -> BenchResult<Duration> {
            Ok(self.1)
        }
    }

    #[test]
    fn ratios_are_speed_over_speed() {
        let mut c = Comparison {
            name: "x".into(),
            events: 1000,
            bytes: 1 << 20,
            ops: None,
            sides: vec![
                Box::new(Fixed("turnwal", Duration::from_millis(10))),
                Box::new(Fixed("slow", Duration::from_millis(40))),
                Box::new(Fixed("fast", Duration::from_millis(5))),
            ],
        };
        let o = c.run(3).unwrap();
        assert_eq!(o.ratio("slow"), 4.0);
        assert_eq!(o.ratio("fast"), 0.5);
        assert_eq!(o.turnwal().rate(o.events), 100_000.0);
        assert_eq!(o.turnwal().mib_per_s(), 100.0);
        let table = o.table();
        assert!(
            table.contains("4.00×") && table.contains("0.50×"),
            "{table}"
        );
        assert_eq!(o.to_json()["sides"][1]["turnwal_ratio"], 4.0);
    }

    #[test]
    fn scratch_dirs_are_removed() {
        let path = {
            let dir = ScratchDir::new().unwrap();
            std::fs::write(dir.path().join("f"), b"x").unwrap();
            dir.path().to_owned()
        };
        assert!(!path.exists());
    }
}
