//! The `turnwal` binary itself on a large session (issue 17): what an
//! operator waits for and what the command holds in memory, process start
//! included.
//!
//! Each command runs as a child process with stdout to `/dev/null`. Its
//! wall time runs from the spawn to its exit; its memory is sampled from
//! `/proc/PID/status` every 200 µs while it runs: `VmHWM`, the peak
//! resident set (mapped pages of the log included), and `RssAnon`, the heap
//! and other anonymous pages (not the mapped log, whose pages the page
//! cache holds anyway). Sampling can miss the last instants of a run, so
//! both are lower bounds, close ones (`VmHWM` only grows). The kernel's
//! `ru_maxrss` is no use here: a child spawned with `vfork` is charged the
//! parent's peak. Only the `turnwal` binary can run this (it needs its own
//! executable), so `turnwal bench` does and the criterion benches do not.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::BenchResult;

/// `tail -n 50` of a 1 GB log: at most this long, process start included.
pub const TAIL_WALL_TARGET: Duration = Duration::from_millis(50);
/// … and at most this resident at its peak.
pub const TAIL_RSS_TARGET: u64 = 64 << 20;
/// `cat`, `verify` and `stats` of a whole log: at most this much heap
/// beyond the mapped pages.
pub const WHOLE_LOG_HEAP_TARGET: u64 = 64 << 20;

/// One command's figures over its runs.
#[derive(Debug, Clone)]
pub struct CliFigure {
    /// The command line after `--store DIR`.
    pub args: Vec<String>,
    /// Median wall time, spawn to exit.
    pub median: Duration,
    /// The largest peak resident set of any run (bytes).
    pub max_rss: u64,
    /// The largest anonymous resident set sampled in any run (bytes).
    pub max_anon: u64,
    /// How many runs.
    pub runs: usize,
}

impl CliFigure {
    /// Whether the figure meets the command's target, if it has one.
    pub fn met(&self) -> Option<bool> {
        match self.args.first().map(String::as_str) {
            Some("tail") => {
                Some(self.median <= TAIL_WALL_TARGET && self.max_rss <= TAIL_RSS_TARGET)
            }
            Some("cat" | "verify" | "stats") if self.args.len() == 2 => {
                Some(self.max_anon <= WHOLE_LOG_HEAP_TARGET)
            }
            _ => None,
        }
    }

    /// The figure as JSON (`turnwal bench --json`, key `cli`).
    pub fn to_json(&self) -> Value {
        json!({
            "command": self.args.join(" "),
            "median_s": self.median.as_secs_f64(),
            "max_rss_bytes": self.max_rss,
            "max_anon_bytes": self.max_anon,
            "runs": self.runs,
            "met": self.met(),
        })
    }
}

/// Runs `exe --store store ARGS…` `runs` times for each command the
/// operator runs on session `id` of `events` events: `tail -n 50`, `cat
/// --from` the last 50, `stats`, `verify` and a whole `cat`.
pub fn measure(
    exe: &Path,
    store: &Path,
    id: &str,
    events: u64,
    runs: usize,
) -> BenchResult<Vec<CliFigure>> {
    let from = events.saturating_sub(50).to_string();
    let commands: [&[&str]; 5] = [
        &["tail", id, "-n", "50"],
        &["cat", id, "--from", &from],
        &["stats", id],
        &["verify", id],
        &["cat", id],
    ];
    commands
        .iter()
        .map(|args| figure(exe, store, args, runs))
        .collect()
}

pub(super) fn figure(
    exe: &Path,
    store: &Path,
    args: &[&str],
    runs: usize,
) -> BenchResult<CliFigure> {
    let mut walls = Vec::with_capacity(runs);
    let (mut max_rss, mut max_anon) = (0, 0);
    for _ in 0..runs {
        let run = run_once(exe, store, args)?;
        walls.push(run.wall);
        max_rss = max_rss.max(run.max_rss);
        max_anon = max_anon.max(run.max_anon);
    }
    walls.sort();
    Ok(CliFigure {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        median: walls[walls.len() / 2],
        max_rss,
        max_anon,
        runs,
    })
}

struct Run {
    wall: Duration,
    max_rss: u64,
    max_anon: u64,
}

fn run_once(exe: &Path, store: &Path, args: &[&str]) -> BenchResult<Run> {
    let started = Instant::now();
    let child = Command::new(exe)
        .arg("--store")
        .arg(store)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    wait_sampling(child, started, args)
}

/// Waits for `child`, sampling its memory from `/proc` (Linux) until it
/// exits.
#[cfg(unix)]
fn wait_sampling(child: std::process::Child, started: Instant, args: &[&str]) -> BenchResult<Run> {
    let pid = child.id() as libc::pid_t;
    let status_path = format!("/proc/{pid}/status");
    let (mut max_rss, mut max_anon) = (0, 0);
    loop {
        // Sampled before the exit check, so even a process that exits at
        // once was sampled after its exec (a sample of the process before
        // its exec is told apart by its name and dropped).
        if let Some((hwm, anon)) = memory(&status_path) {
            max_rss = max_rss.max(hwm);
            max_anon = max_anon.max(anon);
        }
        // The child is reaped here, by wait4; `child` is never waited on.
        let mut status = 0;
        // SAFETY: `pid` is this process's child, not yet reaped; `status`
        // is valid for the call, and a null rusage asks for none.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, std::ptr::null_mut()) };
        if reaped == pid {
            let wall = started.elapsed();
            if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
                return Err(format!("turnwal {} failed ({status:#x})", args.join(" ")).into());
            }
            return Ok(Run {
                wall,
                max_rss,
                max_anon,
            });
        }
        if reaped < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Waits for `child`; Windows has no `/proc` to sample, so the memory
/// figures are 0 (docs/PLATFORMS.md).
#[cfg(windows)]
fn wait_sampling(
    mut child: std::process::Child,
    started: Instant,
    args: &[&str],
) -> BenchResult<Run> {
    let status = child.wait()?;
    if !status.success() {
        return Err(format!("turnwal {} failed ({status})", args.join(" ")).into());
    }
    Ok(Run {
        wall: started.elapsed(),
        max_rss: 0,
        max_anon: 0,
    })
}

#[cfg(unix)]
/// `VmHWM` and `RssAnon` of a live `turnwal` process, in bytes.
fn memory(status_path: &str) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(status_path).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    let name = text.lines().next()?.strip_prefix("Name:")?.trim();
    (name == "turnwal").then_some((field("VmHWM:")?, field("RssAnon:")?))
}
