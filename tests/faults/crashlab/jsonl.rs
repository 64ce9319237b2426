//! Crash safety of upstream JSONL roots, raw and zstd, over the simulated
//! disk against the same oracle as the WAL (`oracle::check_on`): the JSONL
//! backend does every file and directory operation through `Storage`, so the
//! same power cuts, torn sectors, lost directory entries, injected
//! ENOSPC/EIO and short writes reach it, and the same checks follow every
//! crash (every acknowledged event intact, closers exactly where a turn was
//! cut, verify clean, recovery durable and idempotent, the next append
//! continues the seq).

use std::time::Instant;

use turnwal::SyncMode;
use turnwal::backend::jsonl::Compression;
use turnwal_testkit::crashlab::ops::{self, Op, Run};
use turnwal_testkit::crashlab::oracle::{self, Model, Target};
use turnwal_testkit::simdisk::{CrashMode, Fault, FaultError, OpKind, SimDisk};

use super::{
    ENUMERATION_SEED, SYNC_FAULT, SYNC_MODES, Tally, check_error, enumeration_workload, id,
    random_sequence, root, scale, turn,
};

const TARGETS: [Target; 2] = [
    Target::Jsonl(Compression::None),
    Target::Jsonl(Compression::Zstd),
];

/// Crashes `disk` in `modes` and checks the oracle after each.
fn crash_in(
    target: Target,
    disk: &SimDisk,
    model: &Model,
    modes: &[CrashMode],
    context: &str,
    tally: &mut Tally,
) {
    for &mode in modes {
        let after = disk.crash(mode);
        let checked = oracle::check_on(target, &after, root(), &mut model.clone(), mode)
            .unwrap_or_else(|e| panic!("{context}, crash {mode:?}: oracle violation: {e}"));
        tally.checked(checked);
    }
}

/// The crash modes tried at crash point `k`: all of them at a larger
/// scale; by default, the power loss that keeps nothing unsynced, and one
/// more in turn, so every mode meets every part of the workload.
fn modes_at(k: u64) -> Vec<CrashMode> {
    if scale() > 1 {
        return CrashMode::ALL.to_vec();
    }
    let other = CrashMode::ALL[1 + (k as usize % (CrashMode::ALL.len() - 1))];
    vec![CrashMode::LoseUnsynced, other]
}

#[test]
fn jsonl_power_cut_at_every_disk_operation() {
    let started = Instant::now();
    let ops = enumeration_workload();
    let mut tally = Tally::default();
    let mut modes_seen = std::collections::BTreeSet::new();
    for target in TARGETS {
        for sync in SYNC_MODES {
            let mut reference = Run::on(target, ENUMERATION_SEED, sync);
            for op in &ops {
                reference
                    .apply(op)
                    .expect("the healthy run satisfies the oracle");
            }
            let n = reference.disk().ops();
            // 80 before the root lost turnwal's sidecars (the lock and
            // policy files' operations); the proof's moved with it.
            assert!(
                n >= 60,
                "{target:?} {sync}: the workload does {n} disk operations"
            );
            for k in 0..=n {
                let mut run = Run::on(target, ENUMERATION_SEED, sync);
                run.disk().cut_power_at(k);
                for op in &ops {
                    run.apply(op)
                        .unwrap_or_else(|e| panic!("{target:?} {sync} cut at {k}: {e}"));
                }
                assert_eq!(
                    run.disk().is_dead(),
                    k < n,
                    "{target:?} {sync}: cut at {k} of {n}"
                );
                tally.crash_points += 1;
                let modes = modes_at(k);
                modes_seen.extend(modes.iter().map(|m| format!("{m:?}")));
                let context = format!("{target:?} {sync} cut at op {k} of {n}");
                crash_in(
                    target,
                    run.disk(),
                    run.model(),
                    &modes,
                    &context,
                    &mut tally,
                );
            }
        }
    }
    println!(
        "jsonl_power_cut_at_every_disk_operation: {} crash points, {} crashes checked, {} \
         acknowledged events checked intact, {} open turns closed, {:.1?}",
        tally.crash_points,
        tally.crashes,
        tally.acked_events_checked,
        tally.closed_turns,
        started.elapsed()
    );
    assert_eq!(modes_seen.len(), CrashMode::ALL.len());
    assert!(tally.crash_points >= 6 * 60);
    assert!(tally.crashes >= 2 * tally.crash_points);
    assert!(tally.closed_turns > 0 && tally.acked_events_checked > 0);
}

