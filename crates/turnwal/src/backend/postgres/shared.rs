//! What the PostgreSQL store and its writers share: the connections
//! (lent per operation), the renewal thread, who this process is to other
//! hosts, and reading, encoding and deleting a session's rows. Both
//! [`super::store`] and [`super::writer`] build on it; it imports neither.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sync::Table;

use postgres::{Client, IsolationLevel, Transaction};

use super::epoch::Row;
use super::lease::{Keeper, PgOptions};
use super::rows::PgRows;
use super::{connect_only, pg_error};
use crate::backend::rows::codec;
use crate::contract::Policy;
use crate::error::{Corruption, Error, Result};
use crate::event::Event;
use crate::header::{SESSION_FORMAT_VERSION, SessionHeader};

/// What the backend and its writers share.
pub(crate) struct Shared {
    pub(super) url: String,
    /// The connection string without its password.
    pub(crate) location: String,
    pub(crate) path: PathBuf,
    pub(super) store_id: String,
    pub(super) options: PgOptions,
    /// The renewal thread and the leases it keeps.
    pub(crate) keeper: Arc<Keeper>,
    /// Connections not in use, for the next operation (at most
    /// [`IDLE_CONNECTIONS`] are kept).
    pub(super) idle: Table<Vec<Client>>,
    /// Who this process is, as writers name themselves to other hosts.
    pub(crate) holder: String,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.keeper.stop();
    }
}

/// How many idle connections a store keeps for its next operations (more
/// are opened while more operations run at once, and closed after).
pub const IDLE_CONNECTIONS: usize = 8;

/// A connection of the store's, lent to one operation.
pub(crate) struct Pooled<'a> {
    shared: &'a Shared,
    client: Option<Client>,
}

impl std::ops::Deref for Pooled<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("lent until dropped")
    }
}

impl std::ops::DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("lent until dropped")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        // A transaction the operation left open was rolled back when its
        // Transaction dropped. A connection that broke usually means the
        // server went away (a restart, a failover): the idle ones are
        // as dead, and each would fail its next operation once, so they
        // are dropped with it and the next operation connects anew.
        let mut idle = self.shared.idle.lock();
        if client.is_closed() {
            idle.clear();
        } else if idle.len() < IDLE_CONNECTIONS {
            idle.push(client);
        }
    }
}

/// One `turnwal_sessions` row.
#[derive(Debug, Clone)]
pub(crate) struct SessionRow {
    pub header: SessionHeader,
    pub policy: Policy,
    pub incarnation: String,
    pub revision: i64,
    /// Where the session row says its events end.
    pub next_seq: i64,
    /// Bytes of `data` its rows hold, as the session row counts them.
    pub data_bytes: i64,
}

impl SessionRow {
    pub(crate) fn rows<'a, 't>(
        &'a self,
        tx: &'a mut Transaction<'t>,
        location: &'a Path,
    ) -> PgRows<'a, 't> {
        PgRows {
            tx: RefCell::new(tx),
            location,
            header: &self.header,
            policy: self.policy,
            data_bytes: self.data_bytes.max(0) as u64,
        }
    }
}

const SESSION_COLUMNS: &str =
    "session_id, header, policy, incarnation, revision, next_seq, data_bytes";

fn stored_metadata(location: &Path, id: &str, detail: impl std::fmt::Display) -> Error {
    Error::from(Corruption {
        path: location.to_owned(),
        offset: 0,
        unit: crate::error::Unit::Row,
        seq: None,
        reason: format!("invalid stored session metadata of session {id:?}: {detail}"),
    })
}

pub(super) fn decode_session(location: &Path, r: &postgres::Row) -> Result<SessionRow> {
    let id: String = r.get(0);
    let bad = |what: String| stored_metadata(location, &id, what);
    let header =
        SessionHeader::from_json_any_version(r.get(1)).map_err(|e| bad(format!("header: {e}")))?;
    if header.id != id {
        return Err(bad(format!("the header names session {:?}", header.id)));
    }
    if header.version == SESSION_FORMAT_VERSION {
        header.validate().map_err(|e| bad(e.0))?;
    }
    let policy_text: String = r.get(2);
    let policy = match policy_text.as_str() {
        "strict" => Policy::Strict,
        "lenient" => Policy::Lenient,
        "permissive" => Policy::Permissive,
        other => return Err(bad(format!("unknown policy {other:?}"))),
    };
    Ok(SessionRow {
        header,
        policy,
        incarnation: r.get(3),
        revision: r.get(4),
        next_seq: r.get(5),
        data_bytes: r.get(6),
    })
}

