//! Crash safety of the native WAL, proved over the simulated disk
//! (`turnwal_testkit::simdisk`) against the one oracle
//! (`turnwal_testkit::crashlab::oracle::check`).
//!
//! These tests guard against the faults a real disk and a real machine
//! inflict that a test on a healthy file system never shows: a power cut at
//! any disk operation of a workload or of recovery itself, after which any
//! subset of the unsynced writes may persist (nothing, everything, a prefix,
//! or 512 B / 4 KiB sectors kept, torn to zeros or torn to garbage);
//! directory entries lost because the directory was not fsynced; ENOSPC and
//! EIO, transient or persistent, on every write, fdatasync, truncate,
//! create, rename and directory fsync of a workload; Linux fsync-failure
//! semantics (a failed fdatasync drops the dirty pages and marks them clean,
//! so a retried fdatasync "succeeds" without writing them); short writes; and
//! random interleavings of all of these. The engine must never acknowledge
//! an event it could lose, never lose or alter one it acknowledged, never
//! leave garbage between records, and always converge on the same bytes when
//! recovery is itself interrupted.
//!
//! Everything is deterministic (seeded) and counted: each test prints what
//! it ran (visible with `--nocapture`) and asserts lower bounds, so a test
//! that silently ran nothing fails. `TURNWAL_CRASHLAB_SCALE=N` (default 1)
//! runs larger sweeps: N workload seeds per sync mode in the crash-point
//! enumeration and the fault matrix, and 300 × N random op sequences:
//!
//! ```text
//! TURNWAL_CRASHLAB_SCALE=20 cargo test --release --test faults crashlab:: -- --nocapture
//! ```

#[path = "crashlab/jsonl.rs"]
mod jsonl;
// SQLite under its Unix VFS (a shim over it injects the faults), with
// children SIGKILLed: Unix only (docs/PLATFORMS.md).
#[cfg(unix)]
#[path = "crashlab/sqlite.rs"]
mod sqlite;
#[cfg(unix)]
#[path = "crashlab/sqlite_vfs.rs"]
mod sqlite_vfs;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use turnwal::backend::wal::WalBackend;
use turnwal::rng::Rng;
use turnwal::storage::Storage;
use turnwal::{
    Error, Event, EventKind, LogState, Receipt, SessionHeader, Store, StoreOptions, SyncMode,
    interrupted_turn_closers,
};
use turnwal_testkit::crashlab::ops::{self, Op, Run};
use turnwal_testkit::crashlab::oracle::{self, Model, Target};
use turnwal_testkit::crashlab::workload::Generator;
use turnwal_testkit::simdisk::{CrashMode, Fault, FaultError, OpKind, SimDisk};

/// Where every simulated store lives (the root `ops::Run` uses too).
const ROOT: &str = "/store";

const SYNC_MODES: [SyncMode; 3] = [SyncMode::Turn, SyncMode::Batch, SyncMode::Never];

fn root() -> &'static Path {
    Path::new(ROOT)
}

