//! `turnwal bench --feed`: the live feed and sync figures
//! (docs/PERFORMANCE.md, "Follow and sync").
//!
//! - **Follow latency**, per store: a writer appends a realistic session
//!   (the shared [`workload`], streamed deltas in chunk runs) in batches of
//!   about ten events at 50 ms intervals; a follower on another store
//!   instance (its own thread, as another process would be) notes when each
//!   event arrives. The latency of a batch is the time from its `append`
//!   returning (the acknowledgement) to its last event arriving: median and
//!   p99. An event can arrive before its acknowledgement (the follower reads
//!   it between the write and the fsync): counted as 0, and said.
//! - **Idle CPU**, per store: the follower's thread's CPU time over 5 s of
//!   waiting on a session nobody writes (Linux: `RUSAGE_THREAD`).
//! - **Sync**, WAL to each other store and back: a realistic session copied
//!   whole by `Store::sync_to`, in events/s, against the source read whole
//!   and appended to the destination as a new session in one batch (a copy
//!   without batches or checks, `convert`'s shape), as a ratio; and the
//!   time to catch up one new turn (median of 5).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::BenchResult;
use super::stats::{median, percentile};
use super::workload::Workload;
use turnwal::backend::SyncMode;
use turnwal::location::{IfMissing, Location, Opening};
use turnwal::{Event, SessionHeader, Store, StoreOptions};

/// Events per appended batch in the latency run.
const BATCH: usize = 10;
/// The writer's pause between two batches.
const INTERVAL: Duration = Duration::from_millis(50);
/// How long the idle follower waits.
const IDLE: Duration = Duration::from_secs(5);

/// When each seq reached the follower.
type Arrivals = Vec<(u64, Instant)>;

/// One store's follow figures.
struct Follow {
    store: String,
    batches: usize,
    median: Duration,
    p99: Duration,
    early: usize,
    idle_cpu: Option<f64>,
}

/// One sync direction's figures.
struct Sync {
    from: String,
    to: String,
    events: u64,
    elapsed: Duration,
    ingest: Duration,
    catch_up: Duration,
    turn_events: usize,
}

/// The report of `turnwal bench --feed`.
pub struct Report {
    follows: Vec<Follow>,
    syncs: Vec<Sync>,
}

fn open(spec: &str, sync: SyncMode) -> BenchResult<Store> {
    let location = Location::parse(spec)?;
    let options = StoreOptions {
        sync,
        ..StoreOptions::default()
    };
    Ok(location.open(&Opening::new(options).if_missing(IfMissing::Create))?)
}

/// The stores measured: a WAL directory, an SQLite database and a JSONL
/// root in `dir`, and PostgreSQL at `postgres` when given.
fn places(dir: &Path, postgres: Option<&str>, tag: &str) -> Vec<(&'static str, String)> {
    let at = |name: &str| dir.join(format!("{tag}-{name}")).display().to_string();
    let mut places = vec![
        ("wal", at("wal")),
        ("sqlite", format!("{}.db", at("sqlite"))),
        ("jsonl", format!("jsonl+none:{}", at("jsonl"))),
    ];
    if let Some(url) = postgres {
        places.push(("postgres", url.to_owned()));
    }
    places
}

/// Runs the feed figures in `dir` (and the database at `postgres`).
pub fn run(
    dir: &Path,
    postgres: Option<&str>,
    quick: bool,
    progress: &mut dyn FnMut(&str),
) -> BenchResult<Report> {
    let batches = if quick { 40 } else { 200 };
    let turns = if quick { 40 } else { 200 };
    let mut follows = Vec::new();
    for (name, spec) in places(dir, postgres, "follow") {
        progress(&format!("follow latency on {name}"));
        follows.push(follow(name, &spec, batches)?);
    }
    let mut syncs = Vec::new();
    let wal = dir.join("sync-src").display().to_string();
    for (name, spec) in places(dir, postgres, "sync") {
        if name == "wal" {
            continue;
        }
        // A session of its own per pair: written, synced there, caught up
        // five turns, then synced back from there, caught up five more.
        let id = format!("s-{name}");
        let mut workload = realistic(&wal, &id, turns)?;
        progress(&format!("sync wal -> {name}"));
        syncs.push(sync_pair(("wal", &wal), (name, &spec), &id, &mut workload)?);
        progress(&format!("sync {name} -> wal"));
        let back = dir.join(format!("sync-back-{name}")).display().to_string();
        syncs.push(sync_pair(
            (name, &spec),
            ("wal", &back),
            &id,
            &mut workload,
        )?);
    }
    Ok(Report { follows, syncs })
}

