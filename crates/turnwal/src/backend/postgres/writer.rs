//! The writer of one session in a PostgreSQL store: every append and
//! every repair is one transaction conditional on the writer's epoch and
//! the stored next seq ([`epoch::claim`]), committed synchronously.

use std::path::PathBuf;
use std::sync::Arc;

use super::epoch::{self, Hold};
use super::pg_error;
use super::shared::{Shared, delete_session, encode, quarantine_path, read_session};
use crate::backend::rows::scan::{self, Classified};
use crate::backend::{LogWriter, SyncMode};
use crate::contract::Placement;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::scan::{CutReason, Scan};

/// How much of a session a writer's scan reads.
#[derive(Debug, Clone, Copy)]
enum Read {
    /// From the commit row on.
    Tail,
    /// Every row.
    Full,
    /// Every row, cutting a damaged committed row (`recover --salvage`).
    Salvage,
}

/// Session `id`'s row, which must still be `hold`'s incarnation (a
/// session deleted and created again is not the writer's).
fn own_row(
    tx: &mut postgres::Transaction<'_>,
    path: &std::path::Path,
    id: &str,
    hold: &Hold,
) -> Result<super::shared::SessionRow> {
    read_session(tx, path, id)?
        .filter(|row| row.incarnation == hold.incarnation)
        .ok_or_else(|| Error::NotFound { id: id.to_owned() })
}

/// Writes one session.
pub(super) struct PgWriter {
    shared: Arc<Shared>,
    id: String,
    hold: Hold,
}

impl PgWriter {
    /// The writer of `id`, holding `hold`, whose lease was extended at
    /// `extended`: its store renews the lease from now on.
    pub(super) fn new(
        shared: Arc<Shared>,
        id: String,
        hold: Hold,
        extended: std::time::Instant,
    ) -> PgWriter {
        shared.keeper.hold(&id, &hold, extended);
        PgWriter { shared, id, hold }
    }

    fn next_seq(&self) -> u64 {
        u64::try_from(self.hold.next_seq).unwrap_or(0)
    }

    /// The session as stored now, which must still be this writer's
    /// incarnation, and where the session row says its events end: read
    /// whole (`full`, or a salvage read), else from its commit row on.
    fn classify(&self, how: Read) -> Result<(Classified, i64)> {
        let path = &self.shared.path;
        self.shared.read(|tx| {
            let row = own_row(tx, path, &self.id, &self.hold)?;
            let rows = row.rows(tx, path);
            let c = match how {
                Read::Tail => scan::tail_scan(&rows)?,
                Read::Full => scan::full_scan_for(&rows, false)?,
                Read::Salvage => scan::full_scan_for(&rows, true)?,
            };
            Ok((c, row.next_seq))
        })
    }

    /// Classifies the session; when it needs no repair but its rows end
    /// elsewhere than the session row's `next_seq` says (rows deleted or
    /// added outside turnwal: turnwal's own transactions keep the two
    /// together), sets `next_seq` to where the rows end, under this
    /// writer's epoch, so that appends continue the log the scan found.
    /// The log and its revision are untouched.
    fn scan_for(&mut self, how: Read) -> Result<Scan> {
        let (c, stored_next) = self.classify(how)?;
        let rows_end = c.scan.stored_len() as i64;
        if !c.scan.needs_repair() && rows_end != stored_next {
            // Under this writer's epoch, and only from the value read: a
            // writer that lost the session changes nothing here, and
            // hears of it at its next append.
            let (location, id, hold) = (&self.shared.location, &self.id, &self.hold);
            self.shared.write(|tx| {
                tx.execute(
                    "UPDATE turnwal_sessions SET next_seq = $5 WHERE session_id = $1 \
                     AND incarnation = $2 AND writer_epoch = $3 AND next_seq = $4",
                    &[id, &hold.incarnation, &hold.epoch, &stored_next, &rows_end],
                )
                .map_err(|e| pg_error("scan", location, e))
                .map(drop)
            })?;
        }
        if !c.scan.needs_repair() {
            self.hold.next_seq = rows_end;
        } else {
            self.hold.next_seq = stored_next;
        }
        Ok(c.scan)
    }

