//! Many sessions written at once (issue 31): `sessions` realistic sessions,
//! each appended by its own `turnwal append --sync turn` process, all
//! started together into one WAL store — a host running many agents —
//! against the same turns written by plain writers (one thread and one
//! file per session: a write and an `fdatasync` per turn) and by the same
//! processes into one SQLite store. Process start is in turnwal's time, as
//! it is in a harness that spawns `append`; the plain writers pay none.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::BenchResult;
use turnwal::Event;
use turnwal_testkit::workload::realistic::Realistic;

/// The targets: turnwal's turns per second over the plain
/// writers' and over the SQLite store's.
pub const VS_PLAIN_TARGET: f64 = 0.5;
pub const VS_SQLITE_TARGET: f64 = 2.0;

/// One run's figures.
#[derive(Debug, Clone)]
pub struct ConcurrentFigure {
    pub sessions: usize,
    /// Turns per session.
    pub turns: usize,
    /// Events in all sessions.
    pub events: u64,
    /// Wall time of each side, median of the runs.
    pub wal: Duration,
    pub plain: Duration,
    pub sqlite: Duration,
}

impl ConcurrentFigure {
    /// Turns per second in `time`.
    pub fn turns_per_s(&self, time: Duration) -> f64 {
        (self.sessions * self.turns) as f64 / time.as_secs_f64()
    }

    /// The WAL store's turns per second over the plain writers'.
    pub fn vs_plain(&self) -> f64 {
        self.plain.as_secs_f64() / self.wal.as_secs_f64()
    }

    /// … and over the SQLite store's.
    pub fn vs_sqlite(&self) -> f64 {
        self.sqlite.as_secs_f64() / self.wal.as_secs_f64()
    }
}

