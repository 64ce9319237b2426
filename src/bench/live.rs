//! The bytes of a live session (issue 31): a realistic session appended
//! the way a harness's pipeline appends it — one `turnwal append` process
//! per [`TURNS_PER_PROCESS`] turns, `--sync turn`, never closed by a
//! `Store::close` and never compacted by hand — against the same events in
//! upstream's JSONL roots, zstd and raw. What a user actually has on disk
//! is this live log, not the compacted one.
//!
//! Sizes, not times: the figures are exact on any machine (the workload is
//! seeded), so the table also reports each process's median wall time
//! only as an aside.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::BenchResult;
use turnwal::backend::jsonl::{self, layout::Compression};
use turnwal::backend::wal::WalBackend;
use turnwal::backend::wal::seal::{LIVE_ZSTD_LEVEL, UNIT_ZSTD_LEVEL};
use turnwal::{Event, SessionHeader, Store, StoreOptions, SyncMode};
use turnwal_testkit::workload::realistic::Realistic;

/// Turns each `turnwal append` process appends.
pub const TURNS_PER_PROCESS: usize = 10;
/// The bound: a live session's bytes over upstream's zstd JSONL
/// of the same session.
pub const LIVE_VS_ZSTD_TARGET: f64 = 1.2;

/// One session length's figures.
#[derive(Debug, Clone)]
pub struct LiveFigure {
    /// Turns appended.
    pub turns: usize,
    /// Events appended.
    pub events: u64,
    /// The WAL session's bytes on disk (its log and its archive).
    pub wal: u64,
    /// The seal's lag: the largest the live file was after any process
    /// (what is not sealed: closed turns the idle rule left plain, the
    /// open turn, the archive reference).
    pub lag: u64,
    /// The same events in an upstream zstd JSONL root (the log file).
    pub jsonl_zstd: u64,
    /// … and in a raw one.
    pub jsonl_raw: u64,
    /// The median wall time of one `append` process.
    pub process: Duration,
}

impl LiveFigure {
    /// WAL bytes over zstd JSONL bytes.
    pub fn vs_zstd(&self) -> f64 {
        self.wal as f64 / self.jsonl_zstd as f64
    }
}

/// What `turnwal bench --live-turns` reports: each length's figures, and
/// what sealing costs on the longest (at least [`SEAL_MIN_TURNS`] turns),
/// sealed as an idle seal and by `compact`.
#[derive(Debug, Clone)]
pub struct LiveReport {
    pub figures: Vec<LiveFigure>,
    /// Turns of the session whose seals were timed.
    pub seal_turns: usize,
    pub seal_idle: SealCost,
    pub seal_compact: SealCost,
}

/// The fewest turns the seals are timed on.
pub const SEAL_MIN_TURNS: usize = 100;

/// Measures each length in `turns` (seeded realistic sessions), then the
/// seals (median of 3 each), in `scratch`; removes what it wrote.
pub fn run(
    scratch: &Path,
    exe: &Path,
    turns: &[usize],
    progress: &mut dyn FnMut(&str),
) -> BenchResult<LiveReport> {
    let figures = sessions(scratch, exe, turns, progress)?;
    let seal_turns = turns.iter().copied().max().unwrap_or(0).max(SEAL_MIN_TURNS);
    progress(&format!("seal cost: {seal_turns} turns sealed at once"));
    Ok(LiveReport {
        figures,
        seal_turns,
        seal_idle: seal_cost(scratch, seal_turns, 3, true)?,
        seal_compact: seal_cost(scratch, seal_turns, 3, false)?,
    })
}

impl LiveReport {
    /// The report as tables.
    pub fn table(&self) -> String {
        let mut out = table(&self.figures);
        for (seal, how) in [
            (
                &self.seal_idle,
                format!("idle, zstd level {LIVE_ZSTD_LEVEL}"),
            ),
            (
                &self.seal_compact,
                format!("compact, level {UNIT_ZSTD_LEVEL}"),
            ),
        ] {
            out.push_str(&seal_line(self.seal_turns, seal, &how));
        }
        out
    }

    /// The report as JSON (`--json`).
    pub fn to_json(&self) -> Value {
        let mut json = to_json(&self.figures);
        json["seal_idle"] = seal_json(self.seal_turns, &self.seal_idle);
        json["seal_compact"] = seal_json(self.seal_turns, &self.seal_compact);
        json
    }
}

