//! The exclusive writer of one JSONL session.
//!
//! Appends write each batch at the end of the transcript (one frame in zstd
//! mode) and fdatasync as the [`SyncMode`] asks; after every fdatasync that
//! returns, before acknowledging, the durability proof (in the state
//! directory, outside the root) states the synced length (docs/JSONL.md, "The durability proof"). A
//! failed write or fsync truncates the file back to its acknowledged length;
//! batches written since the last fdatasync stay in memory and are written
//! again by the next append or sync (so a retry leaves no gap and no
//! duplicate, and bytes a failed fdatasync dropped from the page cache reach
//! the disk after all).
//!
//! Repairs keep the file's intact bytes and add one batch: the events that
//! must be written again (complete records recovered from a torn zstd
//! frame, or the kept members of a record cut by debris) followed by the
//! closers. When nothing must be written again, the repair truncates and
//! appends in place: a crash at any point leaves a log whose next scan
//! computes the same closers. Otherwise the events to write again exist only
//! in the bytes being cut, so the repaired file is written to a temp file,
//! fsynced and renamed over the transcript: a crash leaves the old file or
//! the new one, never a truncated file that lost them (upstream's two-step
//! repair loses them if it dies between truncating and appending).

use std::path::PathBuf;

use super::JsonlBackend;
use super::proof::Prover;
use crate::backend::{LogWriter, SyncMode};
use crate::contract::Placement;
use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::header::SessionHeader;
use crate::quarantine::{self, Placement as QuarantineAt};
use crate::scan::{Cut, CutReason, Scan};
use crate::storage::StorageFile;

pub(crate) struct JsonlWriter {
    backend: JsonlBackend,
    header: SessionHeader,
    path: PathBuf,
    /// The transcript, held ([`crate::storage::hold_writer`]): the
    /// session's one writer lock, released when the writer drops it.
    file: Box<dyn StorageFile>,
    /// Bytes written (accepted batches).
    len: u64,
    /// Bytes of acknowledged batches: what a failed write or fsync never
    /// cuts (equal to `synced_len` unless `SyncMode::Never` acknowledged
    /// more).
    acked_len: u64,
    /// Bytes an fdatasync that returned covers, and the proof states.
    synced_len: u64,
    /// Events written, and events acknowledged.
    events: u64,
    acked_events: u64,
    /// The bytes written since the last fdatasync (`synced_len..len`), to
    /// write again after a failed one.
    pending: Vec<u8>,
    /// The file was cut back: `pending` must be written again at
    /// `synced_len`.
    rewrite_pending: bool,
    /// `None` when the backend keeps no proofs (no state directory).
    prover: Option<Prover>,
    /// Whether an older turnwal's sidecars were removed from the session
    /// directory: done by the first write ([`JsonlBackend::remove_legacy`]).
    swept: bool,
    /// The CRC-32 of the transcript's first `hashed_len` bytes (the proof's
    /// tag), kept as the proven prefix grows.
    hasher: crc32fast::Hasher,
    hashed_len: u64,
    /// The length the proof stated when this writer last fsynced it (and
    /// its directory entry); `None` before the first time and after a
    /// repair rewrote the transcript.
    proof_synced: Option<u64>,
    poisoned: Option<String>,
    /// This writer left the transcript's unsynced mark: an fdatasync
    /// failed, and none has returned since.
    marked: bool,
    /// The classification the last scan made, at the length `len` had
    /// then: `load` lends the events from it instead of classifying the
    /// log a second time. Anything that writes forgets it.
    classified: Option<(u64, super::classify::Classification)>,
}

/// Above this many bytes written since the last fdatasync, a
/// `SyncMode::Never` writer syncs anyway: what it holds in memory to write
/// again stays bounded.
const MAX_UNSYNCED: usize = 64 << 20;

/// How far the proven length grows between fsyncs of the proof itself.
const PROOF_SYNC_EVERY: u64 = 1 << 20;

impl JsonlWriter {
    pub(crate) fn new(
        backend: JsonlBackend,
        header: SessionHeader,
        path: PathBuf,
        file: Box<dyn StorageFile>,
        len: u64,
        events: u64,
    ) -> JsonlWriter {
        JsonlWriter {
            prover: backend.proof_at(&path).map(Prover::new),
            swept: false,
            backend,
            header,
            path,
            file,
            len,
            acked_len: len,
            synced_len: len,
            events,
            acked_events: events,
            pending: Vec::new(),
            rewrite_pending: false,
            hasher: crc32fast::Hasher::new(),
            hashed_len: 0,
            proof_synced: None,
            poisoned: None,
            marked: false,
            classified: None,
        }
    }