/// A realistic session `id` of `turns` turns written into WAL store
/// `spec`; the generator, positioned after it.
fn realistic(spec: &str, id: &str, turns: usize) -> BenchResult<Workload> {
    let store = open(spec, SyncMode::Turn)?;
    store.create(SessionHeader::new(id, 1_700_000_000_000))?;
    let mut workload = Workload::new(34);
    for _ in 0..turns {
        store.append(id, &workload.next_turn())?;
    }
    store.close_all()?;
    Ok(workload)
}

fn follow(name: &str, spec: &str, batches: usize) -> BenchResult<Follow> {
    let writer = open(spec, SyncMode::Turn)?;
    let reader = open(spec, SyncMode::Turn)?;
    let id = "live";
    let mut workload = Workload::new(7);
    let mut pending: Vec<Event> = Vec::new();
    let mut next_batch = |pending: &mut Vec<Event>| -> Vec<Event> {
        while pending.len() < BATCH {
            pending.extend(workload.next_turn());
        }
        pending.drain(..BATCH).collect()
    };
    if writer.exists(id)? {
        writer.delete(id)?;
    }
    writer.create(SessionHeader::new(id, 1_700_000_000_000))?;
    writer.append(id, &next_batch(&mut pending))?;
    let mut follow = reader.follow(id, BATCH as u64)?;
    let cancel = follow.canceller();
    let (arrivals, idle_cpu) = std::thread::scope(|scope| -> BenchResult<_> {
        let follower = scope.spawn(move || -> turnwal::Result<(Arrivals, Option<f64>)> {
            let mut arrivals = Vec::new();
            let end = (BATCH * (batches + 1)) as u64;
            while follow.next_seq() < end {
                let events = follow.wait(Some(Duration::from_secs(10)))?;
                let now = Instant::now();
                arrivals.extend(events.iter().map(|e| (e.seq(), now)));
                if events.is_empty() && follow.canceller().is_cancelled() {
                    break;
                }
            }
            // Then idle: nothing is written while it waits.
            let cpu = thread_cpu();
            let started = Instant::now();
            let _ = follow.wait(Some(IDLE))?;
            let idle = cpu.zip(thread_cpu()).map(|(before, after)| {
                (after - before).as_secs_f64() / started.elapsed().as_secs_f64()
            });
            Ok((arrivals, idle))
        });
        // Stops the follower however this closure ends (an append's error
        // included), so the scope's join never waits on it forever.
        let _stop = CancelOnDrop(cancel.clone());
        let mut acks = Vec::with_capacity(batches);
        for _ in 0..batches {
            std::thread::sleep(INTERVAL);
            let batch = next_batch(&mut pending);
            let last = batch.last().map(Event::seq).unwrap_or(0);
            writer.append(id, &batch)?;
            acks.push((last, Instant::now()));
        }
        let (arrivals, idle) = follower.join().map_err(|_| "the follower panicked")??;
        Ok(((acks, arrivals), idle))
    })?;
    let (acks, arrivals) = arrivals;
    let arrived: std::collections::HashMap<u64, Instant> = arrivals.into_iter().collect();
    let mut latencies = Vec::new();
    let mut early = 0;
    for (seq, acked) in acks {
        let at = arrived
            .get(&seq)
            .ok_or_else(|| format!("seq {seq} never arrived"))?;
        match at.checked_duration_since(acked) {
            Some(latency) => latencies.push(latency),
            None => {
                early += 1;
                latencies.push(Duration::ZERO);
            }
        }
    }
    writer.close_all()?;
    Ok(Follow {
        store: name.to_owned(),
        batches: latencies.len(),
        median: median(&latencies),
        p99: percentile(&latencies, 99.0),
        early,
        idle_cpu,
    })
}

/// Cancels a follower when dropped.
struct CancelOnDrop(turnwal::follow::Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// This thread's CPU time, user and system.
fn thread_cpu() -> Option<Duration> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed rusage is a valid value to fill.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: RUSAGE_THREAD and a pointer to a struct we own.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
            return None;
        }
        let time = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        Some(time(usage.ru_utime) + time(usage.ru_stime))
    }
    #[cfg(not(target_os = "linux"))]
    None
}