/// How much larger than the default the sweeps are.
fn scale() -> u64 {
    std::env::var("TURNWAL_CRASHLAB_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// The session ids `ops::Run` uses.
fn id(session: usize) -> String {
    format!("session-{session}")
}

fn log_path(id: &str) -> PathBuf {
    WalBackend::with_storage(root(), Arc::new(SimDisk::new(0)))
        .expect("opens")
        .log_path(id)
}

fn store(disk: &SimDisk, sync: SyncMode) -> Store {
    oracle::store_on(
        disk,
        root(),
        StoreOptions {
            sync,
            ..StoreOptions::default()
        },
    )
}

/// The events `id` keeps on `disk` as recovery would (without writing):
/// `None` when the session is absent.
fn stored(disk: &SimDisk, id: &str) -> Option<Vec<Event>> {
    match store(disk, SyncMode::Turn).inspect(id) {
        Ok(view) => Some(view.events[..view.stored as usize].to_vec()),
        Err(Error::NotFound { .. }) => None,
        Err(e) => panic!("{id}: inspect failed: {e}"),
    }
}

/// How many leading events of `sent` the session keeps on `disk` (closers a
/// completed repair stored are not counted: they are not in `sent`).
fn kept_of(disk: &SimDisk, id: &str, sent: &[Event]) -> u64 {
    stored(disk, id).map_or(0, |events| {
        events.iter().zip(sent).take_while(|(a, b)| a == b).count() as u64
    })
}

/// Whether `log` ends inside a turn.
fn ends_in_turn(log: &[Event]) -> bool {
    !interrupted_turn_closers(log).is_empty()
}

fn turn_ends(log: &[Event]) -> usize {
    log.iter()
        .filter(|e| e.kind() == EventKind::TurnEnd)
        .count()
}

/// Counts printed by each test and checked against lower bounds.
#[derive(Debug, Default)]
struct Tally {
    crash_points: u64,
    crashes: u64,
    acked_events_checked: u64,
    closed_turns: u64,
}

impl Tally {
    fn checked(&mut self, c: oracle::Checked) {
        self.crashes += 1;
        self.acked_events_checked += c.acked_events;
        self.closed_turns += c.closed_turns;
    }
}

/// Crashes `disk` in every mode and checks the oracle after each (the disk
/// and the model are left as they are).
fn crash_every_mode(disk: &SimDisk, model: &Model, context: &str, tally: &mut Tally) {
    for mode in CrashMode::ALL {
        let after = disk.crash(mode);
        let checked = oracle::check(&after, root(), &mut model.clone(), mode)
            .unwrap_or_else(|e| panic!("{context}, crash {mode:?}: oracle violation: {e}"));
        tally.checked(checked);
    }
}

// ---------------------------------------------------------------------------
// 1. Crash-point enumeration
// ---------------------------------------------------------------------------

/// A realistic session mix: three sessions of about 100 events and several
/// turns each (tool calls, results up to 9 KiB), batches of 1 to 30 events,
/// two flushes, a close (whose reopen commits the repair of the turn it left
/// open), a session materialized in the middle, and turns left open at the
/// end.
fn enumeration_workload() -> Vec<Op> {
    let append = |session, events| Op::Append { session, events };
    vec![
        append(0, 1),
        append(0, 6),
        append(1, 3),
        append(0, 14),
        append(1, 9),
        Op::Flush { session: 0 },
        append(1, 2),
        append(0, 8),
        append(2, 5),
        Op::Close { session: 1 },
        append(2, 17),
        append(1, 6),
        append(0, 3),
        append(2, 11),
        append(1, 12),
        append(0, 25),
        append(2, 4),
        append(1, 20),
        append(0, 9),
        append(2, 22),
        Op::Flush { session: 2 },
        append(1, 28),
        append(0, 30),
        append(2, 30),
        append(1, 16),
        append(2, 13),
        append(0, 5),
    ]
}

/// The first workload seed (the generator's choices); with it the workload
/// has the shape asserted below. `TURNWAL_CRASHLAB_SCALE` adds the next ones.
const ENUMERATION_SEED: u64 = 4;

fn sent_lens(model: &Model) -> BTreeMap<String, u64> {
    model
        .sessions()
        .iter()
        .map(|(id, w)| (id.clone(), w.sent.len() as u64))
        .collect()
}

/// Where the power died: the op it died in and what each session had been
/// sent before that op.
struct Dying {
    op: Op,
    sent_before: BTreeMap<String, u64>,
}

fn session_of(op: &Op) -> Option<usize> {
    match op {
        Op::Append { session, .. }
        | Op::Flush { session }
        | Op::Close { session }
        | Op::Compact { session }
        | Op::SealDue { session } => Some(*session),
        _ => None,
    }
}

/// Exact expectations for one crash image, beyond the oracle: a power loss
/// keeps exactly what was fsynced, a process crash keeps every batch written
/// (losing at most the one in flight, whole), and the torn modes keep
/// something in between.
fn expect_counts(
    run: &Run,
    dying: Option<&Dying>,
    lose: &BTreeMap<String, u64>,
    keep: &BTreeMap<String, u64>,
    context: &str,
) {
    for (name, w) in run.model().sessions() {
        let in_dying_op = dying
            .and_then(|d| session_of(&d.op).map(|s| (s, d)))
            .filter(|(s, _)| id(*s) == *name);
        let sent = w.sent.len() as u64;
        let lost = lose[name];
        let kept = keep[name];
        // A power loss keeps exactly the fsynced events. The one exception
        // is a power cut inside the reopen that follows a close: the close
        // fsynced everything (the model only learns that from the reopen).
        // The same holds for a power cut at the durability proof's write,
        // which follows the fsync of an append or a flush: the batch is durable but was
        // never acknowledged.
        match in_dying_op {
            Some((_, d))
                if matches!(
                    d.op,
                    Op::Close { .. }
                        | Op::Append { .. }
                        | Op::Flush { .. }
                        | Op::Compact { .. }
                        | Op::SealDue { .. }
                ) =>
            {
                assert!(
                    lost == w.synced || lost == sent,
                    "{context}: {name}: power loss kept {lost}, synced {}, sent {sent}",
                    w.synced
                )
            }
            _ => assert_eq!(lost, w.synced, "{context}: {name}: power loss"),
        }
        // A process crash keeps every batch written; only the batch in
        // flight may be missing, and only whole.
        match in_dying_op {
            Some((_, d)) if matches!(d.op, Op::Append { .. }) => {
                let before = d.sent_before.get(name).copied().unwrap_or(0);
                assert!(
                    kept == before || kept == sent,
                    "{context}: {name}: process crash kept {kept}, sent {before} then {sent}"
                );
            }
            _ => assert_eq!(kept, sent, "{context}: {name}: process crash"),
        }
        assert!(lost <= kept, "{context}: {name}");
    }
}

#[test]
fn power_cut_at_every_disk_operation() {
    let started = Instant::now();
    let ops = enumeration_workload();
    let mut tally = Tally::default();
    let mut per_mode = Vec::new();
    for sync in SYNC_MODES {
        let points = tally.crash_points;
        for seed in ENUMERATION_SEED..ENUMERATION_SEED + scale() {
            let mut reference = Run::new(seed, sync);
            for op in &ops {
                reference
                    .apply(op)
                    .expect("the healthy run satisfies the oracle");
            }
            let n = reference.disk().ops();
            if seed == ENUMERATION_SEED {
                // The workload has the shape it promises.
                let sessions = reference.model().sessions();
                assert_eq!(sessions.len(), 3);
                for (name, w) in sessions {
                    assert!(turn_ends(&w.sent) >= 3, "{sync}: {name}: several turns");
                }
                assert!(
                    sessions.values().any(|w| ends_in_turn(&w.sent)),
                    "{sync}: a turn is left open at the end"
                );
                assert!(
                    sessions[&id(1)]
                        .sent
                        .iter()
                        .any(|e| e.data().get().contains("interrupted")),
                    "{sync}: the close left a turn open, which the reopen closed"
                );
            }
            for k in 0..=n {
                let context = format!("sync {sync}, seed {seed}, power cut at op {k} of {n}");
                let mut run = Run::new(seed, sync);
                run.disk().cut_power_at(k);
                let mut dying = None;
                for op in &ops {
                    let sent_before = sent_lens(run.model());
                    let alive = !run.disk().is_dead();
                    run.apply(op)
                        .unwrap_or_else(|e| panic!("{context}: {op:?}: {e}"));
                    if alive && run.disk().is_dead() {
                        dying = Some(Dying {
                            op: op.clone(),
                            sent_before,
                        });
                    }
                }
                assert_eq!(run.disk().is_dead(), k < n, "{context}");
                let counts = |mode| {
                    let after = run.disk().crash(mode);
                    run.model()
                        .sessions()
                        .iter()
                        .map(|(name, w)| (name.clone(), kept_of(&after, name, &w.sent)))
                        .collect::<BTreeMap<_, _>>()
                };
                let lose = counts(CrashMode::LoseUnsynced);
                let keep = counts(CrashMode::KeepAll);
                expect_counts(&run, dying.as_ref(), &lose, &keep, &context);
                for mode in CrashMode::ALL {
                    let after = run.disk().crash(mode);
                    for (name, w) in run.model().sessions() {
                        let got = kept_of(&after, name, &w.sent);
                        assert!(
                            lose[name] <= got && got <= keep[name] && got <= w.sent.len() as u64,
                            "{context}: {mode:?}: {name}: kept {got}, not between the power \
                             loss's {} and the process crash's {}",
                            lose[name],
                            keep[name]
                        );
                    }
                    let checked = oracle::check(&after, root(), &mut run.model().clone(), mode)
                        .unwrap_or_else(|e| panic!("{context}: crash {mode:?}: {e}"));
                    tally.checked(checked);
                }
                tally.crash_points += 1;
            }
        }
        per_mode.push(format!("{sync}: {}", tally.crash_points - points));
    }
    println!(
        "power_cut_at_every_disk_operation: {} crash points (per sync mode: {}), {} simulated \
         crashes, \
         {} acknowledged events checked, {} turns closed by recovery, {:.1?}",
        tally.crash_points,
        per_mode.join("; "),
        tally.crashes,
        tally.acked_events_checked,
        tally.closed_turns,
        started.elapsed()
    );
    assert!(tally.crash_points >= 3 * 50, "{tally:?}");
    assert_eq!(tally.crashes, tally.crash_points * 9);
    assert!(tally.acked_events_checked > 10_000, "{tally:?}");
    assert!(tally.closed_turns > 1_000, "{tally:?}");
}

/// The bytes of `id`'s log on `disk` (as a read sees them), if it exists.
fn log_bytes_on(disk: &SimDisk, id: &str) -> Option<Vec<u8>> {
    use turnwal::storage::OpenMode;
    let file = disk.open(&log_path(id), OpenMode::Read).ok()?;
    let mut bytes = vec![0; file.len().ok()? as usize];
    file.read_exact_at(&mut bytes, 0).ok()?;
    Some(bytes)
}

/// A session of several closed turns (and an open one) compacted, appended
/// to, and compacted again.
fn compaction_workload() -> Vec<Op> {
    let s = 0;
    vec![
        Op::Append {
            session: s,
            events: 30,
        },
        Op::Append {
            session: s,
            events: 25,
        },
        Op::Append {
            session: s,
            events: 30,
        },
        Op::Flush { session: s },
        Op::Compact { session: s },
        Op::Append {
            session: s,
            events: 20,
        },
        Op::Compact { session: s },
        Op::Append {
            session: s,
            events: 5,
        },
    ]
}

/// A power cut at every disk operation of a workload that seals a log
/// twice (docs/FORMAT.md, "Sealing and compaction"), each crash image
/// checked in every crash mode by the oracle (nothing acknowledged lost,
/// every event byte-identical); and a crash inside the first compaction
/// leaves exactly the old file or exactly the new one.
#[test]
fn power_cut_at_every_operation_of_a_compaction() {
    power_cut_at_every_operation_of_seals(Target::WalV2, 2);
}

/// The same for a version-3 session (docs/FORMAT.md, "A version-3 seal"):
/// its first seal publishes the archive, its second appends to it; a crash
/// at any disk operation of either leaves the old live file or the new one
/// (an archive longer than the live file's reference, or an orphan, read
/// as the old session), and the oracle finds every acknowledged event.
#[test]
fn power_cut_at_every_operation_of_a_version_3_seal() {
    power_cut_at_every_operation_of_seals(Target::Wal, 3);
}

fn power_cut_at_every_operation_of_seals(target: Target, version: u8) {
    let started = Instant::now();
    let ops = compaction_workload();
    let mut tally = Tally::default();
    let mut old_or_new = [0u64; 2];
    for sync in SYNC_MODES {
        for seed in ENUMERATION_SEED..ENUMERATION_SEED + scale() {
            // The reference run: where the first compaction's operations
            // lie, and the file before and after it.
            let mut reference = Run::on(target, seed, sync);
            let mut window = (0, 0);
            let (mut old, mut new) = (Vec::new(), Vec::new());
            for (i, op) in ops.iter().enumerate() {
                if i == 4 {
                    window.0 = reference.disk().ops();
                    old = log_bytes_on(reference.disk(), &id(0)).unwrap();
                }
                reference
                    .apply(op)
                    .expect("the healthy run satisfies the oracle");
                if i == 4 {
                    window.1 = reference.disk().ops();
                    new = log_bytes_on(reference.disk(), &id(0)).unwrap();
                }
            }
            assert!(new.len() < old.len(), "{sync}: the compaction sealed turns");
            assert_eq!(new[8], version, "version {version}");
            let n = reference.disk().ops();
            for k in 0..=n {
                let context =
                    format!("{target:?}, sync {sync}, seed {seed}, power cut at op {k} of {n}");
                let mut run = Run::on(target, seed, sync);
                run.disk().cut_power_at(k);
                for op in &ops {
                    run.apply(op)
                        .unwrap_or_else(|e| panic!("{context}: {op:?}: {e}"));
                }
                for mode in CrashMode::ALL {
                    let after = run.disk().crash(mode);
                    if (window.0..window.1).contains(&k) {
                        let bytes = log_bytes_on(&after, &id(0));
                        let which = if bytes.as_deref() == Some(&old[..]) {
                            0
                        } else if bytes.as_deref() == Some(&new[..]) {
                            1
                        } else {
                            panic!(
                                "{context}: {mode:?}: the log is neither the old file ({} \
                                 bytes) nor the new one ({} bytes): {:?} bytes",
                                old.len(),
                                new.len(),
                                bytes.map(|b| b.len())
                            )
                        };
                        old_or_new[which] += 1;
                    }
                    let checked = oracle::check(&after, root(), &mut run.model().clone(), mode)
                        .unwrap_or_else(|e| panic!("{context}: crash {mode:?}: {e}"));
                    tally.checked(checked);
                }
                tally.crash_points += 1;
            }
        }
    }
    println!(
        "power cut at every operation of two seals ({target:?}): {} crash points, {} simulated \
         crashes, {} acknowledged events checked, old file kept {} times, new file {} times, \
         {:.1?}",
        tally.crash_points,
        tally.crashes,
        tally.acked_events_checked,
        old_or_new[0],
        old_or_new[1],
        started.elapsed()
    );
    assert!(tally.crash_points >= 3 * 20, "{tally:?}");
    assert!(old_or_new[0] > 0 && old_or_new[1] > 0, "{old_or_new:?}");
}

/// Every fault (EIO, ENOSPC; transient or persistent) at every write,
/// fsync, create, rename and directory fsync of a compaction: the call
/// fails or succeeds, and a power loss after it loses nothing
/// acknowledged (the oracle), with the log the old file or the new one.
#[test]
fn every_fault_inside_a_compaction_keeps_old_or_new() {
    every_fault_inside_seals_keeps_old_or_new(Target::WalV2, 2);
}

/// The same for a version-3 session's seal: faults at the archive's write,
/// its fsync, its first publication (create, rename, directory fsync) and
/// the live file's.
#[test]
fn every_fault_inside_a_version_3_seal_keeps_old_or_new() {
    every_fault_inside_seals_keeps_old_or_new(Target::Wal, 3);
}

fn every_fault_inside_seals_keeps_old_or_new(target: Target, version: u8) {
    let mut tally = Tally::default();
    let mut failed = 0;
    for sync in SYNC_MODES {
        for kind in [
            OpKind::Write,
            OpKind::Sync,
            OpKind::Create,
            OpKind::Rename,
            OpKind::SyncDir,
        ] {
            for nth in 0..3 {
                for (error, persistent) in [
                    (FaultError::Io, false),
                    (FaultError::NoSpace, false),
                    (FaultError::Io, true),
                ] {
                    let fault = Fault {
                        kind,
                        nth,
                        error,
                        persistent,
                    };
                    let context = format!("{target:?}, sync {sync}, {fault:?}");
                    let mut ops = compaction_workload();
                    ops.insert(4, Op::Fault(fault));
                    let mut run = Run::on(target, ENUMERATION_SEED, sync);
                    for op in &ops[..5] {
                        run.apply(op)
                            .unwrap_or_else(|e| panic!("{context}: {op:?}: {e}"));
                    }
                    let old = log_bytes_on(run.disk(), &id(0)).unwrap();
                    let before = run.disk().faults_injected();
                    run.apply(&ops[5])
                        .unwrap_or_else(|e| panic!("{context}: {:?}: {e}", ops[5]));
                    if run.disk().faults_injected() > before {
                        failed += 1;
                    }
                    // Right after the (faulted) compaction: the old file, or
                    // a version-2 file whose events the oracle checks.
                    for mode in CrashMode::ALL {
                        let after = run.disk().crash(mode);
                        let bytes = log_bytes_on(&after, &id(0)).expect("the log exists");
                        assert!(
                            bytes == old || (bytes[8] == version && bytes.len() < old.len()),
                            "{context}: crash {mode:?}: neither the old file nor a sealed one"
                        );
                        let checked = oracle::check(&after, root(), &mut run.model().clone(), mode)
                            .unwrap_or_else(|e| panic!("{context}: crash {mode:?}: {e}"));
                        tally.checked(checked);
                    }
                    for op in &ops[6..] {
                        run.apply(op)
                            .unwrap_or_else(|e| panic!("{context}: {op:?}: {e}"));
                    }
                    for mode in CrashMode::ALL {
                        let after = run.disk().crash(mode);
                        let checked = oracle::check(&after, root(), &mut run.model().clone(), mode)
                            .unwrap_or_else(|e| panic!("{context}: crash {mode:?}: {e}"));
                        tally.checked(checked);
                    }
                }
            }
        }
    }
    println!(
        "every_fault_inside_a_compaction_keeps_old_or_new: {} runs with a fault injected, {} \
         simulated crashes, {} acknowledged events checked",
        failed, tally.crashes, tally.acked_events_checked
    );
    assert!(failed > 50, "{failed}");
}

// ---------------------------------------------------------------------------
// 2. Crash inside recovery
// ---------------------------------------------------------------------------

const RECOVERY_ID: &str = "session-r";

/// Three turns, the third left open with one tool call requested and not
/// started and one recorded and unanswered, so the closers hold both kinds
/// of error result, a `step/end` and a `turn/end`.
fn recovery_log() -> Vec<Event> {
    let specs: [(&str, &str); 20] = [
        ("turn/start", r#"{"turn":1}"#),
        (
            "user/message",
            r#"{"id":"u1","role":"user","content":[{"type":"text","text":"list the files"}]}"#,
        ),
        ("step/start", r#"{"turn":1,"step":1}"#),
        (
            "assistant/message",
            r#"{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"a","name":"run","arguments":"{}"}]}}"#,
        ),
        (
            "tool/call",
            r#"{"turn":1,"step":1,"callId":"a","name":"run","arguments":"{}"}"#,
        ),
        (
            "tool/result",
            r#"{"turn":1,"step":1,"message":{"id":"r-a","role":"user","source":{"kind":"tool","callId":"a"},"content":[{"type":"tool-result","toolCallId":"a","content":[{"type":"text","text":"a.txt b.txt"}]}]}}"#,
        ),
        ("step/end", r#"{"turn":1,"step":1}"#),
        ("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#),
        ("turn/start", r#"{"turn":2}"#),
        (
            "user/message",
            r#"{"id":"u2","role":"user","content":[{"type":"text","text":"thanks"}]}"#,
        ),
        ("step/start", r#"{"turn":2,"step":1}"#),
        (
            "assistant/chunk",
            r#"{"turn":2,"step":1,"chunk":{"type":"text-delta","index":0,"text":"you are welcome"}}"#,
        ),
        ("step/end", r#"{"turn":2,"step":1}"#),
        ("turn/end", r#"{"turn":2,"reason":{"kind":"completed"}}"#),
        ("turn/start", r#"{"turn":3}"#),
        (
            "user/message",
            r#"{"id":"u3","role":"user","content":[{"type":"text","text":"now build it"}]}"#,
        ),
        ("step/start", r#"{"turn":3,"step":1}"#),
        (
            "assistant/message",
            r#"{"turn":3,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"b","name":"run","arguments":"{}"},{"type":"tool-call","id":"c","name":"run","arguments":"{}"}]}}"#,
        ),
        (
            "tool/call",
            r#"{"turn":3,"step":1,"callId":"b","name":"run","arguments":"{}"}"#,
        ),
        (
            "assistant/chunk",
            r#"{"turn":3,"step":1,"chunk":{"type":"text-delta","index":0,"text":"building"}}"#,
        ),
    ];
    specs
        .iter()
        .enumerate()
        .map(|(seq, (t, data))| {
            Event::new(t, seq as u64, 1_700_000_000_000 + seq as i64, data).expect("valid")
        })
        .collect()
}

/// A disk holding the whole recovery log, each event appended (and fsynced)
/// on its own, and the file length after each event.
fn recovery_disk() -> (SimDisk, Vec<u64>) {
    let disk = SimDisk::new(21);
    let store = store(&disk, SyncMode::Batch);
    store
        .create(SessionHeader::new(RECOVERY_ID, 1).with_cwd("/work"))
        .expect("creates");
    let path = log_path(RECOVERY_ID);
    let mut ends = Vec::new();
    for event in recovery_log() {
        store
            .append(RECOVERY_ID, std::slice::from_ref(&event))
            .expect("appends");
        ends.push(disk.read(&path).expect("materialized").len() as u64);
    }
    drop(store);
    (disk.crash(CrashMode::LoseUnsynced), ends)
}

/// A model for a crashed image: everything was sent, and the events the
/// image keeps are as good as acknowledged (they were on disk before
/// recovery started, so no crash inside recovery may lose them).
fn image_model(kept: u64) -> Model {
    let mut model = Model::new();
    model.sent(RECOVERY_ID, &recovery_log());
    model.synced(RECOVERY_ID, kept);
    model
}

fn recover(disk: &SimDisk) -> Result<Vec<Event>, Error> {
    store(disk, SyncMode::Turn)
        .load(RECOVERY_ID)
        .map(|view| view.events)
}

#[derive(Debug, Default)]
struct RecoveryTally {
    recoveries: u64,
    cut_points: u64,
    crashes: u64,
    oracle: Tally,
}

/// Cuts the power at every disk operation the recovery of `image` performs,
/// crashes in every mode, and recovers again (itself interrupted the same
/// way while `depth > 1`): every path must end in `expected`'s bytes and
/// satisfy the oracle.
fn crash_inside_recovery(
    image: &SimDisk,
    expected: &[u8],
    model: &Model,
    depth: u32,
    context: &str,
    tally: &mut RecoveryTally,
) {
    let path = log_path(RECOVERY_ID);
    let start = image.ops();
    let clean = image.snapshot();
    recover(&clean).unwrap_or_else(|e| panic!("{context}: recovery failed: {e}"));
    assert_eq!(
        clean.read(&path).as_deref(),
        Some(expected),
        "{context}: recovery did not converge on the bytes of an uninterrupted one"
    );
    tally.recoveries += 1;
    if depth == 0 {
        return;
    }
    let n = clean.ops() - start;
    for k in start..start + n {
        let cut = image.snapshot();
        cut.cut_power_at(k);
        let err = recover(&cut).expect_err("the power cut stops recovery");
        assert!(
            matches!(err, Error::Io { .. }),
            "{context}: cut at {k}: {err}"
        );
        assert!(cut.is_dead());
        tally.cut_points += 1;
        for mode in CrashMode::ALL {
            let after = cut.crash(mode);
            tally.crashes += 1;
            let context = format!("{context} > cut at op {} of {n}, {mode:?}", k - start);
            // Recover again (interrupted again while depth allows): every
            // path ends in the same bytes.
            crash_inside_recovery(&after, expected, model, depth - 1, &context, tally);
            let checked = oracle::check(&after, root(), &mut model.clone(), mode)
                .unwrap_or_else(|e| panic!("{context}: oracle violation: {e}"));
            tally.oracle.checked(checked);
        }
    }
}

#[test]
fn crash_inside_recovery_converges() {
    let started = Instant::now();
    let log = recovery_log();
    let (base, ends) = recovery_disk();
    let path = log_path(RECOVERY_ID);
    let full = base.read(&path).expect("stored");
    assert_eq!(full.len() as u64, ends[19]);
    let half = |i: usize| (ends[i - 1] + (ends[i] - ends[i - 1]) / 2) as usize;
    let mut garbage_rng = Rng::new(5);
    let garbage: Vec<u8> = (0..700).map(|_| garbage_rng.next_u64() as u8).collect();
    // The repair of the open turn, cut inside its second closer: an
    // interrupted repair.
    let repaired = {
        let d = base.snapshot();
        recover(&d).expect("recovers");
        d.read(&path).expect("stored")
    };
    let closer_ends: Vec<usize> = {
        // Closer records follow the real ones; find their boundaries from
        // their trailers (each record ends with its length).
        let mut ends = Vec::new();
        let mut at = repaired.len();
        while at > full.len() {
            ends.push(at);
            let len = u32::from_le_bytes(repaired[at - 4..at].try_into().unwrap()) as usize;
            at -= len;
        }
        assert_eq!(at, full.len());
        ends.reverse();
        ends
    };
    assert_eq!(
        closer_ends.len(),
        4,
        "two error results, step/end, turn/end"
    );
    let images: Vec<(&str, Vec<u8>, usize, bool)> = vec![
        // (name, bytes, events kept, whether closers are needed)
        ("open turn", full.clone(), 20, true),
        ("torn tail", full[..half(14)].to_vec(), 14, false),
        (
            "open turn and torn tail",
            full[..half(19)].to_vec(),
            19,
            true,
        ),
        (
            "open turn and garbage tail",
            [&full[..], &garbage].concat(),
            20,
            true,
        ),
        (
            "open turn and zero tail",
            [&full[..], &[0; 4096]].concat(),
            20,
            true,
        ),
        (
            "interrupted repair",
            repaired[..(closer_ends[0] + closer_ends[1]) / 2].to_vec(),
            20,
            true,
        ),
    ];
    let mut tally = RecoveryTally::default();
    let mut lines = Vec::new();
    for (name, bytes, kept, needs_closers) in images {
        let image = base.snapshot();
        image.write_durable(&path, &bytes).expect("staged");
        // The uninterrupted recovery: exactly the kept events and their
        // closers, in exactly 7 disk operations when only closers are
        // written (fsync at open, the durability proof's write, truncate,
        // fsync, write the closers, fsync, the proof's write); a
        // cut first quarantines the bytes (the file's create, write, fsync
        // and rename, the directory's fsync) and proves nothing at open.
        let clean = image.snapshot();
        let start = clean.ops();
        let events = recover(&clean).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut want = log[..kept].to_vec();
        let closers = interrupted_turn_closers(&want);
        assert_eq!(closers.is_empty(), !needs_closers, "{name}");
        want.extend(closers);
        assert_eq!(events, want, "{name}: recovered events");
        let ops = clean.ops() - start;
        // Only "open turn" cuts nothing; only "torn tail" writes no closers.
        let want_ops = match name {
            "open turn" => 7,
            "torn tail" => 9,
            _ => 11,
        };
        assert_eq!(ops, want_ops, "{name}: recovery ops");
        let expected = clean.read(&path).expect("stored");
        let before = tally.crashes;
        crash_inside_recovery(
            &image,
            &expected,
            &image_model(kept as u64),
            2,
            name,
            &mut tally,
        );
        lines.push(format!(
            "{name}: {ops} ops, {} crashes",
            tally.crashes - before
        ));
    }
    println!(
        "crash_inside_recovery_converges: 6 images ({}), {} power cuts inside recovery, \
         {} simulated crashes (two levels of interrupted recovery), {} recoveries converged \
         on the same bytes, {} oracle checks, {:.1?}",
        lines.join("; "),
        tally.cut_points,
        tally.crashes,
        tally.recoveries,
        tally.oracle.crashes,
        started.elapsed()
    );
    assert!(tally.cut_points >= 5 * 5 + 3, "{tally:?}");
    assert_eq!(tally.crashes, tally.cut_points * 9);
    assert_eq!(tally.oracle.crashes, tally.crashes);
    assert!(tally.recoveries > tally.crashes, "{tally:?}");
}

// ---------------------------------------------------------------------------
// 3. Fault injection: error behaviour
// ---------------------------------------------------------------------------

/// One step of the fault workload, driven through the `Store` API directly
/// so every error and receipt is visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Append the next `n` events of a session (creating it first).
    Append(usize, usize),
    Flush(usize),
    /// Flush and release a session.
    Close(usize),
    /// Load a closed session again (committing the repair of a turn the
    /// close left open) and continue from what is stored.
    Reopen(usize),
}

impl Step {
    fn session(self) -> usize {
        match self {
            Step::Append(s, _) | Step::Flush(s) | Step::Close(s) | Step::Reopen(s) => s,
        }
    }
}

/// Three materializations (one in the middle), writes with and without
/// fdatasync, flushes, closes, and a reopen that commits a repair (truncate
/// plus closers), so every kind of disk operation occurs several times.
const FAULT_SCRIPT: &[Step] = &[
    Step::Append(0, 1),
    Step::Append(0, 5),
    Step::Append(1, 3),
    Step::Append(0, 12),
    Step::Append(1, 9),
    Step::Flush(0),
    Step::Append(0, 7),
    Step::Close(1),
    Step::Append(2, 6),
    Step::Reopen(1),
    Step::Append(1, 10),
    Step::Append(2, 14),
    Step::Append(0, 4),
    Step::Flush(2),
    Step::Close(0),
    Step::Append(2, 3),
    Step::Reopen(0),
    Step::Append(0, 8),
    Step::Append(1, 6),
];

const FAULT_SEED: u64 = 4;

/// A store over a simulated disk, driven step by step, with the model of
/// what was sent and acknowledged.
struct Driver {
    disk: SimDisk,
    store: Store,
    sync: SyncMode,
    model: Model,
    rng: Rng,
    gens: Vec<Generator>,
    created: Vec<bool>,
    /// A batch whose append failed, re-sent by the next append.
    unaccepted: Vec<Option<Vec<Event>>>,
}

impl Driver {
    fn new(seed: u64, sync: SyncMode) -> Driver {
        let disk = SimDisk::new(seed);
        Driver {
            store: store(&disk, sync),
            disk,
            sync,
            model: Model::new(),
            rng: Rng::new(seed),
            gens: vec![Generator::new(); 3],
            created: vec![false; 3],
            unaccepted: vec![None; 3],
        }
    }

    /// What the store reports for a session (an empty append: no disk
    /// operation).
    fn receipt(&self, session: usize) -> Option<Receipt> {
        self.created[session].then(|| {
            self.store
                .append(&id(session), &[])
                .unwrap_or_else(|e| panic!("{}: receipt: {e}", id(session)))
        })
    }

    fn sent(&self, session: usize) -> &[Event] {
        self.model
            .sessions()
            .get(&id(session))
            .map_or(&[], |w| &w.sent[..])
    }

    /// Runs one step, updating the model on success and asserting the
    /// receipt's exact figures.
    fn exec(&mut self, step: Step) -> Result<(), Error> {
        let s = step.session();
        let name = id(s);
        match step {
            Step::Append(_, n) => {
                if !self.created[s] {
                    self.store
                        .create(SessionHeader::new(name.clone(), 1))
                        .expect("creates");
                    self.created[s] = true;
                }
                let durable_before = self.receipt(s).expect("created").durable;
                let batch = match self.unaccepted[s].take() {
                    Some(batch) => batch,
                    None => self.gens[s].batch(&mut self.rng, n),
                };
                self.model.sent(&name, &batch);
                let receipt = match self.store.append(&name, &batch) {
                    Ok(receipt) => receipt,
                    Err(e) => {
                        self.unaccepted[s] = Some(batch);
                        return Err(e);
                    }
                };
                let next = batch.last().expect("nonempty").seq() + 1;
                assert_eq!(receipt.next_seq, next, "{name}");
                // Materialization fsyncs the first batch; `batch` and
                // `never` acknowledge every batch; `turn` one that ends a
                // turn.
                let first = batch[0].seq() == 0;
                let ends_turn = batch.iter().any(|e| e.kind() == EventKind::TurnEnd);
                let want = match self.sync {
                    _ if first => next,
                    SyncMode::Batch | SyncMode::Never => next,
                    SyncMode::Turn if ends_turn => next,
                    SyncMode::Turn => durable_before,
                };
                assert_eq!(receipt.durable, want, "{name}: receipt of {step:?}");
                if first || self.sync != SyncMode::Never {
                    self.model.synced(&name, receipt.durable);
                }
                self.model.acked(&name, receipt.durable);
            }
            Step::Flush(_) => {
                let durable = self.store.flush(&name)?;
                assert_eq!(durable, self.sent(s).len() as u64, "{name}: flush");
                self.model.synced(&name, durable);
            }
            Step::Close(_) => {
                self.store.close(&name)?;
                // Closing fsyncs every accepted event.
                let all = self.sent(s).len() as u64;
                self.model.synced(&name, all);
            }
            Step::Reopen(_) => {
                let view = self.store.load(&name)?;
                let sent = self.sent(s).to_vec();
                let mut want = sent.clone();
                want.extend(interrupted_turn_closers(&sent));
                assert_eq!(view.events, want, "{name}: reopened log");
                self.gens[s] = Generator::resume(&view.events);
                self.model.recovered(&name, view.events);
            }
        }
        Ok(())
    }

    /// The process exits (without closing anything) and a new one opens the
    /// store: the page cache outlives the process, unsynced writes and all.
    /// Every session is loaded again (committing its repair) and continues
    /// from what is stored; every acknowledged event must still be there.
    fn restart(&mut self, context: &str) {
        drop(std::mem::replace(
            &mut self.store,
            store(&SimDisk::new(0), self.sync),
        ));
        self.store = store(&self.disk, self.sync);
        for s in 0..3 {
            self.unaccepted[s] = None;
            if !self.created[s] {
                continue;
            }
            let name = id(s);
            let written = self.model.sessions()[&name].clone();
            match self.store.load(&name) {
                Ok(view) => {
                    let kept = view
                        .events
                        .iter()
                        .zip(&written.sent)
                        .take_while(|(a, b)| a == b)
                        .count();
                    assert!(
                        kept as u64 >= written.acked,
                        "{context}: {name}: {} acknowledged, {kept} found after a restart",
                        written.acked
                    );
                    assert_eq!(
                        view.events[kept..],
                        interrupted_turn_closers(&written.sent[..kept])[..],
                        "{context}: {name}: a prefix of what was sent, then the closers"
                    );
                    self.gens[s] = Generator::resume(&view.events);
                    self.model.recovered(&name, view.events);
                }
                Err(Error::NotFound { .. }) if written.acked == 0 => {
                    // Never materialized: create it again.
                    self.created[s] = false;
                    self.gens[s] = Generator::new();
                    self.model.forget(&name);
                }
                Err(e) => panic!("{context}: {name}: load after a restart: {e}"),
            }
        }
    }

    /// The log of `session` as the disk holds it now (read through another
    /// store, as a reader would): exactly what was accepted, no gap, no
    /// duplicate, no garbage after it.
    fn check_log(&self, session: usize, context: &str) {
        let name = id(session);
        let reader = store(&self.disk, self.sync);
        let accepted =
            self.sent(session).len() - self.unaccepted[session].as_ref().map_or(0, Vec::len);
        let events = match reader.read_from(&name, 0) {
            Ok(events) => events,
            // Never materialized: nothing was accepted.
            Err(Error::NotFound { .. }) if accepted == 0 => return,
            Err(e) => panic!("{context}: {name}: read: {e}"),
        };
        assert!(
            events[..] == self.sent(session)[..accepted],
            "{context}: {name}: the log holds {} events, not exactly the {accepted} accepted",
            events.len()
        );
        let report = reader
            .verify(&name)
            .unwrap_or_else(|e| panic!("{context}: {name}: verify: {e}"));
        assert!(
            report.cut.is_none() && matches!(report.state, LogState::Clean | LogState::OpenTurn),
            "{context}: {name}: garbage after the accepted records: {report:?}"
        );
    }
}

/// The error a failing call must return: the injected I/O error with the
/// path it failed on, or `Poisoned`.
fn check_error(e: &Error, fault: &Fault, context: &str) {
    let code = match fault.error {
        FaultError::NoSpace => 28,
        FaultError::Io => 5,
    };
    match e {
        Error::Io { path, source, .. } => {
            assert_eq!(source.raw_os_error(), Some(code), "{context}: {e}");
            // The root as given, or as the JSONL backend resolves it
            // (`Z:\store` under wine).
            let absolute = std::path::absolute(root()).unwrap();
            assert!(
                path.starts_with(root()) || path.starts_with(&absolute),
                "{context}: no path in {e}"
            );
        }
        Error::Poisoned { .. } => {}
        other => panic!("{context}: expected an I/O error or Poisoned, got {other}"),
    }
}

/// A session's recovered events (`None`: absent) after a process crash and
/// after a power loss.
type Finals = (Option<Vec<Event>>, Option<Vec<Event>>);

/// What one run of the fault workload saw.
#[derive(Debug, Default)]
struct FaultRun {
    fired: bool,
    failures: u64,
    resends: u64,
    /// Each session's recovered events after the run, after a process crash
    /// and after a power loss.
    finals: BTreeMap<String, Finals>,
}

/// Runs the fault workload with `fault` armed (or none), asserting at the
/// failure: (a) the call returns the error, (b) nothing of the failing call
/// is acknowledged, and every crash then satisfies the oracle; (c) after a
/// transient fault re-sending succeeds and the log is exact; (d) after a
/// persistent one, re-sending fails again and every crash followed by
/// recovery on a healthy disk satisfies the oracle.
fn fault_run(seed: u64, sync: SyncMode, fault: Option<Fault>, tally: &mut Tally) -> FaultRun {
    let mut d = Driver::new(seed, sync);
    if let Some(fault) = fault {
        d.disk.inject(fault);
    }
    let mut out = FaultRun::default();
    for (i, &step) in FAULT_SCRIPT.iter().enumerate() {
        let context = format!("sync {sync}, seed {seed}, {fault:?}, step {i} {step:?}");
        let s = step.session();
        let before = d.receipt(s);
        let injected = d.disk.faults_injected();
        let result = d.exec(step);
        let fired = d.disk.faults_injected() > injected;
        let e = match result {
            Ok(()) => {
                assert!(!fired, "{context}: the fault fired and the call succeeded");
                continue;
            }
            Err(e) => e,
        };
        let fault = fault.unwrap_or_else(|| panic!("{context}: failed without a fault: {e}"));
        assert!(fired, "{context}: failed, but not at the fault: {e}");
        out.fired = true;
        out.failures += 1;
        // (a) the error names the injected failure and the path.
        check_error(&e, &fault, &context);
        // (b) nothing of the failing call is acknowledged: the receipt is
        // unchanged (a failed materialization leaves the session pending,
        // at 0), the failed batch is still the next to send, and the model
        // (which only learns from successes) agrees.
        let after = d.receipt(s).expect("created");
        let want = before.unwrap_or(Receipt {
            next_seq: 0,
            durable: 0,
        });
        assert_eq!(after, want, "{context}: the receipt changed: {e}");
        if let Some(batch) = &d.unaccepted[s] {
            assert_eq!(after.next_seq, batch[0].seq(), "{context}");
        }
        assert_eq!(
            d.model.sessions().get(&id(s)).map_or(0, |w| w.acked),
            after.durable,
            "{context}"
        );
        crash_every_mode(&d.disk, &d.model, &context, tally);
        if fault.persistent {
            // (d) the fault is still there: so is the error.
            let again = d
                .exec(step)
                .expect_err("a persistent fault fails the retry too");
            check_error(&again, &fault, &format!("{context}, retry"));
            out.failures += 1;
            crash_every_mode(&d.disk, &d.model, &format!("{context}, retry"), tally);
            return out;
        }
        // (c) re-sending the same batch succeeds, and the log holds exactly
        // the accepted events.
        d.exec(step)
            .unwrap_or_else(|e| panic!("{context}: re-sending after a transient fault: {e}"));
        out.resends += 1;
        d.check_log(s, &context);
    }
    for s in 0..3 {
        d.check_log(s, &format!("sync {sync}, seed {seed}, {fault:?}, end"));
    }
    for s in 0..3 {
        let name = id(s);
        let keep = stored(&d.disk.crash(CrashMode::KeepAll), &name);
        let lose = stored(&d.disk.crash(CrashMode::LoseUnsynced), &name);
        out.finals.insert(name, (keep, lose));
    }
    let context = format!("sync {sync}, seed {seed}, {fault:?}, end");
    if fault.is_none() {
        crash_every_mode(&d.disk, &d.model, &context, tally);
    } else {
        // The caller compares the finals with the healthy run's (checked in
        // every mode above); a power loss still gets the full oracle.
        let after = d.disk.crash(CrashMode::LoseUnsynced);
        let checked = oracle::check(
            &after,
            root(),
            &mut d.model.clone(),
            CrashMode::LoseUnsynced,
        )
        .unwrap_or_else(|e| panic!("{context}: power loss: {e}"));
        tally.checked(checked);
    }
    out
}

/// Runs the fault workload with a transient `fault` armed; when a call
/// fails, the process exits and a new one continues (see
/// [`Driver::restart`]). Returns whether the fault fired.
fn restart_run(seed: u64, sync: SyncMode, fault: Fault, tally: &mut Tally) -> bool {
    let mut d = Driver::new(seed, sync);
    d.disk.inject(fault);
    let mut fired = false;
    for (i, &step) in FAULT_SCRIPT.iter().enumerate() {
        let context = format!("sync {sync}, seed {seed}, {fault:?}, step {i} {step:?}");
        if !matches!(step, Step::Append(..)) && !d.created[step.session()] {
            // Its materialization failed before a restart: nothing to flush,
            // close or reopen until its next append creates it again.
            continue;
        }
        let injected = d.disk.faults_injected();
        match d.exec(step) {
            Ok(()) => assert_eq!(d.disk.faults_injected(), injected, "{context}"),
            Err(e) => {
                check_error(&e, &fault, &context);
                fired = true;
                d.restart(&context);
                for s in 0..3 {
                    d.check_log(s, &context);
                }
            }
        }
    }
    let context = format!("sync {sync}, seed {seed}, {fault:?}, restarted, end");
    crash_every_mode(&d.disk, &d.model, &context, tally);
    fired
}

const FAULT_KINDS: [OpKind; 6] = [
    OpKind::Write,
    OpKind::Sync,
    OpKind::SetLen,
    OpKind::Create,
    OpKind::Rename,
    OpKind::SyncDir,
];

#[test]
fn every_fault_fails_the_call_and_acknowledges_nothing_of_it() {
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut injections = 0;
    let mut failures = 0;
    let mut resends = 0;
    let mut lines = Vec::new();
    for sync in SYNC_MODES {
        // Occurrences of each kind, summed over the seeds, in FAULT_KINDS
        // order.
        let mut per_kind = [0; FAULT_KINDS.len()];
        for seed in FAULT_SEED..FAULT_SEED + scale() {
            let reference = fault_run(seed, sync, None, &mut tally);
            for (kind, occurrences) in FAULT_KINDS.into_iter().zip(&mut per_kind) {
                let mut nth = 0;
                loop {
                    let mut fired = 0;
                    for error in [FaultError::NoSpace, FaultError::Io] {
                        for persistent in [false, true] {
                            let fault = Fault {
                                kind,
                                nth,
                                error,
                                persistent,
                            };
                            let run = fault_run(seed, sync, Some(fault), &mut tally);
                            if !run.fired {
                                continue;
                            }
                            fired += 1;
                            injections += 1;
                            failures += run.failures;
                            resends += run.resends;
                            if !persistent {
                                // No gap, no duplicate: exactly the events of
                                // the run without the fault.
                                assert!(
                                    run.finals == reference.finals,
                                    "sync {sync}, seed {seed}, {fault:?}: the final logs differ \
                                     from the healthy run's"
                                );
                            }
                        }
                    }
                    // The nth occurrence exists for every error or for none
                    // (the run is the same up to it).
                    assert!(fired == 0 || fired == 4, "{sync} {kind:?} #{nth}: {fired}");
                    if fired == 0 {
                        break;
                    }
                    nth += 1;
                }
                // Both reopens commit a repair (one truncate each); there
                // are three materializations (create, rename, directory
                // fsync each).
                let least = match kind {
                    OpKind::Write | OpKind::Sync => 10,
                    OpKind::SetLen => 2,
                    _ => 3,
                };
                if seed == FAULT_SEED {
                    assert!(nth >= least, "{sync}: the workload does {nth} {kind:?}");
                }
                *occurrences += nth;
            }
        }
        let per_kind: Vec<String> = FAULT_KINDS
            .iter()
            .zip(per_kind)
            .map(|(kind, n)| format!("{kind:?} ×{n}"))
            .collect();
        lines.push(format!("{sync}: {}", per_kind.join(", ")));
    }
    println!(
        "every_fault_fails_the_call_and_acknowledges_nothing_of_it: {injections} fault \
         injections (occurrences: {}), {failures} failed calls, {resends} re-sends after a \
         transient fault, {} simulated crashes after faults, {} acknowledged events checked, \
         {:.1?}",
        lines.join("; "),
        tally.crashes,
        tally.acked_events_checked,
        started.elapsed()
    );
    assert!(injections >= 3 * 4 * 35, "{injections}");
    // Every injection failed a call, and every persistent one its retry too.
    assert_eq!(failures, injections + injections / 2);
    assert!(tally.crashes >= injections * 9);
}

/// One complete turn starting at `seq`: start, user message, a step with a
/// chunk, end.
fn turn(number: u64, seq: u64) -> Vec<Event> {
    let specs = [
        ("turn/start", format!(r#"{{"turn":{number}}}"#)),
        (
            "user/message",
            format!(
                r#"{{"id":"u{number}","role":"user","content":[{{"type":"text","text":"go"}}]}}"#
            ),
        ),
        ("step/start", format!(r#"{{"turn":{number},"step":1}}"#)),
        (
            "assistant/chunk",
            format!(
                r#"{{"turn":{number},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{}"}}}}"#,
                "w".repeat(700)
            ),
        ),
        ("step/end", format!(r#"{{"turn":{number},"step":1}}"#)),
        (
            "turn/end",
            format!(r#"{{"turn":{number},"reason":{{"kind":"completed"}}}}"#),
        ),
    ];
    specs
        .iter()
        .enumerate()
        .map(|(i, (t, data))| {
            let seq = seq + i as u64;
            Event::new(t, seq, 1_000 + seq as i64, data).expect("valid")
        })
        .collect()
}

const SYNC_FAULT: Fault = Fault {
    kind: OpKind::Sync,
    nth: 0,
    error: FaultError::Io,
    persistent: false,
};

/// A call that fsyncs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    /// Append the batch that ends the turn (it fsyncs in `turn` and
    /// `batch` mode).
    AppendEnd,
    Flush,
    Close,
}

#[test]
fn a_failed_fdatasync_is_never_trusted_on_retry() {
    // Linux drops the dirty pages of a failed writeback and marks them
    // clean, so a retried fdatasync returns success without writing them. A
    // batch written before the failing call (and not yet fsynced) is in those
    // pages: only rewriting it from memory makes it durable. Then a power
    // loss must find every event the engine acknowledged.
    let started = Instant::now();
    let mut tally = Tally::default();
    let cases = [
        (SyncMode::Turn, Call::AppendEnd, Call::AppendEnd),
        (SyncMode::Turn, Call::Flush, Call::Flush),
        (SyncMode::Turn, Call::Flush, Call::Close),
        (SyncMode::Turn, Call::Close, Call::Close),
        (SyncMode::Turn, Call::AppendEnd, Call::Flush),
        (SyncMode::Never, Call::Flush, Call::Flush),
        (SyncMode::Never, Call::Flush, Call::Close),
        (SyncMode::Never, Call::Close, Call::Close),
        (SyncMode::Batch, Call::AppendEnd, Call::AppendEnd),
    ];
    for (sync, failing, retry) in cases {
        let context = format!("sync {sync}, {failing:?} fails, retried by {retry:?}");
        let disk = SimDisk::new(9);
        let store = store(&disk, sync);
        let name = "s";
        store.create(SessionHeader::new(name, 1)).expect("creates");
        let first = turn(1, 0);
        let second = turn(2, 6);
        let (b1, b2) = second.split_at(2);
        let mut model = Model::new();
        model.sent(name, &first);
        assert_eq!(store.append(name, &first).expect("materializes").durable, 6);
        model.synced(name, 6);
        // b1 opens turn 2: written, and in `turn` mode not yet fsynced.
        model.sent(name, b1);
        let r1 = store.append(name, b1).expect("written");
        let durable_b1 = if sync == SyncMode::Turn { 6 } else { 8 };
        assert_eq!((r1.next_seq, r1.durable), (8, durable_b1), "{context}");
        model.acked(name, r1.durable);
        if sync == SyncMode::Batch {
            model.synced(name, 8);
        }
        let mut accepted = 8;
        if sync == SyncMode::Never {
            // Acknowledged on write.
            model.sent(name, b2);
            let r2 = store.append(name, b2).expect("written");
            assert_eq!(r2.durable, 12, "{context}");
            model.acked(name, 12);
            accepted = 12;
        }
        let call = |call: Call, model: &mut Model| -> Result<(), Error> {
            match call {
                Call::AppendEnd => {
                    model.sent(name, b2);
                    store.append(name, b2).map(|_| ())
                }
                Call::Flush => store.flush(name).map(|_| ()),
                Call::Close => store.close(name),
            }
        };
        let acked = store.append(name, &[]).expect("receipt").durable;
        disk.inject(SYNC_FAULT);
        let e = call(failing, &mut model).expect_err("the fdatasync fails");
        check_error(&e, &SYNC_FAULT, &context);
        assert_eq!(disk.faults_injected(), 1, "{context}");
        assert_eq!(
            store.append(name, &[]).expect("receipt").durable,
            acked,
            "{context}: a failed fdatasync acknowledged something"
        );
        // The fault is gone: the retry's fdatasync succeeds.
        call(retry, &mut model).unwrap_or_else(|e| panic!("{context}: retry: {e}"));
        if retry == Call::AppendEnd {
            accepted = 12;
        }
        // The retry made every accepted event durable.
        model.synced(name, accepted);
        drop(store);
        // Power loss: only what reached the medium survives.
        let after = disk.crash(CrashMode::LoseUnsynced);
        let all: Vec<Event> = first.iter().chain(&second).cloned().collect();
        let got = stored(&after, name).unwrap_or_default();
        assert!(
            got[..] == all[..accepted as usize],
            "{context}: {accepted} events acknowledged and fsynced, {} found intact after a \
             power loss: the retried fdatasync was trusted to cover pages the failed one dropped",
            got.iter().zip(&all).take_while(|(a, b)| a == b).count()
        );
        let checked = oracle::check(&after, root(), &mut model, CrashMode::LoseUnsynced)
            .unwrap_or_else(|e| panic!("{context}: {e}"));
        tally.checked(checked);
    }
    println!(
        "a_failed_fdatasync_is_never_trusted_on_retry: {} cases, {} injected fdatasync \
         failures, {} power losses checked ({} acknowledged events), {:.1?}",
        cases.len(),
        cases.len(),
        tally.crashes,
        tally.acked_events_checked,
        started.elapsed()
    );
    assert_eq!(tally.crashes, cases.len() as u64);
    assert!(tally.acked_events_checked >= 8 * cases.len() as u64);
}

#[test]
fn never_mode_keeps_acknowledged_events_after_a_failed_fsync() {
    // `never` acknowledges on write: a process crash must find those events
    // even after an fdatasync failed and dropped them from the write-back
    // queue (the page cache still holds them), and whatever the writer does
    // next (append more, flush again) must not cut them.
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut cases = 0;
    for persistent in [false, true] {
        for error in [FaultError::Io, FaultError::NoSpace] {
            for then_append in [false, true] {
                let fault = Fault {
                    kind: OpKind::Sync,
                    nth: 0,
                    error,
                    persistent,
                };
                let context = format!("{fault:?}, then append: {then_append}");
                let disk = SimDisk::new(13);
                let store = store(&disk, SyncMode::Never);
                let name = "s";
                store.create(SessionHeader::new(name, 1)).expect("creates");
                let log: Vec<Event> = turn(1, 0).into_iter().chain(turn(2, 6)).collect();
                let mut model = Model::new();
                model.sent(name, &log[..6]);
                store.append(name, &log[..6]).expect("materializes");
                model.synced(name, 6);
                for batch in [&log[6..8], &log[8..11]] {
                    model.sent(name, batch);
                    let r = store.append(name, batch).expect("written");
                    assert_eq!(r.durable, r.next_seq, "{context}: acknowledged on write");
                    model.acked(name, r.durable);
                }
                disk.inject(fault);
                let e = store.flush(name).expect_err("the fdatasync fails");
                check_error(&e, &fault, &context);
                assert_eq!(
                    store.append(name, &[]).expect("receipt").durable,
                    11,
                    "{context}: still acknowledged"
                );
                let mut acked = 11;
                if then_append {
                    model.sent(name, &log[11..]);
                    let r = store.append(name, &log[11..]).expect("written");
                    assert_eq!(r.durable, 12, "{context}");
                    model.acked(name, 12);
                    acked = 12;
                }
                // A process crash: every acknowledged event is there.
                let after = disk.crash(CrashMode::KeepAll);
                assert_eq!(
                    stored(&after, name).map(|events| events.len()),
                    Some(acked as usize),
                    "{context}: a process crash lost acknowledged events"
                );
                assert_eq!(stored(&after, name).unwrap()[..], log[..acked as usize]);
                let checked = oracle::check(&after, root(), &mut model.clone(), CrashMode::KeepAll)
                    .unwrap_or_else(|e| panic!("{context}: {e}"));
                tally.checked(checked);
                // A power loss keeps exactly what was fsynced: the first turn.
                let after = disk.crash(CrashMode::LoseUnsynced);
                assert_eq!(
                    stored(&after, name).map(|events| events.len()),
                    Some(6),
                    "{context}"
                );
                crash_every_mode(&disk, &model, &context, &mut tally);
                cases += 1;
            }
        }
    }
    println!(
        "never_mode_keeps_acknowledged_events_after_a_failed_fsync: {cases} injected fdatasync \
         failures, {} simulated crashes, {} acknowledged events checked, {:.1?}",
        tally.crashes,
        tally.acked_events_checked,
        started.elapsed()
    );
    assert_eq!(cases, 8);
    assert_eq!(tally.crashes, 8 * 10);
}

/// How an fdatasync failure reaches the next writer of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dropped {
    /// The previous process left its last batch in the page cache; this
    /// store's fdatasync at open fails, and it opens again.
    AtOpen,
    /// The writer's own fdatasync fails and its process exits before a retry
    /// succeeds; a new process opens the log.
    ByTheWriter,
}

#[test]
fn a_failed_fdatasync_is_not_trusted_by_the_next_open() {
    // Linux drops the pages a failed fdatasync could not write and marks
    // them clean, so the next open's fdatasync "succeeds" without writing
    // them, in this process or another (the page cache outlives a process).
    // Records written after that must not claim (by their watermark) that
    // those bytes are durable: after a power loss they are a hole, which
    // must read as a torn tail, never as corruption of acknowledged data.
    // And however the next open makes them durable, a power cut in the
    // middle of it must not damage the acknowledged bytes among them.
    let started = Instant::now();
    let mut tally = Tally::default();
    let name = "s";
    let first = turn(1, 0);
    let second = turn(2, 6);
    let mut cut_points = 0;
    let mut cases = 0;
    for (dropped, last_synced) in [
        (Dropped::AtOpen, false),
        (Dropped::AtOpen, true),
        (Dropped::ByTheWriter, false),
    ] {
        let context = format!("{dropped:?}, last batch fsynced: {last_synced}");
        // The log: turn 1, then either two events of turn 2 (unsynced: an
        // open turn) or all of it (acknowledged). `ByTheWriter`: the rest
        // of turn 2 is sent and its fdatasync fails.
        let last = if last_synced {
            &second[..]
        } else {
            &second[..2]
        };
        let setup = || {
            let disk = SimDisk::new(23);
            let mut model = Model::new();
            let writer = store(&disk, SyncMode::Turn);
            writer.create(SessionHeader::new(name, 1)).expect("creates");
            model.sent(name, &first);
            writer.append(name, &first).expect("materializes");
            model.synced(name, 6);
            model.sent(name, last);
            let r = writer.append(name, last).expect("written");
            assert_eq!(r.durable, if last_synced { 12 } else { 6 });
            model.synced(name, r.durable);
            if dropped == Dropped::ByTheWriter {
                disk.inject(SYNC_FAULT);
                model.sent(name, &second[2..]);
                let e = writer
                    .append(name, &second[2..])
                    .expect_err("the fdatasync fails");
                check_error(&e, &SYNC_FAULT, "append");
            }
            // The process exits without closing (or after the failure).
            drop(writer);
            let store = store(&disk, SyncMode::Turn);
            if dropped == Dropped::AtOpen {
                disk.inject(SYNC_FAULT);
                let e = store.load(name).expect_err("the fdatasync at open fails");
                check_error(&e, &SYNC_FAULT, "open");
            }
            (disk, store, model)
        };
        let mut want = [&first[..], last].concat();
        want.extend(interrupted_turn_closers(&want));
        // The next open, uninterrupted.
        let (disk, store, mut model) = setup();
        let start = disk.ops();
        let view = store.load(name).expect("recovers");
        assert_eq!(view.events, want, "{context}");
        let n = disk.ops() - start;
        // Appends continue, acknowledged with watermarks past the old end.
        let next = oracle::next_turn(&want);
        model.recovered(name, want.clone());
        model.sent(name, &next);
        let all = (want.len() + next.len()) as u64;
        assert_eq!(store.append(name, &next).expect("appends").durable, all);
        model.synced(name, all);
        drop(store);
        crash_every_mode(&disk, &model, &context, &mut tally);
        cases += 1;
        // The power cut at every disk operation of that open.
        for k in 0..n {
            let context = format!("{context}, power cut at op {k} of {n}");
            let (disk, store, model) = setup();
            disk.cut_power_at(disk.ops() + k);
            // (Taking the mark away is the last operation and may fail
            // without failing the load.)
            let _ = store.load(name);
            assert!(disk.is_dead(), "{context}");
            drop(store);
            crash_every_mode(&disk, &model, &context, &mut tally);
            cut_points += 1;
        }
    }
    println!(
        "a_failed_fdatasync_is_not_trusted_by_the_next_open: {cases} fdatasync failures (at \
         open, or by the writer before its process exits), {cut_points} power cuts inside the \
         next open, {} simulated crashes, {:.1?}",
        tally.crashes,
        started.elapsed()
    );
    assert!(cut_points >= 3 * 5, "{cut_points}");
    assert_eq!(tally.crashes, (cases + cut_points) * 9);
}

#[test]
fn every_fault_then_a_restart_loses_nothing_acknowledged() {
    // The same faults, but the process gives up at the first failure and a
    // new one takes over: the page cache (unsynced writes, pages a failed
    // fdatasync dropped) outlives the process, the new one must not trust
    // it more than the old one could, and no acknowledged event may be lost
    // by the restart or by any crash after it.
    let started = Instant::now();
    let mut tally = Tally::default();
    let (mut runs, mut restarts) = (0, 0);
    for sync in SYNC_MODES {
        for seed in FAULT_SEED..FAULT_SEED + scale() {
            for kind in FAULT_KINDS {
                for nth in 0.. {
                    let fault = Fault {
                        kind,
                        nth,
                        error: FaultError::Io,
                        persistent: false,
                    };
                    runs += 1;
                    if !restart_run(seed, sync, fault, &mut tally) {
                        break;
                    }
                    restarts += 1;
                }
            }
        }
    }
    println!(
        "every_fault_then_a_restart_loses_nothing_acknowledged: {restarts} fault injections \
         each followed by a restart, {} simulated crashes after them, {} acknowledged events \
         checked, {:.1?}",
        tally.crashes,
        tally.acked_events_checked,
        started.elapsed()
    );
    assert!(restarts >= 3 * 35, "{restarts}");
    assert_eq!(tally.crashes, runs * 9);
}

#[test]
fn the_copy_after_a_failed_fdatasync_works_on_a_real_file_system() {
    // The copy (temp file, fsync, rename over the log, directory fsync) is
    // otherwise exercised only on the simulated disk: on a real file system
    // the log is replaced by a new file with the same bytes, the mark and
    // the temp file are gone, and appends continue.
    let dir = tempfile::tempdir().expect("temp dir");
    let name = "s";
    let first = turn(1, 0);
    let store = Store::open(dir.path()).expect("opens");
    store.create(SessionHeader::new(name, 1)).expect("creates");
    store.append(name, &first).expect("materializes");
    store.append(name, &turn(2, 6)[..2]).expect("written");
    drop(store);
    let path = WalBackend::open(dir.path()).expect("opens").log_path(name);
    let before = std::fs::read(&path).expect("reads");
    // What a failed fdatasync leaves.
    let mark = path.with_file_name(format!(".{name}.unsynced"));
    std::fs::write(&mark, b"").expect("marks");
    let inode = |p: &Path| turnwal::storage::identity(p).unwrap();
    let old_inode = inode(&path);
    let store = Store::open(dir.path()).expect("opens");
    let view = store.load(name).expect("recovers");
    let mut want = [&first[..], &turn(2, 6)[..2]].concat();
    want.extend(interrupted_turn_closers(&want));
    assert_eq!(view.events, want);
    assert_ne!(inode(&path), old_inode, "the log was replaced by a copy");
    assert!(!mark.exists(), "the mark is taken away");
    let after = std::fs::read(&path).expect("reads");
    assert_eq!(
        after[..before.len()],
        before[..],
        "the copy holds the same bytes"
    );
    let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
    let next = oracle::next_turn(&want);
    store.append(name, &next).expect("appends");
    drop(store);
    let store = Store::open(dir.path()).expect("opens");
    assert_eq!(
        store.load(name).expect("loads").events.len(),
        want.len() + 2
    );
    println!("the_copy_after_a_failed_fdatasync_works_on_a_real_file_system: 1 log copied");
}

// ---------------------------------------------------------------------------
// 4. Short writes
// ---------------------------------------------------------------------------

#[test]
fn short_writes_change_no_byte() {
    // `write` may write fewer bytes than asked; the engine must continue
    // where it stopped, so the log is byte-identical to one written with
    // whole writes (the same disk seed gives the same salts).
    let started = Instant::now();
    let ops = enumeration_workload();
    let mut compared = 0;
    let mut extra_writes = 0;
    for sync in SYNC_MODES {
        let mut whole = Run::new(ENUMERATION_SEED, sync);
        let mut short = Run::new(ENUMERATION_SEED, sync);
        short.apply(&Op::ShortWrites(true)).expect("applies");
        for op in &ops {
            whole.apply(op).expect("healthy run");
            short.apply(op).expect("healthy run");
        }
        assert!(
            short.disk().ops() > whole.disk().ops() + 40,
            "{sync}: writes were split ({} vs {} ops)",
            short.disk().ops(),
            whole.disk().ops()
        );
        extra_writes += short.disk().ops() - whole.disk().ops();
        for s in 0..3 {
            let path = log_path(&id(s));
            let a = whole.disk().read(&path).expect("stored");
            let b = short.disk().read(&path).expect("stored");
            assert!(a == b, "{sync}: {}: the logs differ", id(s));
            // And what reached the medium is the same too.
            let a = whole.disk().crash(CrashMode::LoseUnsynced).read(&path);
            let b = short.disk().crash(CrashMode::LoseUnsynced).read(&path);
            assert!(a == b, "{sync}: {}: the durable logs differ", id(s));
            compared += 1;
        }
        assert_eq!(whole.model().sessions().len(), 3);
    }
    println!(
        "short_writes_change_no_byte: {compared} logs byte-identical (live and durable) with \
         {extra_writes} extra partial writes, {:.1?}",
        started.elapsed()
    );
    assert_eq!(compared, 9);
}

#[test]
fn an_error_after_a_short_write_leaves_no_garbage() {
    // A write that fails after a short write has put part of a batch in the
    // file: the engine must cut it off before anything else is written, so
    // no garbage ever sits between records.
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut injections = 0;
    let mut by_mode = Vec::new();
    for sync in SYNC_MODES {
        let before = injections;
        for (i, &step) in FAULT_SCRIPT.iter().enumerate() {
            if !matches!(step, Step::Append(..)) {
                continue;
            }
            for j in 1..=3 {
                let context = format!("sync {sync}, step {i} {step:?}, write #{j} fails");
                let mut d = Driver::new(FAULT_SEED, sync);
                d.disk.short_writes(true);
                for &earlier in &FAULT_SCRIPT[..i] {
                    d.exec(earlier)
                        .unwrap_or_else(|e| panic!("{context}: {earlier:?}: {e}"));
                }
                // The step's first `j` writes are short; the next fails.
                let fault = Fault {
                    kind: OpKind::Write,
                    nth: j,
                    error: FaultError::NoSpace,
                    persistent: false,
                };
                d.disk.inject(fault);
                let s = step.session();
                match d.exec(step) {
                    Ok(()) => {
                        // The batch took `j` writes or fewer.
                        assert_eq!(d.disk.faults_injected(), 0, "{context}");
                        continue;
                    }
                    Err(e) => check_error(&e, &fault, &context),
                }
                assert_eq!(d.disk.faults_injected(), 1, "{context}");
                injections += 1;
                // No garbage: the file holds exactly the accepted events, and
                // a scan finds nothing to cut (nor after a process crash).
                d.check_log(s, &context);
                let after = d.disk.crash(CrashMode::KeepAll);
                if let Some(events) = stored(&after, &id(s)) {
                    let report = store(&after, sync).verify(&id(s)).expect("verifies");
                    assert!(report.cut.is_none(), "{context}: {report:?}");
                    assert_eq!(events[..], d.sent(s)[..events.len()], "{context}");
                }
                crash_every_mode(&d.disk, &d.model, &context, &mut tally);
                // The re-sent batch (written short again) lands right after.
                d.exec(step)
                    .unwrap_or_else(|e| panic!("{context}: re-send: {e}"));
                d.check_log(s, &context);
            }
        }
        by_mode.push(format!("{sync}: {}", injections - before));
    }
    println!(
        "an_error_after_a_short_write_leaves_no_garbage: {injections} write errors injected after \
         1-3 short writes ({}), {} simulated crashes, {:.1?}",
        by_mode.join(", "),
        tally.crashes,
        started.elapsed()
    );
    assert!(injections >= 3 * 20, "{injections}");
    assert_eq!(tally.crashes, injections * 9);
}

// ---------------------------------------------------------------------------
// 5. Lost directory entries
// ---------------------------------------------------------------------------

#[test]
fn a_materialization_is_durable_only_after_the_directory_fsync() {
    // Renaming the temp file into place changes only the directory: until
    // the directory is fsynced a power loss may lose the entry, so the
    // session must not be acknowledged before that.
    let started = Instant::now();
    let mut tally = Tally::default();
    // Session 0 exists; session 1 is materialized with the power cut at its
    // directory fsync (op 6 of 7: create, write, fsync, the durability
    // proof's create and write, rename, directory fsync), then with the
    // power cut right after it.
    let first = turn(1, 0);
    let setup = || {
        let disk = SimDisk::new(17);
        let store = store(&disk, SyncMode::Turn);
        store.create(SessionHeader::new(id(0), 1)).expect("creates");
        store.append(&id(0), &first).expect("materializes");
        store.create(SessionHeader::new(id(1), 1)).expect("creates");
        let mut model = Model::new();
        model.sent(&id(0), &first);
        model.synced(&id(0), 6);
        (disk, store, model)
    };
    let (disk, store, _) = setup();
    let start = disk.ops();
    store.append(&id(1), &first).expect("materializes");
    assert_eq!(
        disk.ops() - start,
        7,
        "create, write, fsync, the durability proof (create, write), rename, fsync dir"
    );
    drop(store);
    let sessions = Path::new(ROOT).join("sessions");

    // The power fails at the directory fsync: the rename happened (the page
    // cache shows the log) but its entry never reached the disk.
    let (disk, store, mut model) = setup();
    disk.cut_power_at(disk.ops() + 6);
    model.sent(&id(1), &first);
    let e = store
        .append(&id(1), &first)
        .expect_err("the power fails at the directory fsync");
    assert!(
        matches!(
            e,
            Error::Io {
                op: "fsync directory",
                ..
            }
        ),
        "{e}"
    );
    assert!(disk.is_dead());
    assert!(disk.read(&log_path(&id(1))).is_some(), "renamed into place");
    drop(store);
    for mode in CrashMode::ALL {
        let after = disk.crash(mode);
        let present = stored(&after, &id(1));
        if mode == CrashMode::KeepAll {
            // A process crash keeps the entry (never acknowledged, but
            // complete).
            assert_eq!(present, Some(first.clone()), "{mode:?}");
        } else {
            assert_eq!(present, None, "{mode:?}: the entry was never durable");
            let names = after.list_dir(&sessions).expect("lists");
            assert!(
                !names.iter().any(|n| n.contains("session-1.")),
                "{mode:?}: nothing of the session survives: {names:?}"
            );
            assert_eq!(store_on_list(&after), vec![id(0)], "{mode:?}");
        }
        assert_eq!(stored(&after, &id(0)), Some(first.clone()), "{mode:?}");
        let checked = oracle::check(&after, root(), &mut model.clone(), mode)
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        tally.checked(checked);
    }

    // The power fails right after the directory fsync and the durability
    // proof: the session is acknowledged and survives every crash.
    let (disk, store, mut model) = setup();
    disk.cut_power_at(disk.ops() + 7);
    model.sent(&id(1), &first);
    let r = store.append(&id(1), &first).expect("materialized");
    assert_eq!(r.durable, 6);
    model.synced(&id(1), 6);
    assert!(!disk.is_dead());
    let e = store
        .append(&id(1), &turn(2, 6)[..1])
        .expect_err("the power is cut now");
    assert!(matches!(e, Error::Io { .. }), "{e}");
    model.sent(&id(1), &turn(2, 6)[..1]);
    drop(store);
    for mode in CrashMode::ALL {
        let after = disk.crash(mode);
        assert_eq!(stored(&after, &id(1)), Some(first.clone()), "{mode:?}");
        let checked = oracle::check(&after, root(), &mut model.clone(), mode)
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        tally.checked(checked);
    }
    println!(
        "a_materialization_is_durable_only_after_the_directory_fsync: {} simulated crashes \
         (9 before, 9 after the directory fsync), {:.1?}",
        tally.crashes,
        started.elapsed()
    );
    assert_eq!(tally.crashes, 18);
}

fn store_on_list(disk: &SimDisk) -> Vec<String> {
    store(disk, SyncMode::Turn)
        .list()
        .expect("lists")
        .into_iter()
        .map(|s| s.id)
        .collect()
}

// ---------------------------------------------------------------------------
// 6. Random op sequences
// ---------------------------------------------------------------------------

/// The byte string of random sequence `seed` (the first byte picks the disk
/// seed and the sync mode, the rest decodes to ops; see `ops::decode`).
fn random_sequence(seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed + 1);
    let len = 1 + rng.below(300);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

#[test]
fn random_op_sequences() {
    // The structure-aware fuzz target's function over seeded random byte
    // strings: appends, flushes, closes, faults, power cuts, short writes and
    // crashes in any order, the oracle checked at every crash.
    let started = Instant::now();
    let sequences = 300 * scale();
    let (mut ops_run, mut crashes, mut faults, mut cuts, mut fired) = (0, 0, 0, 0, 0);
    for seed in 0..sequences {
        let bytes = random_sequence(seed);
        let outcome = std::panic::catch_unwind(|| ops::fuzz_ops(&bytes));
        if let Err(panic) = outcome {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!(
                "random sequence seed {seed} (reproduce: ops::fuzz_ops(&random_sequence({seed})), \
                 bytes {bytes:02x?}): {message}"
            );
        }
        // The same decoding fuzz_ops does, for the counts.
        let sync = SYNC_MODES[bytes[0] as usize % 3];
        let decoded = ops::decode(&bytes[1..], 64);
        ops_run += decoded.len() as u64;
        crashes += 1 + decoded
            .iter()
            .filter(|op| matches!(op, Op::Crash(_)))
            .count() as u64;
        faults += decoded
            .iter()
            .filter(|op| matches!(op, Op::Fault(_)))
            .count() as u64;
        cuts += decoded
            .iter()
            .filter(|op| matches!(op, Op::CutPowerAfter(_)))
            .count() as u64;
        let stats = Run::new(u64::from(bytes[0]), sync)
            .run(&decoded)
            .unwrap_or_else(|e| panic!("random sequence seed {seed}: {e}"));
        assert_eq!(stats.crashes, crashes_in(&decoded) + 1, "seed {seed}");
        fired += stats.faults;
    }
    println!(
        "random_op_sequences: {sequences} sequences, {ops_run} ops, {crashes} simulated crashes \
         checked, {faults} faults armed ({fired} fired), {cuts} power cuts armed, {:.1?}",
        started.elapsed()
    );
    assert!(ops_run >= sequences * 20);
    assert!(crashes >= sequences + sequences / 2);
    assert!(faults >= sequences / 2 && fired >= sequences / 4);
    assert!(cuts >= sequences / 2);
}

fn crashes_in(ops: &[Op]) -> u64 {
    ops.iter().filter(|op| matches!(op, Op::Crash(_))).count() as u64
}

/// Realistic sessions (streamed deltas that pack into chunk runs, as
/// harness sessions are) under the same random operations, faults, power
/// cuts and crashes, on every store the simulated disk runs: the oracle
/// holds at every crash.
#[test]
fn realistic_sessions_under_random_op_sequences() {
    use turnwal_testkit::crashlab::ops::Workload;
    let started = Instant::now();
    let sequences = 40 * scale();
    let (mut crashes, mut acked, mut chunks, mut sent) = (0, 0, 0, 0);
    for target in Target::ALL {
        for seed in 0..sequences {
            let bytes = random_sequence(1_000 + seed);
            let sync = SYNC_MODES[bytes[0] as usize % 3];
            let decoded = ops::decode(&bytes[1..], 64);
            let mut run = Run::on(target, seed, sync).with_workload(Workload::Realistic);
            for op in &decoded {
                run.apply(op).unwrap_or_else(|e| {
                    panic!("{target:?} realistic seed {seed}: {op:?}: {e}\nops: {decoded:?}")
                });
            }
            for w in run.model().sessions().values() {
                sent += w.sent.len();
                chunks += w
                    .sent
                    .iter()
                    .filter(|e| e.event_type() == "assistant/chunk")
                    .count();
            }
            let stats = run.run(&[]).unwrap_or_else(|e| {
                panic!("{target:?} realistic seed {seed}: final crash: {e}\nops: {decoded:?}")
            });
            crashes += stats.crashes;
            acked += stats.acked_events_checked;
        }
    }
    println!(
        "realistic_sessions_under_random_op_sequences: {} sequences, {crashes} crashes checked, \
         {acked} acknowledged events checked intact, {chunks} of {sent} events sent were \
         chunks, {:.1?}",
        3 * sequences,
        started.elapsed()
    );
    assert!(crashes >= 3 * sequences);
    assert!(chunks * 2 > sent, "{chunks} chunks of {sent}");
}