    /// States in the durability proof that the transcript's first `len`
    /// bytes are durable: call only after an fdatasync covering them has
    /// returned (or of a file published whole and fsynced). The proof's tag
    /// is the CRC of those bytes, read back from the file as far as not yet
    /// hashed.
    pub(crate) fn prove(&mut self, len: u64) -> Result<()> {
        if len < self.hashed_len {
            self.hasher = crc32fast::Hasher::new();
            self.hashed_len = 0;
        }
        let mut buf = vec![0; (len - self.hashed_len).min(1 << 20) as usize];
        while self.hashed_len < len {
            let n = (len - self.hashed_len).min(buf.len() as u64) as usize;
            self.file
                .read_exact_at(&mut buf[..n], self.hashed_len)
                .map_err(|e| Error::io("read", &self.path, e))?;
            self.hasher.update(&buf[..n]);
            self.hashed_len += n as u64;
        }
        let tag = self.hasher.clone().finalize();
        // Upstream's format carries no watermarks: after a power loss the
        // proof is all there is to tell a tear from damage, so it is
        // fsynced now and then (not after every batch, which would double
        // the cost of a durable turn): when this writer first writes it,
        // after a repair, and each time it has grown PROOF_SYNC_EVERY bytes.
        // A proof a power loss set back still describes a prefix of the
        // transcript.
        let durably = self
            .proof_synced
            .is_none_or(|at| len < at || len - at >= PROOF_SYNC_EVERY);
        let Some(prover) = self.prover.as_mut() else {
            return Ok(());
        };
        let created = prover
            .prove(self.backend.storage(), tag, len, durably)
            .map_err(|e| Error::io("write", prover.path(), e))?;
        if created || self.proof_synced.is_none() {
            // A proof whose entry a power loss takes away proves nothing.
            let dir = prover.path().parent().expect("a proof has a directory");
            self.backend.sync_dir(dir)?;
        }
        if durably {
            self.proof_synced = Some(len);
        }
        Ok(())
    }