    /// After a failed commit: whether the change that would have moved
    /// the session's end to `end` committed (the connection was lost
    /// after the server committed it), read on a working connection (the
    /// broken one is not lent again). `false`
    /// when it did not or it cannot be told.
    fn committed(&mut self, end: i64) -> bool {
        let Ok(mut client) = self.shared.client() else {
            return false;
        };
        match epoch::current(&mut client, &self.shared.location, &self.id) {
            Ok(Some(now))
                if now.incarnation == self.hold.incarnation
                    && now.epoch == self.hold.epoch
                    && now.next_seq == end =>
            {
                self.hold.revision = now.revision;
                true
            }
            _ => false,
        }
    }
}

impl LogWriter for PgWriter {
    /// From the commit row on: a writer's open costs the same whatever
    /// the session's length.
    fn scan(&mut self) -> Result<Scan> {
        self.scan_for(Read::Tail)
    }

    fn scan_full(&mut self) -> Result<Scan> {
        self.scan_for(Read::Full)
    }

    fn salvage_scan(&mut self) -> Result<Scan> {
        self.scan_for(Read::Salvage)
    }

    fn read_from(&mut self, from_seq: u64) -> Result<Vec<Event>> {
        let path = &self.shared.path;
        self.shared.read(|tx| {
            let row = own_row(tx, path, &self.id, &self.hold)?;
            scan::read_from(&row.rows(tx, path), from_seq)
        })
    }

    /// One transaction, conditional on this writer's epoch: checks the
    /// session still scans to what `scan` found, keeps the rows the cut
    /// removes in `turnwal_quarantine` (their columns, one JSON object a
    /// line, as the SQLite store's quarantine files hold them), deletes
    /// them, inserts the kept events of a packed row the cut starts inside
    /// and the closers, and sets the stored next seq.
    fn repair(&mut self, scan: &Scan) -> Result<Option<PathBuf>> {
        if !scan.needs_repair() {
            return Ok(None);
        }
        let closers = encode(&scan.closers)?;
        let salvage = scan
            .cut
            .as_ref()
            .is_some_and(|c| c.reason == CutReason::Damaged);
        let end = (scan.stored_len() + scan.closers.len() as u64) as i64;
        let shared = self.shared.clone();
        let (id, hold) = (self.id.clone(), self.hold.clone());
        let location = shared.location.clone();
        let path = shared.path.clone();
        let result = shared.write(|tx| {
            let row = own_row(tx, &path, &id, &hold)?;
            let now = scan::full_scan_for(&row.rows(tx, &path), salvage)?;
            scan::check_unchanged(&id, &now.scan, scan)?;
            // Claimed from where the session row says the log ends (which
            // differs from the rows' end when they were damaged).
            let claimed = Hold {
                next_seq: row.next_seq,
                ..hold.clone()
            };
            let revision = epoch::claim(tx, &location, &id, &claimed, end, 0)?;
            let mut kept = None;
            if let (Some(plan), Some(cut)) = (&now.plan, &now.scan.cut) {
                let cut_rows = scan::cut_rows(&row.rows(tx, &path), plan)?;
                tx.execute(
                    "INSERT INTO turnwal_quarantine (session_id, revision, seq, cut_at, detail, rows) \
                     VALUES ($1, $2, $3, now(), $4, $5)",
                    &[
                        &id,
                        &revision,
                        &(cut.seq as i64),
                        &cut.problem("row"),
                        &String::from_utf8_lossy(&cut_rows).into_owned(),
                    ],
                )
                .map_err(|e| pg_error("quarantine", &location, e))?;
                tx.execute(
                    "DELETE FROM turnwal_events WHERE session_id = $1 AND seq >= $2",
                    &[&id, &plan.delete_from],
                )
                .map_err(|e| pg_error("delete events", &location, e))?;
                epoch::insert_rows(tx, &location, &id, &encode(&plan.reinsert)?)?;
                kept = Some(quarantine_path(&location, &id, revision));
            }
            epoch::insert_rows(tx, &location, &id, &closers)?;
            // The rows changed: count their bytes again.
            tx.execute(
                "UPDATE turnwal_sessions SET data_bytes = (SELECT coalesce(sum(octet_length(data)), 0) \
                 FROM turnwal_events WHERE session_id = $1) WHERE session_id = $1",
                &[&id],
            )
            .map_err(|e| pg_error("repair", &location, e))?;
            Ok((revision, kept))
        });
        let (revision, kept) = match result {
            Ok(done) => done,
            Err(e @ Error::Io { .. }) if self.committed(end) => {
                // Committed, then the connection was lost: the repair
                // stands (its quarantine row is in the table).
                let _ = e;
                (self.hold.revision, None)
            }
            Err(e) => return Err(e),
        };
        self.hold.next_seq = end;
        self.hold.revision = revision;
        Ok(kept)
    }

