//! The PostgreSQL store behind [`Backend`]: sessions read in one
//! `REPEATABLE READ` transaction each and classified by the shared scan of
//! stores of rows (`backend::rows::scan`), so the commit point, closers,
//! torn-tail and corruption rules are the SQLite store's, decided by the
//! same code.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::epoch::{self, Lease};
use super::lease::{Keeper, PgOptions};
use super::shared::{
    SessionRow, Shared, decode_session, delete_session, encode, quarantine_path, read_session,
};
use super::writer::PgWriter;
use super::{connect_only, location_of, pg_error};
use crate::backend::rows::scan;
use crate::backend::{Backend, LogWriter, Stored};
use crate::contract::{Placement, Policy};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::header::SessionHeader;
use crate::scan::{Salvage, Scan, SessionSummary};

/// A store of sessions in a PostgreSQL database (docs/POSTGRES.md).
///
/// Cloning is cheap; clones share the store's connections: each operation
/// takes an idle one or opens another, and gives it back when done (at
/// most [`super::shared::IDLE_CONNECTIONS`] are kept), so operations on different
/// sessions run at once. Every writer holds its session through the
/// database's writer epoch and a lease ([`epoch`]) that the store renews
/// while the writer is open: opening a session another writer holds live
/// is refused ([`Error::Leased`]) until its lease runs out, or taken on
/// purpose ([`Backend::open_stealing`]); the writer it was taken from is
/// refused from its next append with [`Error::Superseded`].
#[derive(Clone)]
pub struct PgBackend {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for PgBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgBackend")
            .field("location", &self.shared.location)
            .finish_non_exhaustive()
    }
}

impl PgBackend {
    /// Connects to the database at `url` (`postgres://…`, `postgresql://…`,
    /// or key=value pairs; a `host` that is a directory is a Unix socket),
    /// checking turnwal's schema or creating it ([`super::ensure_schema`]),
    /// with [`PgOptions::from_env`] (the lease `TURNWAL_LEASE` names).
    pub fn open(url: &str) -> Result<PgBackend> {
        PgBackend::open_with_options(url, PgOptions::from_env()?)
    }

    /// [`PgBackend::open`] with the given
    /// [`super::IDLE_IN_TRANSACTION_TIMEOUT`].
    pub fn open_with(url: &str, idle_in_transaction: Duration) -> Result<PgBackend> {
        PgBackend::open_with_options(
            url,
            PgOptions::from_env()?.with_idle_in_transaction(idle_in_transaction),
        )
    }

    /// [`PgBackend::open`] with the given options (no environment read).
    pub fn open_with_options(url: &str, options: PgOptions) -> Result<PgBackend> {
        let location = location_of(url);
        let mut client = connect_only(url, options.idle_in_transaction())?;
        let store_id = super::ensure_schema(&mut client, &location)?;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "unknown-host".into());
        let holder = format!(
            "{host} pid {} writer {:08x}",
            std::process::id(),
            super::schema::random_u64() as u32
        );
        Ok(PgBackend {
            shared: Arc::new(Shared {
                url: url.to_owned(),
                path: PathBuf::from(&location),
                keeper: Keeper::new(url, &location, options),
                location,
                store_id,
                options,
                idle: crate::sync::Table::new(vec![client]),
                holder,
            }),
        })
    }

    /// The options the store was opened with.
    pub fn options(&self) -> PgOptions {
        self.shared.options
    }

    /// How many lease renewals this store has sent (one statement renews
    /// every lease due at once).
    pub fn lease_renewals(&self) -> u64 {
        self.shared.keeper.statements()
    }

    /// Opens a writer of `id`, taking it as `lease` says.
    fn open_writer(&self, id: &str, lease: Lease) -> Result<Option<Box<dyn LogWriter>>> {
        let taken_at = std::time::Instant::now();
        let hold = {
            let mut client = self.shared.client()?;
            epoch::take(
                &mut client,
                &self.shared.location,
                id,
                &self.shared.holder,
                lease,
            )?
        };
        Ok(hold.map(|hold| {
            Box::new(PgWriter::new(
                self.shared.clone(),
                id.to_owned(),
                hold,
                taken_at,
            )) as Box<dyn LogWriter>
        }))
    }

    /// The store's id (random, written when turnwal created the schema).
    pub fn store_id(&self) -> &str {
        &self.shared.store_id
    }

    /// How this backend's writers name themselves to other hosts
    /// (`<hostname> pid <pid> writer <random>`), as [`Error::Superseded`]
    /// reports the holder.
    pub fn holder(&self) -> &str {
        &self.shared.holder
    }

    /// The stored prefix of session `id` as storage records, read in one
    /// snapshot and classified exactly as [`Backend::load`] does, the
    /// packed rows before the last `turn/end` handed over as stored (the
    /// SQLite store's `stored_records`, which the Node binding's
    /// `loadStored` passes to the harness without decoding them); `None`
    /// when the session does not exist.
    pub fn stored_records(&self, id: &str) -> Result<Option<crate::backend::rows::StoredRows>> {
        let path = &self.shared.path;
        self.shared.read(|tx| {
            let Some(row) = read_session(tx, path, id)? else {
                return Ok(None);
            };
            let revision = self.shared.revision_of(&row);
            let (c, items) = scan::full_scan_items(&row.rows(tx, path))?;
            Ok(Some(crate::backend::rows::StoredRows::of(
                c, items, revision,
            )))
        })
    }

    fn session(&self, id: &str) -> Result<Option<SessionRow>> {
        self.shared
            .read(|tx| read_session(tx, &self.shared.path, id))
    }
}

