//! A session's rows in an SQLite transaction, as the shared scan reads
//! them ([`Rows`]), and the one change a repair makes to them.

use std::path::Path;

use rusqlite::Connection;

use super::codec::{Col, PACKED_DISCRIMINATOR, ROW_COLUMNS, RowIn};
use super::schema::sql_error;
use super::{encode, insert_rows};
use crate::backend::rows::scan::{Plan, Rows};
use crate::contract::Policy;
use crate::error::Result;
use crate::header::SessionHeader;

impl rusqlite::types::FromSql for Col {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Col> {
        use rusqlite::types::ValueRef;
        Ok(match value {
            ValueRef::Null => Col::Null,
            ValueRef::Integer(n) => Col::Integer(n),
            ValueRef::Real(f) => Col::Real(f),
            ValueRef::Text(t) => Col::Text(t.to_vec()),
            ValueRef::Blob(b) => Col::Blob(b.to_vec()),
        })
    }
}

impl RowIn {
    /// Reads the [`ROW_COLUMNS`] of a result row.
    pub fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RowIn> {
        Ok(RowIn {
            seq: row.get(0)?,
            event_type: row.get(1)?,
            time: row.get(2)?,
            data: row.get(3)?,
            source_event_seqs: row.get(4)?,
            surface_op: row.get(5)?,
            ignorable: row.get(6)?,
        })
    }
}

/// One session's rows, read through `conn` (a transaction).
pub(crate) struct SqliteRows<'a> {
    pub conn: &'a Connection,
    pub path: &'a Path,
    pub header: &'a SessionHeader,
    pub policy: Policy,
}

impl SqliteRows<'_> {
    fn query(&self, sql: &str, params: impl rusqlite::Params) -> Result<Vec<RowIn>> {
        let mut stmt = self
            .conn
            .prepare_cached(sql)
            .map_err(|e| sql_error("read events", self.path, e))?;
        stmt.query_map(params, RowIn::from_row)
            .and_then(|rows| rows.collect())
            .map_err(|e| sql_error("read events", self.path, e))
    }

    fn id(&self) -> &str {
        &self.header.id
    }
}

impl Rows for SqliteRows<'_> {
    fn path(&self) -> &Path {
        self.path
    }

    fn header(&self) -> &SessionHeader {
        self.header
    }

    fn policy(&self) -> Policy {
        self.policy
    }

    fn all(&self) -> Result<Vec<RowIn>> {
        self.query(
            &format!("SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 ORDER BY seq"),
            [self.id()],
        )
    }

    fn at_or_after(&self, key: i64) -> Result<Vec<RowIn>> {
        self.query(
            &format!(
                "SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq"
            ),
            rusqlite::params![self.id(), key],
        )
    }

    fn packed_between(&self, lo: i64, hi: i64) -> Result<Vec<RowIn>> {
        self.query(
            &format!(
                "SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3 \
                 AND ignorable = {PACKED_DISCRIMINATOR} ORDER BY seq"
            ),
            rusqlite::params![self.id(), lo, hi],
        )
    }

    fn page(&self, lo: i64, hi: i64, limit: usize) -> Result<Vec<RowIn>> {
        self.query(
            &format!(
                "SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3 \
                 ORDER BY seq LIMIT ?4"
            ),
            rusqlite::params![self.id(), lo, hi, i64::try_from(limit).unwrap_or(i64::MAX)],
        )
    }

    fn count_before(&self, key: i64) -> u64 {
        self.conn
            .query_row(
                "SELECT count(*) FROM events WHERE session_id = ?1 AND seq < ?2",
                rusqlite::params![self.id(), key],
                |r| r.get::<_, i64>(0),
            )
            .map_or(0, |n| n.max(0) as u64)
    }

    fn turn_ends_before(&self, below: Option<i64>, limit: usize) -> Result<Vec<RowIn>> {
        self.query(
            &format!(
                "SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 AND type = 'turn/end' \
                 AND (ignorable IS NULL OR ignorable <> {PACKED_DISCRIMINATOR}) AND seq < ?2 \
                 ORDER BY seq DESC LIMIT ?3"
            ),
            rusqlite::params![self.id(), below.unwrap_or(i64::MAX), limit as i64],
        )
    }

    fn first(&self, n: usize) -> Result<Vec<RowIn>> {
        self.query(
            &format!(
                "SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 AND seq >= 0 \
                 ORDER BY seq LIMIT ?2"
            ),
            rusqlite::params![self.id(), i64::try_from(n).unwrap_or(i64::MAX)],
        )
    }

    fn last(&self, n: usize) -> Result<Vec<RowIn>> {
        self.query(
            &format!(
                "SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT ?2"
            ),
            rusqlite::params![self.id(), i64::try_from(n).unwrap_or(i64::MAX)],
        )
    }

    fn data_bytes(&self) -> Result<u64> {
        let bytes: i64 = self
            .conn
            .prepare_cached(
                "SELECT coalesce(sum(octet_length(data)), 0) FROM events WHERE session_id = ?1",
            )
            .and_then(|mut stmt| stmt.query_row([self.id()], |r| r.get(0)))
            .map_err(|e| sql_error("read events", self.path, e))?;
        Ok(bytes.max(0) as u64)
    }
}

/// Deletes what `plan` cuts and inserts its kept events again.
pub(crate) fn apply_plan(conn: &Connection, path: &Path, id: &str, plan: &Plan) -> Result<()> {
    conn.execute(
        "DELETE FROM events WHERE session_id = ?1 AND seq >= ?2",
        rusqlite::params![id, plan.delete_from],
    )
    .map_err(|e| sql_error("delete events", path, e))?;
    if !plan.reinsert.is_empty() {
        insert_rows(conn, path, id, &encode(&plan.reinsert)?)?;
    }
    Ok(())
}
