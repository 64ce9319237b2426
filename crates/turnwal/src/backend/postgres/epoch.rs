//! One writer per session across hosts (docs/POSTGRES.md, "One writer per
//! session across hosts"): a writer takes a session by bumping its writer
//! epoch, and every batch it appends is one transaction conditional on
//! that epoch and on the stored next seq, so a stale writer (a paused
//! process, a host cut off by a partition) can never append after another
//! took over.
//!
//! A writer also holds a **lease** (docs/POSTGRES.md, "Leases"): the
//! session row's `writer_lease_until`, set by the server's clock each time
//! the writer takes, writes or renews. Taking a session whose lease is
//! live is refused ([`Error::Leased`]) unless the taker steals it on
//! purpose; an expired lease (a writer that died, or was paused past it)
//! is taken over as before, and the epoch still fences the old writer.

use std::time::Duration;

use postgres::Client;

use super::pg_error;
use crate::error::{Error, Result};

/// A writer's hold on a session: the epoch it took the session at, and
/// where the session's events end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The session's incarnation (random, given at its creation): a
    /// session deleted and created again is not the one held.
    pub incarnation: String,
    /// The writer epoch this writer holds.
    pub epoch: i64,
    /// The seq the next batch must start at.
    pub next_seq: i64,
    /// The session's revision after the last change.
    pub revision: i64,
    /// How long each take, write and renewal extends the lease.
    pub lease: Duration,
}

/// How a writer takes a session: the length of the lease it will hold,
/// and whether it takes a live lease from its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// How long the lease runs from each take, write and renewal.
    pub length: Duration,
    /// Take the session even while another writer's lease is live (that
    /// writer is fenced by the epoch: its next batch is refused).
    pub steal: bool,
}

impl Lease {
    /// A lease of `length` that waits for a live one to expire.
    pub fn of(length: Duration) -> Lease {
        Lease {
            length,
            steal: false,
        }
    }

    /// A lease of `length` taken even from a live holder.
    pub fn stealing(length: Duration) -> Lease {
        Lease {
            length,
            steal: true,
        }
    }
}

/// A lease length as the statements take it: milliseconds, at least one.
pub(crate) fn lease_ms(length: Duration) -> i64 {
    i64::try_from(length.as_millis()).unwrap_or(i64::MAX).max(1)
}

/// One stored row of a batch (a single event, or a packed run of
/// `members` chunk deltas), as `turnwal_events` holds it: the SQLite
/// store's row encoding ([`crate::backend::rows::codec`]) with `data`
/// always text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The first seq the row holds.
    pub seq: i64,
    /// 1, or a packed run's member count.
    pub members: i32,
    /// The event type (a packed row's tag).
    pub event_type: String,
    /// Unix ms.
    pub time: i64,
    /// The exact JSON text.
    pub data: String,
    /// `sourceEventSeqs`, varint-encoded as the SQLite store encodes it.
    pub source_event_seqs: Option<Vec<u8>>,
    /// `surfaceOp`, as JSON text (with the SQLite store's first-surface
    /// mark).
    pub surface_op: Option<String>,
    /// `ignorable`: `true`, none, or `false` for a packed row.
    pub ignorable: Option<bool>,
}

impl Row {
    /// The row of an encoded row whose `data` is text
    /// ([`crate::backend::rows::codec::encode_batch_text`] encodes only
    /// such rows); `None` for a row whose `data` was compressed, which this
    /// store does not hold.
    pub fn of(row: crate::backend::rows::codec::RowOut) -> Option<Row> {
        use crate::backend::rows::codec::Data;
        let Data::Text(data) = row.data else {
            return None;
        };
        Some(Row {
            seq: row.seq as i64,
            members: row.members as i32,
            event_type: row.event_type,
            time: row.time,
            data,
            source_event_seqs: row.source_event_seqs,
            surface_op: row.surface_op,
            ignorable: row.ignorable.map(|n| n != 0),
        })
    }

    /// How many events `rows` hold.
    pub fn events(rows: &[Row]) -> i64 {
        rows.iter().map(|r| i64::from(r.members)).sum()
    }

    /// Bytes of `data` `rows` hold (what the session row's `data_bytes`
    /// counts).
    pub fn bytes(rows: &[Row]) -> i64 {
        rows.iter().map(|r| r.data.len() as i64).sum()
    }
}

