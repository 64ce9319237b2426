//! A session's rows in a PostgreSQL transaction, as the shared scan reads
//! them ([`Rows`]): the same questions the SQLite store answers, so both
//! stores classify a session by one code (`backend::rows::scan`).

use std::cell::RefCell;
use std::path::Path;

use postgres::Transaction;
use postgres::types::{ToSql, Type};

use super::pg_error;
use crate::backend::rows::codec::{self, Col, RowIn};
use crate::backend::rows::scan::Rows;
use crate::contract::Policy;
use crate::error::Result;
use crate::event::EventKind;
use crate::header::SessionHeader;

/// The columns [`row_in`] reads, in order.
const COLUMNS: &str = "seq, type, time, data, source_event_seqs, surface_op, ignorable";

/// A result row as the SQLite codec reads one: PostgreSQL's types map onto
/// SQLite's storage classes (`ignorable` true is 1, false the packed
/// discriminator 0).
fn row_in(r: &postgres::Row) -> RowIn {
    row_in_at(r, 0)
}

/// [`row_in`] of the [`COLUMNS`] from column `at` of a wider result row.
pub fn row_in_at(r: &postgres::Row, at: usize) -> RowIn {
    let text = |s: Option<String>| s.map_or(Col::Null, |s| Col::Text(s.into_bytes()));
    RowIn {
        seq: Col::Integer(r.get(at)),
        event_type: Col::Text(r.get::<_, String>(at + 1).into_bytes()),
        time: Col::Integer(r.get(at + 2)),
        data: Col::Text(r.get::<_, String>(at + 3).into_bytes()),
        source_event_seqs: r
            .get::<_, Option<Vec<u8>>>(at + 4)
            .map_or(Col::Null, Col::Blob),
        surface_op: text(r.get(at + 5)),
        ignorable: r
            .get::<_, Option<bool>>(at + 6)
            .map_or(Col::Null, |b| Col::Integer(i64::from(b))),
    }
}

/// One session's rows, read through a transaction.
pub(crate) struct PgRows<'a, 't> {
    pub tx: RefCell<&'a mut Transaction<'t>>,
    pub location: &'a Path,
    pub header: &'a SessionHeader,
    pub policy: Policy,
    /// The session row's count of its rows' `data` bytes.
    pub data_bytes: u64,
}

impl PgRows<'_, '_> {
    /// One round trip (`query_typed`: no statement prepared or kept).
    fn query(&self, sql: &str, params: &[(&(dyn ToSql + Sync), Type)]) -> Result<Vec<RowIn>> {
        let rows = self
            .tx
            .borrow_mut()
            .query_typed(sql, params)
            .map_err(|e| pg_error("read events", &self.location.to_string_lossy(), e))?;
        Ok(rows.iter().map(row_in).collect())
    }

    fn id(&self) -> &str {
        &self.header.id
    }
}

impl Rows for PgRows<'_, '_> {
    fn path(&self) -> &Path {
        self.location
    }

    fn header(&self) -> &SessionHeader {
        self.header
    }

    fn policy(&self) -> Policy {
        self.policy
    }

    fn all(&self) -> Result<Vec<RowIn>> {
        self.query(
            &format!("SELECT {COLUMNS} FROM turnwal_events WHERE session_id = $1 ORDER BY seq"),
            &[(&self.id(), Type::TEXT)],
        )
    }

    fn at_or_after(&self, key: i64) -> Result<Vec<RowIn>> {
        self.query(
            &format!(
                "SELECT {COLUMNS} FROM turnwal_events WHERE session_id = $1 AND seq >= $2 \
                 ORDER BY seq"
            ),
            &[(&self.id(), Type::TEXT), (&key, Type::INT8)],
        )
    }