/// Measures `sessions` sessions of `turns` realistic turns each (seeds
/// 100, 101, …), `reps` times each side, in `scratch/concurrent`
/// (removed after).
pub fn run(
    scratch: &Path,
    exe: &Path,
    sessions: usize,
    turns: usize,
    reps: usize,
    progress: &mut dyn FnMut(&str),
) -> BenchResult<ConcurrentFigure> {
    let dir = scratch.join("concurrent");
    let work: Vec<Vec<Vec<u8>>> = (0..sessions)
        .map(|i| {
            let mut session = Realistic::new(100 + i as u64);
            (0..turns).map(|_| jsonl_of(&session.next_turn())).collect()
        })
        .collect();
    let events = work
        .iter()
        .flatten()
        .map(|turn| turn.iter().filter(|&&b| b == b'\n').count() as u64)
        .sum();
    let (mut wal, mut plain, mut sqlite) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..reps.max(1) {
        progress(&format!(
            "concurrent: {sessions} sessions × {turns} turns, run {}",
            rep + 1
        ));
        let at = dir.join(rep.to_string());
        wal.push(processes(exe, &at.join("wal"), &work)?);
        plain.push(plain_writers(&at.join("plain"), &work)?);
        sqlite.push(processes(exe, &at.join("sessions.sqlite"), &work)?);
        let _ = std::fs::remove_dir_all(&at);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    Ok(ConcurrentFigure {
        sessions,
        turns,
        events,
        wal: median(wal),
        plain: median(plain),
        sqlite: median(sqlite),
    })
}

fn jsonl_of(turn: &[Event]) -> Vec<u8> {
    let mut out = Vec::new();
    for event in turn {
        out.extend_from_slice(event.to_json().as_bytes());
        out.push(b'\n');
    }
    out
}

/// One `turnwal append --create --sync turn` process per session into
/// the store at `store`, all spawned before any is fed; the time until
/// the last one exits.
fn processes(exe: &Path, store: &Path, work: &[Vec<Vec<u8>>]) -> BenchResult<Duration> {
    let start = Instant::now();
    let mut children = (0..work.len())
        .map(|i| super::live::append_process(exe, store, &format!("s{i}"), true))
        .collect::<BenchResult<Vec<_>>>()?;
    // Each child's input from its own thread: a pipe holds 64 KiB, and a
    // child blocks on nothing but its own stdin.
    let feeders: Vec<_> = children
        .iter_mut()
        .zip(work)
        .map(|(child, turns)| {
            let mut stdin = child.stdin.take().expect("piped stdin");
            let input: Vec<u8> = turns.concat();
            std::thread::spawn(move || stdin.write_all(&input))
        })
        .collect();
    for feeder in feeders {
        feeder.join().map_err(|_| "a feeder thread panicked")??;
    }
    for child in children {
        super::live::succeeded(child)?;
    }
    Ok(start.elapsed())
}

/// One thread and one file per session under `dir`: each turn written and
/// fdatasynced, as a minimal durable writer does.
fn plain_writers(dir: &Path, work: &[Vec<Vec<u8>>]) -> BenchResult<Duration> {
    std::fs::create_dir_all(dir)?;
    let files = (0..work.len())
        .map(|i| std::fs::File::create(dir.join(format!("s{i}.jsonl"))))
        .collect::<std::io::Result<Vec<_>>>()?;
    let start = Instant::now();
    std::thread::scope(|scope| -> BenchResult<()> {
        let writers: Vec<_> = files
            .into_iter()
            .zip(work)
            .map(|(mut file, turns)| {
                scope.spawn(move || -> std::io::Result<()> {
                    for turn in turns {
                        file.write_all(turn)?;
                        file.sync_data()?;
                    }
                    Ok(())
                })
            })
            .collect();
        for writer in writers {
            writer.join().map_err(|_| "a writer thread panicked")??;
        }
        Ok(())
    })?;
    Ok(start.elapsed())
}

/// The figure as a table.
pub fn table(f: &ConcurrentFigure) -> String {
    let verdict = |ratio: f64, target: f64| if ratio >= target { "met" } else { "not met" };
    format!(
        "concurrent sessions: {} sessions × {} realistic turns ({} events), one `turnwal append \
         --sync turn` process per session, all at once\n\
         side                         wall     turns/s\n\
         turnwal WAL            {:>9.1} ms  {:>9.0}\n\
         plain writers          {:>9.1} ms  {:>9.0}   (a write and an fdatasync per turn)\n\
         turnwal SQLite         {:>9.1} ms  {:>9.0}\n\
         WAL / plain writers   {:>6.2}×  target ≥ {VS_PLAIN_TARGET}×  {}\n\
         WAL / SQLite          {:>6.2}×  target ≥ {VS_SQLITE_TARGET}×  {}\n",
        f.sessions,
        f.turns,
        f.events,
        f.wal.as_secs_f64() * 1e3,
        f.turns_per_s(f.wal),
        f.plain.as_secs_f64() * 1e3,
        f.turns_per_s(f.plain),
        f.sqlite.as_secs_f64() * 1e3,
        f.turns_per_s(f.sqlite),
        f.vs_plain(),
        verdict(f.vs_plain(), VS_PLAIN_TARGET),
        f.vs_sqlite(),
        verdict(f.vs_sqlite(), VS_SQLITE_TARGET),
    )
}

/// The figure as JSON (`turnwal bench --concurrent … --json`).
pub fn to_json(f: &ConcurrentFigure) -> Value {
    json!({
        "sessions": f.sessions,
        "turns_per_session": f.turns,
        "events": f.events,
        "wal_ms": f.wal.as_secs_f64() * 1e3,
        "plain_ms": f.plain.as_secs_f64() * 1e3,
        "sqlite_ms": f.sqlite.as_secs_f64() * 1e3,
        "wal_turns_per_s": f.turns_per_s(f.wal),
        "plain_turns_per_s": f.turns_per_s(f.plain),
        "sqlite_turns_per_s": f.turns_per_s(f.sqlite),
        "wal_vs_plain": f.vs_plain(),
        "wal_vs_sqlite": f.vs_sqlite(),
        "targets": {"vs_plain": VS_PLAIN_TARGET, "vs_sqlite": VS_SQLITE_TARGET},
    })
}
