//! The exclusive writer of one session file.
//!
//! Invariants [`WalWriter`] keeps (stated in full on the struct, checked by
//! `WalWriter::check_invariants` in debug builds after every call that
//! changes them):
//!
//! - the file is `[0, synced_len)` fdatasynced, `[synced_len, held_from)`
//!   written in `never` mode and not held, `[held_from, written_len)` the
//!   bytes of `pending`, which between calls are all written:
//!   `synced_len <= held_from <= written_len == held_from + pending.len()`;
//! - nothing is acknowledged that is not accepted, and everything synced is
//!   acknowledged: `synced_events <= acked_events <= held_from_events +
//!   pending.events()`;
//! - the durability proof never states more than an fdatasync made durable:
//!   `proven_len <= synced_len`;
//! - after a failed fdatasync (`rewrite`) every byte after `synced_len` is
//!   held for the rewrite, or the writer is poisoned;
//! - records go only at the end of the file, and a failed append or repair
//!   cuts the file back to the accepted events: no gap, no duplicate.

use std::path::PathBuf;
use std::sync::Arc;

use super::format::{self, FileHeader};
use super::leave_unsynced_mark;
use super::probe;
use super::proof::Prover;
use super::record::decode_at;
use super::scan::{Classified, decode_kept, salvage_log, scan_log_proven};
use crate::backend::{LogWriter, SyncMode};
use crate::contract::Placement;
use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::scan::{CutReason, Extent, Outcome, Scan};
use crate::storage::{LockGuard, Storage, StorageFile};

/// Force an fdatasync once this many bytes are held for a rewrite, so a
/// turn that never ends cannot grow memory without bound.
pub const MAX_UNSYNCED_BYTES: usize = 64 << 20;

/// Writes one session file.
///
/// The file holds, in order:
/// - `[0, synced_len)`: fsynced;
/// - `[synced_len, held_from)`: written and acknowledged in `never` mode, not
///   held in memory (that mode promises survival of a process crash only);
/// - `[held_from, written_len)`: the first bytes of `pending`, which holds
///   every accepted event after `held_from`, encoded.
///
/// So after a failed write or fdatasync the file can be cut back to its
/// accepted events and the held bytes rewritten from memory: no gap, no
/// duplicate, and never a second fdatasync trusted to cover pages a failed
/// one dropped (Linux marks them clean without writing them). Bytes not held
/// cannot be rewritten: a failed fdatasync over them poisons the writer and
/// leaves the log's unsynced mark, so the next open publishes a durable copy.
//
// How the length and count fields relate. Between calls (checked by
// `check_invariants` at the end of every method that changes them):
//
//   meta.records_start <= synced_len <= held_from <= written_len
//   written_len == held_from + pending.len()
//       Every accepted byte is written: an append writes its whole batch
//       (or is dropped from `pending` and cut off the file), so the file's
//       tail past `held_from` is exactly `pending`. (Within a call `pending`
//       may run ahead of `written_len` until `flush_pending` writes it.)
//       After a failed fdatasync some of those written bytes may be pages
//       the kernel dropped: that is what `rewrite` records, not a shorter
//       `written_len`.
//   synced_events <= held_from_events
//   held_from - synced_len >= (held_from_events - synced_events) * MIN_RECORD_LEN
//       (in version 2, where a chunk-run record holds many events, 1 byte
//       per event instead of MIN_RECORD_LEN, here and below)
//   (held_from == synced_len) == (held_from_events == synced_events)
//       `[synced_len, held_from)` is whole records, the events between the
//       two counts; equal ends hold no record.
//   pending.len() >= pending.events() * MIN_RECORD_LEN
//       `pending` is whole records too (its own sums: see `Pending::check`).
//   synced_events <= acked_events <= held_from_events + pending.events()
//       Acknowledged: everything synced; in `never` mode also everything
//       written; never an event not accepted. In `batch` and `turn` mode
//       `acked_events == synced_events` unless `never`-mode appends came
//       first.
//   proven_len <= synced_len
//       The proof is written only after the fdatasync it states returned
//       (0 until this writer first writes or is told of one).
//   rewrite => held_from == synced_len || poisoned
//       After a failed fdatasync everything past the synced bytes is held
//       (`hold_unheld`), or the writer is poisoned.
//
// The event counts are of the file as last scanned: a writer opened on an
// existing log starts with them 0 (and `synced_len == written_len == len`)
// until its first scan states them; `after_scan` and `repair` reset all
// lengths and counts together (`all_durable`).
#[derive(Debug)]
pub struct WalWriter {
    id: String,
    path: PathBuf,
    storage: Arc<dyn Storage>,
    file: Box<dyn StorageFile>,
    lock_path: PathBuf,
    _lock: Box<dyn LockGuard>,
    salt: u32,
    meta: FileHeader,
    /// fdatasync has returned for `[0, synced_len)`; new records carry it as
    /// their watermark.
    synced_len: u64,
    /// Events in `[0, synced_len)`.
    synced_events: u64,
    /// Where `pending` starts in the file.
    held_from: u64,
    /// Events before `held_from`.
    held_from_events: u64,
    /// Events acknowledged: the synced ones, plus (in `never` mode) the
    /// written ones.
    acked_events: u64,
    written_len: u64,
    pending: Pending,
    /// Encode buffer for `never`-mode batches, reused.
    scratch: Vec<u8>,
    /// After a failed fdatasync the bytes after `held_from` may be pages the
    /// kernel dropped and marked clean: rewrite them (the same bytes, from
    /// `pending`) before the next fdatasync instead of trusting it.
    rewrite: bool,
    poisoned: Option<String>,
    /// Writes the log's durability proof after every fdatasync.
    prover: Prover,
    /// What the proof last stated.
    proven_len: u64,
    /// Where the log's plain closed turns are, for the automatic sealing
    /// (`None` until learned: see [`WalWriter::seal_state`]).
    seal: Option<SealState>,
    /// When this writer seals by itself.
    auto_seal: super::AutoSeal,
    /// The classification of the whole file the last full scan made, and
    /// the file's length then: `load` decodes the kept records from it
    /// instead of scanning the log a second time. Anything that writes
    /// forgets it.
    scanned: Option<(u64, Classified)>,
}

