//! Issue 12's damage oracle: damage to *acknowledged* data.
//!
//! Sessions are written as one batch, per turn and as many small batches,
//! under every sync mode, on the native WAL over the simulated disk (so a
//! process crash, `CrashMode::KeepAll`, and a power cut,
//! `CrashMode::LoseUnsynced`, are both modelled), and on SQLite and JSONL
//! (raw and zstd) on real files. Every acknowledged record (row, line,
//! frame) of each crash image is then damaged: a bit flip (head, payload,
//! trailer), a 4–8 byte overwrite with garbage, and the zeroed 512-byte
//! sector holding a byte of it. For every damaged image:
//!
//! - automatic paths (`inspect`, `load`, `recover`, `verify`) refuse it as
//!   corrupt, naming the first damaged record's byte offset and seq, and
//!   write nothing; or, only when the damaged record lies in the documented
//!   power-loss window (docs/RECOVERY.md, "Proof": beyond the durability
//!   proof on disk and not covered by a later record's watermark), it is
//!   torn, and repair keeps every event before it and quarantines exactly
//!   the bytes it cuts;
//! - `Store::salvage` returns every intact event, with the gap named;
//! - `Store::recover_salvage` keeps the longest valid prefix plus its
//!   closers, quarantines exactly the bytes from the cut to the old end, and
//!   the next load is clean.
//!
//! "In the window" is computed from the image alone (the proof file's
//! bytes per docs/FORMAT.md and the watermarks of the intact later records),
//! and checked against the sync mode's documented window. The default run is
//! bounded (a few damages per record); `TURNWAL_DAMAGE_FULL=1` flips a bit
//! in every byte and overwrites at every eighth byte of every record.

mod wal_damage {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use turnwal::backend::wal::{WalBackend, encode_file_name, format, proof, record};
    use turnwal::rng::Rng;
    use turnwal::scan::Gap;
    use turnwal::{
        Cut, CutReason, Error, Event, EventKind, LogState, Policy, SessionHeader, Store,
        StoreOptions, SyncMode, Tracker, interrupted_turn_closers,
    };
    use turnwal_testkit::simdisk::{CrashMode, SimDisk};

    const ROOT: &str = "/store";
    const ID: &str = "s-damage";
    const T0: i64 = 1_700_000_000_000;
    const SECTOR: usize = 512;
    /// The smallest record (FORMAT.md, "Record").
    const MIN_RECORD: usize = 56;

    pub fn full() -> bool {
        std::env::var("TURNWAL_DAMAGE_FULL").is_ok_and(|v| !v.is_empty() && v != "0")
    }