    fn page(&self, lo: i64, hi: i64, limit: usize) -> Result<Vec<RowIn>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.query(
            &format!(
                "SELECT {COLUMNS} FROM turnwal_events WHERE session_id = $1 AND seq >= $2 \
                 AND seq < $3 ORDER BY seq LIMIT $4"
            ),
            &[
                (&self.id(), Type::TEXT),
                (&lo, Type::INT8),
                (&hi, Type::INT8),
                (&limit, Type::INT8),
            ],
        )
    }

    fn packed_between(&self, lo: i64, hi: i64) -> Result<Vec<RowIn>> {
        self.query(
            &format!(
                "SELECT {COLUMNS} FROM turnwal_events WHERE session_id = $1 AND seq >= $2 \
                 AND seq < $3 AND ignorable = false ORDER BY seq"
            ),
            &[
                (&self.id(), Type::TEXT),
                (&lo, Type::INT8),
                (&hi, Type::INT8),
            ],
        )
    }

    fn count_before(&self, key: i64) -> u64 {
        self.tx
            .borrow_mut()
            .query_typed_one(
                "SELECT count(*) FROM turnwal_events WHERE session_id = $1 AND seq < $2",
                &[(&self.id(), Type::TEXT), (&key, Type::INT8)],
            )
            .map_or(0, |r| r.get::<_, i64>(0).max(0) as u64)
    }

    fn turn_ends_before(&self, below: Option<i64>, limit: usize) -> Result<Vec<RowIn>> {
        self.query(
            &format!(
                "SELECT {COLUMNS} FROM turnwal_events WHERE session_id = $1 AND type = 'turn/end' \
                 AND ignorable IS DISTINCT FROM false AND seq < $2 ORDER BY seq DESC LIMIT $3"
            ),
            &[
                (&self.id(), Type::TEXT),
                (&below.unwrap_or(i64::MAX), Type::INT8),
                (&(limit as i64), Type::INT8),
            ],
        )
    }

    fn first(&self, n: usize) -> Result<Vec<RowIn>> {
        self.query(
            &format!(
                "SELECT {COLUMNS} FROM turnwal_events WHERE session_id = $1 AND seq >= 0 \
                 ORDER BY seq LIMIT $2"
            ),
            &[
                (&self.id(), Type::TEXT),
                (&i64::try_from(n).unwrap_or(i64::MAX), Type::INT8),
            ],
        )
    }

    fn last(&self, n: usize) -> Result<Vec<RowIn>> {
        self.query(
            &format!(
                "SELECT {COLUMNS} FROM turnwal_events WHERE session_id = $1 ORDER BY seq DESC \
                 LIMIT $2"
            ),
            &[
                (&self.id(), Type::TEXT),
                (&i64::try_from(n).unwrap_or(i64::MAX), Type::INT8),
            ],
        )
    }

    /// The session row's count (kept by every write of turnwal's in the
    /// same transaction), not a sum over the rows.
    fn data_bytes(&self) -> Result<u64> {
        Ok(self.data_bytes)
    }
}

/// One session's rows from its last `turn/end` row on (all of them when it
/// has none), read for a whole listing in one query: the questions a
/// listing asks ([`crate::backend::rows::scan::summarize`]) are answered
/// from them, any other from the database through `real`, so the answers
/// are those of [`PgRows`].
pub(crate) struct Prefetched<'a, 't> {
    pub real: PgRows<'a, 't>,
    /// The first seq held (`None`: every row of the session is held).
    pub start: Option<i64>,
    /// The rows held, in seq order.
    pub rows: Vec<RowIn>,
}

impl Prefetched<'_, '_> {
    /// Whether every row with a `seq` column of at least `key` is held.
    fn holds_from(&self, key: i64) -> bool {
        self.start.is_none_or(|start| key >= start)
    }

    fn held_from(&self, key: i64) -> Vec<RowIn> {
        self.rows
            .iter()
            .filter(|r| r.seq_key() >= key)
            .cloned()
            .collect()
    }
}

impl Rows for Prefetched<'_, '_> {
    fn path(&self) -> &Path {
        self.real.path()
    }

    fn header(&self) -> &SessionHeader {
        self.real.header()
    }

    fn policy(&self) -> Policy {
        self.real.policy()
    }

    fn all(&self) -> Result<Vec<RowIn>> {
        match self.start {
            None => Ok(self.rows.clone()),
            Some(_) => self.real.all(),
        }
    }

    fn at_or_after(&self, key: i64) -> Result<Vec<RowIn>> {
        if self.holds_from(key) {
            return Ok(self.held_from(key));
        }
        self.real.at_or_after(key)
    }

    fn page(&self, lo: i64, hi: i64, limit: usize) -> Result<Vec<RowIn>> {
        self.real.page(lo, hi, limit)
    }

    fn packed_between(&self, lo: i64, hi: i64) -> Result<Vec<RowIn>> {
        if self.holds_from(lo) {
            return Ok(self
                .held_from(lo)
                .into_iter()
                .filter(|r| r.seq_key() < hi && r.is_packed())
                .collect());
        }
        self.real.packed_between(lo, hi)
    }

    fn count_before(&self, key: i64) -> u64 {
        self.real.count_before(key)
    }

    fn turn_ends_before(&self, below: Option<i64>, limit: usize) -> Result<Vec<RowIn>> {
        self.real.turn_ends_before(below, limit)
    }

    fn last_commit_row(&self) -> Result<Option<u64>> {
        // The query held the rows from the last row typed `turn/end` on:
        // when it decodes as one, it is the commit row; else the database
        // is asked, as PgRows would be.
        if let Some(start) = self.start
            && let Some(first) = self.rows.first()
            && first.seq_key() == start
            && let Ok(events) = codec::decode_row(first)
            && events[0].kind() == EventKind::TurnEnd
        {
            return Ok(Some(events[0].seq()));
        }
        if self.start.is_none() {
            return Ok(None);
        }
        self.real.last_commit_row()
    }

    fn first(&self, n: usize) -> Result<Vec<RowIn>> {
        self.real.first(n)
    }

    fn last(&self, n: usize) -> Result<Vec<RowIn>> {
        if self.start.is_none() || self.rows.len() >= n {
            return Ok(self.rows.iter().rev().take(n).cloned().collect());
        }
        self.real.last(n)
    }

    fn data_bytes(&self) -> Result<u64> {
        self.real.data_bytes()
    }
}