impl Backend for PgBackend {
    fn location(&self) -> String {
        self.shared.location.clone()
    }

    /// A connection of the follower's own, listening for the writers'
    /// notifications (`pg_notify` in every write's transaction).
    fn watch(&self, id: Option<&str>) -> Result<Box<dyn crate::storage::watch::Watch>> {
        Ok(Box::new(super::listen::Listen::new(
            &self.shared.url,
            self.shared.options.idle_in_transaction(),
            id,
        )?))
    }

    /// The session row's incarnation, drawn when it is created.
    fn incarnation(&self, revision: &str) -> Option<String> {
        crate::backend::rows::incarnation_of(revision)
    }

    /// One query for the whole listing: every session row with its rows
    /// from its last `turn/end` row on (all of them when it has none) and
    /// its bytes; each session classified from them by the shared scan,
    /// which asks the database only about a session that needs more (a
    /// commit row that does not decode, a span that must be read whole).
    fn list(&self) -> Result<Vec<SessionSummary>> {
        let path = &self.shared.path;
        self.shared.read(|tx| {
            // The planner's estimates for this query are far above what it
            // costs, so it would be JIT-compiled: 150 ms of compiling for a
            // query that runs in about as much.
            tx.batch_execute("SET LOCAL jit = off")
                .map_err(|e| pg_error("read sessions", &self.shared.location, e))?;
            let rows = tx
                .query(
                    "SELECT s.session_id, s.header, s.policy, s.incarnation, s.revision, \
                     s.next_seq, s.data_bytes, c.start, \
                     e.seq, e.type, e.time, e.data, e.source_event_seqs, e.surface_op, e.ignorable \
                     FROM turnwal_sessions s \
                     LEFT JOIN LATERAL (SELECT max(seq) AS start FROM turnwal_events \
                       WHERE session_id = s.session_id AND type = 'turn/end' \
                       AND ignorable IS DISTINCT FROM false) c ON true \
                     LEFT JOIN LATERAL (SELECT * FROM turnwal_events \
                       WHERE session_id = s.session_id \
                       AND seq >= coalesce(c.start, -9223372036854775808) ORDER BY seq) e ON true \
                     ORDER BY s.session_id, e.seq",
                    &[],
                )
                .map_err(|e| pg_error("read sessions", &self.shared.location, e))?;
            let mut out = Vec::new();
            let mut i = 0;
            while i < rows.len() {
                let id: String = rows[i].get(0);
                let end = rows[i..]
                    .iter()
                    .position(|r| r.get::<_, String>(0) != id)
                    .map_or(rows.len(), |n| i + n);
                let group = &rows[i..end];
                i = end;
                let session = match decode_session(path, &group[0]) {
                    Ok(session) => session,
                    Err(e) => {
                        out.push(SessionSummary::corrupt(id, 0, e.to_string()));
                        continue;
                    }
                };
                let held: Vec<_> = group
                    .iter()
                    .filter(|r| r.get::<_, Option<i64>>(8).is_some())
                    .map(|r| super::rows::row_in_at(r, 8))
                    .collect();
                let prefetched = super::rows::Prefetched {
                    real: session.rows(tx, path),
                    start: group[0].get(7),
                    rows: held,
                };
                out.push(scan::summarize(&prefetched));
            }
            Ok(out)
        })
    }

    fn summary(&self, id: &str) -> Result<Option<SessionSummary>> {
        let path = &self.shared.path;
        self.shared.read(|tx| {
            Ok(read_session(tx, path, id)?.map(|row| scan::summarize(&row.rows(tx, path))))
        })
    }

    fn end_hint(&self, id: &str) -> Result<Option<u64>> {
        // The last row by the primary key: a packed row's seq is its first
        // member's, so this can fall short of the end by a run.
        let last: Option<i64> = self.shared.read(|tx| {
            tx.query_one(
                "SELECT max(seq) FROM turnwal_events WHERE session_id = $1",
                &[&id],
            )
            .map(|r| r.get(0))
            .map_err(|e| pg_error("read events", &self.shared.location, e))
        })?;
        Ok(last
            .and_then(|seq| u64::try_from(seq).ok())
            .map(|seq| seq + 1))
    }

