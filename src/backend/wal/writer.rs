//! The exclusive writer of one session file.

use std::path::PathBuf;
use std::sync::Arc;

use super::format;
use super::scan::{Classified, decode_at, heads, scan_log};
use super::storage::{LockGuard, Storage, StorageFile};
use crate::backend::{LogWriter, SyncMode};
use crate::contract::Placement;
use crate::error::{Error, Result};
use crate::event::{Event, EventError, EventKind};
use crate::scan::Scan;

/// In `turn` mode, force an fdatasync once this many bytes are unsynced, so
/// a turn that never ends cannot grow memory without bound.
pub const MAX_UNSYNCED_BYTES: usize = 64 << 20;

/// Writes one session file. Invariant: the file holds the acknowledged
/// bytes `[0, acked_len)` followed by the first `written_len - acked_len`
/// bytes of `pending`; `pending` holds every accepted, unacknowledged event,
/// encoded, so a failed write or fdatasync can be retried from memory.
#[derive(Debug)]
pub struct WalWriter {
    id: String,
    path: PathBuf,
    storage: Arc<dyn Storage>,
    file: Box<dyn StorageFile>,
    lock_path: PathBuf,
    _lock: Box<dyn LockGuard>,
    salt: u32,
    /// fdatasync has returned for `[0, synced_len)`; new records carry it as
    /// their watermark.
    synced_len: u64,
    acked_len: u64,
    acked_events: u64,
    written_len: u64,
    pending: Vec<u8>,
    pending_events: u64,
    poisoned: Option<String>,
}

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
        salt: u32,
        durable_len: u64,
        durable_events: u64,
    ) -> WalWriter {
        WalWriter {
            id,
            path,
            storage,
            file,
            lock_path,
            _lock: lock,
            salt,
            synced_len: durable_len,
            acked_len: durable_len,
            acked_events: durable_events,
            written_len: durable_len,
            pending: Vec::new(),
            pending_events: 0,
            poisoned: None,
        }
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

    fn classify(&self) -> Result<Classified> {
        let map = self.file.map().map_err(|e| self.io("map", e))?;
        scan_log(&map, &self.path)
    }

    /// Writes what of `pending` is not in the file yet, then (if asked)
    /// fdatasyncs; acknowledges on success. On failure the file goes back to
    /// `acked_len` and `pending` is kept for a retry.
    fn flush_pending(&mut self, sync: bool, ack_on_write: bool) -> Result<()> {
        let written = (self.written_len - self.acked_len) as usize;
        if written < self.pending.len() {
            if let Err(e) = self
                .file
                .write_all_at(&self.pending[written..], self.written_len)
            {
                let err = self.io("write", e);
                self.roll_back(&err);
                return Err(err);
            }
            self.written_len = self.acked_len + self.pending.len() as u64;
        }
        if sync && self.synced_len < self.written_len {
            if let Err(e) = self.file.sync_data() {
                // Linux may have dropped the failed pages and marked them clean:
                // never trust a second fdatasync; rewrite from memory instead.
                let err = self.io("fdatasync", e);
                self.roll_back(&err);
                return Err(err);
            }
            self.synced_len = self.written_len;
        }
        if sync || ack_on_write {
            self.acked_len = self.written_len;
            self.acked_events += self.pending_events;
            self.pending.clear();
            self.pending_events = 0;
        }
        Ok(())
    }

    fn roll_back(&mut self, cause: &Error) {
        match self.file.set_len(self.acked_len) {
            Ok(()) => self.written_len = self.acked_len,
            Err(e) => {
                self.poisoned = Some(format!(
                    "{cause}; rollback to byte {} failed: {e}",
                    self.acked_len
                ));
            }
        }
    }
}

/// Decodes the kept records with seq >= `from_seq`.
pub(super) fn decode_kept(
    bytes: &[u8],
    classified: &Classified,
    from_seq: u64,
    path: &std::path::Path,
) -> Result<Vec<Event>> {
    let kept = classified.scan.stored_len();
    let mut events = Vec::with_capacity(kept.saturating_sub(from_seq) as usize);
    let start = classified.frames.file.records_start;
    for (at, head) in heads(bytes, start, classified.kept_end) {
        if head.seq >= from_seq {
            events.push(decode_at(bytes, at, &head, path)?);
        }
    }
    Ok(events)
}

impl LogWriter for WalWriter {
    fn scan(&mut self) -> Result<Scan> {
        let scan = self.classify()?.scan;
        if self.pending.is_empty() && !scan.needs_repair() {
            self.acked_events = scan.stored_len();
        }
        Ok(scan)
    }

    fn read_from(&mut self, from_seq: u64) -> Result<Vec<Event>> {
        let map = self.file.map().map_err(|e| self.io("map", e))?;
        let classified = scan_log(&map, &self.path)?;
        decode_kept(&map, &classified, from_seq, &self.path)
    }

    fn repair(&mut self, scan: &Scan) -> Result<()> {
        self.check_poison()?;
        let placements = closer_placements(scan)?;
        let kept_end = match &scan.cut {
            Some(cut) => cut.offset,
            None => self.file.len().map_err(|e| self.io("stat", e))?,
        };
        // Cut first, so bytes are only ever written at the end of the file.
        self.file
            .set_len(kept_end)
            .map_err(|e| self.io("truncate", e))?;
        self.file.sync_data().map_err(|e| self.io("fdatasync", e))?;
        let mut bytes = Vec::new();
        for (event, placement) in scan.closers.iter().zip(placements) {
            format::encode_synthetic_record(&mut bytes, event, placement, kept_end, self.salt);
        }
        self.file
            .write_all_at(&bytes, kept_end)
            .map_err(|e| self.io("write", e))?;
        self.file.sync_data().map_err(|e| self.io("fdatasync", e))?;
        let end = kept_end + bytes.len() as u64;
        self.synced_len = end;
        self.acked_len = end;
        self.written_len = end;
        self.acked_events = scan.stored_len() + scan.closers.len() as u64;
        self.pending.clear();
        self.pending_events = 0;
        Ok(())
    }

    fn append(&mut self, batch: &[Event], placements: &[Placement], sync: SyncMode) -> Result<u64> {
        self.check_poison()?;
        for event in batch {
            format::check_limits(event).map_err(|reason| {
                Error::Event(
                    EventError::new(reason)
                        .at_seq(event.seq())
                        .of_type(event.event_type()),
                )
            })?;
        }
        let mark = (self.pending.len(), self.pending_events);
        for (event, placement) in batch.iter().zip(placements) {
            format::encode_record(
                &mut self.pending,
                event,
                *placement,
                self.synced_len,
                self.salt,
            );
        }
        self.pending_events += batch.len() as u64;
        let sync_now = match sync {
            SyncMode::Batch => true,
            SyncMode::Turn => {
                batch.iter().any(|e| e.kind() == EventKind::TurnEnd)
                    || self.pending.len() > MAX_UNSYNCED_BYTES
            }
            SyncMode::Never => false,
        };
        if let Err(e) = self.flush_pending(sync_now, sync == SyncMode::Never) {
            // The failing batch is not accepted; earlier pending events stay.
            self.pending.truncate(mark.0);
            self.pending_events = mark.1;
            return Err(e);
        }
        Ok(self.acked_events)
    }

    fn sync(&mut self) -> Result<u64> {
        self.check_poison()?;
        self.flush_pending(true, false)?;
        Ok(self.acked_events)
    }

    fn durable_events(&self) -> u64 {
        self.acked_events
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
