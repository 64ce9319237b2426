//! Writes the checked-in seed corpus of the four fuzz targets. Run it by
//! hand (never from `cargo test`) when the format or the op encoding
//! changes, then review and commit the result:
//!
//!     cargo run --manifest-path fuzz/Cargo.toml --example seed_corpus -- fuzz/corpus
//!
//! Everything is byte-reproducible: session files are written by the real
//! engine onto the simulated disk with fixed seeds and times.
//!
//! - `scan/`: real session files (clean, open turn, torn tail, zero and
//!   garbage tails, first batch only, repaired with closers, interrupted
//!   repair, acknowledged corruption, stale copies, Strict debris, Lenient
//!   with every optional header key and envelope key), and a compacted log
//!   with its units forged in every number a reader takes from a unit head
//!   (count, plain length, seq, the frame), checksums recomputed;
//! - `ops/`: encoded operation sequences, checked to decode to the intended
//!   ops: every op code, every fault kind and error, transient and
//!   persistent, power cuts, short writes and every crash mode, under each
//!   sync mode;
//! - `decode/`: JSON lines for the event decoder and the append line parser;
//! - `differential/`: encoded operation sequences for the WAL-against-SQLite
//!   (and JSONL) target, checked to decode to the intended ops: appends in
//!   many partitions, flush, close, crashes with open turns, every torn
//!   tail, recovery (dry and committed), load, delete and re-create,
//!   refused batches, reads past the end. Their seed bytes pick the JSONL
//!   store taking part (seed mod 3: none, raw, zstd), three seeds each.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use turnwal::backend::SyncMode;
use turnwal::backend::wal::WalBackend;
use turnwal_testkit::simdisk::{CrashMode, Fault, FaultError, OpKind, SimDisk};
use turnwal_testkit::crashlab::ops::{self, Op};
use turnwal::{Event, Policy, SessionHeader, Store, StoreOptions};

const T0: i64 = 1_700_000_000_000;

fn ev(t: &str, seq: u64, data: &str) -> Event {
    Event::new(t, seq, T0 + seq as i64, data).expect("a valid seed event")
}