    fn check(&self) -> Result<()> {
        match &self.poisoned {
            Some(cause) => Err(Error::Poisoned {
                id: self.header.id.clone(),
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// The plan of the file as it is now; with `salvage`, the salvage read.
    fn read_plan_for(&self, salvage: bool) -> Result<(super::scan::Plan, Vec<u8>)> {
        let bytes = self
            .backend
            .storage()
            .read_all(&self.path)
            .map_err(|e| Error::io("read", &self.path, e))?
            .ok_or_else(|| Error::io("read", &self.path, std::io::ErrorKind::NotFound.into()))?;
        let plan = self
            .backend
            .plan_bytes(&self.path, &bytes, Some(&self.header.id), salvage)?;
        Ok((plan, bytes))
    }

    /// A scan (the salvage read with `salvage`), positioning the writer
    /// after the stored log.
    fn scan_for(&mut self, salvage: bool) -> Result<Scan> {
        self.check()?;
        self.classified = None;
        let (scan, len) = if salvage {
            let (plan, bytes) = self.read_plan_for(salvage)?;
            (plan.scan, bytes.len() as u64)
        } else {
            // Classified without holding the log or its events.
            let (c, src) = self.backend.classify_file(&self.path, &self.header.id)?;
            let len = super::source::Source::len(&src);
            let scan = c.scan.clone();
            self.classified = Some((len, c));
            (scan, len)
        };
        self.all_durable(len, scan.stored_len());
        // Opening fdatasynced the whole file: with nothing to cut, all of
        // it is proven.
        if scan.cut.is_none() {
            self.prove(self.len)?;
        }
        Ok(scan)
    }

    /// Positions the writer after `len` durable bytes holding `events`.
    fn all_durable(&mut self, len: u64, events: u64) {
        self.len = len;
        self.acked_len = len;
        self.synced_len = len;
        self.events = events;
        self.acked_events = events;
        self.pending.clear();
        self.rewrite_pending = false;
    }

    /// Writes the bytes a repair cuts (`bytes[cut.offset..]`) to a durable
    /// quarantine file in the session directory's `.turnwal-quarantine/`
    /// (docs/JSONL.md, "Quarantine").
    fn quarantine(&self, cut: &Cut, bytes: &[u8]) -> Result<PathBuf> {
        let dir = JsonlBackend::quarantine_dir(&self.path);
        let name = super::layout::encode_segment(&self.header.id)
            .map_err(|e| Error::InvalidArgument(format!("session id {:?}: {e}", self.header.id)))?;
        let at = QuarantineAt {
            dir: &dir,
            name: &name,
            offset: cut.offset,
            seq: cut.seq,
            ext: "jsonl-cut",
        };
        let start = usize::try_from(cut.offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        quarantine::keep(self.backend.storage(), &at, &bytes[start..])
            .map_err(|e| Error::io("quarantine", &dir, e))
    }

    /// Cuts the file back to its acknowledged length after a failed write
    /// or fsync, and marks what was written since the last fdatasync to be
    /// written again (a failed fdatasync may have dropped those pages: the
    /// next one would "succeed" without writing them); a failure here
    /// poisons the writer.
    fn roll_back(&mut self, cause: &Error) {
        let truncated = self
            .file
            .set_len(self.acked_len)
            .and_then(|()| self.file.sync_all());
        match truncated {
            Ok(()) => {
                self.len = self.acked_len;
                self.rewrite_pending = !self.pending.is_empty();
            }
            Err(e) => {
                self.poisoned = Some(format!("{cause}; rolling back failed: {e}"));
            }
        }
    }

    /// Writes `pending` again after a rollback.
    fn restore_pending(&mut self) -> Result<()> {
        if !self.rewrite_pending {
            return Ok(());
        }
        if let Err(e) = self.file.write_all_at(&self.pending, self.synced_len) {
            let err = Error::io("write", &self.path, e);
            self.roll_back(&err);
            return Err(err);
        }
        self.len = self.synced_len + self.pending.len() as u64;
        self.rewrite_pending = false;
        Ok(())
    }

    /// fdatasync, then the proof; either failing rolls back. A failed
    /// fdatasync leaves the transcript's unsynced mark (see
    /// [`super::unsynced`]) until one that follows the rewrite of every
    /// byte after the last good one returns.
    fn fsync(&mut self) -> Result<()> {
        let synced = match self.file.sync_data() {
            Ok(()) => self.prove(self.len),
            Err(e) => {
                self.backend.leave_unsynced_mark(&self.path);
                self.marked = true;
                Err(Error::io("fdatasync", &self.path, e))
            }
        };
        if let Err(err) = synced {
            self.roll_back(&err);
            return Err(err);
        }
        if self.marked {
            self.backend.clear_unsynced_mark(&self.path);
            self.marked = false;
        }
        let (len, events) = (self.len, self.events);
        self.all_durable(len, events);
        Ok(())
    }

    /// Marks the session directory swept (materialization did it).
    pub(crate) fn swept(&mut self) {
        self.swept = true;
    }

    /// Before the first write: an older turnwal's sidecars go.
    fn sweep(&mut self) {
        if !self.swept {
            self.backend
                .remove_legacy(self.path.parent().expect("a transcript has a directory"));
            self.swept = true;
        }
    }
}

impl LogWriter for JsonlWriter {
    fn scan(&mut self) -> Result<Scan> {
        self.scan_for(false)
    }

    /// The salvage read: damage in the committed region (a line that does
    /// not parse, a seq gap, a frame that does not decode) is cut from its
    /// line (raw) or frame (zstd) to the end of the file, as
    /// [`crate::scan::CutReason::Damaged`]; a log without damage scans as
    /// [`LogWriter::scan`] scans it.
    fn salvage_scan(&mut self) -> Result<Scan> {
        self.scan_for(true)
    }

    fn read_from(&mut self, from_seq: u64) -> Result<Vec<Event>> {
        self.check()?;
        let (c, src) = match self.classified.take() {
            Some((len, c)) if len == self.len => {
                let file = self
                    .backend
                    .storage()
                    .open(&self.path, crate::storage::OpenMode::Read)
                    .map_err(|e| Error::io("open", &self.path, e))?;
                let src = super::source::FileSource::new(file, &self.path)
                    .map_err(|e| Error::io("stat", &self.path, e))?;
                (c, src)
            }
            _ => self.backend.classify_file(&self.path, &self.header.id)?,
        };
        let len = super::source::Source::len(&src);
        let events = self.backend.events_from(src, &self.path, &c, from_seq);
        self.classified = Some((len, c));
        events
    }

    fn repair(&mut self, scan: &Scan) -> Result<Option<std::path::PathBuf>> {
        self.classified = None;
        self.check()?;
        // A salvage repair is checked against the salvage read.
        let salvage = scan
            .cut
            .as_ref()
            .is_some_and(|c| c.reason == CutReason::Damaged);
        let (plan, bytes) = self.read_plan_for(salvage)?;
        let now = &plan.scan;
        // Empty closers with a cut: the cut alone (a writer that adopts the
        // log continues its open turn).
        if now.stored_len() != scan.stored_len()
            || (!scan.closers.is_empty() && now.closers != scan.closers)
            || now.cut != scan.cut
        {
            return Err(Error::StaleRepair {
                id: self.header.id.clone(),
                detail: format!(
                    "the log now keeps {} events with {} closers, the scan had {} and {}",
                    now.stored_len(),
                    now.closers.len(),
                    scan.stored_len(),
                    scan.closers.len()
                ),
            });
        }
        if !scan.needs_repair() {
            return Ok(None);
        }
        self.sweep();
        let mut batch = plan.rewrite.clone();
        batch.extend(scan.closers.iter().cloned());
        let tail = if batch.is_empty() {
            Vec::new()
        } else {
            self.backend.encode_batch(&batch)
        };
        let keep = plan.keep_bytes;
        // What is cut is kept before the cut is made durable.
        let quarantined = match &now.cut {
            Some(cut) => Some(self.quarantine(cut, &bytes)?),
            None => None,
        };
        if plan.rewrite.is_empty() {
            // In place: any crash leaves a log whose next scan repairs to
            // the same bytes (the closers are recomputed).
            let io = |op, e| Error::io(op, &self.path, e);
            self.file.set_len(keep).map_err(|e| io("truncate", e))?;
            self.file.sync_all().map_err(|e| io("fsync", e))?;
            if !tail.is_empty() {
                let written = self
                    .file
                    .write_all_at(&tail, keep)
                    .map_err(|e| io("write", e))
                    .and_then(|()| self.file.sync_data().map_err(|e| io("fdatasync", e)));
                if let Err(err) = written {
                    // Whether the write or the fdatasync failed, pages of
                    // the closers may be dropped.
                    self.backend.leave_unsynced_mark(&self.path);
                    self.marked = true;
                    // The closers are recomputed by the next open: take them
                    // back out rather than leave pages a failed fdatasync may
                    // have dropped, which the next open's fdatasync would
                    // not write and its scan would read as stored.
                    let cut = self.file.set_len(keep).and_then(|()| self.file.sync_all());
                    if let Err(e) = cut {
                        self.poisoned = Some(format!("{err}; taking the closers back failed: {e}"));
                    }
                    return Err(err);
                }
            }
        } else {
            self.backend.remove_temps(&self.path);
            let mut content = bytes[..keep as usize].to_vec();
            content.extend_from_slice(&tail);
            // The temp file is held before it takes the transcript's name,
            // so the new transcript is never unheld: its handle becomes
            // this writer's.
            let (tmp, file) = self
                .backend
                .write_temp(&self.path, &content)?
                .ok_or_else(|| {
                    // Only a creator's cleanup takes a fresh temp file, and
                    // no one creates a session whose transcript exists.
                    Error::io(
                        "create",
                        &self.path,
                        std::io::Error::other("the repair's temp file was taken by another writer"),
                    )
                })?;
            self.backend.rename(&tmp, &self.path)?;
            self.file = file;
            // The handle knows its file by name (a shrink's turnstile).
            self.file.renamed(&self.path);
            self.backend
                .sync_dir(self.path.parent().expect("a transcript has a directory"))?;
        }
        self.all_durable(
            keep + tail.len() as u64,
            now.stored_len() + scan.closers.len() as u64,
        );
        self.proof_synced = None;
        self.prove(self.len)?;
        Ok(quarantined)
    }

    fn append(&mut self, batch: &[Event], _: &[Placement], sync: SyncMode) -> Result<u64> {
        self.classified = None;
        self.check()?;
        self.sweep();
        self.restore_pending()?;
        let bytes = self.backend.encode_batch(batch);
        if let Err(e) = self.file.write_all_at(&bytes, self.len) {
            let err = Error::io("write", &self.path, e);
            // Only this batch's bytes go; earlier accepted ones stay.
            if let Err(e2) = self.file.set_len(self.len) {
                self.poisoned = Some(format!("{err}; rolling back failed: {e2}"));
            }
            return Err(err);
        }
        let before = (self.events, self.pending.len());
        self.len += bytes.len() as u64;
        self.events += batch.len() as u64;
        self.pending.extend_from_slice(&bytes);
        let fsync = match sync {
            SyncMode::Batch => true,
            SyncMode::Turn => batch.iter().any(|e| e.kind() == EventKind::TurnEnd),
            SyncMode::Never => self.pending.len() > MAX_UNSYNCED,
        };
        if fsync {
            if let Err(e) = self.fsync() {
                // The failed batch is not acknowledged: forget it.
                self.events = before.0;
                self.pending.truncate(before.1);
                self.rewrite_pending = !self.pending.is_empty() && self.poisoned.is_none();
                return Err(e);
            }
        } else if sync == SyncMode::Never {
            // Acknowledged on write: a process crash keeps it.
            self.acked_len = self.len;
            self.acked_events = self.events;
        }
        Ok(self.acked_events)
    }

    fn sync(&mut self) -> Result<u64> {
        self.check()?;
        self.restore_pending()?;
        if self.synced_len != self.len {
            self.fsync()?;
        }
        Ok(self.acked_events)
    }

    fn durable_events(&self) -> u64 {
        self.acked_events
    }

    fn delete(self: Box<Self>) -> Result<()> {
        let JsonlWriter {
            backend,
            path,
            file,
            ..
        } = *self;
        backend.remove_session(&path, file)
    }
}