const FAULT_KINDS: [OpKind; 7] = [
    OpKind::Create,
    OpKind::Write,
    OpKind::SetLen,
    OpKind::Sync,
    OpKind::Rename,
    OpKind::Remove,
    OpKind::SyncDir,
];

#[test]
fn jsonl_injected_faults_on_every_kind_of_operation() {
    // ENOSPC and EIO, once or from then on, on the first few operations of
    // each kind, then short writes on top: every failed append is a typed
    // I/O error (the run rejects any other), the failed batch is re-sent,
    // and a process crash and a power loss at the end keep every
    // acknowledged event.
    let started = Instant::now();
    let workload = enumeration_workload();
    let mut tally = Tally::default();
    let (mut runs, mut fired, mut failed_appends) = (0u64, 0u64, 0u64);
    let mut fired_by_kind = std::collections::BTreeMap::new();
    for target in TARGETS {
        for sync in SYNC_MODES {
            for kind in FAULT_KINDS {
                for nth in 0..3 * scale() {
                    for error in [FaultError::Io, FaultError::NoSpace] {
                        for persistent in [false, true] {
                            for short in [false, true] {
                                let fault = Fault {
                                    kind,
                                    nth,
                                    error,
                                    persistent,
                                };
                                let mut ops = vec![Op::ShortWrites(short), Op::Fault(fault)];
                                ops.extend(workload.iter().cloned());
                                ops.push(Op::Crash(CrashMode::KeepAll));
                                let stats = Run::on(target, ENUMERATION_SEED, sync)
                                    .run(&ops)
                                    .unwrap_or_else(|e| {
                                        panic!("{target:?} {sync} {fault:?} short {short}: {e}")
                                    });
                                runs += 1;
                                tally.crashes += stats.crashes;
                                tally.acked_events_checked += stats.acked_events_checked;
                                fired += stats.faults;
                                failed_appends += stats.failed_appends;
                                *fired_by_kind.entry(format!("{kind:?}")).or_insert(0) +=
                                    stats.faults;
                            }
                        }
                    }
                }
            }
        }
    }
    println!(
        "jsonl_injected_faults_on_every_kind_of_operation: {runs} runs, {fired} faults fired \
         ({fired_by_kind:?}), {failed_appends} failed appends, {} crashes checked, {} \
         acknowledged events checked intact, {:.1?}",
        tally.crashes,
        tally.acked_events_checked,
        started.elapsed()
    );
    // This workload never renames on a JSONL root since the policy
    // sidecar (written by rename) went: only a repair that writes records
    // again renames, and `jsonl_crash_inside_recovery_converges` cuts the
    // power at every operation of one. Rename faults are still injected.
    for kind in FAULT_KINDS.into_iter().filter(|&k| k != OpKind::Rename) {
        assert!(
            fired_by_kind[&format!("{kind:?}")] > 0,
            "no {kind:?} fault fired"
        );
    }
    assert!(failed_appends > runs / 4);
    assert_eq!(tally.crashes, 2 * runs);
}

#[test]
fn jsonl_a_failed_fdatasync_whose_cut_fails_is_not_trusted_by_the_next_writer() {
    // A failed fdatasync drops its pages; the writer's cut back to its
    // acknowledged length fails too, so it is poisoned and the store lets
    // it go. The next writer (in this process, or in the next one: the page
    // cache outlives a process) reads the dropped bytes as intact, and its
    // opening fdatasync "succeeds" without writing them. It must publish a
    // durable copy instead, or the turns it acknowledges after them sit
    // behind a hole a power loss makes: corruption of acknowledged data
    // (found by CI's fuzzing: fuzz/regressions/ops/crash-f37c6f23…).
    let started = Instant::now();
    let append = |session, events| Op::Append { session, events };
    let (mut runs, mut both, mut acked) = (0u64, 0u64, 0u64);
    for target in TARGETS {
        for sync in [SyncMode::Turn, SyncMode::Batch] {
            for seed in [18, ENUMERATION_SEED] {
                for (cut, nth) in (0..3).flat_map(|cut| (0..6).map(move |nth| (cut, nth))) {
                    for restart in [None, Some(CrashMode::KeepAll)] {
                        let mut ops = vec![
                            append(0, 6),
                            // Which set_len is the writer's cut back depends
                            // on the sync fault's place: try a few.
                            Op::Fault(Fault {
                                kind: OpKind::SetLen,
                                nth: cut,
                                error: FaultError::Io,
                                persistent: false,
                            }),
                            Op::Fault(Fault {
                                kind: OpKind::Sync,
                                nth,
                                error: FaultError::Io,
                                persistent: false,
                            }),
                            append(0, 10),
                            append(0, 1),
                            append(0, 8),
                            append(0, 1),
                            // Lets the poisoned writer go.
                            Op::Close { session: 0 },
                        ];
                        ops.extend(restart.map(Op::Crash));
                        ops.extend([append(0, 9), Op::Close { session: 0 }, append(1, 1)]);
                        let stats = Run::on(target, seed, sync).run(&ops).unwrap_or_else(|e| {
                            panic!(
                                "{target:?} {sync} seed {seed} set_len fault {cut} sync fault \
                                 {nth} restart {restart:?}: {e}"
                            )
                        });
                        runs += 1;
                        both += u64::from(stats.faults == 2);
                        acked += stats.acked_events_checked;
                    }
                }
            }
        }
    }
    println!(
        "jsonl_a_failed_fdatasync_whose_cut_fails_is_not_trusted_by_the_next_writer: {runs} runs \
         ({both} with both faults fired), {acked} acknowledged events checked intact, {:.1?}",
        started.elapsed()
    );
    assert!(both >= runs / 2, "{both} of {runs}");
}