    fn exists(&self, id: &str) -> Result<bool> {
        self.shared.read(|tx| {
            tx.query_opt(
                "SELECT 1 FROM turnwal_sessions WHERE session_id = $1",
                &[&id],
            )
            .map(|r| r.is_some())
            .map_err(|e| pg_error("read session", &self.shared.location, e))
        })
    }

    fn revision(&self, id: &str) -> Result<Option<String>> {
        Ok(self.session(id)?.map(|row| self.shared.revision_of(&row)))
    }

    fn scan(&self, id: &str) -> Result<Option<Scan>> {
        Ok(self.load(id)?.map(|stored| stored.scan))
    }

    fn read(&self, id: &str) -> Result<Option<crate::view::LogReader>> {
        let path = &self.shared.path;
        let shared = self.shared.clone();
        let session = id.to_owned();
        // Each page of rows in a read transaction of its own, on a
        // connection lent for it.
        let fetch: crate::backend::rows::cursor::Fetch = Box::new(move |lo, hi, limit| {
            let path = &shared.path;
            shared.read(|tx| {
                let row = read_session(tx, path, &session)?.ok_or_else(|| Error::NotFound {
                    id: session.clone(),
                })?;
                crate::backend::rows::scan::Rows::page(&row.rows(tx, path), lo, hi, limit)
            })
        });
        self.shared.read(|tx| {
            let Some(row) = read_session(tx, path, id)? else {
                return Ok(None);
            };
            crate::backend::rows::cursor::reader(&row.rows(tx, path), fetch).map(Some)
        })
    }

    fn load(&self, id: &str) -> Result<Option<Stored>> {
        let path = &self.shared.path;
        self.shared.read(|tx| {
            let Some(row) = read_session(tx, path, id)? else {
                return Ok(None);
            };
            let c = scan::full_scan(&row.rows(tx, path))?;
            Ok(Some(Stored {
                scan: c.scan,
                events: c.events,
            }))
        })
    }

    fn salvage(&self, id: &str) -> Result<Option<Salvage>> {
        let path = &self.shared.path;
        self.shared.read(|tx| {
            let Some(row) = read_session(tx, path, id)? else {
                return Ok(None);
            };
            scan::salvage(&row.rows(tx, path)).map(Some)
        })
    }

    fn header(&self, id: &str) -> Result<Option<SessionHeader>> {
        Ok(self.session(id)?.map(|row| row.header))
    }

    fn policy(&self, id: &str) -> Result<Option<Policy>> {
        Ok(self.session(id)?.map(|row| row.policy))
    }

    fn read_first(&self, id: &str, n: usize) -> Result<Option<Vec<Event>>> {
        self.shared
            .read_events(id, |rows| scan::read_first(rows, n))
    }

    fn read_from(&self, id: &str, from_seq: u64) -> Result<Option<Vec<Event>>> {
        self.shared
            .read_events(id, |rows| scan::read_from(rows, from_seq))
    }

    fn admit_header(&self, header: SessionHeader) -> Result<SessionHeader> {
        refuse_nul(&self.shared.path, &header)?;
        Ok(header)
    }

    fn create(
        &self,
        header: &SessionHeader,
        policy: Policy,
        batch: &[Event],
        _placements: &[Placement],
    ) -> Result<Box<dyn LogWriter>> {
        refuse_nul(&self.shared.path, header)?;
        if batch.first().is_some_and(|e| e.seq() != 0) {
            return Err(Error::SeqMismatch {
                id: header.id.clone(),
                expected: 0,
                got: batch[0].seq(),
            });
        }
        let rows = encode(batch)?;
        let taken_at = std::time::Instant::now();
        let hold = {
            let mut client = self.shared.client()?;
            epoch::create(
                &mut client,
                &self.shared.location,
                &header.id,
                &header.to_json(),
                &policy.to_string(),
                &self.shared.holder,
                self.shared.options.lease(),
                &rows,
            )?
        };
        Ok(Box::new(PgWriter::new(
            self.shared.clone(),
            header.id.clone(),
            hold,
            taken_at,
        )))
    }

    /// Takes the session unless another writer's lease is live
    /// ([`Error::Leased`]).
    fn open(&self, id: &str) -> Result<Option<Box<dyn LogWriter>>> {
        self.open_writer(id, Lease::of(self.shared.options.lease()))
    }