/// A random incarnation token.
fn new_incarnation() -> String {
    format!(
        "{:016x}{:016x}",
        super::schema::random_u64(),
        super::schema::random_u64()
    )
}

/// A batch's rows inserted from one array per column ([`Columns::params`]
/// as `$2` to `$9`, the session id as `$1`).
const INSERT_UNNEST: &str = "INSERT INTO turnwal_events (session_id, seq, members, type, time, \
     data, source_event_seqs, surface_op, ignorable) \
     SELECT $1, * FROM unnest($2::bigint[], $3::integer[], $4::text[], $5::bigint[], \
     $6::text[], $7::bytea[], $8::text[], $9::boolean[])";

/// The rows of a batch as one array per column, for `unnest`.
struct Columns<'a> {
    seqs: Vec<i64>,
    members: Vec<i32>,
    types: Vec<&'a str>,
    times: Vec<i64>,
    data: Vec<&'a str>,
    sources: Vec<Option<&'a [u8]>>,
    surface: Vec<Option<&'a str>>,
    ignorable: Vec<Option<bool>>,
}

impl Columns<'_> {
    /// The arrays as typed parameters: what `unnest($N::bigint[],
    /// $N+1::integer[], $N+2::text[], $N+3::bigint[], $N+4::text[],
    /// $N+5::bytea[], $N+6::text[], $N+7::boolean[])` takes, in that order.
    fn params(&self) -> [(&(dyn postgres::types::ToSql + Sync), postgres::types::Type); 8] {
        use postgres::types::Type;
        [
            (&self.seqs, Type::INT8_ARRAY),
            (&self.members, Type::INT4_ARRAY),
            (&self.types, Type::TEXT_ARRAY),
            (&self.times, Type::INT8_ARRAY),
            (&self.data, Type::TEXT_ARRAY),
            (&self.sources, Type::BYTEA_ARRAY),
            (&self.surface, Type::TEXT_ARRAY),
            (&self.ignorable, Type::BOOL_ARRAY),
        ]
    }

    fn of(rows: &[Row]) -> Columns<'_> {
        Columns {
            seqs: rows.iter().map(|r| r.seq).collect(),
            members: rows.iter().map(|r| r.members).collect(),
            types: rows.iter().map(|r| r.event_type.as_str()).collect(),
            times: rows.iter().map(|r| r.time).collect(),
            data: rows.iter().map(|r| r.data.as_str()).collect(),
            sources: rows
                .iter()
                .map(|r| r.source_event_seqs.as_deref())
                .collect(),
            surface: rows.iter().map(|r| r.surface_op.as_deref()).collect(),
            ignorable: rows.iter().map(|r| r.ignorable).collect(),
        }
    }
}

/// From this many rows on a batch is sent with `COPY … FROM STDIN
/// BINARY` (a bulk `convert`, a large first batch): no statement to parse,
/// no arrays to build, the rows streamed.
const COPY_ROWS: usize = 256;

/// [`insert_rows`] through `COPY`.
fn copy_rows(
    tx: &mut postgres::Transaction<'_>,
    location: &str,
    id: &str,
    rows: &[Row],
) -> Result<()> {
    use postgres::binary_copy::BinaryCopyInWriter;
    use postgres::types::Type;
    let err = |e| pg_error("copy events", location, e);
    let sink = tx
        .copy_in(
            "COPY turnwal_events (session_id, seq, members, type, time, data, \
             source_event_seqs, surface_op, ignorable) FROM STDIN BINARY",
        )
        .map_err(err)?;
    let types = [
        Type::TEXT,
        Type::INT8,
        Type::INT4,
        Type::TEXT,
        Type::INT8,
        Type::TEXT,
        Type::BYTEA,
        Type::TEXT,
        Type::BOOL,
    ];
    let mut writer = BinaryCopyInWriter::new(sink, &types);
    for r in rows {
        writer
            .write(&[
                &id,
                &r.seq,
                &r.members,
                &r.event_type,
                &r.time,
                &r.data,
                &r.source_event_seqs,
                &r.surface_op,
                &r.ignorable,
            ])
            .map_err(err)?;
    }
    writer.finish().map_err(err)?;
    Ok(())
}

