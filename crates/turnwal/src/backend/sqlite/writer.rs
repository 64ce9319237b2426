//! The exclusive writer of one session in a SQLite store.
//!
//! Opening one reads and checks the whole session (its first scan is the
//! full scan), as upstream's adoption of a stored session does, so a session
//! with a corrupt committed row is refused before anything is appended.
//!
//! Every append and every repair is one `BEGIN IMMEDIATE` transaction that
//! re-checks schema ownership, the session's incarnation and the stored
//! tail, and commits under the database's `synchronous` setting (FULL by
//! default: the commit is durable when it returns). So every [`SyncMode`]
//! acknowledges a batch as durable at its commit: `turn` and `batch` get
//! exactly what they ask for, and `never` gets more (docs/SQLITE.md, "Sync
//! modes").

use std::path::PathBuf;
use std::sync::Arc;

use super::lock::WriterLock;
use super::{SessionRow, Shared, bump_revision, codec, delete_session, encode, insert_rows};
use crate::backend::rows::scan::{self, Classified};
use crate::backend::{LogWriter, SyncMode};
use crate::contract::Placement;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::header::SessionHeader;
use crate::quarantine;
use crate::scan::{Cut, CutReason, Scan};

/// Writes one session.
#[derive(Debug)]
pub(super) struct SqliteWriter {
    shared: Arc<Shared>,
    /// Held for the writer's life: dropping it releases the session.
    _lock: WriterLock,
    id: String,
    /// The session's incarnation when this writer took it: a session
    /// deleted and created again under its feet is not its session.
    incarnation: String,
    /// Events stored and committed (all durable).
    next_seq: u64,
}

impl SqliteWriter {
    pub(super) fn new(
        shared: Arc<Shared>,
        lock: WriterLock,
        header: SessionHeader,
        incarnation: String,
        next_seq: u64,
    ) -> SqliteWriter {
        SqliteWriter {
            shared,
            _lock: lock,
            id: header.id.clone(),
            incarnation,
            next_seq,
        }
    }

    /// The session row, which must still be this writer's session.
    fn own_row(&self, conn: &rusqlite::Connection) -> Result<SessionRow> {
        let path = &self.shared.path;
        let row = super::read_session(conn, path, &self.id)?.ok_or_else(|| Error::NotFound {
            id: self.id.clone(),
        })?;
        if row.incarnation != self.incarnation {
            return Err(Error::Poisoned {
                id: self.id.clone(),
                cause: format!(
                    "the session was deleted and created again by another writer (incarnation \
                     {} is now {})",
                    self.incarnation, row.incarnation
                ),
            });
        }
        Ok(row)
    }

    /// Writes the rows `plan` deletes to a durable quarantine file; `None`
    /// for an in-memory database, which has nowhere to keep them.
    fn quarantine(
        &self,
        conn: &rusqlite::Connection,
        cut: &Cut,
        plan: &scan::Plan,
    ) -> Result<Option<PathBuf>> {
        let Some(dir) = self.shared.quarantine_dir() else {
            return Ok(None);
        };
        let row = self.own_row(conn)?;
        let rows = scan::cut_rows(&row.rows(conn, &self.shared.path), plan)?;
        let name = crate::storage::encode_file_name(&self.id);
        let at = quarantine::Placement {
            dir: &dir,
            name: &name,
            offset: cut.offset,
            seq: cut.seq,
            ext: "rows.jsonl",
        };
        quarantine::keep_file(&at, &rows)
            .map(Some)
            .map_err(|e| Error::io("quarantine", &dir, e))
    }

    fn classify(&self, salvage: bool) -> Result<Classified> {
        let path = &self.shared.path;
        self.shared.conn()?.read(path, |conn| {
            let row = self.own_row(conn)?;
            scan::full_scan_for(&row.rows(conn, path), salvage)
        })
    }
}

impl LogWriter for SqliteWriter {
    fn scan(&mut self) -> Result<Scan> {
        let c = self.classify(false)?;
        self.next_seq = c.scan.stored_len();
        Ok(c.scan)
    }