/// The plain records of closed turns in a version-2 log: `[sealed_end,
/// commit_end)` (everything before `sealed_end` is sealed, or was found
/// unsealable by the last compaction).
#[derive(Debug, Clone, Copy)]
struct SealState {
    sealed_end: u64,
    commit_end: u64,
}

/// A writer seals by itself after a batch that leaves at least this many
/// bytes of plain closed-turn records…
pub const AUTO_SEAL_MIN_BYTES: u64 = 1 << 20;
/// …and at an idle moment ([`LogWriter::seal_due`]) this many: idle work
/// costs no append its latency, so it seals smaller sessions too.
pub const IDLE_SEAL_MIN_BYTES: u64 = 256 << 10;
/// …that are at least 1/this of the file (docs/FORMAT.md, "Sealing and
/// compaction").
pub const AUTO_SEAL_FILE_FRACTION: u64 = 4;

impl WalWriter {
    /// A writer over a file whose whole content is durable and acknowledged
    /// (just materialized, or fdatasync'ed at open).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        id: String,
        path: PathBuf,
        storage: Arc<dyn Storage>,
        file: Box<dyn StorageFile>,
        lock_path: PathBuf,
        lock: Box<dyn LockGuard>,
        meta: FileHeader,
        durable_len: u64,
        durable_events: u64,
    ) -> WalWriter {
        let path_for_prover = path.clone();
        let meta_salt = meta.salt;
        let writer = WalWriter {
            id,
            path,
            storage,
            file,
            lock_path,
            _lock: lock,
            salt: meta.salt,
            meta,
            synced_len: durable_len,
            synced_events: durable_events,
            held_from: durable_len,
            held_from_events: durable_events,
            acked_events: durable_events,
            written_len: durable_len,
            pending: Pending::default(),
            scratch: Vec::new(),
            rewrite: false,
            poisoned: None,
            prover: Prover::new(&path_for_prover, meta_salt),
            proven_len: 0,
            seal: None,
            auto_seal: super::AutoSeal {
                at_close: true,
                after_batches: false,
            },
            scanned: None,
        };
        writer.check_invariants();
        writer
    }

    /// Checks the relations between the length and count fields (see the
    /// comment on [`WalWriter`]) in debug builds. Called at the end of every
    /// method that changes them, and after every restore.
    fn check_invariants(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        // A chunk-run record holds up to 1024 events in a few bytes each,
        // and a version-3 archive reference stands for all the archive's:
        // every event takes at least one byte.
        let min = if self.seals() {
            1
        } else {
            format::MIN_RECORD_LEN as u64
        };
        debug_assert!(
            self.meta.records_start <= self.synced_len,
            "synced_len {} is inside the file header (records start at {})",
            self.synced_len,
            self.meta.records_start
        );
        debug_assert!(
            self.synced_len <= self.held_from && self.held_from <= self.written_len,
            "lengths out of order: synced {} held_from {} written {}",
            self.synced_len,
            self.held_from,
            self.written_len
        );
        debug_assert_eq!(
            self.written_len,
            self.held_from + self.pending.len(),
            "written_len is not the end of pending (held_from {}, pending {} bytes)",
            self.held_from,
            self.pending.len()
        );
        debug_assert!(
            self.synced_events <= self.held_from_events,
            "synced_events {} > held_from_events {}",
            self.synced_events,
            self.held_from_events
        );
        let unheld_events = self.held_from_events - self.synced_events;
        debug_assert!(
            self.held_from - self.synced_len >= unheld_events * min,
            "[{}, {}) cannot hold {unheld_events} records",
            self.synced_len,
            self.held_from
        );
        debug_assert_eq!(
            self.held_from == self.synced_len,
            unheld_events == 0,
            "[{}, {}) and {unheld_events} unheld events disagree",
            self.synced_len,
            self.held_from
        );
        self.pending.check();
        debug_assert!(
            self.pending.len() >= self.pending.events() * min,
            "pending's {} bytes cannot hold {} records",
            self.pending.len(),
            self.pending.events()
        );
        debug_assert!(
            self.synced_events <= self.acked_events
                && self.acked_events <= self.held_from_events + self.pending.events(),
            "acked_events {} outside [synced {}, accepted {}]",
            self.acked_events,
            self.synced_events,
            self.held_from_events + self.pending.events()
        );
        debug_assert!(
            self.proven_len <= self.synced_len,
            "the proof states {} bytes, only {} synced",
            self.proven_len,
            self.synced_len
        );
        debug_assert!(
            !self.rewrite || self.held_from == self.synced_len || self.poisoned.is_some(),
            "a rewrite is due but [{}, {}) is not held",
            self.synced_len,
            self.held_from
        );
    }

    /// States in the durability proof that `len` bytes are durable (an
    /// fdatasync covering them has returned), before any event they hold is
    /// acknowledged: nothing is acknowledged without its proof, so a proof
    /// that cannot be written fails the call like a failed write.
    ///
    /// A step inside a sync, not a whole mutation: it states `len` just
    /// before the caller raises `synced_len` to it (`all_durable`), so
    /// `proven_len <= synced_len` holds again only after that, and the
    /// invariants are checked by the caller.
    fn prove(&mut self, len: u64) -> Result<()> {
        if len != self.proven_len {
            self.prover
                .prove(self.storage.as_ref(), len)
                .map_err(|e| Error::io("write", super::proof::path_of(&self.path), e))?;
            self.proven_len = len;
        }
        Ok(())
    }

    /// When this writer seals by itself (see
    /// `WalBackend::sealing_by_itself`).
    pub(super) fn set_auto_seal(&mut self, on: super::AutoSeal) {
        self.auto_seal = on;
    }

    /// Records that the durability proof already states `len` (written by
    /// materialization).
    pub(super) fn set_proven(&mut self, len: u64) {
        self.proven_len = len;
        self.check_invariants();
    }

    /// After a scan under the lock: a log with nothing to cut is all
    /// durable (opening fdatasynced, or published a copy of, the whole
    /// file) and kept (an open turn's closers come after it), so the proof
    /// can state all of it.
    fn after_scan(&mut self, scan: &Scan) -> Result<()> {
        if self.pending.is_empty() && scan.cut.is_none() {
            let len = self.written_len;
            self.prove(len)?;
            self.all_durable(len, scan.stored_len());
        }
        self.check_invariants();
        Ok(())
    }

    /// Writes the bytes a repair is about to cut, `[from, end of file)`, to
    /// a quarantine file in the store's `quarantine/` directory, durably.
    fn quarantine(&self, from: u64, seq: u64) -> Result<std::path::PathBuf> {
        let len = self.file.len().map_err(|e| self.io("stat", e))?;
        let mut bytes = vec![0; (len - from) as usize];
        self.file
            .read_exact_at(&mut bytes, from)
            .map_err(|e| self.io("read", e))?;
        let sessions = self.path.parent().expect("logs live in sessions/");
        let dir = sessions
            .parent()
            .unwrap_or(sessions)
            .join(crate::quarantine::WAL_DIR);
        let at = crate::quarantine::Placement {
            dir: &dir,
            name: super::log_name(&self.path),
            offset: from,
            seq,
            ext: "twal-cut",
        };
        crate::quarantine::keep(self.storage.as_ref(), &at, &bytes)
            .map_err(|e| Error::io("quarantine", &dir, e))
    }

    /// Classifies the whole log with `classify` (the recovery or the
    /// salvage scan) and its proof, under the lock.
    fn scan_whole(
        &mut self,
        classify: fn(&[u8], &std::path::Path, u64) -> Result<Classified>,
    ) -> Result<Scan> {
        let proven = self.proven()?;
        let map = self.file.map().map_err(|e| self.io("map", e))?;
        let classified = classify(&map, &self.path, proven)?;
        let scan = classified.scan.clone();
        self.after_scan(&scan)?;
        self.scanned = Some((map.len() as u64, classified));
        Ok(scan)
    }

    /// What this log's durability proof states now.
    fn proven(&self) -> Result<u64> {
        super::proof::read(self.storage.as_ref(), &self.path, self.salt)
            .map_err(|e| Error::io("read", super::proof::path_of(&self.path), e))
    }

    /// Resets every length to a file that is `len` bytes of `events`
    /// durable events (after a repair, or a scan of an untouched log).
    fn all_durable(&mut self, len: u64, events: u64) {
        self.synced_len = len;
        self.synced_events = events;
        self.held_from = len;
        self.held_from_events = events;
        self.written_len = len;
        self.acked_events = events;
        self.pending.clear();
    }

    /// Whether appends pack chunk runs: only into a version-2 log. A
    /// version-1 log is appended to in version 1, and a version-3 log's
    /// appends write plain records, which its seals pack (the append path
    /// pays for no head scan).
    fn packs_at_append(&self) -> bool {
        self.meta.version == format::FORMAT_V2
    }

    /// Whether the log can be sealed (version 2 by a rewrite, version 3
    /// into its archive); a version-1 log is sealed only when asked
    /// (`compact`), which makes it version 2.
    fn seals(&self) -> bool {
        self.meta.version >= format::FORMAT_V2
    }

    fn io(&self, op: &'static str, e: std::io::Error) -> Error {
        Error::io(op, &self.path, e)
    }

    fn check_poison(&self) -> Result<()> {
        match &self.poisoned {
            Some(cause) => Err(Error::Poisoned {
                id: self.id.clone(),
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Writes what of `pending` is not in the file yet (all of it after a
    /// failed fdatasync), then (if asked) fdatasyncs. On failure the caller
    /// calls [`WalWriter::restore`].
    fn flush_pending(&mut self, sync: bool) -> Result<(), Failure> {
        let from = if self.rewrite {
            0
        } else {
            self.written_len - self.held_from
        };
        if from < self.pending.len() {
            self.pending
                .write_from(self.file.as_mut(), self.held_from, from)
                .map_err(|e| Failure::Write(self.io("write", e)))?;
            self.written_len = self.held_from + self.pending.len();
            self.rewrite = false;
        }
        if sync {
            if self.synced_len < self.written_len {
                self.file
                    .sync_data()
                    .map_err(|e| Failure::Sync(self.io("fdatasync", e)))?;
            }
            self.prove(self.written_len).map_err(Failure::Write)?;
            let events = self.held_from_events + self.pending.events();
            self.all_durable(self.written_len, events.max(self.acked_events));
        }
        Ok(())
    }

    /// After a failed write or fdatasync (and after dropping any failed
    /// batch from `pending`): cut off whatever the file holds past the
    /// accepted events; after a failed fdatasync, mark the held bytes for a
    /// rewrite from memory and leave the log's unsynced mark. Events written
    /// before stay in the file, so a process crash still finds what `never`
    /// mode acknowledged. Poisons the writer when the file cannot be cut, or
    /// when a failed fdatasync covered bytes not held in memory.
    fn restore(&mut self, failure: Failure) -> Error {
        let (err, synced_failed) = match failure {
            Failure::Write(e) => (e, false),
            Failure::Sync(e) => (e, true),
        };
        let accepted_end = self.held_from + self.pending.len();
        let cut = self.file.len().and_then(|len| {
            if len > accepted_end {
                self.file.set_len(accepted_end)
            } else {
                Ok(())
            }
        });
        if let Err(e) = cut {
            self.poisoned = Some(format!(
                "{err}; cutting back to byte {accepted_end} failed: {e}"
            ));
        }
        self.written_len = self.written_len.min(accepted_end);
        if synced_failed {
            self.rewrite = true;
            self.leave_unsynced_mark();
            if let Err(why) = self.hold_unheld() {
                self.poisoned.get_or_insert(format!(
                    "{err}; events acknowledged on write (never mode) after byte {} could not \
                     be held for a rewrite ({why}): reopen the session to publish a durable copy",
                    self.synced_len
                ));
            }
        }
        self.check_invariants();
        err
    }

    /// Takes the bytes written in `never` mode but not held (`[synced_len,
    /// held_from)`) into `pending`, so a failed fdatasync over them can be
    /// answered by a rewrite like any other. They are read back from the
    /// page cache right after the failure, and accepted only if every
    /// record checks out (checksum with this file's salt, expected seqs): a
    /// page the kernel evicted in between could only read back as bytes that
    /// fail that check.
    fn hold_unheld(&mut self) -> Result<(), String> {
        if self.held_from == self.synced_len {
            return Ok(());
        }
        let len = (self.held_from - self.synced_len) as usize;
        let mut bytes = vec![0; len];
        self.file
            .read_exact_at(&mut bytes, self.synced_len)
            .map_err(|e| e.to_string())?;
        let mut at = 0;
        let mut seq = self.synced_events;
        while seq < self.held_from_events && at < len as u64 {
            let head = super::record::check_at(&bytes, at, Some(seq), self.salt)
                .map_err(|(_, detail)| format!("read back: {detail}"))?;
            at += head.record_len();
            seq = head.next_seq();
        }
        if at != len as u64 || seq != self.held_from_events {
            return Err("read back: records do not fill the range".into());
        }
        self.pending
            .hold_front(bytes, self.held_from_events - self.synced_events);
        self.held_from = self.synced_len;
        self.held_from_events = self.synced_events;
        Ok(())
    }

    /// Appends a `never`-mode batch straight from a reused buffer, holding
    /// nothing: the mode acknowledges on write and promises a process crash
    /// only.
    fn append_unheld(&mut self, batch: &[Event], placements: &[Placement]) -> Result<u64> {
        self.scratch.clear();
        let pack = self.packs_at_append();
        let encoded = format::encode_batch(
            &mut self.scratch,
            batch,
            placements,
            self.synced_len,
            self.salt,
            pack,
        );
        if let Err(e) = self.file.write_all_at(&self.scratch, self.written_len) {
            return Err(self.restore(Failure::Write(self.io("write", e))));
        }
        let batch_start = self.written_len;
        self.written_len += self.scratch.len() as u64;
        self.held_from = self.written_len;
        self.held_from_events += batch.len() as u64;
        self.acked_events = self.held_from_events;
        self.check_invariants();
        self.after_batch(batch_start, encoded.closing_end);
        Ok(self.acked_events)
    }
}

/// Encoded records accepted but not yet fsynced, one buffer per batch.
#[derive(Debug, Default)]
struct Pending {
    batches: Vec<(Vec<u8>, u64)>,
    len: u64,
    events: u64,
}

impl Pending {
    fn len(&self) -> u64 {
        self.len
    }

    fn events(&self) -> u64 {
        self.events
    }

    fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    fn push(&mut self, bytes: Vec<u8>, events: u64) {
        self.len += bytes.len() as u64;
        self.events += events;
        self.batches.push((bytes, events));
    }

    /// Puts bytes that precede every held batch in front of them.
    fn hold_front(&mut self, bytes: Vec<u8>, events: u64) {
        self.len += bytes.len() as u64;
        self.events += events;
        self.batches.insert(0, (bytes, events));
    }

    /// Drops the last batch (a failed append).
    fn pop(&mut self) {
        if let Some((bytes, events)) = self.batches.pop() {
            self.len -= bytes.len() as u64;
            self.events -= events;
        }
    }

    fn clear(&mut self) {
        self.batches.clear();
        self.len = 0;
        self.events = 0;
    }

    /// Debug builds: `len` and `events` are the sums over `batches`.
    fn check(&self) {
        if cfg!(debug_assertions) {
            let len: u64 = self.batches.iter().map(|(b, _)| b.len() as u64).sum();
            let events: u64 = self.batches.iter().map(|(_, e)| e).sum();
            debug_assert_eq!((self.len, self.events), (len, events), "pending's sums");
        }
    }

    /// Writes the bytes from logical offset `from` on at `base + from`.
    fn write_from(&self, file: &mut dyn StorageFile, base: u64, from: u64) -> std::io::Result<()> {
        let mut at = 0;
        for (bytes, _) in &self.batches {
            let end = at + bytes.len() as u64;
            if end > from {
                let skip = from.saturating_sub(at) as usize;
                file.write_all_at(&bytes[skip..], base + at + skip as u64)?;
            }
            at = end;
        }
        Ok(())
    }
}

/// How [`WalWriter::flush_pending`] failed.
enum Failure {
    Write(Error),
    Sync(Error),
}

/// The scan a writer opens with: without reading the whole log when the
/// tail probe proves a clean end that needs no repair (see [`tail_scan`]).
/// Anything that would be written — closers, a cut — is decided by the full
/// scan, so a repair is never committed onto a log with corrupt records
/// below the last watermark.
pub(super) fn tail_or_full_scan(
    bytes: &[u8],
    meta: &FileHeader,
    path: &std::path::Path,
    proven: u64,
) -> Result<Scan> {
    match tail_scan(bytes, meta, path, proven)? {
        Some(scan) if !scan.needs_repair() => Ok(scan),
        _ => Ok(scan_log_proven(bytes, path, proven)?.scan),
    }
}

/// The scan of a log whose end the tail probe proves clean: every record
/// after the last watermark valid, and everything after the commit point
/// obeying the turn contract (so nothing is cut). Reads the last batch and
/// the records since the commit point — an open turn gets its closers from
/// them — never the whole log. `None` when a full scan must decide.
pub(super) fn tail_scan(
    bytes: &[u8],
    meta: &FileHeader,
    path: &std::path::Path,
    proven: u64,
) -> Result<Option<Scan>> {
    if proven > bytes.len() as u64 {
        return Ok(None); // shorter than proven: the full scan refuses it
    }
    let Some((last, previous)) = probe::clean_end(bytes, probe::Records::of(meta)) else {
        return Ok(None);
    };
    scan_clean_end(bytes, meta, path, last, previous)
}

/// [`tail_scan`] once the end is proven clean: `last` is the file's last
/// record and `previous` the one before it.
fn scan_clean_end(
    bytes: &[u8],
    meta: &FileHeader,
    path: &std::path::Path,
    last: format::RecordHead,
    previous: Option<format::RecordHead>,
) -> Result<Option<Scan>> {
    // A unit at the end is the commit point the scan takes its count from:
    // check it (decompressed, bounded) before trusting it, as the full scan
    // checks every unit, so that no append continues from a count the
    // unit's records do not hold. The full scan decides what a bad one is.
    if last.is_sealed() {
        let at = bytes.len() as u64 - last.record_len();
        if super::record::check_unit(super::record::unit_frame(bytes, at, &last), &last).is_err() {
            return Ok(None);
        }
    }
    let (commit, tail) = if last.commits_after(previous.as_ref()) {
        (Some(last), Vec::new())
    } else {
        if last.synthetic() && last.in_turn() {
            return Ok(None); // an interrupted repair: the scan cuts it
        }
        let Some((commit, found)) = probe::since_commit(bytes, probe::Records::of(meta)) else {
            return Ok(None);
        };
        let mut tail: Vec<Event> = Vec::new();
        for f in &found {
            tail.extend(decode_at(bytes, f.offset, &f.head, path)?);
        }
        (commit, tail)
    };
    // No commit point among the live records: the archive reference's (a
    // version-3 file), or none.
    let base = meta.archive;
    let committed = commit.map_or(base.map_or(0, |a| a.count), |c| c.next_seq());
    let committed_turn =
        commit.map_or(base.map_or(0, |a| u64::from(a.turn)), |c| u64::from(c.turn));
    let verdict = crate::scan::classify_tail(meta.policy, committed, committed_turn, &tail);
    if verdict.debris.is_some() {
        return Ok(None);
    }
    // The probe proved the end clean: nothing to cut, at most a turn to
    // close.
    let outcome = Outcome::of_cut(None, !verdict.closers.is_empty());
    let extent = Extent {
        bytes: bytes.len() as u64,
        committed,
        committed_turn,
        committed_time: commit.map(|c| c.time).or(base.map(|a| a.time)),
    };
    let scan = Scan::new(
        meta.header.clone(),
        meta.policy,
        extent,
        tail,
        verdict,
        outcome,
        None,
    );
    debug_assert!(
        last.is_run() || scan.last_time == Some(last.time),
        "the last record is kept"
    );
    Ok(Some(scan))
}

/// The kept events with seq >= `from_seq`: from the end of the file when the
/// tail probe proves it clean and kept as it is (a tail read costs the
/// suffix, not the log), otherwise from a full scan.
pub(super) fn read_from(
    bytes: &[u8],
    meta: &FileHeader,
    from_seq: u64,
    path: &std::path::Path,
    proven: u64,
) -> Result<Vec<Event>> {
    read_from_scanned(bytes, meta, from_seq, path, proven).map(|(events, _)| events)
}

/// [`read_from`], and the closers recovery would append to the log (those
/// the scan that vouched for its end found).
pub(super) fn read_from_scanned(
    bytes: &[u8],
    meta: &FileHeader,
    from_seq: u64,
    path: &std::path::Path,
    proven: u64,
) -> Result<(Vec<Event>, Vec<Event>)> {
    if proven <= bytes.len() as u64
        && let Some(found) = probe::clean_suffix(bytes, probe::Records::of(meta), from_seq, proven)
    {
        // The suffix walk already proved the end clean: its last two records
        // are what the fast scan would walk back to find.
        let clean = match found.as_slice() {
            [.., previous, last] => {
                scan_clean_end(bytes, meta, path, last.head, Some(previous.head))?
            }
            _ => tail_scan(bytes, meta, path, proven)?,
        };
        if let Some(scan) = clean {
            let mut events = Vec::new();
            for f in &found {
                events.extend(
                    decode_at(bytes, f.offset, &f.head, path)?
                        .into_iter()
                        .filter(|e| e.seq() >= from_seq),
                );
            }
            return Ok((events, scan.closers));
        }
    }
    let classified = scan_log_proven(bytes, path, proven)?;
    let events = decode_kept(bytes, &classified, from_seq, path)?;
    Ok((events, classified.scan.closers))
}

impl LogWriter for WalWriter {
    fn scan(&mut self) -> Result<Scan> {
        let proven = self.proven()?;
        let map = self.file.map().map_err(|e| self.io("map", e))?;
        let scan = tail_or_full_scan(&map, &self.meta, &self.path, proven)?;
        self.after_scan(&scan)?;
        Ok(scan)
    }

    fn scan_full(&mut self) -> Result<Scan> {
        // All of the log: a version-3 log's archive too.
        super::archive::check_whole(self.storage.as_ref(), &self.path, &self.meta)?;
        self.scan_whole(scan_log_proven)
    }

    fn salvage_scan(&mut self) -> Result<Scan> {
        self.scan_whole(salvage_log)
    }

    fn read_from(&mut self, from_seq: u64) -> Result<Vec<Event>> {
        let proven = self.proven()?;
        let map = self.file.map().map_err(|e| self.io("map", e))?;
        if let Some((len, classified)) = &self.scanned
            && *len == map.len() as u64
            && classified.proven == proven
        {
            // Right after the full scan that opened the log (`load`): its
            // classification is this file's.
            let (mut events, from_seq) = self.archived_from(from_seq)?;
            events.extend(decode_kept(&map, classified, from_seq, &self.path)?);
            return Ok(events);
        }
        let (mut events, from_seq) = self.archived_from(from_seq)?;
        events.extend(read_from(&map, &self.meta, from_seq, &self.path, proven)?);
        Ok(events)
    }

    fn repair(&mut self, scan: &Scan) -> Result<Option<std::path::PathBuf>> {
        self.scanned = None;
        self.check_poison()?;
        // A salvage may cut below the commit point: learn it again.
        self.seal = None;
        let placements = closer_placements(scan)?;
        let len = self.file.len().map_err(|e| self.io("stat", e))?;
        let kept_end = scan.cut.as_ref().map_or(len, |cut| cut.offset);
        // Nothing is cut before it is kept elsewhere.
        let quarantined = match &scan.cut {
            Some(cut) if kept_end < len => Some(self.quarantine(kept_end, cut.seq)?),
            _ => None,
        };
        if scan
            .cut
            .as_ref()
            .is_some_and(|c| c.reason == CutReason::Damaged)
        {
            // An explicit salvage cuts below the proof: lower it first, or
            // the next scan would find proven bytes missing.
            self.prover
                .prove_durably(self.storage.as_ref(), kept_end)
                .map_err(|e| Error::io("fsync", super::proof::path_of(&self.path), e))?;
            self.proven_len = kept_end;
            self.check_invariants();
        }
        // Cut first, so bytes are only ever written at the end of the file.
        self.file
            .set_len(kept_end)
            .map_err(|e| self.io("truncate", e))?;
        if let Err(e) = self.file.sync_data() {
            self.leave_unsynced_mark();
            return Err(self.io("fdatasync", e));
        }
        self.all_durable(kept_end, scan.stored_len());
        let mut closers = Vec::new();
        for (event, placement) in scan.closers.iter().zip(placements) {
            format::encode_synthetic_record(&mut closers, event, placement, kept_end, self.salt);
        }
        self.pending.push(closers, scan.closers.len() as u64);
        if let Err(failure) = self.flush_pending(true) {
            // Closers are recomputed from the kept events on the next try:
            // take them back out rather than leave pages a failed fdatasync
            // may have dropped, which the next open would read as stored.
            self.pending.clear();
            self.rewrite = false;
            return Err(self.restore(failure));
        }
        self.check_invariants();
        Ok(quarantined)
    }

    fn append(&mut self, batch: &[Event], placements: &[Placement], sync: SyncMode) -> Result<u64> {
        self.scanned = None;
        self.check_poison()?;
        crate::limits::check_batch(batch)?;
        if sync == SyncMode::Never && self.pending.is_empty() && !self.rewrite {
            return self.append_unheld(batch, placements);
        }
        // One buffer per batch, sized up front: appending never moves the
        // bytes of earlier batches.
        let size: usize = batch.iter().map(format::encoded_len).sum();
        let mut bytes = Vec::with_capacity(size);
        let encoded = format::encode_batch(
            &mut bytes,
            batch,
            placements,
            self.synced_len,
            self.salt,
            self.packs_at_append(),
        );
        let batch_start = self.held_from + self.pending.len();
        self.pending.push(bytes, batch.len() as u64);
        let sync_now = match sync {
            SyncMode::Batch => true,
            SyncMode::Turn => batch.iter().any(|e| e.kind() == EventKind::TurnEnd),
            SyncMode::Never => false,
        } || self.pending.len() > MAX_UNSYNCED_BYTES as u64;
        if let Err(failure) = self.flush_pending(sync_now) {
            // The failing batch is not accepted; earlier pending events stay.
            self.pending.pop();
            return Err(self.restore(failure));
        }
        if sync == SyncMode::Never {
            self.acked_events = self.held_from_events + self.pending.events();
        }
        self.check_invariants();
        self.after_batch(batch_start, encoded.closing_end);
        Ok(self.acked_events)
    }

    fn sync(&mut self) -> Result<u64> {
        self.check_poison()?;
        if let Err(failure) = self.flush_pending(true) {
            return Err(self.restore(failure));
        }
        self.check_invariants();
        Ok(self.acked_events)
    }

    fn durable_events(&self) -> u64 {
        self.acked_events
    }

    fn seal_due(&mut self) -> Result<bool> {
        self.check_poison()?;
        if !self.auto_seal.at_close || !self.seals() || !self.pending.is_empty() {
            return Ok(false);
        }
        let Some(state) = self.seal_state() else {
            return Ok(false);
        };
        if !seal_pays(
            state.commit_end - state.sealed_end,
            self.written_len,
            IDLE_SEAL_MIN_BYTES,
        ) {
            return Ok(false);
        }
        Ok(self.seal_live()?.is_some())
    }

    fn close(&mut self) -> Result<()> {
        self.sync()?;
        if self.auto_seal.at_close
            && self.seals()
            && self
                .seal_state()
                .is_some_and(|st| st.commit_end > st.sealed_end)
        {
            // Everything is durable already: a seal that fails leaves the
            // log as it was (or both files complete, if only the directory
            // fsync failed), so the close still succeeds, as after a batch.
            let _ = self.compact();
        }
        Ok(())
    }

    fn compact(&mut self) -> Result<Option<crate::backend::Compaction>> {
        self.seal_at(super::seal::UNIT_ZSTD_LEVEL)
    }

    fn delete(self: Box<Self>) -> Result<()> {
        let dir = self
            .path
            .parent()
            .expect("session files live in a directory")
            .to_owned();
        self.storage
            .remove_file(&self.path)
            .map_err(|e| self.io("remove", e))?;
        self.storage
            .sync_dir(&dir)
            .map_err(|e| Error::io("fsync directory", &dir, e))?;
        // The live file first: an archive left by a crash here is an
        // orphan no live file references, replaced by the next first seal.
        let _ = self
            .storage
            .remove_file(&super::archive::path_of(&self.path));
        let _ = self.storage.remove_file(&super::unsynced_mark(&self.path));
        let _ = self.storage.remove_file(&super::proof::path_of(&self.path));
        // Still holding the lock: no writer can be between its lock and its
        // open of the (now absent) log.
        let _ = self.storage.remove_file(&self.lock_path);
        Ok(())
    }
}

/// The placements of a scan's closers, from the tracker state after the
/// kept tail.
fn closer_placements(scan: &Scan) -> Result<Vec<Placement>> {
    let mut tracker =
        crate::contract::Tracker::resume(scan.policy, scan.committed, scan.committed_turn);
    tracker.accept_batch(&scan.tail)?;
    Ok(tracker.accept_batch(&scan.closers)?)
}

/// Whether `plain` bytes of closed turns left plain in a file of `len`
/// bytes are worth a seal: at least `min` and 1/[`AUTO_SEAL_FILE_FRACTION`]
/// of the file. A seal rewrites the file, so the fraction makes its cost
/// proportional to what it seals: the rest it copies is at most
/// `FRACTION - 1` times the plain bytes it compresses, and every byte is
/// compressed once.
fn seal_pays(plain: u64, len: u64, min: u64) -> bool {
    plain >= min && plain * AUTO_SEAL_FILE_FRACTION >= len
}

impl WalWriter {
    /// A version-3 seal's first steps (docs/FORMAT.md, "A version-3
    /// seal"): seals the closed turns of the live file into units, appends
    /// them to the archive (cut back to the length the live file stands on
    /// first) and makes them durable, or writes a new archive and
    /// publishes it; returns the new live file for [`WalWriter::publish_copy`]
    /// to publish (archive reference, then the records after what was
    /// sealed, with `salt`). `None` when no closed turn can be sealed.
    fn archive_seal(
        &mut self,
        map: &[u8],
        classified: &super::scan::Classified,
        salt: u32,
        level: i32,
    ) -> Result<Option<super::seal::SealedCopy>> {
        let frames = &classified.frames;
        let file = &frames.file;
        let reference = file.archive;
        let archive_salt = match reference {
            Some(r) => r.salt,
            None => self.storage.random() as u32,
        };
        let Some(units) = super::seal::archive_units(
            map,
            file.records_start,
            frames.commit_end,
            &self.path,
            archive_salt,
            level,
        )?
        else {
            return Ok(None);
        };
        let archive_path = super::archive::path_of(&self.path);
        let archive_len = match reference {
            Some(r) => {
                let io = |op, e| Error::io(op, &archive_path, e);
                let mut archive = self
                    .storage
                    .open(&archive_path, crate::storage::OpenMode::ReadWrite)
                    .map_err(|e| io("open", e))?;
                // The archive this live file stands on, as far as a seal
                // looks without reading it (every read checks it whole):
                // at least that long, with that salt.
                let mut fixed = [0u8; format::FILE_HEADER_LEN];
                let held = archive.len().map_err(|e| io("stat", e))?;
                if held < r.len
                    || archive.read_exact_at(&mut fixed, 0).is_err()
                    || format::decode_salt(&fixed) != Some(r.salt)
                {
                    return Err(super::scan::corrupt(
                        &archive_path,
                        held.min(r.len),
                        None,
                        format!(
                            "archive-mismatch: {held} bytes and another header than the {} bytes \
                             of salt {:#010x} the live file stands on; nothing was sealed",
                            r.len, r.salt
                        ),
                    ));
                }
                // What a seal that did not finish left past the length the
                // live file stands on goes; then the new units, durable
                // before any live file references them.
                let len = r.len + units.bytes.len() as u64;
                archive
                    .write_all_at(&units.bytes, r.len)
                    .and_then(|()| archive.set_len(len))
                    .and_then(|()| archive.sync_data())
                    .map_err(|e| io("write", e))?;
                len
            }
            None => {
                let mut bytes = Vec::with_capacity(units.bytes.len() + 256);
                format::encode_file_header_version(
                    &mut bytes,
                    &file.header,
                    file.policy,
                    archive_salt,
                    format::FORMAT_V3,
                );
                bytes.extend_from_slice(&units.bytes);
                self.publish_archive(&archive_path, &bytes)?;
                bytes.len() as u64
            }
        };
        // The new live file: header, reference, the records after the
        // sealed turns.
        let mut out = Vec::with_capacity((map.len() as u64 - units.end) as usize + 256);
        format::encode_file_header_version(
            &mut out,
            &file.header,
            file.policy,
            salt,
            format::FORMAT_V3,
        );
        let reference_at = out.len();
        let new_reference = format::ArchiveRef {
            count: units.next_seq,
            turn: units.last_turn,
            time: units.last_time,
            salt: archive_salt,
            len: archive_len,
            published: (reference_at + format::ARCHIVE_REF_LEN) as u64
                + (classified.kept_end - units.end),
        };
        let total = new_reference.published;
        new_reference.encode(&mut out, salt);
        let records_start = out.len();
        out.extend_from_slice(&map[units.end as usize..classified.kept_end as usize]);
        format::stamp_published(&mut out, records_start, salt);
        debug_assert_eq!(out.len() as u64, total);
        Ok(Some(super::seal::SealedCopy {
            bytes: out,
            events: classified.scan.stored_len(),
            new_units: units.units,
            commit_end: records_start as u64 + (frames.commit_end - units.end),
        }))
    }

    /// Publishes a version-3 session's first archive at `path`: a temp
    /// file written and fsynced whole, renamed over the name (replacing an
    /// orphan a crashed first seal left), and the directory fsynced, all
    /// before any live file references it.
    fn publish_archive(&self, path: &std::path::Path, bytes: &[u8]) -> Result<()> {
        let dir = path.parent().expect("session files live in a directory");
        let name = super::log_name(&self.path).to_owned();
        let tmp = dir.join(format!(
            ".{name}.archive.{:016x}.tmp",
            self.storage.random()
        ));
        let io = |op, e| Error::io(op, &tmp, e);
        let mut file = self
            .storage
            .open(&tmp, crate::storage::OpenMode::CreateNew)
            .map_err(|e| io("create", e))?;
        let written = file
            .write_all_at(bytes, 0)
            .and_then(|()| file.sync_all())
            .map_err(|e| io("write", e))
            .and_then(|()| {
                self.storage
                    .rename(&tmp, path)
                    .map_err(|e| Error::io("rename", path, e))
            });
        if let Err(e) = written {
            drop(file);
            let _ = self.storage.remove_file(&tmp);
            return Err(e);
        }
        self.storage
            .sync_dir(dir)
            .map_err(|e| Error::io("fsync directory", dir, e))
    }

    /// The archived events with seq >= `from_seq` (none unless `from_seq`
    /// is below a version-3 log's archive count), and the seq the live
    /// file's read starts at.
    fn archived_from(&self, from_seq: u64) -> Result<(Vec<Event>, u64)> {
        match self.meta.archive {
            Some(reference) if from_seq < reference.count => {
                let archive =
                    super::archive::Archive::open(self.storage.as_ref(), &self.path, &self.meta)?
                        .expect("a file with a reference has an archive");
                Ok((archive.events_from(from_seq)?, reference.count))
            }
            _ => Ok((Vec::new(), from_seq)),
        }
    }

    /// After an accepted batch that started at byte `start` and closed a
    /// turn ending at `start + closing`: moves the commit point the close
    /// will seal up to, and, when asked to seal after batches, seals the log
    /// once its plain closed turns reach the threshold (at least
    /// [`AUTO_SEAL_MIN_BYTES`] and 1/[`AUTO_SEAL_FILE_FRACTION`] of the
    /// file). The batch is acknowledged either way: a failed seal leaves the
    /// old file (or poisons the writer, reported by its next call).
    fn after_batch(&mut self, start: u64, closing: Option<u64>) {
        let Some(closing) = closing else { return };
        if !self.auto_seal.at_close || !self.seals() {
            return;
        }
        let Some(mut state) = self.seal_state() else {
            return;
        };
        state.commit_end = state.commit_end.max(start + closing);
        self.seal = Some(state);
        if self.auto_seal.after_batches
            && seal_pays(
                state.commit_end - state.sealed_end,
                self.written_len,
                AUTO_SEAL_MIN_BYTES,
            )
        {
            let _ = self.seal_live();
        }
    }

    /// A seal while the session lives (idle, or after a batch): the
    /// compaction, its units at [`super::seal::LIVE_ZSTD_LEVEL`].
    fn seal_live(&mut self) -> Result<Option<crate::backend::Compaction>> {
        self.seal_at(super::seal::LIVE_ZSTD_LEVEL)
    }

    /// Seals every closed turn (the compaction), its units compressed at
    /// zstd `level`.
    fn seal_at(&mut self, level: i32) -> Result<Option<crate::backend::Compaction>> {
        self.scanned = None;
        self.check_poison()?;
        // Accepted events become durable first. Only those: a writer just
        // opened on a log nobody scanned yet (`WalBackend::compact`) holds
        // nothing, and a sync would prove whatever the file holds, a torn
        // tail included, before the scan below has judged it.
        if (!self.pending.is_empty() || self.rewrite)
            && let Err(failure) = self.flush_pending(true)
        {
            return Err(self.restore(failure));
        }
        let before = self.written_len;
        let proven = self.proven()?;
        let map = self.file.map().map_err(|e| self.io("map", e))?;
        let classified = scan_log_proven(&map, &self.path, proven)?;
        if let Some(cut) = &classified.scan.cut {
            return Err(Error::InvalidArgument(format!(
                "session {:?} needs recovery before it can be compacted: {} (`turnwal \
                 recover` repairs it; compaction only seals, it never cuts)",
                self.id,
                cut.problem("byte")
            )));
        }
        // A fresh salt: the durability proof names it, so a proof written
        // for one of the two files never states anything about the other.
        let salt = loop {
            let salt = self.storage.random() as u32;
            if salt != self.salt {
                break salt;
            }
        };
        let copy = if self.meta.version == format::FORMAT_V3 {
            self.archive_seal(&map, &classified, salt, level)?
        } else {
            super::seal::sealed_copy(&map, &classified, &self.path, salt, level)?
        };
        let Some(copy) = copy else {
            let commit_end = classified.frames.commit_end;
            self.seal = Some(SealState {
                sealed_end: commit_end,
                commit_end,
            });
            return Ok(Some(crate::backend::Compaction {
                before,
                after: before,
            }));
        };
        drop(map);
        let commit_end = copy.commit_end;
        self.publish_copy(copy, salt)?;
        self.seal = Some(SealState {
            sealed_end: commit_end,
            commit_end,
        });
        Ok(Some(crate::backend::Compaction {
            before,
            after: self.written_len,
        }))
    }

    /// Where the plain closed turns are, learned once by a backward walk
    /// from the end to the last sealed unit (`None` if the walk cannot
    /// vouch for the records, in which case nothing is sealed by itself).
    fn seal_state(&mut self) -> Option<SealState> {
        if self.seal.is_none() {
            let map = self.file.map().ok()?;
            let start = self.meta.records_start;
            let walk =
                probe::walk_back(&map, probe::Records::of(&self.meta), |f| f.head.is_sealed())?;
            let sealed_end = if walk.stopped {
                walk.found
                    .last()
                    .map_or(start, |f| f.offset + f.head.record_len())
            } else {
                start
            };
            // `found` is last first: the first closing turn/end met (with
            // its predecessor open) is the commit point.
            let mut commit_end = sealed_end;
            for pair in walk.found.windows(2) {
                let (end, before) = (&pair[0], &pair[1]);
                if end.head.closes_turn_after(Some(&before.head)) {
                    commit_end = end.offset + end.head.record_len();
                    break;
                }
            }
            self.seal = Some(SealState {
                sealed_end,
                commit_end: commit_end.max(sealed_end),
            });
        }
        self.seal
    }

    /// Publishes a sealed copy of the log (docs/FORMAT.md, "Sealing and
    /// compaction"): a temp file written whole, held (so the writer's hold
    /// moves with it) and fsynced, renamed over the log, the directory
    /// fsynced; then the proof states the new length under the new salt.
    /// A crash at any point leaves the old file or the new one; before the
    /// rename a temp file, which the next writer removes. A failure before
    /// the rename leaves this writer on the old file, untouched; a failed
    /// directory fsync after it poisons the writer and leaves the log's
    /// unsynced mark, so the next open republishes the log (with a
    /// directory fsync) before it acknowledges anything: until then a power
    /// loss may keep either file, both complete.
    fn publish_copy(&mut self, copy: super::seal::SealedCopy, salt: u32) -> Result<()> {
        let dir = self
            .path
            .parent()
            .expect("session files live in a directory")
            .to_owned();
        let name = super::log_name(&self.path).to_owned();
        let tmp = dir.join(format!(".{name}.{:016x}.tmp", self.storage.random()));
        let io = |op, e| Error::io(op, &tmp, e);
        let mut file = self
            .storage
            .open(&tmp, crate::storage::OpenMode::CreateNew)
            .map_err(|e| io("create", e))?;
        let written = file.hold_writer().and_then(|held| {
            if !held {
                return Err(std::io::Error::other(
                    "the new file is held by another writer",
                ));
            }
            file.write_all_at(&copy.bytes, 0)?;
            file.sync_all()
        });
        let published = written.map_err(|e| io("write", e)).and_then(|()| {
            self.storage
                .rename(&tmp, &self.path)
                .map_err(|e| Error::io("rename", &self.path, e))
        });
        if let Err(e) = published {
            drop(file);
            let _ = self.storage.remove_file(&tmp);
            return Err(e);
        }
        // From here the log is the new file.
        let len = copy.bytes.len() as u64;
        file.renamed(&self.path);
        self.file = file;
        self.salt = salt;
        // The copy's header: its salt, version (a compaction makes version
        // 1 version 2; a version-3 seal keeps 3) and archive reference.
        self.meta = format::decode_file_header(&copy.bytes).expect("a header just encoded");
        self.prover = Prover::new(&self.path, salt);
        self.proven_len = 0;
        self.rewrite = false;
        self.all_durable(len, copy.events);
        if let Err(e) = self.storage.sync_dir(&dir) {
            let err = Error::io("fsync directory", &dir, e);
            // The rename may not be durable: a power loss could bring the
            // old file back under the name. The unsynced mark makes the next
            // open publish a durable copy (temp file, rename, directory
            // fsync) before anything more is acknowledged.
            self.leave_unsynced_mark();
            self.poisoned = Some(format!("{err} after publishing a sealed copy"));
            self.check_invariants();
            return Err(err);
        }
        self.prove(len)?;
        self.check_invariants();
        Ok(())
    }

    /// After a failed fdatasync of the log: leave its unsynced mark, so that
    /// no later open, in this process or another, trusts an fdatasync of it
    /// (see `WalBackend::republish`). This writer needs no mark: it rewrites
    /// its unsynced bytes from memory. The mark stays until the next open
    /// publishes a copy. Best effort: if even an empty file cannot be
    /// created, the call still fails with the fdatasync's error.
    fn leave_unsynced_mark(&self) {
        let _ = leave_unsynced_mark(self.storage.as_ref(), &self.path);
    }
}