/// Inserts `rows` of session `id` in `tx`, in one statement (one round
/// trip, whatever the batch holds).
pub fn insert_rows(
    tx: &mut postgres::Transaction<'_>,
    location: &str,
    id: &str,
    rows: &[Row],
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    if rows.len() >= COPY_ROWS {
        return copy_rows(tx, location, id, rows);
    }
    use postgres::types::{ToSql, Type};
    let columns = Columns::of(rows);
    let mut params: Vec<(&(dyn ToSql + Sync), Type)> = vec![(&id, Type::TEXT)];
    params.extend(columns.params());
    tx.execute_typed(INSERT_UNNEST, &params)
        .map_err(|e| pg_error("insert events", location, e))?;
    Ok(())
}

/// Creates session `id` (its header's JSON and its policy) with its first
/// `rows`, in one transaction, held by `holder` at epoch 1 with a lease of
/// `lease`;
/// [`Error::AlreadyExists`] when the database holds it (and nothing is
/// written).
#[allow(clippy::too_many_arguments)] // the session row's columns, one each
pub fn create(
    client: &mut Client,
    location: &str,
    id: &str,
    header: &str,
    policy: &str,
    holder: &str,
    lease: Duration,
    rows: &[Row],
) -> Result<Hold> {
    let err = |op| move |e| pg_error(op, location, e);
    let incarnation = new_incarnation();
    let next_seq = Row::events(rows);
    let mut tx = client.transaction().map_err(err("begin"))?;
    tx.batch_execute("SET LOCAL synchronous_commit = on")
        .map_err(err("begin"))?;
    let inserted = tx
        .execute(
            "INSERT INTO turnwal_sessions \
             (session_id, header, policy, incarnation, next_seq, revision, data_bytes, \
              writer_epoch, writer_holder, writer_heartbeat, writer_lease_until) \
             VALUES ($1, $2, $3, $4, $5, 1, $7, 1, $6, now(), \
               now() + $8::bigint * interval '1 millisecond') \
             ON CONFLICT (session_id) DO NOTHING",
            &[
                &id,
                &header,
                &policy,
                &incarnation,
                &next_seq,
                &holder,
                &Row::bytes(rows),
                &lease_ms(lease),
            ],
        )
        .map_err(err("create session"))?;
    if inserted == 0 {
        return Err(Error::AlreadyExists {
            id: id.to_owned(),
            on_disk: true,
        });
    }
    insert_rows(&mut tx, location, id, rows)?;
    notify(&mut tx, location, id)?;
    tx.commit().map_err(err("commit"))?;
    Ok(Hold {
        incarnation,
        epoch: 1,
        next_seq,
        revision: 1,
        lease,
    })
}

/// Takes session `id` for `holder`: bumps its writer epoch, so every
/// earlier holder's next batch is refused, and gives `holder` a lease of
/// `lease.length`. Refused with [`Error::Leased`], nothing changed, while
/// another writer's lease is live, unless `lease.steal`. Expiry is judged
/// by the server's clock, inside the statement. `None` when the session
/// does not exist.
pub fn take(
    client: &mut Client,
    location: &str,
    id: &str,
    holder: &str,
    lease: Lease,
) -> Result<Option<Hold>> {
    let err = |e| pg_error("take session", location, e);
    let row = client
        .query_opt(
            "UPDATE turnwal_sessions \
             SET writer_epoch = writer_epoch + 1, writer_holder = $2, writer_heartbeat = now(), \
               writer_lease_until = now() + $3::bigint * interval '1 millisecond' \
             WHERE session_id = $1 \
               AND ($4 OR writer_lease_until IS NULL OR writer_lease_until <= now()) \
             RETURNING writer_epoch, next_seq, revision, incarnation",
            &[&id, &holder, &lease_ms(lease.length), &lease.steal],
        )
        .map_err(err)?;
    if let Some(row) = row {
        return Ok(Some(hold_of(&row, lease.length)));
    }
    match holder_of(client, location, id)? {
        None => Ok(None),
        Some(Holder::Leased {
            holder,
            epoch,
            expires_in,
        }) => Err(Error::Leased {
            id: id.to_owned(),
            location: location.into(),
            holder,
            epoch,
            expires_in,
        }),
        // The lease ran out between the two statements: take it now.
        Some(Holder::Free) => take(client, location, id, holder, lease),
    }
}

