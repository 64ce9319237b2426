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
    /// The WAL session's bytes on disk (its log; no other file of it).
    pub wal: u64,
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

/// Measures each length in `turns` (seeded realistic sessions) in
/// `scratch/live`, removed after.
pub fn run(
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
    for (i, chunk) in turns.chunks(TURNS_PER_PROCESS).enumerate() {
        let mut args = vec!["append", "--quiet", "--sync", "turn", "--store"];
        let store = wal.to_str().ok_or("a UTF-8 scratch path")?;
        args.push(store);
        if i == 0 {
            args.extend(["--create", "--cwd", "/work/app"]);
        }
        args.push(id);
        let mut input = Vec::new();
        for event in chunk.iter().flatten() {
            input.extend_from_slice(event.to_json().as_bytes());
            input.push(b'\n');
        }
        let start = Instant::now();
        let mut child = Command::new(exe)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        child.stdin.take().ok_or("stdin")?.write_all(&input)?;
        let out = child.wait_with_output()?;
        times.push(start.elapsed());
        if !out.status.success() {
            return Err(format!(
                "turnwal append failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
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
        jsonl_zstd: jsonl(Compression::Zstd)?,
        jsonl_raw: jsonl(Compression::None)?,
        process: times[times.len() / 2],
    })
}

/// The figures as a table.
pub fn table(figures: &[LiveFigure]) -> String {
    let mut out = format!(
        "live session: realistic turns appended by one `turnwal append --sync turn` process per \
         {TURNS_PER_PROCESS} turns, never compacted by hand\n\
         turns   events    WAL bytes  zstd JSONL   raw JSONL  WAL/zstd  WAL/raw  per process\n"
    );
    for f in figures {
        out.push_str(&format!(
            "{:>5}  {:>7}  {:>11}  {:>10}  {:>10}  {:>7.2}×  {:>6.2}×  {:>8.1} ms{}\n",
            f.turns,
            f.events,
            f.wal,
            f.jsonl_zstd,
            f.jsonl_raw,
            f.vs_zstd(),
            f.wal as f64 / f.jsonl_raw as f64,
            f.process.as_secs_f64() * 1e3,
            if f.vs_zstd() <= LIVE_VS_ZSTD_TARGET {
                ""
            } else {
                "  (target ≤ 1.2× zstd: not met)"
            },
        ));
    }
    out
}

/// The figures as JSON (`turnwal bench --live-turns … --json`).
pub fn to_json(figures: &[LiveFigure]) -> Value {
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
        })).collect::<Vec<_>>(),
    })
}