/// Measures each length in `turns` (seeded realistic sessions) in
/// `scratch/live`, removed after.
fn sessions(
    scratch: &Path,
    exe: &Path,
    turns: &[usize],
    progress: &mut dyn FnMut(&str),
) -> BenchResult<Vec<LiveFigure>> {
    let dir = scratch.join("live");
    let figures = turns
        .iter()
        .map(|&n| {
            progress(&format!("live session: {n} turns through `turnwal append`"));
            one(&dir.join(n.to_string()), exe, n)
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    figures
}

fn one(dir: &Path, exe: &Path, n: usize) -> BenchResult<LiveFigure> {
    let mut session = Realistic::new(31);
    let turns: Vec<Vec<Event>> = (0..n).map(|_| session.next_turn()).collect();
    let id = "live";
    let wal = dir.join("wal");
    let mut times = Vec::new();
    let mut lag = 0;
    for (i, chunk) in turns.chunks(TURNS_PER_PROCESS).enumerate() {
        let mut input = Vec::new();
        for event in chunk.iter().flatten() {
            input.extend_from_slice(event.to_json().as_bytes());
            input.push(b'\n');
        }
        let start = Instant::now();
        let mut child = append_process(exe, &wal, id, i == 0)?;
        child.stdin.take().ok_or("stdin")?.write_all(&input)?;
        succeeded(child)?;
        times.push(start.elapsed());
        lag = lag.max(std::fs::metadata(WalBackend::open(&wal)?.log_path(id))?.len());
    }
    times.sort();
    let jsonl = |compression: Compression| -> BenchResult<u64> {
        let root = dir.join(format!("{compression:?}"));
        let options = StoreOptions {
            sync: SyncMode::Never,
            ..StoreOptions::default()
        };
        let backend = jsonl::JsonlBackend::open(&root, compression)?;
        let store = Store::with_backend(std::sync::Arc::new(backend), options);
        store.create(SessionHeader::new(id, 1).with_cwd("/work/app"))?;
        for turn in &turns {
            store.append(id, turn)?;
        }
        store.close(id)?;
        let path = jsonl::layout::log_path(&root, Some("/work/app"), id, compression)?;
        Ok(std::fs::metadata(path)?.len())
    };
    Ok(LiveFigure {
        turns: n,
        events: turns.iter().map(|t| t.len() as u64).sum(),
        wal: WalBackend::open(&wal)?.session_bytes(id)?,
        lag,
        jsonl_zstd: jsonl(Compression::Zstd)?,
        jsonl_raw: jsonl(Compression::None)?,
        process: times[times.len() / 2],
    })
}

/// A `turnwal append --quiet --sync turn` process into the store at
/// `store` for session `id` (created, with cwd `/work/app`, if `create`),
/// its input piped, as a harness's pipeline runs it.
pub(super) fn append_process(
    exe: &Path,
    store: &Path,
    id: &str,
    create: bool,
) -> BenchResult<std::process::Child> {
    let store = store.to_str().ok_or("a UTF-8 scratch path")?;
    let mut command = Command::new(exe);
    command.args(["append", "--quiet", "--sync", "turn", "--store", store]);
    if create {
        command.args(["--create", "--cwd", "/work/app"]);
    }
    Ok(command
        .arg(id)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?)
}

/// Waits for an [`append_process`]; its stderr is the error if it failed.
pub(super) fn succeeded(child: std::process::Child) -> BenchResult<()> {
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(format!(
            "turnwal append failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(())
}

/// The figures as a table.
fn table(figures: &[LiveFigure]) -> String {
    let mut out = format!(
        "live session: realistic turns appended by one `turnwal append --sync turn` process per \
         {TURNS_PER_PROCESS} turns, never compacted by hand\n\
         turns   events    WAL bytes  zstd JSONL   raw JSONL  WAL/zstd  WAL/raw  per process  largest live file\n"
    );
    for f in figures {
        out.push_str(&format!(
            "{:>5}  {:>7}  {:>11}  {:>10}  {:>10}  {:>7.2}×  {:>6.2}×  {:>8.1} ms  {:>11} B{}\n",
            f.turns,
            f.events,
            f.wal,
            f.jsonl_zstd,
            f.jsonl_raw,
            f.vs_zstd(),
            f.wal as f64 / f.jsonl_raw as f64,
            f.process.as_secs_f64() * 1e3,
            f.lag,
            if f.vs_zstd() <= LIVE_VS_ZSTD_TARGET {
                ""
            } else {
                "  (target ≤ 1.2× zstd: not met)"
            },
        ));
    }
    out
}

/// The figures as JSON.
fn to_json(figures: &[LiveFigure]) -> Value {
    json!({
        "turns_per_process": TURNS_PER_PROCESS,
        "target_vs_zstd": LIVE_VS_ZSTD_TARGET,
        "sessions": figures.iter().map(|f| json!({
            "turns": f.turns,
            "events": f.events,
            "wal_bytes": f.wal,
            "jsonl_zstd_bytes": f.jsonl_zstd,
            "jsonl_raw_bytes": f.jsonl_raw,
            "wal_vs_zstd": f.vs_zstd(),
            "process_ms": f.process.as_secs_f64() * 1e3,
            "largest_live_file_bytes": f.lag,
        })).collect::<Vec<_>>(),
    })
}

/// What sealing costs: a realistic session of `turns` turns appended into
/// a version-3 store, then sealed once (every closed turn packed,
/// compressed and appended to the archive; the open turn copied) — by
/// `Store::seal_due`, as the idle seal of a live session runs, or by
/// `Store::compact`.
#[derive(Debug, Clone)]
pub struct SealCost {
    /// The plain bytes sealed (the live file before, less after).
    pub sealed: u64,
    /// The process's CPU time (user and system) the seal took.
    pub cpu: Duration,
    /// Its wall time.
    pub wall: Duration,
}

impl SealCost {
    /// CPU milliseconds per MiB of plain records sealed.
    pub fn cpu_ms_per_mib(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e3 / (self.sealed as f64 / (1 << 20) as f64)
    }
}

/// Measures [`SealCost`] for `turns` turns (seed 31) in `scratch/seal`,
/// removed after: the median seal of `reps` fresh sessions, sealed as a
/// live session's idle seal (`live`) or by `compact`.
fn seal_cost(scratch: &Path, turns: usize, reps: usize, live: bool) -> BenchResult<SealCost> {
    let dir = scratch.join("seal");
    let mut session = Realistic::new(31);
    let all: Vec<Vec<Event>> = (0..turns).map(|_| session.next_turn()).collect();
    let mut costs = Vec::new();
    for rep in 0..reps.max(1) {
        let root = dir.join(rep.to_string());
        // Sealing by itself (the default) for `seal_due`; never for
        // `compact`, which is then the only seal.
        let backend = WalBackend::open(&root)?.sealing_by_itself(live);
        let log = backend.log_path("s");
        let options = StoreOptions {
            sync: SyncMode::Never,
            ..StoreOptions::default()
        };
        let store = Store::with_backend(std::sync::Arc::new(backend), options);
        store.create(SessionHeader::new("s", 1).with_cwd("/work/app"))?;
        for turn in &all {
            store.append("s", turn)?;
        }
        store.flush("s")?;
        let before = std::fs::metadata(&log)?.len();
        let (cpu0, wall0) = (cpu_time(), Instant::now());
        let sealed = if live {
            store.seal_due("s")?
        } else {
            store.compact("s")?.is_some()
        };
        if !sealed {
            return Err("the session was not sealed".into());
        }
        let (cpu, wall) = (cpu_time().saturating_sub(cpu0), wall0.elapsed());
        let after = std::fs::metadata(&log)?.len();
        costs.push(SealCost {
            sealed: before.saturating_sub(after),
            cpu,
            wall,
        });
        drop(store);
    }
    let _ = std::fs::remove_dir_all(&dir);
    costs.sort_by_key(|c| c.cpu);
    Ok(costs.swap_remove(costs.len() / 2))
}

/// This process's CPU time so far (user and system).
#[cfg(windows)]
fn cpu_time() -> Duration {
    use windows_sys::Win32::Foundation::FILETIME;
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, GetProcessTimes};
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: the pseudo-handle of this process and four FILETIMEs we own.
    let ok = unsafe {
        GetProcessTimes(
            GetCurrentProcess(),
            &mut created,
            &mut exited,
            &mut kernel,
            &mut user,
        )
    };
    if ok == 0 {
        return Duration::ZERO;
    }
    // FILETIMEs count 100 ns.
    let t = |f: FILETIME| {
        Duration::from_nanos(
            ((u64::from(f.dwHighDateTime) << 32) | u64::from(f.dwLowDateTime)) * 100,
        )
    };
    t(kernel) + t(user)
}

/// This process's CPU time so far (user and system).
#[cfg(unix)]
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// The seal's cost as one line of the table.
fn seal_line(turns: usize, seal: &SealCost, how: &str) -> String {
    format!(
        "seal ({how}): {turns} realistic turns ({} bytes of plain records) sealed at once: \
         {:.1} ms CPU, {:.1} ms wall, {:.1} ms CPU per MiB sealed\n",
        seal.sealed,
        seal.cpu.as_secs_f64() * 1e3,
        seal.wall.as_secs_f64() * 1e3,
        seal.cpu_ms_per_mib()
    )
}

/// The seal's cost as JSON.
fn seal_json(turns: usize, seal: &SealCost) -> Value {
    json!({
        "turns": turns,
        "sealed_bytes": seal.sealed,
        "cpu_ms": seal.cpu.as_secs_f64() * 1e3,
        "wall_ms": seal.wall.as_secs_f64() * 1e3,
        "cpu_ms_per_mib": seal.cpu_ms_per_mib(),
    })
}