/// Who holds a session, by the server's clock now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// No live lease: the session is free to take.
    Free,
    /// A writer holds a live lease.
    Leased {
        /// Who, as it named itself.
        holder: String,
        /// Its writer epoch.
        epoch: i64,
        /// How long its lease runs from now.
        expires_in: Duration,
    },
}

/// Who holds session `id` now; `None` when it does not exist.
pub fn holder_of(client: &mut Client, location: &str, id: &str) -> Result<Option<Holder>> {
    let row = client
        .query_opt(
            "SELECT writer_holder, writer_epoch, \
               (extract(epoch FROM writer_lease_until - now()) * 1000)::bigint \
             FROM turnwal_sessions WHERE session_id = $1",
            &[&id],
        )
        .map_err(|e| pg_error("read session", location, e))?;
    Ok(row.map(|r| holder_in(&r, 0)))
}

/// The [`Holder`] in `(writer_holder, writer_epoch, ms left)` at column
/// `at` of `r`.
pub(crate) fn holder_in(r: &postgres::Row, at: usize) -> Holder {
    match r.get::<_, Option<i64>>(at + 2) {
        Some(ms) if ms > 0 => Holder::Leased {
            holder: r.get::<_, Option<String>>(at).unwrap_or_default(),
            epoch: r.get(at + 1),
            expires_in: Duration::from_millis(ms as u64),
        },
        _ => Holder::Free,
    }
}

