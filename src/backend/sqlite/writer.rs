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

use std::sync::Arc;

use super::lock::WriterLock;
use super::scan::{self, Classified};
use super::{SessionRow, Shared, bump_revision, codec, delete_session, encode, insert_rows};
use crate::backend::{LogWriter, SyncMode};
use crate::contract::Placement;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::header::SessionHeader;
use crate::scan::Scan;

/// Writes one session.
#[derive(Debug)]
pub(super) struct SqliteWriter {
    shared: Arc<Shared>,
    lock: WriterLock,
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
            lock,
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

    fn classify(&self) -> Result<Classified> {
        let path = &self.shared.path;
        self.shared.conn().read(path, |conn| {
            let row = self.own_row(conn)?;
            scan::full_scan(conn, path, &row)
        })
    }
}

impl LogWriter for SqliteWriter {
    fn scan(&mut self) -> Result<Scan> {
        let c = self.classify()?;
        self.next_seq = c.scan.stored_len();
        Ok(c.scan)
    }

    fn read_from(&mut self, from_seq: u64) -> Result<Vec<Event>> {
        let path = &self.shared.path;
        self.shared.conn().read(path, |conn| {
            let row = self.own_row(conn)?;
            scan::read_from(conn, path, &row, from_seq)
        })
    }

    /// Deletes the torn rows and inserts the closers in one transaction,
    /// after checking the session still scans to what `scan` found: the
    /// same kept events and the same closers. A repair whose tail changed
    /// since (another writer repaired or appended) is refused with
    /// [`Error::StaleRepair`] and changes nothing.
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
        self.shared.conn().write(&path, |conn| {
            let row = self.own_row(conn)?;
            let now = scan::full_scan(conn, &path, &row)?;
            // Empty closers with a cut: a cut alone (a live writer that
            // adopts the log continues its open turn).
            if now.scan.stored_len() != scan.stored_len()
                || now.scan.tail != scan.tail
                || (!scan.closers.is_empty() && now.scan.closers != scan.closers)
            {
                return Err(Error::StaleRepair {
                    id: id.clone(),
                    detail: format!(
                        "the stored tail changed since it was scanned (stored next seq is {}; \
                         the repair's closers start at seq {})",
                        now.scan.stored_len(),
                        scan.stored_len()
                    ),
                });
            }
            if let Some(plan) = &now.plan {
                scan::apply_plan(conn, &path, &id, plan)?;
            }
            insert_rows(conn, &path, &id, &closers)?;
            bump_revision(conn, &path, &id)
        })?;
        self.next_seq = scan.stored_len() + scan.closers.len() as u64;
        Ok(None)
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
        self.shared.conn().write(&path, |conn| {
            self.own_row(conn)?;
            let next = scan::stored_next_seq(conn, &path, &id)?;
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
        self.shared.conn().write(&path, |conn| {
            self.own_row(conn)?;
            delete_session(conn, &path, &self.id)
        })?;
        self.lock.remove_file();
        Ok(())
    }
}
