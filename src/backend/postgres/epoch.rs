//! One writer per session across hosts (docs/POSTGRES.md, "One writer per
//! session across hosts"): a writer takes a session by bumping its writer
//! epoch, and every batch it appends is one transaction conditional on
//! that epoch and on the stored next seq, so a stale writer (a paused
//! process, a host cut off by a partition) can never append after another
//! took over.

use postgres::Client;

use super::pg_error;
use crate::error::{Error, Result};

/// A writer's hold on a session: the epoch it took the session at, and
/// where the session's events end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// The writer epoch this writer holds.
    pub epoch: i64,
    /// The seq the next batch must start at.
    pub next_seq: i64,
    /// The session's revision after the last change.
    pub revision: i64,
}

/// One stored row of a batch (a single event, or a packed run of
/// `members` chunk deltas), as `turnwal_events` holds it.
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
    /// `sourceEventSeqs`, as JSON text.
    pub source_event_seqs: Option<String>,
    /// `surfaceOp`, as JSON text.
    pub surface_op: Option<String>,
    /// `ignorable`.
    pub ignorable: Option<bool>,
    /// Whether a turn is open after the row.
    pub in_turn: bool,
}

/// Creates session `id` (its header's JSON and its policy), held by
/// `holder` at epoch 1 with no events; [`Error::AlreadyExists`] when the
/// database holds it.
pub fn create(
    client: &mut Client,
    location: &str,
    id: &str,
    header: &str,
    policy: &str,
    holder: &str,
) -> Result<Hold> {
    let inserted = client
        .execute(
            "INSERT INTO turnwal_sessions \
             (session_id, header, policy, next_seq, revision, writer_epoch, writer_holder, writer_heartbeat) \
             VALUES ($1, $2, $3, 0, 0, 1, $4, now()) ON CONFLICT (session_id) DO NOTHING",
            &[&id, &header, &policy, &holder],
        )
        .map_err(|e| pg_error("create session", location, e))?;
    if inserted == 0 {
        return Err(Error::AlreadyExists {
            id: id.to_owned(),
            on_disk: true,
        });
    }
    Ok(Hold {
        epoch: 1,
        next_seq: 0,
        revision: 0,
    })
}

/// Takes session `id` for `holder`: bumps its writer epoch, so every
/// earlier holder's next batch is refused. `None` when the session does
/// not exist.
pub fn take(client: &mut Client, location: &str, id: &str, holder: &str) -> Result<Option<Hold>> {
    let row = client
        .query_opt(
            "UPDATE turnwal_sessions \
             SET writer_epoch = writer_epoch + 1, writer_holder = $2, writer_heartbeat = now() \
             WHERE session_id = $1 RETURNING writer_epoch, next_seq, revision",
            &[&id, &holder],
        )
        .map_err(|e| pg_error("take session", location, e))?;
    Ok(row.map(|r| Hold {
        epoch: r.get(0),
        next_seq: r.get(1),
        revision: r.get(2),
    }))
}

/// The session's writer epoch and where its events end, as stored now:
/// what a writer reads after a lost connection to learn whether its last
/// batch committed (`next_seq` past the batch) or not (still at its
/// start), and whether it still holds the session. `None` when the session
/// does not exist.
pub fn current(client: &mut Client, location: &str, id: &str) -> Result<Option<Hold>> {
    let row = client
        .query_opt(
            "SELECT writer_epoch, next_seq, revision FROM turnwal_sessions WHERE session_id = $1",
            &[&id],
        )
        .map_err(|e| pg_error("read session", location, e))?;
    Ok(row.map(|r| Hold {
        epoch: r.get(0),
        next_seq: r.get(1),
        revision: r.get(2),
    }))
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
    let events: i64 = rows.iter().map(|r| i64::from(r.members)).sum();
    let end = hold.next_seq + events;
    let err = |op| move |e| pg_error(op, location, e);
    let mut tx = client.transaction().map_err(err("begin"))?;
    // Synchronous commit for this transaction, whatever the server's
    // default: an acknowledged batch is on disk (and on a synchronous
    // standby, when one is configured).
    tx.batch_execute("SET LOCAL synchronous_commit = on")
        .map_err(err("begin"))?;
    let updated = tx
        .query_opt(
            "UPDATE turnwal_sessions SET next_seq = $4, revision = revision + 1 \
             WHERE session_id = $1 AND writer_epoch = $2 AND next_seq = $3 \
             RETURNING revision",
            &[&id, &hold.epoch, &hold.next_seq, &end],
        )
        .map_err(err("append"))?;
    let Some(updated) = updated else {
        let now = tx
            .query_opt(
                "SELECT writer_epoch, writer_holder, next_seq FROM turnwal_sessions \
                 WHERE session_id = $1",
                &[&id],
            )
            .map_err(err("append"))?;
        drop(tx);
        return Err(match now {
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
        });
    };
    let insert = tx
        .prepare(
            "INSERT INTO turnwal_events (session_id, seq, members, type, time, data, \
             source_event_seqs, surface_op, ignorable, in_turn) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .map_err(err("append"))?;
    for r in rows {
        tx.execute(
            &insert,
            &[
                &id,
                &r.seq,
                &r.members,
                &r.event_type,
                &r.time,
                &r.data,
                &r.source_event_seqs,
                &r.surface_op,
                &r.ignorable,
                &r.in_turn,
            ],
        )
        .map_err(err("append"))?;
    }
    tx.commit().map_err(err("commit"))?;
    hold.next_seq = end;
    hold.revision = updated.get(0);
    Ok(())
}