/// Reads and checks one session row.
pub(crate) fn read_session(
    tx: &mut Transaction<'_>,
    location: &Path,
    id: &str,
) -> Result<Option<SessionRow>> {
    let row = tx
        .query_typed_opt(
            &format!("SELECT {SESSION_COLUMNS} FROM turnwal_sessions WHERE session_id = $1"),
            &[(&id, postgres::types::Type::TEXT)],
        )
        .map_err(|e| pg_error("read session", &location.to_string_lossy(), e))?;
    row.map(|r| decode_session(location, &r)).transpose()
}

/// The rows of a batch, its events checked against the row limits.
pub fn encode(batch: &[Event]) -> Result<Vec<Row>> {
    codec::encode_batch_text(batch)
        .map_err(Error::Event)?
        .into_iter()
        .map(|row| {
            let seq = row.seq;
            Row::of(row).ok_or_else(|| {
                Error::Event(
                    crate::event::EventError::new(
                        "its row's data was compressed; the PostgreSQL store keeps text",
                    )
                    .at_seq(seq),
                )
            })
        })
        .collect()
}

impl Shared {
    /// A connection for one operation: an idle one of the store's, else a
    /// new one (a connection the server dropped is not reused). It goes
    /// back to the idle ones when the operation is done.
    pub(crate) fn client(&self) -> Result<Pooled<'_>> {
        let reused = {
            let mut idle = self.idle.lock();
            std::iter::from_fn(|| idle.pop()).find(|c| !c.is_closed())
        };
        let client = match reused {
            Some(client) => client,
            None => connect_only(&self.url, self.options.idle_in_transaction())?,
        };
        Ok(Pooled {
            shared: self,
            client: Some(client),
        })
    }

    /// Runs `f` in a read-only `REPEATABLE READ` transaction: one snapshot.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&mut Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut client = self.client()?;
        let mut tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(|e| pg_error("begin", &self.location, e))?;
        let value = f(&mut tx)?;
        tx.commit()
            .map_err(|e| pg_error("commit", &self.location, e))?;
        Ok(value)
    }

    /// Runs `f` in a read-write transaction with synchronous commit:
    /// committed (and acknowledged) when this returns `Ok`.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&mut Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut client = self.client()?;
        let mut tx = client
            .transaction()
            .map_err(|e| pg_error("begin", &self.location, e))?;
        tx.batch_execute("SET LOCAL synchronous_commit = on")
            .map_err(|e| pg_error("begin", &self.location, e))?;
        let value = f(&mut tx)?;
        tx.commit()
            .map_err(|e| pg_error("commit", &self.location, e))?;
        Ok(value)
    }

    pub(crate) fn revision_of(&self, row: &SessionRow) -> String {
        format!(
            "postgres:store:{}:incarnation:{}:revision:{}",
            self.store_id, row.incarnation, row.revision
        )
    }

    /// Reads session `id` with `read` in one snapshot; `None` when it does
    /// not exist. A foreign header version is refused first (these reads
    /// have no header for `Store` to check).
    pub(super) fn read_events(
        &self,
        id: &str,
        read: impl FnOnce(&PgRows<'_, '_>) -> Result<Vec<Event>>,
    ) -> Result<Option<Vec<Event>>> {
        self.read(|tx| {
            let Some(row) = read_session(tx, &self.path, id)? else {
                return Ok(None);
            };
            row.header
                .check_version()
                .map_err(|detail| Error::Unsupported {
                    path: self.path.clone(),
                    detail: detail.to_string(),
                })?;
            read(&row.rows(tx, &self.path)).map(Some)
        })
    }
}

/// Where a repair's cut rows are kept, named as a path: the
/// `turnwal_quarantine` row of the session at the repair's revision.
pub(crate) fn quarantine_path(location: &str, id: &str, revision: i64) -> PathBuf {
    PathBuf::from(format!(
        "{location}#turnwal_quarantine/{}/{revision}",
        crate::storage::encode_file_name(id)
    ))
}

/// Deletes session `id` and its rows (its quarantined rows stay).
pub(crate) fn delete_session(tx: &mut Transaction<'_>, location: &str, id: &str) -> Result<bool> {
    tx.execute("DELETE FROM turnwal_events WHERE session_id = $1", &[&id])
        .map_err(|e| pg_error("delete events", location, e))?;
    let n = tx
        .execute("DELETE FROM turnwal_sessions WHERE session_id = $1", &[&id])
        .map_err(|e| pg_error("delete session", location, e))?;
    super::epoch::notify(tx, location, id)?;
    Ok(n > 0)
}