    /// Takes the session even from a live lease: its holder is refused
    /// from its next batch ([`Error::Superseded`]).
    fn open_stealing(&self, id: &str) -> Result<Option<Box<dyn LogWriter>>> {
        self.open_writer(id, Lease::stealing(self.shared.options.lease()))
    }

    fn holders(&self, ids: &[String]) -> Result<Vec<Option<crate::backend::Holder>>> {
        let held: HashMap<String, crate::backend::Holder> = self.shared.read(|tx| {
            let rows = tx
                .query(
                    "SELECT session_id, writer_holder, writer_epoch, \
                       (extract(epoch FROM writer_lease_until - now()) * 1000)::bigint \
                     FROM turnwal_sessions WHERE session_id = ANY($1) \
                       AND writer_lease_until > now()",
                    &[&ids],
                )
                .map_err(|e| pg_error("read sessions", &self.shared.location, e))?;
            Ok(rows
                .iter()
                .filter_map(|r| match epoch::holder_in(r, 1) {
                    epoch::Holder::Leased {
                        holder,
                        epoch,
                        expires_in,
                    } => Some((
                        r.get::<_, String>(0),
                        crate::backend::Holder {
                            who: holder,
                            pid: None,
                            epoch: Some(epoch),
                            lease_expires_in: Some(expires_in),
                        },
                    )),
                    epoch::Holder::Free => None,
                })
                .collect())
        })?;
        Ok(ids.iter().map(|id| held.get(id).cloned()).collect())
    }

    fn delete_if(
        &self,
        id: &str,
        check: &mut dyn FnMut(&SessionSummary) -> bool,
    ) -> Result<super::super::Deletion> {
        use super::super::Deletion;
        let path = &self.shared.path;
        let location = &self.shared.location;
        self.shared.write(|tx| {
            // The session row locked first: every append and repair updates
            // it in its own transaction, so none commits between this read
            // and the delete (one waiting on the lock finds the session
            // gone and is refused, acknowledging nothing).
            let locked = tx
                .query_opt(
                    "SELECT 1 FROM turnwal_sessions WHERE session_id = $1 FOR UPDATE",
                    &[&id],
                )
                .map_err(|e| pg_error("lock session", location, e))?;
            if locked.is_none() {
                return Ok(Deletion::NotFound);
            }
            // A session a live writer holds is that writer's to change.
            let holder = tx
                .query_one(
                    "SELECT writer_holder, writer_epoch, \
                       (extract(epoch FROM writer_lease_until - now()) * 1000)::bigint \
                     FROM turnwal_sessions WHERE session_id = $1",
                    &[&id],
                )
                .map_err(|e| pg_error("lock session", location, e))?;
            if let epoch::Holder::Leased {
                holder,
                epoch,
                expires_in,
            } = epoch::holder_in(&holder, 0)
            {
                return Err(Error::Leased {
                    id: id.to_owned(),
                    location: path.clone(),
                    holder,
                    epoch,
                    expires_in,
                });
            }
            let Some(row) = read_session(tx, path, id)? else {
                return Ok(Deletion::NotFound);
            };
            let summary = scan::summarize(&row.rows(tx, path));
            if !check(&summary) {
                return Ok(Deletion::Kept(summary));
            }
            Ok(if delete_session(tx, location, id)? {
                Deletion::Deleted(summary)
            } else {
                Deletion::NotFound
            })
        })
    }

    fn quarantined(&self) -> Result<Vec<PathBuf>> {
        self.shared.read(|tx| {
            let rows = tx
                .query(
                    "SELECT session_id, revision FROM turnwal_quarantine ORDER BY 1, 2",
                    &[],
                )
                .map_err(|e| pg_error("read quarantine", &self.shared.location, e))?;
            Ok(rows
                .iter()
                .map(|r| quarantine_path(&self.shared.location, r.get(0), r.get(1)))
                .collect())
        })
    }

    fn stored_records(
        &self,
        id: &str,
    ) -> Option<Result<Option<Box<dyn crate::backend::StoredLog>>>> {
        Some(
            PgBackend::stored_records(self, id)
                .map(|s| s.map(|s| Box::new(s) as Box<dyn crate::backend::StoredLog>)),
        )
    }
}

/// PostgreSQL's `text` cannot hold NUL: an id or header field holding one
/// is refused before anything is stored (the header's JSON escapes it,
/// but the `session_id` column holds the id itself).
fn refuse_nul(location: &Path, header: &SessionHeader) -> Result<()> {
    match header.strings().find(|(_, value)| value.contains('\0')) {
        None => Ok(()),
        Some((key, _)) => Err(Error::Unsupported {
            path: location.to_owned(),
            detail: format!(
                "session header field {key} holds a NUL character, which PostgreSQL's text \
                 cannot hold: keep this session in a WAL, SQLite or JSONL store"
            ),
        }),
    }
}