    /// The salvage read: a bad committed row (which [`LogWriter::scan`]
    /// refuses) is cut with every row after it, as
    /// [`crate::scan::CutReason::Damaged`]; the rows before it are kept and an
    /// open final turn among them gets the closers. A session without a bad
    /// committed row scans as [`LogWriter::scan`] scans it.
    fn salvage_scan(&mut self) -> Result<Scan> {
        let c = self.classify(true)?;
        self.next_seq = c.scan.stored_len();
        Ok(c.scan)
    }

    fn read_from(&mut self, from_seq: u64) -> Result<Vec<Event>> {
        let path = &self.shared.path;
        self.shared.conn()?.read(path, |conn| {
            let row = self.own_row(conn)?;
            scan::read_from(&row.rows(conn, path), from_seq)
        })
    }

    /// Deletes the torn rows and inserts the closers in one transaction,
    /// after checking the session still scans to what `scan` found: the
    /// same kept events and the same closers. A repair whose tail changed
    /// since (another writer repaired or appended) is refused with
    /// [`Error::StaleRepair`] and changes nothing. A `Damaged` cut is checked
    /// against the salvage read.
    ///
    /// The rows deleted are first written to a durable quarantine file in
    /// `<database>.turnwal-quarantine/`, inside the transaction and before
    /// its commit (docs/SQLITE.md, "Quarantine"); its path is returned.
    fn repair(&mut self, scan: &Scan) -> Result<Option<std::path::PathBuf>> {
        if !scan.needs_repair() {
            return Ok(None);
        }
        let path = self.shared.path.clone();
        let id = self.id.clone();
        let closers: Vec<codec::RowOut> = scan
            .closers
            .iter()
            .map(codec::scalar_row)
            .collect::<Result<_, _>>()
            .map_err(Error::Event)?;
        let salvage = scan
            .cut
            .as_ref()
            .is_some_and(|c| c.reason == CutReason::Damaged);
        let quarantined = self.shared.conn()?.write(&path, |conn| {
            let row = self.own_row(conn)?;
            let now = scan::full_scan_for(&row.rows(conn, &path), salvage)?;
            scan::check_unchanged(&id, &now.scan, scan)?;
            let mut quarantined = None;
            if let (Some(plan), Some(cut)) = (&now.plan, &now.scan.cut) {
                quarantined = self.quarantine(conn, cut, plan)?;
                super::rows::apply_plan(conn, &path, &id, plan)?;
            }
            insert_rows(conn, &path, &id, &closers)?;
            bump_revision(conn, &path, &id)?;
            Ok(quarantined)
        })?;
        self.next_seq = scan.stored_len() + scan.closers.len() as u64;
        Ok(quarantined)
    }

    /// One transaction: the batch must start at the stored next seq (a
    /// stale writer is refused with "stored next seq is N" and nothing is
    /// written), its rows are inserted (runs of chunks packed within the
    /// batch), the revision bumped. Earlier rows are never touched.
    fn append(&mut self, batch: &[Event], _: &[Placement], _: SyncMode) -> Result<u64> {
        let Some(first) = batch.first() else {
            return Ok(self.next_seq);
        };
        let rows = encode(batch)?;
        let path = self.shared.path.clone();
        let id = self.id.clone();
        self.shared.conn()?.write(&path, |conn| {
            let row = self.own_row(conn)?;
            let next = scan::stored_next_seq(&row.rows(conn, &path))?;
            if first.seq() != next {
                return Err(Error::SeqMismatch {
                    id: id.clone(),
                    expected: next,
                    got: first.seq(),
                });
            }
            insert_rows(conn, &path, &id, &rows)?;
            bump_revision(conn, &path, &id)
        })?;
        self.next_seq = first.seq() + batch.len() as u64;
        Ok(self.next_seq)
    }

    fn sync(&mut self) -> Result<u64> {
        Ok(self.next_seq)
    }

    fn durable_events(&self) -> u64 {
        self.next_seq
    }

    fn delete(self: Box<Self>) -> Result<()> {
        let path = self.shared.path.clone();
        self.shared.conn()?.write(&path, |conn| {
            self.own_row(conn)?;
            delete_session(conn, &path, &self.id)
        })?;
        Ok(())
    }
}