#[test]
fn jsonl_a_failed_fdatasync_is_not_trusted_by_the_next_process() {
    // The same, across processes: the writer's fdatasync fails, its cut
    // back fails, and its process exits. The page cache (the dropped pages
    // reading as intact) outlives it; the next process's backend knows
    // nothing of the failure but the mark in the state directory.
    let mut tally = Tally::default();
    let name = "s";
    for target in TARGETS {
        let disk = SimDisk::new(29);
        let mut model = Model::new();
        let options = turnwal::StoreOptions {
            sync: SyncMode::Turn,
            ..turnwal::StoreOptions::default()
        };
        let first = turn(1, 0);
        let second = turn(2, 6);
        let writer = target.store_on(&disk, root(), options);
        writer.create(target.header(name)).expect("creates");
        model.sent(name, &first);
        assert_eq!(writer.append(name, &first).expect("appends").durable, 6);
        model.synced(name, 6);
        disk.inject(Fault {
            kind: OpKind::SetLen,
            nth: 0,
            error: FaultError::Io,
            persistent: false,
        });
        disk.inject(SYNC_FAULT);
        model.sent(name, &second);
        let e = writer
            .append(name, &second)
            .expect_err("the fdatasync fails");
        check_error(&e, &SYNC_FAULT, "append");
        assert_eq!(
            disk.faults_injected(),
            2,
            "{target:?}: the cut back failed too"
        );
        drop(writer);
        // The next process: recovery keeps the unacknowledged turn the page
        // cache shows (it reads as stored), then a third turn is
        // acknowledged after it.
        let store = target.store_on(&disk, root(), options);
        let view = store.load(name).expect("recovers");
        let want = [&first[..], &second[..]].concat();
        assert_eq!(view.events, want, "{target:?}");
        model.recovered(name, want.clone());
        let third = oracle::next_turn(&want);
        model.sent(name, &third);
        let all = (want.len() + third.len()) as u64;
        assert_eq!(store.append(name, &third).expect("appends").durable, all);
        model.synced(name, all);
        drop(store);
        crash_in(
            target,
            &disk,
            &model,
            &CrashMode::ALL,
            &format!("{target:?}"),
            &mut tally,
        );
    }
    assert_eq!(tally.crashes, 2 * 9);
}

#[test]
fn jsonl_random_op_sequences() {
    let started = Instant::now();
    let sequences = 150 * scale();
    let (mut crashes, mut fired, mut acked) = (0, 0, 0);
    for target in TARGETS {
        for seed in 0..sequences {
            let bytes = random_sequence(seed);
            let sync = SYNC_MODES[bytes[0] as usize % 3];
            let decoded = ops::decode(&bytes[1..], 64);
            let stats = Run::on(target, u64::from(bytes[0]), sync)
                .run(&decoded)
                .unwrap_or_else(|e| {
                    panic!("{target:?} random sequence seed {seed}: {e}\nops: {decoded:?}")
                });
            crashes += stats.crashes;
            fired += stats.faults;
            acked += stats.acked_events_checked;
        }
    }
    println!(
        "jsonl_random_op_sequences: {} sequences, {crashes} crashes checked, {fired} faults \
         fired, {acked} acknowledged events checked intact, {:.1?}",
        2 * sequences,
        started.elapsed()
    );
    assert!(crashes >= 2 * sequences + sequences);
    assert!(fired >= sequences / 2);
}