    /// One transaction, conditional on this writer's epoch and the stored
    /// next seq; acknowledged when it commits. A connection lost at the
    /// commit is resolved on a new connection: the batch is acknowledged
    /// when it committed, refused when it did not.
    fn append(&mut self, batch: &[Event], _: &[Placement], _: SyncMode) -> Result<u64> {
        let Some(first) = batch.first() else {
            return Ok(self.next_seq());
        };
        if first.seq() != self.next_seq() {
            return Err(Error::SeqMismatch {
                id: self.id.clone(),
                expected: self.next_seq(),
                got: first.seq(),
            });
        }
        let rows = encode(batch)?;
        let end = self.hold.next_seq + epoch::Row::events(&rows);
        let started = std::time::Instant::now();
        // A connection the server dropped (a restart, a failover) fails the
        // first operation on it: the batch is tried once more on a new
        // connection when it did not commit. Safe whatever happened: the
        // claim is conditional on the stored next seq, so a batch that did
        // commit can never go in twice.
        let mut retried = false;
        loop {
            let result = {
                let mut client = self.shared.client()?;
                let mut hold = self.hold.clone();
                epoch::append(
                    &mut client,
                    &self.shared.location,
                    &self.id,
                    &mut hold,
                    &rows,
                )
                .map(|()| hold)
            };
            match result {
                Ok(hold) => self.hold = hold,
                Err(e @ Error::Io { .. }) => {
                    if !self.committed(end) {
                        if !retried {
                            retried = true;
                            continue;
                        }
                        return Err(e);
                    }
                    self.hold.next_seq = end;
                }
                Err(e) => return Err(e),
            }
            break;
        }
        // The batch's claim extended the lease.
        self.shared
            .keeper
            .extended(&self.id, self.hold.epoch, started);
        Ok(self.next_seq())
    }

    fn sync(&mut self) -> Result<u64> {
        Ok(self.next_seq())
    }

    fn durable_events(&self) -> u64 {
        self.next_seq()
    }

    /// Deletes the session, when this writer still holds it.
    fn delete(self: Box<Self>) -> Result<()> {
        let location = self.shared.location.clone();
        self.shared.write(|tx| {
            let claimed = epoch::claim(tx, &location, &self.id, &self.hold, self.hold.next_seq, 0);
            claimed?;
            delete_session(tx, &location, &self.id).map(drop)
        })
    }
}

impl Drop for PgWriter {
    /// Lets the session go: its lease is no longer renewed and is ended
    /// at once, so another host may take the session without waiting for
    /// it to run out. Best effort: a lease that cannot be ended here (the
    /// server unreachable) runs out by itself.
    fn drop(&mut self) {
        self.shared.keeper.let_go(&self.id, self.hold.epoch);
        if let Ok(mut client) = self.shared.client() {
            let _ = epoch::release(&mut client, &self.shared.location, &self.id, &self.hold);
        }
    }
}