/// Renews the leases of the sessions in `held` (id, incarnation, epoch) by
/// `length`, each only while its writer still holds it, in one statement;
/// returns the ids renewed (a missing one was taken over or deleted: its
/// writer hears of it at its next batch).
pub(crate) fn renew(
    client: &mut Client,
    location: &str,
    held: &[(String, String, i64)],
    length: Duration,
) -> Result<Vec<String>> {
    let ids: Vec<&str> = held.iter().map(|h| h.0.as_str()).collect();
    let incarnations: Vec<&str> = held.iter().map(|h| h.1.as_str()).collect();
    let epochs: Vec<i64> = held.iter().map(|h| h.2).collect();
    let rows = client
        .query(
            "UPDATE turnwal_sessions s \
             SET writer_lease_until = now() + $4::bigint * interval '1 millisecond', \
               writer_heartbeat = now() \
             FROM unnest($1::text[], $2::text[], $3::bigint[]) AS h(id, inc, ep) \
             WHERE s.session_id = h.id AND s.incarnation = h.inc AND s.writer_epoch = h.ep \
             RETURNING s.session_id",
            &[&ids, &incarnations, &epochs, &lease_ms(length)],
        )
        .map_err(|e| pg_error("renew leases", location, e))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Ends `hold`'s lease (a writer closing): the session is free to take at
/// once. Nothing changes when another writer holds it now.
pub(crate) fn release(client: &mut Client, location: &str, id: &str, hold: &Hold) -> Result<()> {
    client
        .execute(
            "UPDATE turnwal_sessions SET writer_lease_until = NULL \
             WHERE session_id = $1 AND incarnation = $2 AND writer_epoch = $3",
            &[&id, &hold.incarnation, &hold.epoch],
        )
        .map_err(|e| pg_error("release lease", location, e))?;
    Ok(())
}

/// The session's writer epoch and where its events end, as stored now:
/// what a writer reads after a lost connection to learn whether its last
/// batch committed (`next_seq` past the batch) or not (still at its
/// start), and whether it still holds the session (its `lease` is zero:
/// the caller's own is not stored). `None` when the session does not
/// exist.
pub fn current(client: &mut Client, location: &str, id: &str) -> Result<Option<Hold>> {
    let row = client
        .query_opt(
            "SELECT writer_epoch, next_seq, revision, incarnation FROM turnwal_sessions \
             WHERE session_id = $1",
            &[&id],
        )
        .map_err(|e| pg_error("read session", location, e))?;
    Ok(row.as_ref().map(|r| hold_of(r, Duration::ZERO)))
}

fn hold_of(r: &postgres::Row, lease: Duration) -> Hold {
    Hold {
        epoch: r.get(0),
        next_seq: r.get(1),
        revision: r.get(2),
        incarnation: r.get(3),
        lease,
    }
}

/// Claims session `id` for one change by the writer holding `hold`, in
/// `tx`: bumps its revision, sets its next seq to `end`, adds
/// `added_bytes` to its `data_bytes`, stamps `writer_heartbeat` and extends
/// the lease by `hold.lease`, when the
/// writer still holds it (same incarnation and epoch) and its events still
/// end at `hold.next_seq`. Refused, with the row untouched, as
/// [`Error::Superseded`] naming the holder when another writer took it,
/// [`Error::NotFound`] when it was deleted (or created again), and
/// [`Error::SeqMismatch`] when its log moved under the same epoch. Returns
/// the new revision.
pub(crate) fn claim(
    tx: &mut postgres::Transaction<'_>,
    location: &str,
    id: &str,
    hold: &Hold,
    end: i64,
    added_bytes: i64,
) -> Result<i64> {
    let err = |e| pg_error("append", location, e);
    let updated = tx
        .query_opt(
            "UPDATE turnwal_sessions SET next_seq = $5, revision = revision + 1, \
             data_bytes = data_bytes + $6, writer_heartbeat = now(), \
             writer_lease_until = now() + $7::bigint * interval '1 millisecond' \
             WHERE session_id = $1 AND incarnation = $2 AND writer_epoch = $3 AND next_seq = $4 \
             RETURNING revision",
            &[
                &id,
                &hold.incarnation,
                &hold.epoch,
                &hold.next_seq,
                &end,
                &added_bytes,
                &lease_ms(hold.lease),
            ],
        )
        .map_err(err)?;
    if let Some(updated) = updated {
        notify(tx, location, id)?;
        return Ok(updated.get(0));
    }
    let now = tx
        .query_opt(
            "SELECT writer_epoch, writer_holder, next_seq, incarnation FROM turnwal_sessions \
             WHERE session_id = $1",
            &[&id],
        )
        .map_err(err)?;
    Err(match now {
        Some(r) if r.get::<_, String>(3) != hold.incarnation => {
            Error::NotFound { id: id.to_owned() }
        }
        None => Error::NotFound { id: id.to_owned() },
        Some(r) if r.get::<_, i64>(0) != hold.epoch => Error::Superseded {
            id: id.to_owned(),
            holder: r.get::<_, Option<String>>(1).unwrap_or_default(),
            epoch: r.get(0),
            stale: hold.epoch,
        },
        Some(r) => Error::SeqMismatch {
            id: id.to_owned(),
            expected: u64::try_from(r.get::<_, i64>(2)).unwrap_or(0),
            got: u64::try_from(hold.next_seq).unwrap_or(0),
        },
    })
}

/// Appends `rows` (seqs from `hold.next_seq` on, contiguous) in one
/// transaction, acknowledged when it commits: refused with
/// [`Error::Superseded`] when another writer took the session since
/// `hold` (nothing is written), with [`Error::SeqMismatch`] when the
/// stored log moved without a new epoch.
pub fn append(
    client: &mut Client,
    location: &str,
    id: &str,
    hold: &mut Hold,
    rows: &[Row],
) -> Result<()> {
    if rows.len() >= COPY_ROWS {
        return append_in_transaction(client, location, id, hold, rows);
    }
    use postgres::types::Type;
    let end = hold.next_seq + Row::events(rows);
    let columns = Columns::of(rows);
    let bytes = Row::bytes(rows);
    let lease = lease_ms(hold.lease);
    let mut params: Vec<(&(dyn postgres::types::ToSql + Sync), Type)> = vec![
        (&id, Type::TEXT),
        (&hold.incarnation, Type::TEXT),
        (&hold.epoch, Type::INT8),
        (&hold.next_seq, Type::INT8),
        (&end, Type::INT8),
        (&bytes, Type::INT8),
    ];
    params.extend(columns.params());
    params.push((&lease, Type::INT8));
    // One statement, one round trip, its own transaction: the claim and
    // the rows commit together or not at all, and the rows go in only
    // when the claim matched (they are joined to it). Synchronous commit
    // is set for this transaction inside the statement, so nothing is
    // left on a pooled connection.
    // The notification is sent at the commit, to the followers listening
    // (docs/POSTGRES.md, "Following"); a CTE that is only selected from
    // runs only when referenced, hence its count.
    let result = client
        .query_typed(
            &format!(
                "WITH sc AS (SELECT set_config('synchronous_commit', 'on', true)), \
             claim AS (UPDATE turnwal_sessions SET next_seq = $5, revision = revision + 1, \
               data_bytes = data_bytes + $6, writer_heartbeat = now(), \
               writer_lease_until = now() + $15::bigint * interval '1 millisecond' \
               WHERE session_id = $1 AND incarnation = $2 AND writer_epoch = $3 \
               AND next_seq = $4 RETURNING revision), \
             ins AS (INSERT INTO turnwal_events (session_id, seq, members, type, time, data, \
               source_event_seqs, surface_op, ignorable) \
               SELECT $1, u.* FROM claim, unnest($7::bigint[], $8::integer[], $9::text[], \
               $10::bigint[], $11::text[], $12::bytea[], $13::text[], $14::boolean[]) AS u \
               RETURNING 1), \
             nt AS (SELECT pg_notify('{channel}', {payload}) FROM claim) \
             SELECT (SELECT revision FROM claim), (SELECT count(*) FROM ins), \
             (SELECT count(*) FROM sc), (SELECT count(*) FROM nt)",
                channel = super::listen::CHANNEL,
                payload = super::listen::payload_sql(1)
            ),
            &params,
        )
        .map_err(|e| pg_error("append", location, e))?;
    let revision: Option<i64> = result.first().and_then(|r| r.get(0));
    let Some(revision) = revision else {
        // Nothing was written: say why, from the session row as it is.
        let mut tx = client
            .transaction()
            .map_err(|e| pg_error("append", location, e))?;
        let refused = claim(&mut tx, location, id, hold, end, 0);
        drop(tx);
        return Err(match refused {
            Err(e) => e,
            // The session row moved back to this writer's claim between
            // the two statements (it cannot: only a holder changes it);
            // refuse rather than guess.
            Ok(_) => Error::SeqMismatch {
                id: id.to_owned(),
                expected: u64::try_from(hold.next_seq).unwrap_or(0),
                got: u64::try_from(hold.next_seq).unwrap_or(0),
            },
        });
    };
    hold.next_seq = end;
    hold.revision = revision;
    Ok(())
}

/// [`append`] of a large batch: a transaction whose rows go in through
/// `COPY`.
fn append_in_transaction(
    client: &mut Client,
    location: &str,
    id: &str,
    hold: &mut Hold,
    rows: &[Row],
) -> Result<()> {
    let end = hold.next_seq + Row::events(rows);
    let err = |op| move |e| pg_error(op, location, e);
    let mut tx = client.transaction().map_err(err("begin"))?;
    // Synchronous commit for this transaction, whatever the server's
    // default: an acknowledged batch is on disk (and on a synchronous
    // standby, when one is configured).
    tx.batch_execute("SET LOCAL synchronous_commit = on")
        .map_err(err("begin"))?;
    let revision = claim(&mut tx, location, id, hold, end, Row::bytes(rows))?;
    insert_rows(&mut tx, location, id, rows)?;
    tx.commit().map_err(err("commit"))?;
    hold.next_seq = end;
    hold.revision = revision;
    Ok(())
}

/// `rows` of session `id` inserted by one statement in a transaction of
/// its own and nothing else (no claim, no session row): the baseline
/// turnwal's appends are measured against (`turnwal bench`).
#[doc(hidden)]
pub fn insert_alone(client: &mut Client, id: &str, rows: &[Row]) -> Result<(), postgres::Error> {
    use postgres::types::{ToSql, Type};
    let columns = Columns::of(rows);
    let mut params: Vec<(&(dyn ToSql + Sync), Type)> = vec![(&id, Type::TEXT)];
    params.extend(columns.params());
    client.execute_typed(INSERT_UNNEST, &params)?;
    Ok(())
}

/// Tells the store's followers that session `id` changed: delivered when
/// `tx` commits, never if it rolls back (docs/POSTGRES.md, "Following").
pub(crate) fn notify(tx: &mut postgres::Transaction<'_>, location: &str, id: &str) -> Result<()> {
    tx.execute(
        &format!(
            "SELECT pg_notify('{}', {})",
            super::listen::CHANNEL,
            super::listen::payload_sql(1)
        ),
        &[&id],
    )
    .map_err(|e| pg_error("notify", location, e))?;
    Ok(())
}