    fn root() -> &'static Path {
        Path::new(ROOT)
    }

    fn log_path() -> PathBuf {
        WalBackend::with_storage(root(), Arc::new(SimDisk::new(0)))
            .unwrap()
            .log_path(ID)
    }

    fn store_on(disk: &SimDisk, sync: SyncMode) -> Store {
        store_in(disk, sync, format::FORMAT_VERSION)
    }

    /// A store on `disk` creating sessions in format `version`.
    fn store_in(disk: &SimDisk, sync: SyncMode, version: u16) -> Store {
        let backend = WalBackend::with_storage(root(), Arc::new(disk.clone()))
            .unwrap()
            .creating_version(version);
        Store::with_backend(
            Arc::new(backend),
            StoreOptions {
                sync,
                ..StoreOptions::default()
            },
        )
    }

    /// A session header whose cwd pads the file header to exactly one
    /// sector, so the records start at byte 512 and zeroing a record's
    /// sector never zeroes the file header too (that is damage to the
    /// header, refused at offset 0 with nothing to salvage, not damage to a
    /// record).
    fn header() -> SessionHeader {
        let base = SessionHeader::new(ID, T0 as u64).with_cwd("/work/app");
        let mut out = Vec::new();
        format::encode_file_header(&mut out, &base, Policy::Strict, 0);
        let pad = SECTOR - out.len();
        let header =
            SessionHeader::new(ID, T0 as u64).with_cwd(format!("/work/app{}", "x".repeat(pad)));
        let mut out = Vec::new();
        format::encode_file_header(&mut out, &header, Policy::Strict, 0);
        assert_eq!(out.len(), SECTOR);
        header
    }

    /// Builds events with contiguous seqs and increasing times, turn by
    /// turn.
    struct Script {
        seq: u64,
        time: i64,
        turns: Vec<Vec<Event>>,
    }

    impl Script {
        fn e(&mut self, event_type: &str, data: &str) -> &mut Script {
            self.time += 7;
            let event = Event::new(event_type, self.seq, self.time, data).unwrap();
            self.seq += 1;
            self.turns.last_mut().unwrap().push(event);
            self
        }

        fn with(&mut self, f: impl FnOnce(Event) -> Event) -> &mut Script {
            let last = self.turns.last_mut().unwrap().pop().unwrap();
            self.turns.last_mut().unwrap().push(f(last));
            self
        }

        fn turn(&mut self) -> &mut Script {
            self.turns.push(Vec::new());
            self
        }
    }

    /// Three complete turns (steps, chunks, tool calls and results), then a
    /// fourth left open with a tool call unanswered.
    pub fn turns() -> Vec<Vec<Event>> {
        let mut s = Script {
            seq: 0,
            time: T0,
            turns: Vec::new(),
        };
        s.turn()
            .e("turn/start", r#"{"turn":1}"#)
            .e("user/message", r#"{"id":"u1","text":"What is in src/?"}"#)
            .e("step/start", r#"{"turn":1,"step":1}"#)
            .e("assistant/chunk", r#"{"turn":1,"step":1,"delta":"Let me "}"#)
            .e("assistant/chunk", r#"{"turn":1,"step":1,"delta":"look."}"#)
            .e(
                "assistant/message",
                r#"{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool-call","id":"call-1","name":"ls","input":{"path":"src"}}]}}"#,
            )
            .e(
                "tool/call",
                r#"{"turn":1,"step":1,"callId":"call-1","name":"ls","arguments":{"path":"src"}}"#,
            )
            .e(
                "tool/result",
                r#"{"turn":1,"step":1,"message":{"id":"r1","role":"user","source":{"kind":"tool","callId":"call-1"},"content":[{"type":"tool-result","toolCallId":"call-1","content":[{"type":"text","text":"lib.rs main.rs"}]}]}}"#,
            )
            .with(|e| {
                e.with_surface_op("\"append\"")
                    .unwrap()
                    .with_source_event_seqs(&[6])
                    .unwrap()
            })
            .e("step/end", r#"{"turn":1,"step":1}"#)
            .e("step/start", r#"{"turn":1,"step":2}"#)
            .e("assistant/chunk", r#"{"turn":1,"step":2,"delta":"Two "}"#)
            .e(
                "assistant/message",
                r#"{"turn":1,"step":2,"message":{"id":"a2","role":"assistant","content":[{"type":"text","text":"Two files."}]}}"#,
            )
            .e("step/end", r#"{"turn":1,"step":2}"#)
            .e("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#);
        s.turn()
            .e("turn/start", r#"{"turn":2}"#)
            .e("user/message", r#"{"id":"u2","text":"thanks","n":1e+21}"#)
            .e("step/start", r#"{"turn":2,"step":1}"#)
            .e("assistant/chunk", r#"{"turn":2,"step":1,"delta":"You're"}"#)
            .e(
                "assistant/message",
                r#"{"turn":2,"step":1,"message":{"id":"a3","role":"assistant","content":[{"type":"text","text":"You're welcome."}]}}"#,
            )
            .e("step/end", r#"{"turn":2,"step":1}"#)
            .e("turn/end", r#"{"turn":2,"reason":{"kind":"completed"}}"#);
        s.turn()
            .e("turn/start", r#"{"turn":3}"#)
            .e("user/message", r#"{"id":"u3","text":"show lib.rs"}"#)
            .e("plugin/telemetry", r#"{"tokens":42}"#)
            .with(Event::with_ignorable)
            .e("step/start", r#"{"turn":3,"step":1}"#)
            .e(
                "assistant/message",
                r#"{"turn":3,"step":1,"message":{"id":"a4","role":"assistant","content":[{"type":"tool-call","id":"call-3","name":"read","input":{"path":"src/lib.rs"}}]}}"#,
            )
            .e(
                "tool/call",
                r#"{"turn":3,"step":1,"callId":"call-3","name":"read","arguments":{"path":"src/lib.rs"}}"#,
            )
            .e(
                "tool/result",
                r#"{"turn":3,"step":1,"message":{"id":"r3","role":"user","source":{"kind":"tool","callId":"call-3"},"content":[{"type":"tool-result","toolCallId":"call-3","content":[{"type":"text","text":"pub mod x;"}]}]}}"#,
            )
            .e("step/end", r#"{"turn":3,"step":1}"#)
            .e("turn/end", r#"{"turn":3,"reason":{"kind":"completed"}}"#);
        s.turn()
            .e("turn/start", r#"{"turn":4}"#)
            .e("user/message", r#"{"id":"u4","text":"now run the tests"}"#)
            .e("step/start", r#"{"turn":4,"step":1}"#)
            .e("assistant/chunk", r#"{"turn":4,"step":1,"delta":"Running"}"#)
            .e(
                "assistant/message",
                r#"{"turn":4,"step":1,"message":{"id":"a5","role":"assistant","content":[{"type":"tool-call","id":"call-4","name":"test","input":{}}]}}"#,
            )
            .e(
                "tool/call",
                r#"{"turn":4,"step":1,"callId":"call-4","name":"test","arguments":{}}"#,
            );
        s.turns
    }

    /// How a session is handed to `append`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Shape {
        /// Every turn in one append (the materializing one).
        OneBatch,
        /// One append per turn.
        PerTurn,
        /// Appends of 1, 3, 2, 1, 3, 2, … events.
        ManyBatches,
    }

    pub const SHAPES: [Shape; 3] = [Shape::OneBatch, Shape::PerTurn, Shape::ManyBatches];

    fn batches(shape: Shape) -> Vec<Vec<Event>> {
        let turns = turns();
        match shape {
            Shape::OneBatch => vec![turns.concat()],
            Shape::PerTurn => turns,
            Shape::ManyBatches => small_batches(&turns.concat()),
        }
    }

    /// `all` in batches of 1, 3, 2, 1, 3, 2, … events.
    pub fn small_batches(all: &[Event]) -> Vec<Vec<Event>> {
        let mut out = Vec::new();
        let mut at = 0;
        for size in [1, 3, 2].into_iter().cycle() {
            if at >= all.len() {
                break;
            }
            let end = (at + size).min(all.len());
            out.push(all[at..end].to_vec());
            at = end;
        }
        out
    }

    /// A session as written, before the crash.
    pub struct Written {
        disk: SimDisk,
        sync: SyncMode,
        sent: Vec<Event>,
        /// Events acknowledged (the largest `Receipt::durable`).
        acked: u64,
        /// Events known fsynced (materialization, a `turn`/`batch`
        /// acknowledgement, an explicit flush).
        synced: u64,
    }

    /// Writes the session `shape` under `sync`. In `never` mode the store
    /// is flushed once turn 2 has ended (when turn 2's end is not in the
    /// materializing batch): what follows is acknowledged but not flushed.
    pub fn write(shape: Shape, sync: SyncMode) -> Written {
        let disk = SimDisk::new(12);
        let store = store_on(&disk, sync);
        store.create(header()).unwrap();
        let mut sent = Vec::new();
        let (mut acked, mut synced) = (0u64, 0u64);
        for (i, batch) in batches(shape).iter().enumerate() {
            let receipt = store.append(ID, batch).unwrap();
            sent.extend(batch.iter().cloned());
            let next = sent.len() as u64;
            let ends_turn = batch.iter().any(|e| e.kind() == EventKind::TurnEnd);
            let want = match sync {
                _ if i == 0 => next,
                SyncMode::Batch | SyncMode::Never => next,
                SyncMode::Turn if ends_turn => next,
                SyncMode::Turn => acked,
            };
            assert_eq!(
                (receipt.next_seq, receipt.durable),
                (next, want),
                "{shape:?} {sync:?} append {i}"
            );
            acked = want;
            if i == 0 || sync != SyncMode::Never {
                synced = acked;
            }
            let ends_turn_2 = batch.iter().any(|e| {
                e.kind() == EventKind::TurnEnd && e.data().get().starts_with(r#"{"turn":2,"#)
            });
            if sync == SyncMode::Never && ends_turn_2 && i > 0 {
                assert_eq!(store.flush(ID).unwrap(), next, "{shape:?} flush");
                synced = next;
            }
        }
        drop(store); // the crash: no close, no flush
        Written {
            disk,
            sync,
            sent,
            acked,
            synced,
        }
    }

    /// A session compacted twice while it lived: turns 1–2 appended as
    /// `shape` hands them over and sealed by `Store::compact` (the live
    /// writer makes every accepted event durable, then rewrites the log);
    /// turn 3 and the first event of the open turn 4 appended and sealed
    /// again (the first unit copied as it is, a second unit for turn 3, the
    /// open turn's record copied plain: every record of the new file
    /// states its length); then the rest of turn 4 appended in batches of 3
    /// and 2 events. Also the proof file's bytes from just before the
    /// second compaction, which a power cut can leave in place of the new
    /// proof.
    pub fn write_compacted(
        shape: Shape,
        sync: SyncMode,
        version: u16,
    ) -> (Written, Option<Vec<u8>>) {
        let disk = SimDisk::new(13);
        let store = store_in(&disk, sync, version);
        store.create(header()).unwrap();
        let all = turns();
        let split = |turns: &[Vec<Event>]| match shape {
            Shape::OneBatch => vec![turns.concat()],
            Shape::PerTurn => turns.to_vec(),
            Shape::ManyBatches => small_batches(&turns.concat()),
        };
        let mut sent: Vec<Event> = Vec::new();
        let mut acked = 0u64;
        let append = |batch: &[Event], sent: &mut Vec<Event>, acked: &mut u64| {
            let first = sent.is_empty();
            let receipt = store.append(ID, batch).unwrap();
            sent.extend(batch.iter().cloned());
            let ends_turn = batch.iter().any(|e| e.kind() == EventKind::TurnEnd);
            if first || ends_turn || sync != SyncMode::Turn {
                *acked = sent.len() as u64;
            }
            assert_eq!(receipt.durable, *acked, "{shape:?} {sync:?}");
        };
        for batch in split(&all[..2]) {
            append(&batch, &mut sent, &mut acked);
        }
        let first = store.compact(ID).unwrap().expect("the WAL compacts");
        assert!(first.after < first.before, "{first:?}");
        acked = sent.len() as u64;
        let tail = small_batches(&all[3]);
        for batch in split(&all[2..3]).iter().chain(&tail[..1]) {
            append(batch, &mut sent, &mut acked);
        }
        let proof_before = disk.read(&proof::path_of(&log_path()));
        let second = store.compact(ID).unwrap().expect("the WAL compacts");
        assert!(second.after < second.before, "{second:?}");
        // Everything accepted is durable now, and published.
        let mut synced = sent.len() as u64;
        acked = synced;
        for batch in &tail[1..] {
            append(batch, &mut sent, &mut acked);
            if sync == SyncMode::Batch {
                synced = acked;
            }
        }
        drop(store); // the crash: no close, no flush
        let written = Written {
            disk,
            sync,
            sent,
            acked,
            synced,
        };
        (written, proof_before)
    }

    /// Which proof file a compacted image is checked with.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ProofFile {
        /// As the crash left it.
        Current,
        /// The one from before the compaction, put back (another salt: it
        /// states nothing about the new file).
        BeforeCompaction,
        /// None.
        Missing,
    }

    /// [`run`] on the compacted session `written` crashed with `mode`,
    /// its proof file as `proof` says. With `legacy`, the published
    /// records' watermarks are 0, as a compaction of an earlier turnwal
    /// wrote them: then only the first record and the units themselves
    /// are known published.
    pub fn run_compacted(
        written: &Written,
        before: Option<&[u8]>,
        mode: CrashMode,
        proof: ProofFile,
        legacy: bool,
        full: bool,
    ) -> Tally {
        use turnwal::storage::Storage;
        let disk = written.disk.crash(mode);
        let path = proof::path_of(&log_path());
        if legacy {
            let mut bytes = disk.read(&log_path()).unwrap();
            let salt = u32_at(&bytes, 12);
            let mut at = SECTOR;
            while at < bytes.len() {
                let head = format::parse_head(&bytes[at..at + format::RECORD_HEADER_LEN]).unwrap();
                let end = at + head.record_len() as usize;
                if head.watermark > at as u64 {
                    bytes[at + 40..at + 48].fill(0);
                    let mut crc = crc32fast::Hasher::new();
                    crc.update(&salt.to_le_bytes());
                    crc.update(&bytes[at + 4..end]);
                    let crc = crc.finalize();
                    bytes[at..at + 4].copy_from_slice(&crc.to_le_bytes());
                }
                at = end;
            }
            disk.write_durable(&log_path(), &bytes).unwrap();
        }
        match (proof, before) {
            (ProofFile::Current, _) => {}
            (ProofFile::BeforeCompaction, Some(bytes)) => disk.write_durable(&path, bytes).unwrap(),
            (ProofFile::BeforeCompaction, None) | (ProofFile::Missing, _) => {
                let _ = disk.remove_file(&path);
            }
        }
        let mut image = image_of(disk);
        image.proof_current = proof == ProofFile::Current;
        assert!(
            [format::KIND_SEALED, format::KIND_ARCHIVE].contains(&image.bytes[image.starts[0] + 4]),
            "the image starts with a sealed unit or an archive reference"
        );
        run_image(written, mode, image, full)
    }

    /// A crash image, its records located by walking the file backwards
    /// through the trailers, and its durability proof read per FORMAT.md.
    struct Image {
        disk: SimDisk,
        bytes: Vec<u8>,
        salt: u32,
        starts: Vec<usize>,
        ends: Vec<usize>,
        watermarks: Vec<u64>,
        /// The first seq of each record (a chunk run or a sealed unit holds
        /// many events), and the events in all.
        seqs: Vec<u64>,
        total: u64,
        /// Whether the proof file is the one the crash left (not one put
        /// back from before a compaction, or removed): the window after a
        /// process crash assumes it.
        proof_current: bool,
        /// The durable length the proof file on the image states (0: none).
        proven: u64,
        proof_bytes: Option<Vec<u8>>,
        /// A version-3 log's archive as the image holds it, and the length
        /// the live file's reference (record 0) stands on.
        archive: Option<(Vec<u8>, u64)>,
    }

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    /// The durable length a proof file's bytes state for a log salted
    /// `salt` (FORMAT.md, "The durability proof"): 0 unless the magic, the
    /// CRC and the salt all match.
    fn proof_length(bytes: Option<&[u8]>, salt: u32) -> u64 {
        let Some(b) = bytes else { return 0 };
        if b.len() < 20
            || &b[..4] != b"TWDP"
            || crc32fast::hash(&b[..16]) != u32_at(b, 16)
            || u32_at(b, 4) != salt
        {
            return 0;
        }
        u64_at(b, 8)
    }

    fn image_of(disk: SimDisk) -> Image {
        let bytes = disk.read(&log_path()).expect("the log survives");
        let salt = u32_at(&bytes, 12);
        let records_start = 24 + u32_at(&bytes, 16) as usize;
        assert_eq!(records_start, SECTOR);
        // Backwards through the trailers.
        let mut starts = Vec::new();
        let mut end = bytes.len();
        while end > records_start {
            let len = u32_at(&bytes, end - 4) as usize;
            assert!(len >= MIN_RECORD && len <= end - records_start);
            end -= len;
            starts.push(end);
        }
        assert_eq!(
            end, records_start,
            "the trailers walk back to the first record"
        );
        starts.reverse();
        let mut ends = Vec::new();
        let mut watermarks = Vec::new();
        let mut seqs = Vec::new();
        let mut total = 0u64;
        let mut archive_len = None;
        for &at in &starts {
            // The head's lengths agree with the trailer, and the seqs run on
            // from record to record (a run's or a unit's count at once; an
            // archive reference, first, stands for the archive's events,
            // its seq field their count).
            if bytes[at + 4] == format::KIND_ARCHIVE {
                assert_eq!(at, records_start, "the reference is the first record");
                archive_len = Some(u64_at(&bytes, at + 52 + 8));
                ends.push(at + format::ARCHIVE_REF_LEN);
                seqs.push(0);
                total = u64_at(&bytes, at + 24);
                watermarks.push(u64_at(&bytes, at + 40));
                continue;
            }
            let head = format::parse_head(&bytes[at..at + format::RECORD_HEADER_LEN]).unwrap();
            ends.push(at + head.record_len() as usize);
            assert_eq!(u64_at(&bytes, at + 24), total);
            seqs.push(total);
            total += head.count();
            watermarks.push(u64_at(&bytes, at + 40));
        }
        assert_eq!(ends.last().copied().unwrap_or(records_start), bytes.len());
        let proof_bytes = disk.read(&proof::path_of(&log_path()));
        let proven = proof_length(proof_bytes.as_deref(), salt);
        assert_eq!(
            proven,
            proof_bytes.as_deref().map_or(0, |b| proof::decode(b, salt))
        );
        let archive = archive_len.map(|len| {
            let archive = disk.read(&archive_path()).expect("the archive survives");
            (archive, len)
        });
        Image {
            disk,
            bytes,
            salt,
            starts,
            ends,
            watermarks,
            seqs,
            total,
            proof_current: true,
            proven,
            proof_bytes,
            archive,
        }
    }

    impl Image {
        /// The seq after record `r`'s last event.
        fn end_seq(&self, r: usize) -> u64 {
            self.seqs.get(r + 1).copied().unwrap_or(self.total)
        }
    }

    /// One damage to the image.
    #[derive(Debug, Clone)]
    enum Damage {
        Flip { at: usize, bit: u8 },
        Overwrite { at: usize, with: Vec<u8> },
        ZeroSector { sector: usize },
    }

    impl Damage {
        fn apply(&self, bytes: &[u8]) -> Vec<u8> {
            let mut out = bytes.to_vec();
            match self {
                Damage::Flip { at, bit } => out[*at] ^= 1 << bit,
                Damage::Overwrite { at, with } => out[*at..at + with.len()].copy_from_slice(with),
                Damage::ZeroSector { sector } => {
                    let from = sector * SECTOR;
                    let to = (from + SECTOR).min(out.len());
                    out[from..to].fill(0);
                }
            }
            out
        }
    }

    /// The damages applied to record `r`: bit flips in its head, payload
    /// and trailer (every byte with `full`), overwrites of 4-8 garbage
    /// bytes, and zeroing each sector that holds a byte of it.
    fn damages(image: &Image, r: usize, full: bool, rng: &mut Rng) -> Vec<Damage> {
        let (start, end) = (image.starts[r], image.ends[r]);
        let len = end - start;
        let mut out = Vec::new();
        let flips: Vec<usize> = if full {
            (start..end).collect()
        } else {
            vec![
                start + (r * 11) % 52,               // head
                start + 52 + (len - MIN_RECORD) / 2, // payload
                end - 4 + r % 2,                     // trailer
            ]
        };
        for (k, at) in flips.into_iter().enumerate() {
            out.push(Damage::Flip {
                at,
                bit: ((r + k) % 8) as u8,
            });
        }
        let overwrites: Vec<usize> = if full {
            (start..end - 4).step_by(8).collect()
        } else {
            vec![start + (r * 13) % (len - 8)]
        };
        for at in overwrites {
            let n = 4 + (rng.next_u64() % 5) as usize;
            let n = n.min(end - at);
            let mut with: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            if with == image.bytes[at..at + n] {
                with[0] ^= 0xff;
            }
            out.push(Damage::Overwrite { at, with });
        }
        for sector in start / SECTOR..=(end - 1) / SECTOR {
            out.push(Damage::ZeroSector { sector });
            if !full {
                break;
            }
        }
        out
    }

    /// What was checked, per sync mode and crash kind.
    #[derive(Debug, Default, Clone)]
    pub struct Tally {
        pub images: u64,
        /// Damages that changed no byte (a zeroed sector over zeros).
        pub no_ops: u64,
        pub corrupt: u64,
        /// The corrupt images by the rule that proved them.
        pub rules: std::collections::BTreeMap<&'static str, u64>,
        /// Torn: in the documented window.
        pub torn: u64,
        /// Acknowledged events an automatic repair cut inside the window.
        pub acked_cut_in_window: u64,
        /// Acknowledged events an automatic repair cut outside it (must be 0).
        pub acked_cut_outside_window: u64,
        /// Events `salvage` returned, and the intact events the image held.
        pub salvaged: u64,
        pub intact: u64,
        /// Intact events after a torn (in-window) damage that `salvage`
        /// did not return (it returns a loadable log's kept prefix).
        pub torn_intact_not_salvaged: u64,
        /// Those images, described.
        pub torn_salvage_misses: Vec<String>,
        pub failures: Vec<String>,
    }

    fn seqs(events: &[Event]) -> String {
        let s: Vec<String> = events.iter().map(|e| e.seq().to_string()).collect();
        format!("[{}]", s.join(","))
    }

    macro_rules! ensure {
        ($cond:expr, $($msg:tt)+) => {
            if !$cond {
                return Err(format!($($msg)+));
            }
        };
    }

    macro_rules! ensure_eq {
        ($got:expr, $want:expr, $ctx:expr) => {{
            let (got, want) = (&$got, &$want);
            if got != want {
                return Err(format!(
                    "{}: {}: expected {:?}, got {:?}",
                    $ctx,
                    stringify!($got),
                    want,
                    got
                ));
            }
        }};
    }

    fn ensure_events(got: &[Event], want: &[Event], ctx: &str) -> Result<(), String> {
        if got != want {
            let at = got.iter().zip(want).position(|(a, b)| a != b);
            return Err(format!(
                "{ctx}: events differ (first at index {at:?}): expected seqs {}, got seqs {}",
                seqs(want),
                seqs(got)
            ));
        }
        Ok(())
    }

    fn ensure_bytes(got: Option<Vec<u8>>, want: &[u8], ctx: &str) -> Result<(), String> {
        let Some(got) = got else {
            return Err(format!("{ctx}: file missing"));
        };
        if got != want {
            let at = got.iter().zip(want).position(|(a, b)| a != b);
            return Err(format!(
                "{ctx}: bytes differ at {at:?} (got {} bytes, expected {})",
                got.len(),
                want.len()
            ));
        }
        Ok(())
    }

    /// The log after a repair that keeps `bytes[..p]` (the events `kept`)
    /// and appends their closers, flagged synthetic, with watermark `p`.
    fn repaired(bytes: &[u8], p: usize, kept: &[Event], salt: u32) -> (Vec<Event>, Vec<u8>) {
        let closers = interrupted_turn_closers(kept);
        let mut out = bytes[..p].to_vec();
        let mut tracker = Tracker::new(Policy::Strict);
        tracker.accept_batch(kept).unwrap();
        for (event, placement) in closers.iter().zip(tracker.accept_batch(&closers).unwrap()) {
            format::encode_synthetic_record(&mut out, event, placement, p as u64, salt);
        }
        (closers, out)
    }

    /// RECOVERY.md's `damaged-in-place` rule for damage confined to records
    /// `r0..=r1`: only record `r0` is touched, its frame is intact (the head's
    /// lengths and seq, the trailer, as written), the record after it is
    /// there, and no 512-byte sector could have been torn without breaking
    /// that frame (none lies within `[start + 32, end - 4)`, no boundary
    /// within `(start, start + 32]`).
    fn damaged_in_place(image: &Image, damaged: &[u8], r0: usize, r1: usize) -> bool {
        let (start, end) = (image.starts[r0], image.ends[r0]);
        if r1 != r0 || r0 + 1 >= image.starts.len() {
            return false;
        }
        let frame_intact = format::parse_head(&damaged[start..start + format::RECORD_HEADER_LEN])
            .is_ok_and(|h| h.seq == image.seqs[r0] && h.record_len() == (end - start) as u64)
            && damaged[end - 4..end] == image.bytes[end - 4..end];
        let boundary_in_head = (start + 1).next_multiple_of(512) <= start + 32;
        let interior = (start + 32).next_multiple_of(512) + 512 <= end - 4;
        frame_intact && !boundary_in_head && !interior
    }

    /// RECOVERY.md's `sealed-unit` rule: the damaged record `r0` still
    /// reads as a sealed unit (kind 18) with the seq it should have and a
    /// trailer equal to its length, inside the file. Units are only ever
    /// published whole, never appended.
    fn unit_frame_intact(image: &Image, damaged: &[u8], r0: usize) -> bool {
        let p = image.starts[r0];
        let Ok(head) = format::parse_head(&damaged[p..p + format::RECORD_HEADER_LEN]) else {
            return false;
        };
        let len = head.record_len() as usize;
        head.is_sealed()
            && head.seq == image.seqs[r0]
            && p + len <= damaged.len()
            && u32_at(damaged, p + len - 4) as usize == len
    }

    /// FORMAT.md's classification of the bytes `rest` at the first invalid
    /// record, when nothing proves them acknowledged.
    fn torn_reason(rest: &[u8]) -> CutReason {
        if rest.iter().all(|&b| b == 0) {
            return CutReason::ZeroFill;
        }
        if rest.len() < MIN_RECORD {
            return CutReason::Incomplete;
        }
        match format::parse_head(&rest[..format::RECORD_HEADER_LEN]) {
            Ok(head) if head.record_len() > rest.len() as u64 => CutReason::Incomplete,
            _ => CutReason::Invalid,
        }
    }

    /// The single quarantine file of the store, checked by name, and its
    /// path.
    fn only_quarantine(store: &Store, p: usize, seq: usize, ctx: &str) -> Result<PathBuf, String> {
        let files = store
            .quarantined()
            .map_err(|e| format!("{ctx}: quarantined: {e}"))?;
        ensure!(
            files.len() == 1,
            "{ctx}: quarantine files {files:?}, expected one"
        );
        let file = files[0].clone();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let prefix = format!("{}.at-{p}.seq-{seq}.", encode_file_name(ID));
        ensure!(
            file.parent() == Some(&root().join("quarantine"))
                && name.starts_with(&prefix)
                && name.ends_with(".twal-cut"),
            "{ctx}: quarantine file {} should be quarantine/{prefix}<ms>.twal-cut",
            file.display()
        );
        Ok(file)
    }

    /// The archive of the session [`log_path`] names.
    fn archive_path() -> PathBuf {
        WalBackend::with_storage(root(), Arc::new(SimDisk::new(0)))
            .unwrap()
            .archive_path(ID)
    }

    /// Every automatic path refuses `store`'s session as corrupt at
    /// `offset` (seq `seq`) of `path`, and writes nothing to either file.
    fn every_read_refuses(
        store: &Store,
        disk: &SimDisk,
        files: [(&PathBuf, &[u8]); 2],
        (path, offset, seq): (&PathBuf, u64, Option<u64>),
        ctx: &str,
    ) -> Result<(), String> {
        for (what, result) in [
            ("inspect", store.inspect(ID).map(|v| v.stored)),
            ("load", store.load(ID).map(|v| v.stored)),
            ("read_raw", store.read_raw(ID, 0).map(|e| e.len() as u64)),
            ("recover --dry-run", store.recover(ID, true).map(|r| r.kept)),
            ("recover", store.recover(ID, false).map(|r| r.kept)),
        ] {
            match result {
                Err(Error::Corrupt(c)) => ensure_eq!(
                    (c.offset, c.seq, &c.path),
                    (offset, seq, path),
                    format!("{ctx}: {what}")
                ),
                Ok(kept) => {
                    return Err(format!(
                        "{ctx}: {what} accepted the damaged log ({kept} events)"
                    ));
                }
                Err(e) => return Err(format!("{ctx}: {what}: expected corruption, got {e}")),
            }
        }
        let report = store
            .verify(ID)
            .map_err(|e| format!("{ctx}: verify: {e}"))?;
        ensure_eq!(report.state, LogState::Corrupt, ctx);
        for (file, bytes) in files {
            ensure_bytes(
                disk.read(file),
                bytes,
                &format!("{ctx}: a refusal wrote {}", file.display()),
            )?;
        }
        ensure_eq!(store.quarantined().unwrap(), Vec::<PathBuf>::new(), ctx);
        Ok(())
    }

    /// Damage to a version-3 live file's archive reference: it is read with
    /// the file header, published with the file and never torn, so every
    /// read refuses the file as corrupt at byte 0 (no seq: no event is
    /// reached) and nothing is written.
    fn check_reference_damage(
        image: &Image,
        written: &Written,
        damaged: &[u8],
        tally: &mut Tally,
    ) -> Result<(), String> {
        let (archive, _) = image.archive.as_ref().expect("a version-3 image");
        let log = log_path();
        let ctx = format!("{:?}: damage in the archive reference", written.sync);
        let disk = image.disk.snapshot();
        disk.write_durable(&log, damaged).unwrap();
        let store = store_on(&disk, written.sync);
        let archive_path = archive_path();
        // Still of kind 19, it is refused with the header (byte 0, no
        // seq); of another kind, it is no reference, and the first record
        // is refused where it starts, as the first event.
        let at = image.starts[0];
        let refused = if damaged[at + 4] == format::KIND_ARCHIVE {
            (&log, 0, None)
        } else {
            (&log, at as u64, Some(0))
        };
        every_read_refuses(
            &store,
            &disk,
            [(&log, damaged), (&archive_path, archive)],
            refused,
            &ctx,
        )?;
        tally.corrupt += 1;
        *tally.rules.entry("archive-reference").or_default() += 1;
        Ok(())
    }

    /// Damage inside a version-3 session's archive, below the length its
    /// reference stands on (every byte there was fsynced before the live
    /// file that names it was published): every read refuses the archive
    /// as corrupt at the damaged unit's offset in it, nothing is written,
    /// and salvage returns every event of the live file and of the
    /// undamaged units, each as it was sent.
    fn check_archive_damage(
        image: &Image,
        written: &Written,
        at: usize,
        bit: u8,
        tally: &mut Tally,
    ) -> Result<(), String> {
        let (archive, len) = image.archive.as_ref().expect("a version-3 image");
        let len = *len as usize;
        let mut damaged = archive.clone();
        damaged[at] ^= 1 << bit;
        // Where the refusal points: the unit the byte lies in (its offset
        // and first seq; the archive's records walked from its header), or
        // byte 0 with no seq for damage to the header itself.
        let start = 24 + u32_at(archive, 16) as usize;
        let mut units = Vec::new();
        let mut p = start;
        while p < len {
            units.push((
                p,
                u64_at(archive, p + 24),
                u64::from(u32_at(archive, p + 16)),
            ));
            p += u32_at(archive, p + 8) as usize + 56;
        }
        let unit = units.iter().rev().find(|u| u.0 <= at).copied();
        let refused = match unit {
            Some((offset, seq, _)) => (offset as u64, Some(seq)),
            None => (0, None),
        };
        let ctx = format!("{:?}: archive byte {at} bit {bit}", written.sync);
        let disk = image.disk.snapshot();
        let archive_path = archive_path();
        disk.write_durable(&archive_path, &damaged).unwrap();
        let store = store_on(&disk, written.sync);
        let log = log_path();
        every_read_refuses(
            &store,
            &disk,
            [(&log, &image.bytes), (&archive_path, &damaged)],
            (&archive_path, refused.0, refused.1),
            &ctx,
        )?;
        tally.images += 1;
        tally.corrupt += 1;
        *tally.rules.entry("archive").or_default() += 1;
        if let Some((_, first, count)) = unit {
            // Salvage: every event but the damaged unit's, byte for byte.
            let salvage = store
                .salvage(ID)
                .map_err(|e| format!("{ctx}: salvage: {e}"))?;
            let spared: Vec<Event> = written.sent[..image.total as usize]
                .iter()
                .filter(|e| !(first..first + count).contains(&e.seq()))
                .cloned()
                .collect();
            ensure_events(&salvage.events, &spared, &format!("{ctx}: salvage"))?;
            tally.salvaged += salvage.events.len() as u64;
        }
        Ok(())
    }

    /// The oracle for one damaged image. `acked` is how many events were
    /// acknowledged, `synced` how many were known fsynced.
    fn check_image(
        image: &Image,
        written: &Written,
        mode: CrashMode,
        damage: &Damage,
        tally: &mut Tally,
    ) -> Result<(), String> {
        let log = log_path();
        let damaged = damage.apply(&image.bytes);
        let n = image.starts.len();
        let touched: Vec<usize> = (0..n)
            .filter(|&i| {
                damaged[image.starts[i]..image.ends[i]]
                    != image.bytes[image.starts[i]..image.ends[i]]
            })
            .collect();
        if touched.is_empty() {
            tally.no_ops += 1;
            return Ok(());
        }
        tally.images += 1;
        let (r0, r1) = (touched[0], *touched.last().unwrap());
        assert_eq!(
            touched.len(),
            r1 - r0 + 1,
            "damage is one contiguous region"
        );
        let p = image.starts[r0];
        let len = damaged.len();
        let (k0, k_after) = (image.seqs[r0], image.end_seq(r1));
        if r0 == 0 && image.archive.is_some() {
            return check_reference_damage(image, written, &damaged, tally);
        }
        // Acknowledged: events, and the records holding them.
        let acked_events = written.acked.min(image.total);
        let acked_records = (0..n).filter(|&r| image.seqs[r] < written.acked).count();
        let ctx = format!(
            "{:?} {:?} {damage:?}: first damaged record {r0} at byte {p} (records {r0}..={r1} of {n}, {} acknowledged, {} synced, proof {})",
            written.sync, mode, acked_events, written.synced, image.proven
        );

        // The window, from the image alone: the proof on disk, the
        // watermarks of the intact records after the damage, and a zero
        // fill to the end (which only the proof can prove).
        let later = (r1 + 1..n).map(|j| image.watermarks[j]);
        let zero_fill = damaged[p..].iter().all(|&b| b == 0);
        // Published whole (RECOVERY.md, "Proof"): the first record, and
        // whatever an intact earlier record's watermark (the file's length
        // when it was published) passes, unless the proof states less.
        let stated = (0..r0).map(|j| image.watermarks[j]).max().unwrap_or(0);
        let floor = stated.max(SECTOR as u64 + 1);
        let published = image.proven == 0 || image.proven >= floor;
        let rule = if (p as u64) < image.proven {
            Some("inside-proven-length")
        } else if published && r0 == usize::from(image.archive.is_some()) {
            // The first record after the file header (and after the archive
            // reference, which is read with the header).
            Some("first-record")
        } else if published && stated > p as u64 {
            Some("inside-published-copy")
        } else if unit_frame_intact(image, &damaged, r0) {
            Some("sealed-unit")
        } else if zero_fill {
            None
        } else if later.clone().any(|w| w > p as u64) {
            Some("below-later-watermark")
        } else if later.clone().any(|w| w == 0) {
            Some("inside-materialized-batch")
        } else if damaged_in_place(image, &damaged, r0, r1) {
            Some("damaged-in-place")
        } else {
            None
        };
        let in_window = rule.is_none();
        // The documented window (docs/RECOVERY.md): after a power cut, the
        // records past the last proof the image keeps — normally the batch
        // acknowledged last (its records share the last watermark), and
        // wider only when the damage also took every intact record whose
        // watermark would prove an earlier one; in `never` mode,
        // everything since the last flush; after a process crash in `turn`
        // and `batch` mode, nothing.
        let proven_by_survivor = |r: usize| {
            image.proven > image.starts[r] as u64
                || (r1 + 1..n).any(|j| image.watermarks[j] > image.starts[r] as u64)
        };
        let documented = |r: usize| match (mode, written.sync) {
            (CrashMode::KeepAll, SyncMode::Never) if image.proof_current => {
                image.seqs[r] >= written.synced
            }
            (CrashMode::KeepAll, _) if image.proof_current => false,
            _ => {
                image.watermarks[r] == image.watermarks[n - 1]
                    || (written.sync != SyncMode::Never && !proven_by_survivor(r))
            }
        };
        // Acknowledged records a torn verdict would cut although they lie
        // outside the documented window: each one is an acknowledged event
        // cut by an automatic repair. The rest of the oracle still runs, so
        // the report says what else holds.
        let mut outside_failure = None;
        if in_window {
            let outside: Vec<usize> = (r0..acked_records).filter(|&r| !documented(r)).collect();
            if !outside.is_empty() {
                tally.acked_cut_outside_window += outside.len() as u64;
                let at: Vec<String> = outside
                    .iter()
                    .map(|&r| {
                        format!(
                            "seq {r} at byte {} (watermark {})",
                            image.starts[r], image.watermarks[r]
                        )
                    })
                    .collect();
                outside_failure = Some(format!(
                    "{ctx}: expected corrupt at byte {p} (seq {r0}), but nothing left on the image proves it \
                     (the proof file states {} and every later record is damaged or lost), so it is torn: \
                     the automatic repair cuts acknowledged events outside the documented window \
                     (last batch's watermark {}): {}",
                    image.proven,
                    image.watermarks[n - 1],
                    at.join(", ")
                ));
            }
        }

        let disk = image.disk.snapshot();
        disk.write_durable(&log, &damaged).unwrap();
        let store = store_on(&disk, written.sync);
        let intact: Vec<Event> = (0..n)
            .filter(|i| !touched.contains(i))
            .flat_map(|i| &written.sent[image.seqs[i] as usize..image.end_seq(i) as usize])
            .cloned()
            .collect();
        tally.intact += intact.len() as u64;

        if let Some(rule) = rule {
            // Corrupt: every automatic path refuses and writes nothing.
            let mut reason = None;
            for (what, result) in [
                ("inspect", store.inspect(ID).map(|v| v.stored)),
                ("load", store.load(ID).map(|v| v.stored)),
                ("recover --dry-run", store.recover(ID, true).map(|r| r.kept)),
                ("recover", store.recover(ID, false).map(|r| r.kept)),
            ] {
                match result {
                    Err(Error::Corrupt(c)) => {
                        ensure_eq!(
                            (c.offset, c.seq, &c.path),
                            (p as u64, Some(k0), &log),
                            format!("{ctx}: {what}")
                        );
                        ensure!(
                            c.reason.contains(&format!("[rule: {rule}]")),
                            "{ctx}: {what}: expected rule {rule}, got {}",
                            c.reason
                        );
                        reason = Some(c.reason.clone());
                    }
                    Ok(kept) => {
                        let cut = acked_events.saturating_sub(kept);
                        tally.acked_cut_outside_window += cut;
                        return Err(format!(
                            "{ctx}: {what} accepted the damaged log keeping {kept} events: {cut} acknowledged events cut automatically"
                        ));
                    }
                    Err(e) => return Err(format!("{ctx}: {what}: expected corruption, got {e}")),
                }
            }
            let reason = reason.unwrap();
            let report = store
                .verify(ID)
                .map_err(|e| format!("{ctx}: verify: {e}"))?;
            ensure_eq!(report.state, LogState::Corrupt, ctx);
            ensure_bytes(
                disk.read(&log),
                &damaged,
                &format!("{ctx}: a refusal wrote the log"),
            )?;
            ensure_eq!(disk.read(&proof::path_of(&log)), image.proof_bytes, ctx);
            ensure_eq!(store.quarantined().unwrap(), Vec::<PathBuf>::new(), ctx);
            tally.corrupt += 1;
            *tally.rules.entry(rule).or_default() += 1;

            // Salvage: every intact event, the damaged region as one gap.
            let salvage = store
                .salvage(ID)
                .map_err(|e| format!("{ctx}: salvage: {e}"))?;
            tally.salvaged += salvage.events.len() as u64;
            ensure_events(&salvage.events, &intact, &format!("{ctx}: salvage"))?;
            let (gap_end, next_seq) = match image.starts.get(r1 + 1) {
                Some(&q) => (q, Some(k_after)),
                None => (len, None),
            };
            let Err((kind, detail)) = record::check_at(&damaged, p as u64, Some(k0), image.salt)
            else {
                return Err(format!("{ctx}: the damaged record checks valid"));
            };
            let kind = if damaged[p..].iter().all(|&b| b == 0) {
                CutReason::ZeroFill
            } else {
                kind
            };
            ensure_eq!(
                salvage.gaps,
                [Gap {
                    offset: p as u64,
                    len: (gap_end - p) as u64,
                    first_seq: k0,
                    next_seq,
                    reason: format!("{}: {detail}", kind.code()),
                    damaged: true,
                }],
                ctx
            );

            // The salvage repair: the longest valid prefix plus its
            // closers; exactly the cut bytes quarantined.
            let report = store
                .recover_salvage(ID, false)
                .map_err(|e| format!("{ctx}: recover --salvage: {e}"))?;
            let kept = &written.sent[..k0 as usize];
            let (closers, after) = repaired(&damaged, p, kept, image.salt);
            ensure_eq!(
                (report.kept, report.committed, &report.cut),
                (
                    k0,
                    true,
                    &Some(Cut {
                        offset: p as u64,
                        seq: k0,
                        len: (len - p) as u64,
                        reason: CutReason::Damaged,
                        detail: reason,
                    })
                ),
                ctx
            );
            ensure_events(
                &report.closers,
                &closers,
                &format!("{ctx}: salvage closers"),
            )?;
            let file = only_quarantine(&store, p, k0 as usize, &ctx)?;
            ensure_eq!(report.quarantine.as_ref(), Some(&file), ctx);
            ensure_bytes(
                disk.read(&file),
                &damaged[p..],
                &format!("{ctx}: quarantine"),
            )?;
            ensure_bytes(disk.read(&log), &after, &format!("{ctx}: salvaged log"))?;
            let proof_now = proof_length(disk.read(&proof::path_of(&log)).as_deref(), image.salt);
            ensure_eq!(
                proof_now,
                after.len() as u64,
                format!("{ctx}: proof after salvage")
            );
            drop(store);
            let store = store_on(&disk, written.sync);
            let view = store
                .load(ID)
                .map_err(|e| format!("{ctx}: load after salvage: {e}"))?;
            let expected: Vec<Event> = kept.iter().chain(&closers).cloned().collect();
            ensure_events(
                &view.events,
                &expected,
                &format!("{ctx}: load after salvage"),
            )?;
            ensure_eq!((view.state, &view.cut), (LogState::Clean, &None), ctx);
            ensure_bytes(disk.read(&log), &after, &format!("{ctx}: clean load wrote"))?;
        } else {
            // Torn, in the window: the records before it are kept and
            // closed, the rest cut and quarantined.
            let reason = torn_reason(&damaged[p..]);
            let kept = &written.sent[..k0 as usize];
            let (closers, after) = repaired(&damaged, p, kept, image.salt);
            let expected: Vec<Event> = kept.iter().chain(&closers).cloned().collect();
            let view = store
                .inspect(ID)
                .map_err(|e| format!("{ctx}: inspect (torn expected): {e}"))?;
            ensure_events(&view.events, &expected, &format!("{ctx}: inspect"))?;
            let cut = view
                .cut
                .clone()
                .ok_or_else(|| format!("{ctx}: inspect: no cut"))?;
            ensure_eq!(
                (
                    view.stored,
                    view.state,
                    cut.offset,
                    cut.seq,
                    cut.len,
                    cut.reason
                ),
                (k0, LogState::Torn, p as u64, k0, (len - p) as u64, reason),
                ctx
            );
            let report = store
                .verify(ID)
                .map_err(|e| format!("{ctx}: verify: {e}"))?;
            ensure_eq!((report.state, report.events), (LogState::Torn, k0), ctx);
            ensure_bytes(disk.read(&log), &damaged, &format!("{ctx}: inspect wrote"))?;

            // Salvage reads past the hole as past damage: every intact
            // event, the damaged region as one gap — not damage, since
            // recovery does not refuse the log.
            let salvage = store
                .salvage(ID)
                .map_err(|e| format!("{ctx}: salvage: {e}"))?;
            tally.salvaged += salvage.events.len() as u64;
            let returned_after = salvage.events.iter().filter(|e| e.seq() >= k_after).count();
            let after_damage = intact.iter().filter(|e| e.seq() >= k_after).count();
            if returned_after < after_damage {
                tally.torn_intact_not_salvaged += (after_damage - returned_after) as u64;
                tally.torn_salvage_misses.push(format!(
                    "{ctx}: torn, salvage returned seqs {} (gap {:?})",
                    seqs(&salvage.events),
                    salvage.gaps,
                ));
            }
            ensure_events(&salvage.events, &intact, &format!("{ctx}: salvage"))?;
            let (gap_end, next_seq) = match image.starts.get(r1 + 1) {
                Some(&q) => (q, Some(k_after)),
                None => (len, None),
            };
            ensure_eq!(
                salvage.gaps,
                [Gap {
                    offset: p as u64,
                    len: (gap_end - p) as u64,
                    first_seq: k0,
                    next_seq,
                    reason: format!("{}: {}", cut.reason.code(), cut.detail),
                    damaged: false,
                }],
                ctx
            );

            // The automatic repair (load) cuts exactly there and keeps the
            // cut bytes.
            let view = store.load(ID).map_err(|e| format!("{ctx}: load: {e}"))?;
            ensure_events(&view.events, &expected, &format!("{ctx}: load"))?;
            tally.acked_cut_in_window += (r0..acked_records)
                .filter(|&r| documented(r))
                .map(|r| image.end_seq(r) - image.seqs[r])
                .sum::<u64>();
            tally.torn += 1;
            let file = only_quarantine(&store, p, k0 as usize, &ctx)?;
            ensure_bytes(
                disk.read(&file),
                &damaged[p..],
                &format!("{ctx}: quarantine"),
            )?;
            ensure_bytes(disk.read(&log), &after, &format!("{ctx}: repaired log"))?;
            drop(store);
            let store = store_on(&disk, written.sync);
            let view = store
                .load(ID)
                .map_err(|e| format!("{ctx}: second load: {e}"))?;
            ensure_events(&view.events, &expected, &format!("{ctx}: second load"))?;
            ensure_eq!((view.state, &view.cut), (LogState::Clean, &None), ctx);
            ensure_bytes(
                disk.read(&log),
                &after,
                &format!("{ctx}: second load wrote"),
            )?;

            // recover --salvage on the same torn image is plain recover.
            let disk = image.disk.snapshot();
            disk.write_durable(&log, &damaged).unwrap();
            let store = store_on(&disk, written.sync);
            let report = store
                .recover_salvage(ID, false)
                .map_err(|e| format!("{ctx}: recover --salvage: {e}"))?;
            ensure_eq!(
                (
                    report.kept,
                    report
                        .cut
                        .as_ref()
                        .map(|c| (c.offset, c.seq, c.len, c.reason))
                ),
                (k0, Some((p as u64, k0, (len - p) as u64, reason))),
                ctx
            );
            let file = only_quarantine(&store, p, k0 as usize, &ctx)?;
            ensure_eq!(report.quarantine.as_ref(), Some(&file), ctx);
            ensure_bytes(
                disk.read(&file),
                &damaged[p..],
                &format!("{ctx}: quarantine"),
            )?;
            ensure_bytes(disk.read(&log), &after, &format!("{ctx}: recovered log"))?;
        }
        outside_failure.map_or(Ok(()), Err)
    }

    /// Crashes the written session with `mode` and damages every
    /// acknowledged record of the image.
    pub fn run(written: &Written, mode: CrashMode, full: bool) -> Tally {
        run_image(written, mode, image_of(written.disk.crash(mode)), full)
    }

    /// Damages every acknowledged record of `image`, a crash image of
    /// `written` under `mode`.
    fn run_image(written: &Written, mode: CrashMode, image: Image, full: bool) -> Tally {
        let n = image.starts.len();
        let required = if mode == CrashMode::KeepAll {
            written.acked
        } else {
            written.synced
        };
        // The undamaged image recovers every event it must.
        let view = store_on(&image.disk.snapshot(), written.sync)
            .inspect(ID)
            .unwrap();
        let total = image.total as usize;
        assert!(view.cut.is_none() && view.stored == image.total);
        assert!(
            image.total >= required,
            "{} events, {required} required",
            image.total
        );
        assert_eq!(view.events[..total], written.sent[..total]);

        let mut tally = Tally::default();
        let mut rng = Rng::from_state(0x9e37_79b9_7f4a_7c15);
        let mut sectors_done = std::collections::BTreeSet::new();
        for r in (0..n).filter(|&r| image.seqs[r] < written.acked) {
            for damage in damages(&image, r, full, &mut rng) {
                if let Damage::ZeroSector { sector } = damage
                    && !sectors_done.insert(sector)
                {
                    continue;
                }
                if let Err(failure) = check_image(&image, written, mode, &damage, &mut tally) {
                    tally.failures.push(failure);
                }
            }
        }
        if let Some((_, len)) = &image.archive {
            let step = if full { 1 } else { 7 };
            for at in (0..*len as usize).step_by(step) {
                let bit = (at % 8) as u8;
                if let Err(failure) = check_archive_damage(&image, written, at, bit, &mut tally) {
                    tally.failures.push(failure);
                }
            }
        }
        tally
    }
}

use turnwal::SyncMode;
use turnwal_testkit::simdisk::CrashMode;

/// Runs every shape and both crash kinds under `sync`; returns the oracle's
/// failures and the torn images whose salvage missed intact events.
fn wal_sweep(sync: SyncMode) -> (Vec<String>, Vec<String>) {
    let full = wal_damage::full();
    let mut failures = Vec::new();
    let mut misses = Vec::new();
    for mode in [CrashMode::KeepAll, CrashMode::LoseUnsynced] {
        let mut total = wal_damage::Tally::default();
        for shape in wal_damage::SHAPES {
            let written = wal_damage::write(shape, sync);
            let t = wal_damage::run(&written, mode, full);
            eprintln!(
                "wal {sync:?} {} {shape:?}: {} images ({} no-op), {} corrupt, {} torn (window), acked events cut: {} in window, {} outside (must be 0); salvage {} of {} intact; {} intact after torn damage not salvaged; {} failures",
                crash_name(mode),
                t.images,
                t.no_ops,
                t.corrupt,
                t.torn,
                t.acked_cut_in_window,
                t.acked_cut_outside_window,
                t.salvaged,
                t.intact,
                t.torn_intact_not_salvaged,
                t.failures.len()
            );
            total.images += t.images;
            total.no_ops += t.no_ops;
            total.corrupt += t.corrupt;
            total.torn += t.torn;
            total.acked_cut_in_window += t.acked_cut_in_window;
            total.acked_cut_outside_window += t.acked_cut_outside_window;
            total.salvaged += t.salvaged;
            total.intact += t.intact;
            total.torn_intact_not_salvaged += t.torn_intact_not_salvaged;
            failures.extend(t.failures);
            misses.extend(t.torn_salvage_misses);
        }
        eprintln!(
            "wal {sync:?} {} TOTAL: {} images, {} corrupt, {} torn (window), acked cut outside window {}, salvage {} of {} intact ({} after torn damage not salvaged)",
            crash_name(mode),
            total.images,
            total.corrupt,
            total.torn,
            total.acked_cut_outside_window,
            total.salvaged,
            total.intact,
            total.torn_intact_not_salvaged
        );
        assert!(total.images > 0);
        if mode == CrashMode::KeepAll && sync != SyncMode::Never {
            assert_eq!(
                total.torn, 0,
                "after a process crash in {sync:?} mode no acknowledged damage is in the window"
            );
        }
    }
    (failures, misses)
}

/// Issue 26, item 3: every damaged image of a compacted log, with the
/// proof the crash left, the proof from before the compaction and none,
/// after a process crash and after a power cut. A unit and every record
/// published with it are never torn; only records appended after the
/// compaction can be, in the documented window.
#[test]
fn wal_damage_compacted_logs() {
    use turnwal::backend::wal::format::{FORMAT_V2, FORMAT_V3};
    use wal_damage::ProofFile;
    let full = wal_damage::full();
    let mut failures = Vec::new();
    let mut total = wal_damage::Tally::default();
    for (version, sync) in [FORMAT_V2, FORMAT_V3]
        .into_iter()
        .flat_map(|v| [SyncMode::Turn, SyncMode::Batch, SyncMode::Never].map(|s| (v, s)))
    {
        for shape in wal_damage::SHAPES {
            let (written, before) = wal_damage::write_compacted(shape, sync, version);
            for mode in [CrashMode::KeepAll, CrashMode::LoseUnsynced] {
                for (proof, legacy) in [
                    (ProofFile::Current, false),
                    (ProofFile::BeforeCompaction, false),
                    (ProofFile::Missing, false),
                    (ProofFile::Missing, true),
                ] {
                    // Legacy watermarks are an earlier build's version-2
                    // compaction.
                    if legacy && version == FORMAT_V3 {
                        continue;
                    }
                    let t = wal_damage::run_compacted(
                        &written,
                        before.as_deref(),
                        mode,
                        proof,
                        legacy,
                        full,
                    );
                    total.images += t.images;
                    total.corrupt += t.corrupt;
                    for (rule, n) in t.rules {
                        *total.rules.entry(rule).or_default() += n;
                    }
                    total.torn += t.torn;
                    total.acked_cut_in_window += t.acked_cut_in_window;
                    total.acked_cut_outside_window += t.acked_cut_outside_window;
                    total.salvaged += t.salvaged;
                    total.intact += t.intact;
                    failures.extend(t.failures.into_iter().map(|f| {
                        format!(
                            "v{version} {sync:?} {shape:?} {} {proof:?}{}: {f}",
                            crash_name(mode),
                            if legacy { " legacy" } else { "" }
                        )
                    }));
                }
            }
        }
    }
    eprintln!(
        "wal compacted TOTAL: {} images, {} corrupt {:?}, {} torn (window: records appended after \
         the compaction, in the last batch with no proof left), acked events cut: {} in window, {} \
         outside (must be 0); salvage {} of {} intact",
        total.images,
        total.corrupt,
        total.rules,
        total.torn,
        total.acked_cut_in_window,
        total.acked_cut_outside_window,
        total.salvaged,
        total.intact
    );
    for rule in ["first-record", "inside-published-copy", "sealed-unit"] {
        assert!(total.rules.contains_key(rule), "no image proved by {rule}");
    }
    assert_eq!(total.acked_cut_outside_window, 0);
    assert_no_failures(&failures);
}

fn crash_name(mode: CrashMode) -> &'static str {
    match mode {
        CrashMode::KeepAll => "process-crash",
        CrashMode::LoseUnsynced => "power-cut",
        _ => "other",
    }
}

fn assert_no_failures(failures: &[String]) {
    for f in failures.iter().take(40) {
        eprintln!("FAILURE: {f}");
    }
    assert!(
        failures.is_empty(),
        "{} failures (first: {})",
        failures.len(),
        failures[0]
    );
}

#[test]
fn wal_damage_turn_mode() {
    assert_no_failures(&wal_sweep(SyncMode::Turn).0);
}

#[test]
fn wal_damage_batch_mode() {
    assert_no_failures(&wal_sweep(SyncMode::Batch).0);
}

#[test]
fn wal_damage_never_mode() {
    assert_no_failures(&wal_sweep(SyncMode::Never).0);
}

/// Issue 12 asks that salvage return every intact event. For a damaged
/// record in the power-loss window the log loads (torn), and `salvage`
/// returns its kept prefix with the cut as the one gap (documented in
/// `Store::salvage`): intact, acknowledged events after the damaged record
/// are not returned. This holds the issue's stricter requirement.
#[test]
fn wal_salvage_returns_intact_events_after_torn_damage() {
    let mut misses = Vec::new();
    for sync in [SyncMode::Turn, SyncMode::Batch, SyncMode::Never] {
        misses.extend(wal_sweep(sync).1);
    }
    assert_no_failures(&misses);
}

// ---------------------------------------------------------------------------
// SQLite and JSONL (raw and zstd), on real files: the process crash is the
// files as written. Upstream's rules: a damaged row, line or frame at or
// before the last `turn/end` is corruption (refused, nothing cut); after it,
// upstream's torn tail (cut, and quarantined).
// ---------------------------------------------------------------------------

mod upstream {
    use std::fs;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use rusqlite::types::Value;
    use turnwal::backend::jsonl::layout::log_path;
    use turnwal::backend::jsonl::zstd::scan_frames;
    use turnwal::backend::jsonl::{Compression, JsonlBackend};
    use turnwal::backend::sqlite::{SqliteBackend, SqliteOptions};
    use turnwal::{
        CutReason, Error, Event, EventKind, LogState, SessionHeader, Store, StoreOptions,
        interrupted_turn_closers,
    };

    use super::wal_damage::{small_batches, turns};

    pub const ID: &str = "s";

    /// The session's append batches (1, 3, 2, 1, 3, 2, … events: one zstd
    /// frame each) and every event.
    pub fn batches() -> Vec<Vec<Event>> {
        small_batches(&turns().concat())
    }

    /// Events through the last `turn/end`.
    pub fn committed(all: &[Event]) -> usize {
        all.iter()
            .rposition(|e| e.kind() == EventKind::TurnEnd)
            .unwrap()
            + 1
    }

    /// `recover --salvage` on a corrupt upstream log damaged at seq `d`
    /// (its unit starting at `p`): it keeps `d` events, cuts `[p, len)` as
    /// damaged and appends exactly `closers`.
    fn salvage_repair(
        store: &Store,
        d: usize,
        p: usize,
        len: usize,
        closers: &[Event],
        ctx: &str,
    ) -> Result<turnwal::RecoveryReport, String> {
        let report = store
            .recover_salvage(ID, false)
            .map_err(|e| format!("{ctx}: recover --salvage: {e}"))?;
        let cut = report.cut.clone().unwrap();
        if (report.kept, cut.offset, cut.seq, cut.len, cut.reason)
            != (
                d as u64,
                p as u64,
                d as u64,
                (len - p) as u64,
                CutReason::Damaged,
            )
            || report.closers != closers
        {
            return Err(format!("{ctx}: recover --salvage reported {report:?}"));
        }
        Ok(report)
    }

    fn corruption(
        result: Result<turnwal::SessionView, Error>,
    ) -> Result<(u64, Option<u64>), String> {
        match result {
            Err(Error::Corrupt(c)) => Ok((c.offset, c.seq)),
            Err(e) => Err(format!("expected corruption, got {e}")),
            Ok(v) => Err(format!(
                "expected corruption, got {} events ({}): acknowledged events cut automatically",
                v.events.len(),
                v.state
            )),
        }
    }

    fn files_in(dir: &Path) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = fs::read_dir(dir)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        out.sort();
        out
    }

    // --- SQLite -----------------------------------------------------------

    pub struct Db {
        _dir: tempfile::TempDir,
        pub path: PathBuf,
    }

    impl Db {
        pub fn new() -> Db {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("sessions.db");
            let db = Db { _dir: dir, path };
            let store = db.store();
            store
                .create(SessionHeader::new(ID, 1000).with_cwd("/work"))
                .unwrap();
            for batch in batches() {
                store.append(ID, &batch).unwrap();
            }
            db
        }

        fn store(&self) -> Store {
            let backend = SqliteBackend::open(&self.path, SqliteOptions::default()).unwrap();
            Store::with_backend(Arc::new(backend), StoreOptions::default())
        }

        fn exec(&self, sql: &str) {
            rusqlite::Connection::open(&self.path)
                .unwrap()
                .execute(sql, [])
                .unwrap();
        }

        /// Every column of every row of the session, in seq order.
        fn rows(&self) -> Vec<Vec<Value>> {
            let conn = rusqlite::Connection::open(&self.path).unwrap();
            let mut stmt = conn
                .prepare("SELECT * FROM events WHERE session_id = ?1 ORDER BY seq")
                .unwrap();
            stmt.query_map([ID], |r| (0..8).map(|i| r.get(i)).collect())
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        }

        fn quarantine(&self) -> PathBuf {
            self.path.with_file_name("sessions.db.turnwal-quarantine")
        }
    }

    /// A row as docs/SQLITE.md's quarantine writes it: one JSON object, the
    /// columns in table order.
    fn row_line(row: &[Value]) -> String {
        let col = |v: &Value| match v {
            Value::Null => "null".to_owned(),
            Value::Integer(n) => n.to_string(),
            Value::Real(f) => format!("{{\"real\":\"{f}\"}}"),
            Value::Text(t) => serde_json::to_string(t).unwrap(),
            Value::Blob(b) => format!(
                "{{\"blob_hex\":\"{}\"}}",
                b.iter().map(|x| format!("{x:02x}")).collect::<String>()
            ),
        };
        let names = [
            "session_id",
            "seq",
            "type",
            "time",
            "data",
            "source_event_seqs",
            "surface_op",
            "ignorable",
        ];
        let fields: Vec<String> = names
            .iter()
            .zip(row)
            .map(|(n, v)| format!("\"{n}\":{}", col(v)))
            .collect();
        format!("{{{}}}\n", fields.join(","))
    }

    #[derive(Debug, Clone, Copy)]
    pub enum RowDamage {
        InvalidJson,
        Delete,
    }

    /// Damages the row of seq `d` and checks the oracle. Returns whether the
    /// image was corrupt (else torn or, for the last row deleted, clean).
    pub fn sqlite_case(d: usize, damage: RowDamage) -> Result<&'static str, String> {
        let all = turns().concat();
        let committed = committed(&all);
        let db = Db::new();
        match damage {
            RowDamage::InvalidJson => db.exec(&format!(
                "UPDATE events SET data = '{{\"id\":' WHERE session_id = '{ID}' AND seq = {d}"
            )),
            RowDamage::Delete => db.exec(&format!(
                "DELETE FROM events WHERE session_id = '{ID}' AND seq = {d}"
            )),
        }
        let ctx = format!("sqlite {damage:?} seq {d}");
        let damaged = db.rows();
        // The rows a cut at seq d removes (row d is at index d: no row
        // before it is missing).
        let cut_rows: String = damaged[d.min(damaged.len())..]
            .iter()
            .map(|r| row_line(r))
            .collect();
        let kept = &all[..d];
        let closers = interrupted_turn_closers(kept);
        let expected: Vec<Event> = kept.iter().chain(&closers).cloned().collect();
        let store = db.store();
        // Corruption when a later row holds a turn/end (the commit point
        // lies after the damage); the last turn/end's own row damaged
        // leaves the commit point before it: upstream's torn tail.
        if d + 1 < committed {
            for (what, result) in [("inspect", store.inspect(ID)), ("load", store.load(ID))] {
                let got = corruption(result).map_err(|e| format!("{ctx}: {what}: {e}"))?;
                if got != (d as u64, Some(d as u64)) {
                    return Err(format!(
                        "{ctx}: {what}: corrupt at {got:?}, expected row {d} seq {d}"
                    ));
                }
            }
            if db.rows() != damaged || db.quarantine().exists() {
                return Err(format!("{ctx}: a refusal changed rows or quarantined"));
            }
            let salvage = store
                .salvage(ID)
                .map_err(|e| format!("{ctx}: salvage: {e}"))?;
            let intact: Vec<Event> = all
                .iter()
                .filter(|e| e.seq() != d as u64)
                .cloned()
                .collect();
            if salvage.events != intact {
                return Err(format!(
                    "{ctx}: salvage returned {} events, expected {} intact",
                    salvage.events.len(),
                    intact.len()
                ));
            }
            let g = &salvage.gaps;
            let len = match damage {
                RowDamage::InvalidJson => 1,
                RowDamage::Delete => 0,
            };
            if g.len() != 1
                || (
                    g[0].offset,
                    g[0].len,
                    g[0].first_seq,
                    g[0].next_seq,
                    g[0].damaged,
                ) != (d as u64, len, d as u64, Some(d as u64 + 1), true)
            {
                return Err(format!("{ctx}: salvage gaps {g:?}"));
            }
            let report = salvage_repair(&store, d, d, damaged.len(), &closers, &ctx)?;
            check_sqlite_repaired(
                &db,
                &store,
                report.quarantine,
                &cut_rows,
                &damaged[..d],
                &expected,
                &ctx,
            )?;
            return Ok("corrupt");
        }
        // After the last turn/end: upstream's torn tail.
        let view = store.load(ID).map_err(|e| format!("{ctx}: load: {e}"))?;
        if view.events != expected {
            return Err(format!(
                "{ctx}: load kept {} events, expected {}",
                view.events.len(),
                expected.len()
            ));
        }
        if matches!(damage, RowDamage::Delete) && d == all.len() - 1 {
            // The last row gone leaves a shorter, undamaged log: nothing to cut.
            if view.cut.is_some() || db.quarantine().exists() {
                return Err(format!("{ctx}: cut {:?}", view.cut));
            }
            return Ok("clean");
        }
        let cut = view.cut.clone().unwrap();
        if (cut.offset, cut.seq, cut.len) != (d as u64, d as u64, (damaged.len() - d) as u64) {
            return Err(format!("{ctx}: load cut {cut:?}"));
        }
        let files = files_in(&db.quarantine());
        check_sqlite_repaired(
            &db,
            &store,
            files.first().cloned(),
            &cut_rows,
            &damaged[..d],
            &expected,
            &ctx,
        )?;
        if files.len() != 1 {
            return Err(format!("{ctx}: quarantine files {files:?}"));
        }
        Ok("torn")
    }

    fn check_sqlite_repaired(
        db: &Db,
        store: &Store,
        quarantine: Option<PathBuf>,
        cut_rows: &str,
        kept_rows: &[Vec<Value>],
        expected: &[Event],
        ctx: &str,
    ) -> Result<(), String> {
        let file = quarantine.ok_or_else(|| format!("{ctx}: no quarantine file"))?;
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if file.parent() != Some(&db.quarantine()) || !name.ends_with(".rows.jsonl") {
            return Err(format!("{ctx}: quarantine file {}", file.display()));
        }
        let held = fs::read_to_string(&file).unwrap();
        if held != cut_rows {
            return Err(format!(
                "{ctx}: quarantine holds\n{held}\nexpected\n{cut_rows}"
            ));
        }
        let rows = db.rows();
        if rows.len() != expected.len() || rows[..kept_rows.len()] != *kept_rows {
            return Err(format!(
                "{ctx}: {} rows after the repair, expected {}",
                rows.len(),
                expected.len()
            ));
        }
        let view = store
            .load(ID)
            .map_err(|e| format!("{ctx}: next load: {e}"))?;
        if view.events != expected || view.state != LogState::Clean || view.cut.is_some() {
            return Err(format!(
                "{ctx}: next load not clean: {} events, {}",
                view.events.len(),
                view.state
            ));
        }
        if db.rows() != rows {
            return Err(format!("{ctx}: a clean load wrote"));
        }
        Ok(())
    }

    // --- JSONL ------------------------------------------------------------

    pub struct Root {
        dir: tempfile::TempDir,
        compression: Compression,
    }

    impl Root {
        pub fn new(compression: Compression) -> Root {
            Root {
                dir: tempfile::tempdir().unwrap(),
                compression,
            }
        }

        fn path(&self) -> PathBuf {
            self.dir.path().join("root")
        }

        fn store(&self) -> Store {
            let backend = JsonlBackend::open(self.path(), self.compression).unwrap();
            Store::with_backend(Arc::new(backend), StoreOptions::default())
        }

        fn quarantine(&self) -> PathBuf {
            self.path()
                .join("--work--")
                .join(ID)
                .join(".turnwal-quarantine")
        }

        /// Writes the session afresh; returns the log's path and bytes.
        pub fn write(&self) -> (PathBuf, Vec<u8>) {
            let _ = fs::remove_dir_all(self.path());
            let store = self.store();
            store
                .create(SessionHeader::new(ID, 1000).with_cwd("/work"))
                .unwrap();
            for batch in batches() {
                store.append(ID, &batch).unwrap();
            }
            drop(store);
            let path = log_path(&self.path(), Some("/work"), ID, self.compression).unwrap();
            let bytes = fs::read(&path).unwrap();
            (path, bytes)
        }
    }

    /// The units of a JSONL log the damage targets: every event line (raw)
    /// or every batch frame (zstd), as (byte range, events in it).
    pub fn units(root: &Root, bytes: &[u8]) -> Vec<(std::ops::Range<usize>, Vec<Event>)> {
        match root.compression {
            Compression::None => {
                let text = String::from_utf8(bytes.to_vec()).unwrap();
                let mut from = 0;
                turns()
                    .concat()
                    .into_iter()
                    .map(|e| {
                        let line = format!("{}\n", e.to_json());
                        let at = from + text[from..].find(&line).unwrap();
                        from = at + line.len();
                        (at..from, vec![e])
                    })
                    .collect()
            }
            _ => {
                let frames = scan_frames(bytes, usize::MAX).unwrap().frames;
                let batches = batches();
                assert_eq!(
                    frames.len(),
                    batches.len() + 1,
                    "a header frame, then one per batch"
                );
                frames[1..].iter().cloned().zip(batches).collect()
            }
        }
    }

    /// Damages unit `u` (raw: a bit of the line's opening brace, so it no
    /// longer parses — raw JSONL has no checksum, so a flip inside a string
    /// is undetectable by design; zstd: a byte in the middle of the frame,
    /// or its last byte, the content checksum) and checks the oracle.
    pub fn jsonl_case(root: &Root, u: usize, variant: usize) -> Result<&'static str, String> {
        let all = turns().concat();
        let committed = committed(&all);
        let (path, bytes) = root.write();
        let units = units(root, &bytes);
        let (range, in_unit) = units[u].clone();
        let mut damaged = bytes.clone();
        let at = match (root.compression, variant) {
            (Compression::None, _) => range.start,
            (_, 0) => range.start + range.len() / 2,
            _ => range.end - 1,
        };
        damaged[at] ^= if root.compression == Compression::None {
            1
        } else {
            0x10
        };
        fs::write(&path, &damaged).unwrap();
        let ctx = format!(
            "jsonl {:?} unit {u} (seqs {}..) byte {at}",
            root.compression,
            in_unit[0].seq()
        );
        let d = in_unit[0].seq() as usize;
        let p = range.start;
        let kept = &all[..d];
        let closers = interrupted_turn_closers(kept);
        let expected: Vec<Event> = kept.iter().chain(&closers).cloned().collect();
        let repaired_tail = match root.compression {
            Compression::None => closers
                .iter()
                .map(|e| format!("{}\n", e.to_json()))
                .collect::<String>()
                .into_bytes(),
            _ if closers.is_empty() => Vec::new(),
            _ => turnwal::backend::jsonl::zstd::compress_frame(
                &turnwal::backend::jsonl::records::encode_batch(&closers, true),
            ),
        };
        let mut after = damaged[..p].to_vec();
        after.extend_from_slice(&repaired_tail);
        let store = root.store();
        let last_seq = in_unit.last().unwrap().seq() as usize;
        // Corruption when a later line or frame holds a turn/end.
        let mut soft = Vec::new();
        // zstd: every complete frame must be good throughout (docs/JSONL.md,
        // Recovery), so a damaged complete frame after it is refused too.
        if last_seq + 1 < committed || root.compression != Compression::None {
            for (what, result) in [("inspect", store.inspect(ID)), ("load", store.load(ID))] {
                let got = corruption(result).map_err(|e| format!("{ctx}: {what}: {e}"))?;
                if got != (p as u64, Some(d as u64)) {
                    soft.push(format!(
                        "{ctx}: {what}: corrupt at {got:?}, expected byte {p} seq {d}"
                    ));
                }
            }
            if fs::read(&path).unwrap() != damaged || root.quarantine().exists() {
                return Err(format!("{ctx}: a refusal wrote or quarantined"));
            }
            let salvage = store
                .salvage(ID)
                .map_err(|e| format!("{ctx}: salvage: {e}"))?;
            let intact: Vec<Event> = all
                .iter()
                .filter(|e| !in_unit.contains(e))
                .cloned()
                .collect();
            if salvage.events != intact {
                return Err(format!(
                    "{ctx}: salvage returned {} events, expected {} intact",
                    salvage.events.len(),
                    intact.len()
                ));
            }
            let g = &salvage.gaps;
            if g.len() != 1
                || (
                    g[0].offset,
                    g[0].len,
                    g[0].first_seq,
                    g[0].next_seq,
                    g[0].damaged,
                ) != (
                    p as u64,
                    range.len() as u64,
                    d as u64,
                    (last_seq + 1 < all.len()).then_some(last_seq as u64 + 1),
                    true,
                )
            {
                return Err(format!("{ctx}: salvage gaps {g:?}"));
            }
            let report = salvage_repair(&store, d, p, damaged.len(), &closers, &ctx)?;
            check_jsonl_repaired(
                root,
                &store,
                &path,
                report.quarantine,
                &damaged[p..],
                &after,
                &expected,
                &ctx,
            )?;
            if !soft.is_empty() {
                return Err(soft.join("; "));
            }
            return Ok("corrupt");
        }
        let view = store
            .load(ID)
            .map_err(|e| format!("{ctx}: load (torn tail expected): {e}"))?;
        if view.events != expected {
            return Err(format!(
                "{ctx}: load kept {} events, expected {}",
                view.events.len(),
                expected.len()
            ));
        }
        let cut = view.cut.clone().ok_or_else(|| format!("{ctx}: no cut"))?;
        if (cut.offset, cut.seq, cut.len) != (p as u64, d as u64, (damaged.len() - p) as u64) {
            return Err(format!("{ctx}: load cut {cut:?}"));
        }
        let files = files_in(&root.quarantine());
        if files.len() != 1 {
            return Err(format!("{ctx}: quarantine files {files:?}"));
        }
        check_jsonl_repaired(
            root,
            &store,
            &path,
            files.first().cloned(),
            &damaged[p..],
            &after,
            &expected,
            &ctx,
        )?;
        Ok("torn")
    }

    #[allow(clippy::too_many_arguments)]
    fn check_jsonl_repaired(
        root: &Root,
        store: &Store,
        path: &Path,
        quarantine: Option<PathBuf>,
        cut: &[u8],
        after: &[u8],
        expected: &[Event],
        ctx: &str,
    ) -> Result<(), String> {
        let file = quarantine.ok_or_else(|| format!("{ctx}: no quarantine file"))?;
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if file.parent() != Some(&root.quarantine()) || !name.ends_with(".jsonl-cut") {
            return Err(format!("{ctx}: quarantine file {}", file.display()));
        }
        if fs::read(&file).unwrap() != cut {
            return Err(format!(
                "{ctx}: the quarantine does not hold exactly the cut bytes"
            ));
        }
        if fs::read(path).unwrap() != after {
            return Err(format!(
                "{ctx}: the repaired log is not the prefix plus the closers"
            ));
        }
        let view = store
            .load(ID)
            .map_err(|e| format!("{ctx}: next load: {e}"))?;
        if view.events != expected || view.state != LogState::Clean || view.cut.is_some() {
            return Err(format!(
                "{ctx}: next load not clean: {} events, {}",
                view.events.len(),
                view.state
            ));
        }
        if fs::read(path).unwrap() != after {
            return Err(format!("{ctx}: a clean load wrote"));
        }
        Ok(())
    }
}

#[test]
fn sqlite_damage_every_row() {
    let all = wal_damage::turns().concat();
    let mut failures = Vec::new();
    let mut counts = std::collections::BTreeMap::new();
    for d in 0..all.len() {
        for damage in [
            upstream::RowDamage::InvalidJson,
            upstream::RowDamage::Delete,
        ] {
            match upstream::sqlite_case(d, damage) {
                Ok(kind) => *counts.entry(kind).or_insert(0) += 1,
                Err(e) => failures.push(e),
            }
        }
    }
    eprintln!(
        "sqlite: {} rows x 2 damages ({} committed): {counts:?}, {} failures",
        all.len(),
        upstream::committed(&all),
        failures.len()
    );
    assert_no_failures(&failures);
}

#[test]
fn jsonl_damage_every_line_and_frame() {
    use turnwal::backend::jsonl::Compression;
    let mut failures = Vec::new();
    for compression in [Compression::None, Compression::Zstd] {
        let root = upstream::Root::new(compression);
        let (_, bytes) = root.write();
        let units = upstream::units(&root, &bytes).len();
        let variants = if compression == Compression::None {
            1
        } else {
            2
        };
        let mut counts = std::collections::BTreeMap::new();
        for u in 0..units {
            for v in 0..variants {
                match upstream::jsonl_case(&root, u, v) {
                    Ok(kind) => *counts.entry(kind).or_insert(0) += 1,
                    Err(e) => failures.push(e),
                }
            }
        }
        eprintln!("jsonl {compression:?}: {units} units x {variants} damages: {counts:?}");
    }
    assert_no_failures(&failures);
}