/// A session whose last batch was torn in the middle: its first events
/// intact (kept by recovery, as upstream keeps them), a partial line
/// (raw) or the first part of its frame (zstd, whose complete records
/// recovery keeps by rewriting the file through a temp file and a rename),
/// and a turn left open. Returns the disk and a model in which everything
/// before the last batch was acknowledged.
fn torn_image(target: Target) -> (SimDisk, Model) {
    let append = |events| Op::Append { session: 0, events };
    let mut run = Run::on(target, ENUMERATION_SEED, SyncMode::Batch);
    for op in [append(1), append(12), append(9)] {
        run.apply(&op).expect("healthy");
    }
    let path = target.log_path(root(), &id(0));
    let before = run.disk().read(&path).expect("stored").len();
    let acked = run.model().sessions()[&id(0)].sent.len() as u64;
    run.apply(&append(12)).expect("healthy");
    let sent = run.model().sessions()[&id(0)].sent.clone();
    let disk = run.disk().crash(CrashMode::KeepAll);
    let bytes = disk.read(&path).expect("stored");
    let torn = match target {
        // A frame decodes only as far as whole blocks arrived (one block,
        // here): it loses part of its checksum.
        Target::Jsonl(Compression::Zstd) => bytes.len() - 3,
        _ => before + (bytes.len() - before) * 2 / 3,
    };
    disk.write_durable(&path, &bytes[..torn]).expect("written");
    let mut model = Model::new();
    model.sent(&id(0), &sent);
    model.synced(&id(0), acked);
    (disk, model)
}

#[test]
fn jsonl_crash_inside_recovery_converges() {
    // The repair of a torn tail and an open turn, cut by a power loss at
    // every disk operation it performs, in every crash mode: the next
    // recovery must converge on the bytes of an uninterrupted one, and the
    // oracle holds after each.
    let started = Instant::now();
    let mut tally = Tally::default();
    let (mut recoveries, mut cut_points) = (0u64, 0u64);
    for target in TARGETS {
        let (image, model) = torn_image(target);
        let path = target.log_path(root(), &id(0));
        let recover = |disk: &SimDisk| {
            target
                .store_on(disk, root(), Default::default())
                .load(&id(0))
                .map(|view| view.events)
        };
        let clean = image.snapshot();
        let start = clean.ops();
        let events = recover(&clean).unwrap_or_else(|e| panic!("{target:?}: {e}"));
        let expected = clean.read(&path).expect("stored");
        let written = &model.sessions()[&id(0)];
        let kept = events
            .iter()
            .zip(&written.sent)
            .take_while(|(a, b)| a == b)
            .count() as u64;
        assert!(
            kept > written.acked,
            "{target:?}: complete records of the torn batch are kept ({kept} of {})",
            written.sent.len()
        );
        let last = events.last().expect("events");
        assert_eq!(
            (last.event_type(), last.data().get().contains("interrupted")),
            ("turn/end", true),
            "{target:?}: the open turn was closed"
        );
        let n = clean.ops() - start;
        assert!(n >= 3, "{target:?}: the repair does {n} disk operations");
        for k in start..start + n {
            let cut = image.snapshot();
            cut.cut_power_at(k);
            recover(&cut).expect_err("the power cut stops recovery");
            cut_points += 1;
            for mode in CrashMode::ALL {
                let after = cut.crash(mode);
                let again = after.snapshot();
                let view = recover(&again)
                    .unwrap_or_else(|e| panic!("{target:?} cut at {k}, {mode:?}: {e}"));
                assert_eq!(view, events, "{target:?} cut at {k}, {mode:?}");
                assert_eq!(
                    again.read(&path).as_deref(),
                    Some(&expected[..]),
                    "{target:?} cut at {k}, {mode:?}: recovery did not converge"
                );
                recoveries += 1;
                let checked = oracle::check_on(target, &after, root(), &mut model.clone(), mode)
                    .unwrap_or_else(|e| panic!("{target:?} cut at {k}, {mode:?}: {e}"));
                tally.checked(checked);
            }
        }
    }
    println!(
        "jsonl_crash_inside_recovery_converges: {cut_points} cut points, {recoveries} \
         recoveries converged, {} crashes checked, {:.1?}",
        tally.crashes,
        started.elapsed()
    );
    assert!(cut_points >= 6);
}