fn sync_pair(
    (from, src_spec): (&str, &str),
    (to, dst_spec): (&str, &str),
    id: &str,
    workload: &mut Workload,
) -> BenchResult<Sync> {
    let src = open(src_spec, SyncMode::Turn)?;
    let dst = open(dst_spec, SyncMode::Batch)?;
    if dst.exists(id)? {
        dst.delete(id)?;
    }
    let started = Instant::now();
    let synced = src.sync_to(&dst, id)?;
    let elapsed = started.elapsed();
    // The baseline: the source read whole and its events appended to the
    // destination as a new session in one batch (a copy with no batching,
    // no checks: `convert`'s shape).
    let ingest_id = format!("{id}-ingest");
    if dst.exists(&ingest_id)? {
        dst.delete(&ingest_id)?;
    }
    let started = Instant::now();
    let events = src.read_raw(id, 0)?;
    dst.create(SessionHeader::new(&ingest_id, 1_700_000_000_000))?;
    dst.append(&ingest_id, &events)?;
    // Closed, as a sync closes what it wrote (a WAL seals its closed turns
    // at a clean close).
    dst.close(&ingest_id)?;
    let ingest = started.elapsed();
    dst.delete(&ingest_id)?;
    // Catching up one new turn, five times.
    let mut samples = Vec::new();
    let mut turn_events = 0;
    for _ in 0..5 {
        let turn = workload.next_turn();
        turn_events = turn.len();
        src.append(id, &turn)?;
        src.flush(id)?;
        let started = Instant::now();
        src.sync_to(&dst, id)?;
        samples.push(started.elapsed());
    }
    src.close_all()?;
    dst.close_all()?;
    Ok(Sync {
        from: from.to_owned(),
        to: to.to_owned(),
        events: synced.copied,
        elapsed,
        ingest,
        catch_up: median(&samples),
        turn_events,
    })
}

impl Report {
    /// One JSON object: `follow` and `sync` arrays.
    pub fn to_json(&self) -> Value {
        json!({
            "follow": self.follows.iter().map(|f| json!({
                "store": f.store,
                "batches": f.batches,
                "latency_median_ms": ms(f.median),
                "latency_p99_ms": ms(f.p99),
                "before_ack": f.early,
                "idle_cpu_percent": f.idle_cpu.map(|c| c * 100.0),
            })).collect::<Vec<_>>(),
            "sync": self.syncs.iter().map(|s| json!({
                "from": s.from,
                "to": s.to,
                "events": s.events,
                "events_per_s": per_s(s.events, s.elapsed),
                "copy_events_per_s": per_s(s.events, s.ingest),
                "ratio_to_copy": s.ingest.as_secs_f64() / s.elapsed.as_secs_f64(),
                "catch_up_ms": ms(s.catch_up),
                "catch_up_turn_events": s.turn_events,
            })).collect::<Vec<_>>(),
        })
    }

    /// The figures as two tables.
    pub fn table(&self) -> String {
        let mut out =
            String::from("follow      batches  median ms  p99 ms  before ack  idle CPU\n");
        for f in &self.follows {
            out.push_str(&format!(
                "{:<10} {:>8} {:>10.2} {:>7.2} {:>11} {:>9}\n",
                f.store,
                f.batches,
                ms(f.median),
                ms(f.p99),
                f.early,
                f.idle_cpu
                    .map_or("-".to_owned(), |c| format!("{:.3}%", c * 100.0))
            ));
        }
        out.push_str("\nsync                 events   events/s    copy events/s  ratio  catch-up ms (turn)\n");
        for s in &self.syncs {
            out.push_str(&format!(
                "{:<20} {:>7} {:>10.0} {:>16.0} {:>6.2} {:>10.2} ({} events)\n",
                format!("{} -> {}", s.from, s.to),
                s.events,
                per_s(s.events, s.elapsed),
                per_s(s.events, s.ingest),
                s.ingest.as_secs_f64() / s.elapsed.as_secs_f64(),
                ms(s.catch_up),
                s.turn_events
            ));
        }
        out
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn per_s(events: u64, d: Duration) -> f64 {
    events as f64 / d.as_secs_f64().max(1e-9)
}