/// One complete turn starting at `seq`: a user message, a step with chunks
/// and a tool round trip, a second step with the answer.
fn turn(n: u64, seq: u64, close: bool) -> Vec<Event> {
    let call = format!("c{n}");
    let mut events = vec![
        ev("turn/start", seq, &format!(r#"{{"turn":{n}}}"#)),
        ev(
            "user/message",
            seq + 1,
            &format!(
                r#"{{"id":"u{n}","role":"user","content":[{{"type":"text","text":"list the files \u00e9 {n}"}}]}}"#
            ),
        ),
        ev(
            "step/start",
            seq + 2,
            &format!(r#"{{"turn":{n},"step":1}}"#),
        ),
        ev(
            "assistant/chunk",
            seq + 3,
            &format!(
                r#"{{"turn":{n},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"Let me look.\n"}}}}"#
            ),
        ),
        ev(
            "assistant/message",
            seq + 4,
            &format!(
                r#"{{"turn":{n},"step":1,"message":{{"role":"assistant","content":[{{"type":"tool-call","id":"{call}","name":"ls","arguments":"{{\"path\":\".\"}}"}}]}}}}"#
            ),
        ),
        ev(
            "tool/call",
            seq + 5,
            &format!(
                r#"{{"turn":{n},"step":1,"callId":"{call}","name":"ls","arguments":"{{\"path\":\".\"}}"}}"#
            ),
        ),
    ];
    if !close {
        // Open with a recorded, unanswered tool call: the closers must
        // answer it as "outcome unknown".
        return events;
    }
    events.extend([
        ev(
            "tool/result",
            seq + 6,
            &format!(
                r#"{{"turn":{n},"step":1,"message":{{"id":"r{n}","role":"user","source":{{"kind":"tool","callId":"{call}"}},"content":[{{"type":"tool-result","toolCallId":"{call}","content":[{{"type":"text","text":"Cargo.toml\nsrc\n"}}]}}]}}}}"#
            ),
        )
        .with_source_event_seqs(&[seq + 5])
        .expect("earlier seq")
        .with_surface_op("\"append\"")
        .expect("valid surfaceOp"),
        ev("step/end", seq + 7, &format!(r#"{{"turn":{n},"step":1}}"#)),
        ev("step/start", seq + 8, &format!(r#"{{"turn":{n},"step":2}}"#)),
        ev(
            "assistant/message",
            seq + 9,
            &format!(
                r#"{{"turn":{n},"step":2,"message":{{"role":"assistant","content":[{{"type":"text","text":"Two entries: 1e+21, -0.0, \ud83d\ude00."}}]}}}}"#
            ),
        ),
        ev("step/end", seq + 10, &format!(r#"{{"turn":{n},"step":2}}"#)),
        ev(
            "turn/end",
            seq + 11,
            &format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#),
        ),
    ]);
    events
}

/// `turns` complete turns, numbered from 1, as one sequence.
fn turns(count: u64) -> Vec<Event> {
    let mut log = Vec::new();
    for n in 1..=count {
        log.extend(turn(n, log.len() as u64, true));
    }
    log
}

/// A store on a fresh simulated disk.
struct Sim {
    disk: SimDisk,
    store: Store,
    backend: Arc<WalBackend>,
}

impl Sim {
    fn new(seed: u64, sync: SyncMode) -> Sim {
        let disk = SimDisk::new(seed);
        let backend =
            Arc::new(WalBackend::with_storage(Path::new("/s"), Arc::new(disk.clone())).unwrap());
        let store = Store::with_backend(
            backend.clone(),
            StoreOptions {
                sync,
                ..StoreOptions::default()
            },
        );
        Sim {
            disk,
            store,
            backend,
        }
    }

    /// Creates the session and appends `batches` (one append call each).
    fn write(&self, header: SessionHeader, policy: Policy, batches: &[&[Event]]) {
        let id = header.id.clone();
        self.store.create_with_policy(header, policy).unwrap();
        for batch in batches {
            self.store.append(&id, batch).unwrap();
        }
    }

    /// The session file's bytes as reads see them.
    fn bytes(&self, id: &str) -> Vec<u8> {
        self.disk.read(&self.backend.log_path(id)).unwrap()
    }
}

fn header() -> SessionHeader {
    SessionHeader::new("s", T0 as u64).with_cwd("/work/app")
}

/// Offsets of the records of a session file (after its header).
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let header_len = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
    let mut at = 24 + header_len;
    let mut out = Vec::new();
    while at + 56 <= bytes.len() {
        let len = 56
            + u16::from_le_bytes(bytes[at + 6..at + 8].try_into().unwrap()) as usize
            + [8, 12, 16]
                .iter()
                .map(|&o| {
                    u32::from_le_bytes(bytes[at + o..at + o + 4].try_into().unwrap()) as usize
                })
                .sum::<usize>();
        if at + len > bytes.len() {
            break;
        }
        out.push(at);
        at += len;
    }
    out.push(at);
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    assert!(bytes.len() <= 16 * 1024, "{name}: seeds stay small");
    fs::write(dir.join(name), bytes).unwrap();
}

fn scan_corpus(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    let three = turns(3);

    // A clean multi-turn log written in three batches (turn mode: each
    // batch ends with a turn/end, so each is fsynced and later records'
    // watermarks prove the earlier ones durable).
    let sim = Sim::new(1, SyncMode::Turn);
    sim.write(
        header(),
        Policy::Strict,
        &[&three[..12], &three[12..24], &three[24..]],
    );
    let clean = sim.bytes("s");
    write(dir, "clean-3-turns.twal", &clean);

    // The first batch only, as materialization publishes it; and the bare
    // header (never published by the engine, but a boundary for the scan).
    let sim = Sim::new(2, SyncMode::Turn);
    sim.write(header(), Policy::Strict, &[&three[..2]]);
    let first = sim.bytes("s");
    write(dir, "first-batch-only.twal", &first);
    let offsets = record_offsets(&first);
    write(dir, "header-only.twal", &first[..offsets[0]]);

    // Two complete turns and a third left open with an unanswered call.
    let mut open_log = turns(2);
    open_log.extend(turn(3, open_log.len() as u64, false));
    let sim = Sim::new(3, SyncMode::Turn);
    sim.write(
        header(),
        Policy::Strict,
        &[&open_log[..12], &open_log[12..24], &open_log[24..]],
    );
    let open = sim.bytes("s");
    write(dir, "open-turn.twal", &open);

    // Torn tails: the open turn's last record cut in its body, and cut
    // inside its 56-byte header.
    let offsets = record_offsets(&open);
    let last = offsets[offsets.len() - 2];
    write(
        dir,
        "torn-tail.twal",
        &open[..last + (open.len() - last) / 2],
    );
    write(dir, "torn-record-header.twal", &open[..last + 20]);

    // Zero-filled and garbage tails after the clean log.
    let mut zeros = clean.clone();
    zeros.resize(clean.len() + 1536, 0);
    write(dir, "zero-tail.twal", &zeros);
    let mut garbage = clean.clone();
    let mut rng = turnwal::rng::Rng::from_state(0x2545_f491_4f6c_dd1d);
    garbage.extend((0..700).map(|_| rng.next_u64() as u8));
    write(dir, "garbage-tail.twal", &garbage);

    // Stale data: the clean log's own first two records copied to its end.
    let offsets = record_offsets(&clean);
    let mut stale = clean.clone();
    stale.extend_from_slice(&clean[offsets[0]..offsets[2]]);
    write(dir, "stale-copied-records.twal", &stale);

    // A flip inside an acknowledged record (a later record's watermark
    // proves it was durable): corruption, refused.
    let mut hole = clean.clone();
    hole[offsets[3] + 60] ^= 0x10;
    write(dir, "acknowledged-flip.twal", &hole);

    // The open turn repaired by load: synthetic closers (flag bit 3).
    let sim = Sim::new(4, SyncMode::Turn);
    sim.write(
        header(),
        Policy::Strict,
        &[&open_log[..12], &open_log[12..24], &open_log[24..]],
    );
    drop(sim.store);
    let store = Store::with_backend(sim.backend.clone(), StoreOptions::default());
    store.load("s").unwrap();
    let repaired = sim.disk.read(&sim.backend.log_path("s")).unwrap();
    write(dir, "repaired-with-closers.twal", &repaired);
    // An interrupted repair: the final synthetic turn/end torn off.
    let offsets = record_offsets(&repaired);
    let last = offsets[offsets.len() - 2];
    write(
        dir,
        "interrupted-repair.twal",
        &repaired[..last + (repaired.len() - last) / 3],
    );

    // Lenient: every optional header key, a plugin event between turns
    // (ignorable, kind 14), session/end-seed, request/context and a
    // todo/write inside a turn, surfaceOp before sourceEventSeqs.
    let mut full = SessionHeader::new("sub/\u{e9}../x", T0 as u64).with_cwd("/work/app");
    full.parent_session = Some("parent".into());
    full.seed_length = Some(1);
    full.origin = Some("subagent".into());
    full.delegation_depth = Some(2);
    full.agent_preset = Some("review".into());
    let lenient = vec![
        ev("session/end-seed", 0, r#"{"seedLength":1}"#),
        ev("plugin/note", 1, r#"{"note":"between turns","n":[1,2.5e-3,null]}"#).with_ignorable(),
        ev("turn/start", 2, r#"{"turn":1}"#),
        ev(
            "request/context",
            3,
            r#"{"turn":1,"messages":[{"role":"system","content":"hi"}]}"#,
        ),
        ev(
            "todo/write",
            4,
            r#"{"turn":1,"todos":[{"content":"a","status":"pending"}]}"#,
        ),
        ev("step/start", 5, r#"{"turn":1,"step":1}"#),
        ev(
            "assistant/message",
            6,
            r#"{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"\ud800 lone"}]}}"#,
        )
        .with_surface_op(r#"{"op":"replace","start":1,"end":1}"#)
        .unwrap()
        .with_source_event_seqs(&[1])
        .unwrap(),
        ev("step/end", 7, r#"{"turn":1,"step":1}"#),
        ev(
            "turn/end",
            8,
            r#"{"turn":1,"reason":{"kind":"error","message":"boom"}}"#,
        ),
        ev("plugin/after", 9, r#"{}"#),
    ];
    let sim = Sim::new(5, SyncMode::Batch);
    sim.store
        .create_with_policy(full.clone(), Policy::Lenient)
        .unwrap();
    sim.store.append(&full.id, &lenient[..2]).unwrap();
    sim.store.append(&full.id, &lenient[2..]).unwrap();
    let lenient_bytes = sim.bytes(&full.id);
    write(dir, "lenient-full-header.twal", &lenient_bytes);

    // The same file read as Strict (flag bit 0 cleared, header CRC
    // recomputed): the plugin event after the last turn/end is debris.
    let mut strict = lenient_bytes.clone();
    strict[10] &= !1;
    let header_len = u32::from_le_bytes(strict[16..20].try_into().unwrap()) as usize;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&strict[..20]);
    crc.update(&strict[24..24 + header_len]);
    strict[20..24].copy_from_slice(&crc.finalize().to_le_bytes());
    write(dir, "strict-debris.twal", &strict);

    // Never mode: appended but unsynced records (watermarks stay low).
    let sim = Sim::new(6, SyncMode::Never);
    sim.write(
        header(),
        Policy::Strict,
        &[&three[..5], &three[5..12], &three[12..20]],
    );
    write(dir, "never-mode-open.twal", &sim.bytes("s"));

    // A power loss with sectors of the unsynced batch torn to zeros: the
    // first disk seed whose crash image kept the new length but not every
    // new sector.
    let torn = (7..100)
        .find_map(|seed| {
            let sim = Sim::new(seed, SyncMode::Never);
            sim.write(header(), Policy::Strict, &[&three[..12], &three[12..]]);
            let path = sim.backend.log_path("s");
            let full = sim.disk.read(&path).unwrap();
            let image = sim
                .disk
                .crash(CrashMode::SectorsZeroed { size: 512 })
                .read(&path)
                .unwrap();
            (image.len() == full.len() && image != full).then_some(image)
        })
        .expect("some crash tears a sector");
    write(dir, "power-loss-torn-sectors.twal", &torn);

    // A compacted log (two units: turns 1-2, then turn 3, published with
    // the open turn's first records), and units forged in every number a
    // reader takes from their heads, each record checksum recomputed so
    // only the numbers give them away (issue 26, items 3-5).
    let sim = Sim::new(8, SyncMode::Turn);
    sim.write(header(), Policy::Strict, &[&open_log[..12]]);
    sim.store.compact("s").unwrap();
    sim.store.append("s", &open_log[12..24]).unwrap();
    sim.store.append("s", &open_log[24..27]).unwrap();
    sim.store.compact("s").unwrap();
    sim.store.append("s", &open_log[27..]).unwrap();
    let compacted = sim.bytes("s");
    write(dir, "compacted-two-units.twal", &compacted);
    let unit = record_offsets_v2(&compacted)[1];
    let forge = |name: &str, edit: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = compacted.clone();
        edit(&mut bytes);
        reseal(&mut bytes, unit);
        write(dir, name, &bytes);
    };
    let put = |bytes: &mut Vec<u8>, at: usize, value: u32| {
        bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    };
    let count = u32::from_le_bytes(compacted[unit + 16..unit + 20].try_into().unwrap());
    let plain = u32::from_le_bytes(compacted[unit + 12..unit + 16].try_into().unwrap());
    forge("unit-count-max.twal", &|b| put(b, unit + 16, u32::MAX));
    forge("unit-count-plus-one.twal", &|b| put(b, unit + 16, count + 1));
    forge("unit-count-minus-one.twal", &|b| put(b, unit + 16, count - 1));
    forge("unit-plain-len-plus-one.twal", &|b| put(b, unit + 12, plain + 1));
    forge("unit-plain-len-minus-one.twal", &|b| put(b, unit + 12, plain - 1));
    forge("unit-plain-len-max.twal", &|b| put(b, unit + 12, 64 << 20));
    forge("unit-seq-past-safe.twal", &|b| {
        b[unit + 24..unit + 32].copy_from_slice(&((1u64 << 53) - 2).to_le_bytes());
    });
    forge("unit-frame-garbled.twal", &|b| b[unit + 52 + 6] ^= 0x5a);
    // A frame that inflates to 1 MiB of zeros behind the same head.
    let bomb = zstd::bulk::compress(&vec![0u8; 1 << 20], 19).unwrap();
    let mut inflating = compacted[..unit + 52].to_vec();
    let frame_len = u32::from_le_bytes(compacted[unit + 8..unit + 12].try_into().unwrap()) as usize;
    inflating[unit + 8..unit + 12].copy_from_slice(&(bomb.len() as u32).to_le_bytes());
    inflating.extend_from_slice(&bomb);
    inflating.extend_from_slice(&(56 + bomb.len() as u32).to_le_bytes());
    inflating.extend_from_slice(&compacted[unit + 56 + frame_len..]);
    reseal(&mut inflating, unit);
    write(dir, "unit-frame-inflates.twal", &inflating);
}

/// Offsets of a version-2 file's records (a unit's and a run's lengths
/// read as the format says), then its end.
fn record_offsets_v2(bytes: &[u8]) -> Vec<usize> {
    let header_len = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
    let mut at = 24 + header_len;
    let mut out = Vec::new();
    while at + 56 <= bytes.len() {
        let head = turnwal::backend::wal::format::parse_head(&bytes[at..at + 52]).unwrap();
        out.push(at);
        at += head.record_len() as usize;
    }
    out.push(at);
    out
}

/// Recomputes the checksum of the record at `at` with the file's salt.
fn reseal(bytes: &mut [u8], at: usize) {
    let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize + 56;
    let salt: [u8; 4] = bytes[12..16].try_into().unwrap();
    let mut crc = crc32fast::Hasher::new();
    crc.update(&salt);
    crc.update(&bytes[at + 4..at + len]);
    bytes[at..at + 4].copy_from_slice(&crc.finalize().to_le_bytes());
}

/// Encodes ops the way `turnwal_testkit::crashlab::ops::decode` reads them.
fn encode(ops_list: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    for op in ops_list {
        match op {
            Op::Append { session, events } => {
                out.extend([0, *session as u8, (*events - 1) as u8]);
            }
            Op::Flush { session } => out.extend([7, *session as u8]),
            Op::Close { session } => out.extend([8, *session as u8]),
            Op::Compact { session } => out.extend([15, *session as u8]),
            Op::SealDue { session } => out.extend([15, (*session + ops::SESSIONS) as u8]),
            Op::CutPowerAfter(n) => out.extend([9, *n as u8]),
            Op::Fault(f) => {
                let kinds = [
                    OpKind::Write,
                    OpKind::Sync,
                    OpKind::SetLen,
                    OpKind::Create,
                    OpKind::Rename,
                    OpKind::SyncDir,
                ];
                let kind = kinds.iter().position(|k| *k == f.kind).unwrap() as u8;
                let a = (0u8..=255)
                    .find(|a| {
                        a % 6 == kind
                            && (a & 8 != 0) == (f.error == FaultError::NoSpace)
                            && (a & 16 != 0) == f.persistent
                    })
                    .unwrap();
                out.extend([11, a, f.nth as u8]);
            }
            Op::ShortWrites(on) => out.extend([13, *on as u8]),
            Op::Crash(mode) => {
                let i = CrashMode::ALL.iter().position(|m| m == mode).unwrap();
                out.extend([14, i as u8]);
            }
        }
    }
    let decoded = ops::decode(&out, usize::MAX);
    assert_eq!(decoded, ops_list, "the encoding round-trips");
    out
}

fn ops_corpus(dir: &Path) {
    use Op::*;
    fs::create_dir_all(dir).unwrap();
    let app = |session, events| Append { session, events };
    let mut seeds: Vec<(String, u8, Vec<Op>)> = Vec::new();
    let sync_names = ["turn", "batch", "never"];
    // Plain workloads in each sync mode: appends to all three sessions,
    // flushes, closes and reopens.
    for (m, name) in sync_names.iter().enumerate() {
        seeds.push((
            format!("workload-{name}"),
            m as u8,
            vec![
                app(0, 8),
                app(1, 3),
                app(0, 12),
                Flush { session: 0 },
                app(2, 24),
                Close { session: 1 },
                app(1, 5),
                Flush { session: 2 },
                app(0, 6),
            ],
        ));
    }
    // Every crash mode after a workload with an open turn, in each sync
    // mode (the sync mode is the seed byte modulo 3, so vary it).
    for (i, mode) in CrashMode::ALL.iter().enumerate() {
        let label = format!("{mode:?}")
            .to_lowercase()
            .replace([' ', '{', '}', ':'], "");
        seeds.push((
            format!("crash-{i}-{label}"),
            i as u8,
            vec![
                app(0, 10),
                app(0, 9),
                app(1, 7),
                Crash(*mode),
                app(0, 4),
                app(1, 20),
                Crash(*mode),
            ],
        ));
    }
    // Every fault kind with each error, transient then persistent, armed
    // in the middle of a workload.
    for kind in [
        OpKind::Write,
        OpKind::Sync,
        OpKind::SetLen,
        OpKind::Create,
        OpKind::Rename,
        OpKind::SyncDir,
    ] {
        for error in [FaultError::Io, FaultError::NoSpace] {
            for persistent in [false, true] {
                if persistent && error == FaultError::NoSpace {
                    continue;
                }
                let label = format!(
                    "fault-{kind:?}-{}{}",
                    if error == FaultError::Io {
                        "eio"
                    } else {
                        "enospc"
                    },
                    if persistent { "-persistent" } else { "" }
                )
                .to_lowercase();
                let nth = if kind == OpKind::Write { 1 } else { 0 };
                // set_len runs only to cut back a failed batch that reached
                // the file (or in a repair): fail an fdatasync too, so the
                // rollback meets the fault and the writer is poisoned.
                let mut armed = vec![Fault(self::Fault {
                    kind,
                    nth,
                    error,
                    persistent,
                })];
                if kind == OpKind::SetLen {
                    armed.push(Fault(self::Fault {
                        kind: OpKind::Sync,
                        nth: 0,
                        error: FaultError::Io,
                        persistent: false,
                    }));
                }
                seeds.push((
                    label,
                    seeds.len() as u8,
                    [
                        vec![app(0, 6)],
                        armed,
                        vec![
                            app(0, 10),
                            app(1, 6),
                            Flush { session: 0 },
                            app(0, 3),
                            Crash(CrashMode::KeepAll),
                            app(0, 5),
                            Close { session: 0 },
                            app(1, 4),
                        ],
                    ]
                    .concat(),
                ));
            }
        }
    }
    // Power cuts at several points, then each kind of crash image.
    for (n, mode) in [
        (0, CrashMode::LoseUnsynced),
        (2, CrashMode::Prefix),
        (5, CrashMode::Sectors { size: 512 }),
        (9, CrashMode::SectorsGarbage { size: 4096 }),
        (11, CrashMode::SectorsZeroed { size: 512 }),
    ] {
        seeds.push((
            format!("power-cut-after-{n}"),
            n as u8,
            vec![
                app(0, 7),
                app(1, 2),
                CutPowerAfter(n),
                app(0, 15),
                app(1, 9),
                Flush { session: 1 },
                Crash(mode),
                app(1, 3),
            ],
        ));
    }
    // Short writes on and off, with a crash that keeps a prefix of them.
    seeds.push((
        "short-writes".into(),
        1,
        vec![
            ShortWrites(true),
            app(0, 11),
            app(0, 13),
            app(2, 4),
            ShortWrites(false),
            app(0, 2),
            Crash(CrashMode::Prefix),
        ],
    ));
    // A failed fsync (Linux semantics: the pages are dropped and marked
    // clean) followed by a process crash and a power loss.
    seeds.push((
        "fsync-failure-then-crash".into(),
        0,
        vec![
            app(0, 12),
            Fault(self::Fault {
                kind: OpKind::Sync,
                nth: 0,
                error: FaultError::Io,
                persistent: false,
            }),
            app(0, 12),
            app(0, 12),
            Crash(CrashMode::KeepAll),
            app(0, 12),
            Crash(CrashMode::LoseUnsynced),
        ],
    ));
    for (name, seed, list) in &seeds {
        let mut bytes = vec![*seed];
        bytes.extend(encode(list));
        write(dir, &format!("{name}.bin"), &bytes);
    }
}

fn decode_corpus(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    let lines: &[(&str, &[u8])] = &[
        ("turn-start", br#"{"type":"turn/start","seq":0,"time":1700000000000,"data":{"turn":1}}"#),
        ("user-message-crlf", b"{\"type\":\"user/message\",\"seq\":1,\"time\":1700000000001,\"data\":{\"id\":\"u1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi \\u00e9\"}]}}\r\n"),
        ("tool-result-every-key", br#"{"type":"tool/result","seq":7,"time":-5,"data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"c1"}}},"ignorable":true,"sourceEventSeqs":[1,3],"surfaceOp":"append"}"#),
        ("surface-op-first", br#"{"type":"assistant/message","seq":9,"time":2,"data":{},"surfaceOp":{"op":"replace","start":1,"end":2},"sourceEventSeqs":[0]}"#),
        ("plugin-ignorable", br#"{"type":"plugin/x","seq":3,"time":4,"data":[1,2,{"a":null}],"ignorable":true}"#),
        ("lone-surrogates", br#"{"type":"user/message","seq":2,"time":3,"data":{"text":"\ud800 and \udc00 and \ud83d\ude00"}}"#),
        ("surrogate-in-type", br#"{"type":"x\ud800","seq":2,"time":3,"data":1}"#),
        ("number-spellings", br#"{"type":"x","seq":0,"time":0,"data":[1e+21,-0.0,0.1e-400,123456789012345678901234567890]}"#),
        ("nan", br#"{"type":"x","seq":0,"time":0,"data":NaN}"#),
        ("infinity", br#"{"type":"x","seq":0,"time":0,"data":[-Infinity]}"#),
        ("trailing-garbage", br#"{"type":"x","seq":0,"time":0,"data":1} x"#),
        ("two-objects", br#"{"type":"x","data":1}{"type":"y","data":2}"#),
        ("invalid-utf8-data", b"{\"type\":\"x\",\"seq\":0,\"time\":0,\"data\":\"\xff\xfe\"}"),
        ("invalid-utf8-type", b"{\"type\":\"\xc0\xaf\",\"data\":1}"),
        ("truncated-utf8", b"{\"type\":\"x\",\"data\":\"\xe2\x82\"}"),
        ("unknown-key", br#"{"type":"x","seq":0,"time":0,"data":1,"extra":2}"#),
        ("duplicate-key", br#"{"type":"x","type":"y","data":1}"#),
        ("seq-time-missing", br#"{"type":"turn/start","data":{"turn":1}}"#),
        ("time-missing", br#"{"type":"x","seq":4,"data":{}}"#),
        ("seq-missing", br#"{"type":"x","time":4,"data":{}}"#),
        ("seq-null", br#"{"type":"x","seq":null,"data":1}"#),
        ("seq-negative", br#"{"type":"x","seq":-1,"data":1}"#),
        ("seq-unsafe", br#"{"type":"x","seq":9007199254740992,"time":-9007199254740991,"data":1}"#),
        ("time-float", br#"{"type":"x","seq":1,"time":1.5,"data":1}"#),
        ("ignorable-false", br#"{"type":"x","data":1,"ignorable":false}"#),
        ("surface-op-null", br#"{"type":"tool/result","data":1,"surfaceOp":null}"#),
        ("source-seqs-not-earlier", br#"{"type":"tool/result","seq":3,"data":1,"sourceEventSeqs":[1,3]}"#),
        ("source-seqs-duplicate", br#"{"type":"user/message","seq":5,"data":1,"sourceEventSeqs":[1,1]}"#),
        ("surface-op-on-non-surface", br#"{"type":"turn/start","seq":0,"data":{"turn":1},"surfaceOp":"append"}"#),
        ("data-missing", br#"{"type":"x","seq":0,"time":0}"#),
        ("type-missing", br#"{"seq":0,"data":1}"#),
        ("type-empty", br#"{"type":"","data":1}"#),
        ("type-not-string", br#"{"type":5,"data":1}"#),
        ("not-an-object", br#"[{"type":"x","data":1}]"#),
        ("empty", b""),
        ("whitespace", b"  \t\n"),
        ("bom", b"\xef\xbb\xbf{\"type\":\"x\",\"data\":1}"),
        ("escaped-key", br#"{"\u0074ype":"x","d\u0061ta":1}"#),
        ("control-char-in-string", b"{\"type\":\"x\",\"data\":\"a\x01b\"}"),
        ("nul-byte", b"{\"type\":\"x\",\"data\":1}\x00"),
        ("retired-type", br#"{"type":"mode/set","seq":0,"time":0,"data":{}}"#),
        ("turn-end", br#"{"type":"turn/end","seq":11,"time":1700000000011,"data":{"turn":1,"reason":{"kind":"completed"}}}"#),
    ];
    for (name, bytes) in lines {
        write(dir, &format!("{name}.json"), bytes);
    }
    // Nesting past serde_json's recursion limit (128).
    let deep = format!(
        r#"{{"type":"x","data":{}{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    write(dir, "deep-nesting.json", deep.as_bytes());
}

fn differential_corpus(dir: &Path) {
    use turnwal_testkit::crashlab::differential::{self, DiffOp::*, TornTail as How};
    fs::create_dir_all(dir).unwrap();
    let app = |session, events| Append { session, events };
    // The first byte: bit 0 two sessions, bits 1 and 2 Lenient for each;
    // the second byte: the content's seed.
    let seeds: Vec<(&str, [u8; 2], Vec<differential::DiffOp>)> = vec![
        (
            "one-strict-session",
            [0, 1],
            vec![
                app(0, 1),
                app(0, 2),
                app(0, 3),
                app(0, 48),
                app(0, 17),
                Check,
                app(0, 5),
            ],
        ),
        (
            "two-sessions-lenient",
            [0b111, 2],
            vec![
                app(0, 9),
                app(1, 30),
                app(0, 48),
                Flush { session: 1 },
                app(1, 4),
                Close { session: 0 },
                app(0, 11),
                Reopen,
                app(1, 13),
            ],
        ),
        (
            "crash-in-open-turns",
            [1, 3],
            vec![
                app(0, 20),
                app(1, 7),
                Reopen,
                app(0, 6),
                Reopen,
                Recover {
                    session: 1,
                    dry_run: true,
                },
                app(1, 2),
            ],
        ),
        (
            "torn-partial-next",
            [0, 4],
            vec![
                app(0, 40),
                Tear {
                    session: 0,
                    how: How::PartialNext,
                },
                Recover {
                    session: 0,
                    dry_run: true,
                },
                Load { session: 0 },
                app(0, 10),
            ],
        ),
        (
            "torn-cut-last",
            [0, 5],
            vec![
                app(0, 33),
                app(0, 3),
                Tear {
                    session: 0,
                    how: How::CutLast(129),
                },
                app(0, 8),
            ],
        ),
        (
            "drop-last-batch-half",
            [1, 6],
            vec![
                app(0, 48),
                app(1, 25),
                Tear {
                    session: 0,
                    how: How::DropLast(20),
                },
                Tear {
                    session: 1,
                    how: How::DropLast(3),
                },
                Recover {
                    session: 0,
                    dry_run: false,
                },
                Check,
            ],
        ),
        (
            "delete-and-recreate",
            [0b11, 7],
            vec![
                app(0, 12),
                app(1, 12),
                Delete { session: 0 },
                Check,
                app(0, 12),
                Reopen,
                Delete { session: 1 },
                app(1, 1),
            ],
        ),
        (
            "refused-batches",
            [0, 8],
            vec![
                Reject {
                    session: 0,
                    how: 64,
                },
                app(0, 10),
                Reject {
                    session: 0,
                    how: 65,
                },
                Reject {
                    session: 0,
                    how: 66,
                },
                app(0, 0),
                Reopen,
                Reject {
                    session: 0,
                    how: 67,
                },
                app(0, 1),
            ],
        ),
        (
            "reads-everywhere",
            [0, 9],
            vec![
                app(0, 30),
                ReadFrom { session: 0, seq: 0 },
                ReadFrom {
                    session: 0,
                    seq: 29,
                },
                ReadFrom {
                    session: 0,
                    seq: 30,
                },
                ReadFrom {
                    session: 0,
                    seq: 31,
                },
                ReadFrom {
                    session: 0,
                    seq: 255,
                },
                Reopen,
                ReadFrom {
                    session: 0,
                    seq: 15,
                },
            ],
        ),
    ];
    for (name, head, list) in &seeds {
        let mut bytes = head.to_vec();
        bytes.extend(differential::encode(list));
        let sessions = 1 + usize::from(head[0] & 1);
        assert_eq!(
            &differential::decode(&bytes[2..], sessions, 24),
            list,
            "{name} round-trips"
        );
        write(dir, &format!("{name}.bin"), &bytes);
    }
}

fn main() {
    let out: PathBuf = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .expect("usage: seed_corpus <corpus dir, e.g. fuzz/corpus>");
    scan_corpus(&out.join("scan"));
    ops_corpus(&out.join("ops"));
    decode_corpus(&out.join("decode"));
    differential_corpus(&out.join("differential"));
    // Every seed runs clean through its target.
    for (target, f) in [
        ("scan", turnwal_testkit::crashlab::fuzz_scan as fn(&[u8])),
        ("ops", turnwal_testkit::crashlab::ops::fuzz_ops),
        ("decode", turnwal_testkit::crashlab::fuzz_decode),
        (
            "differential",
            turnwal_testkit::crashlab::differential::fuzz_differential,
        ),
    ] {
        let mut entries: Vec<_> = fs::read_dir(out.join(target))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in &entries {
            f(&fs::read(path).unwrap());
        }
        println!("{target}: {} seeds", entries.len());
    }
}
