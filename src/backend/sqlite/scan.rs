//! Reading a session's rows back, with the same rules as the WAL's scan
//! (docs/SQLITE.md, "Recovery"):
//!
//! - the **commit point** is the last row that decodes to a `turn/end`;
//! - walking the rows in seq order, a row that does not decode, or whose
//!   first seq is not the next one (a gap or an overlap), is **corruption**
//!   when it sits at or before the commit point (the session is refused,
//!   naming the database, the seq and the rule), and the start of a **torn
//!   tail** after it (nothing from it on was ever acknowledged: repair
//!   deletes it);
//! - the valid events after the commit point go through the turn contract
//!   like the WAL's tail: an open turn gets closers, debris is cut.
//!
//! Reads seek: `read_from` starts at the earliest packed row within 1023
//! seqs before the requested seq that covers it (a malformed one included,
//! so the read fails closed), or at the commit row when that is earlier, and
//! a listing reads each session from its commit row on.

use std::path::Path;

use rusqlite::Connection;

use super::codec::{self, MAX_PACKED_MEMBERS, ROW_COLUMNS, RowIn};
use super::schema::sql_error;
use super::{SessionRow, encode};
use crate::error::{Corruption, Error, Result};
use crate::event::{Event, EventKind, MAX_SAFE_INTEGER};
use crate::json::Num;
use crate::scan::{
    Cut, CutReason, Evidence, Extent, Gap, OnDamage, Outcome, Proof, Salvage, Scan, SessionSummary,
    classify_tail, decide,
};

fn query_rows(
    conn: &Connection,
    path: &Path,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<RowIn>> {
    let mut stmt = conn
        .prepare_cached(sql)
        .map_err(|e| sql_error("read events", path, e))?;
    stmt.query_map(params, RowIn::from_row)
        .and_then(|rows| rows.collect())
        .map_err(|e| sql_error("read events", path, e))
}

/// Every row of `id` with `seq >= start`, in seq order.
fn rows_from(conn: &Connection, path: &Path, id: &str, start: u64) -> Result<Vec<RowIn>> {
    if start == 0 {
        // Rows with a damaged (negative) seq sort first and count too.
        return query_rows(
            conn,
            path,
            &format!("SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 ORDER BY seq"),
            [id],
        );
    }
    query_rows(
        conn,
        path,
        &format!(
            "SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq"
        ),
        rusqlite::params![id, sql_seq(start)],
    )
}

/// A seq as an SQL integer (seqs past 2^53 are clamped just above it).
fn sql_seq(seq: u64) -> i64 {
    seq.min(MAX_SAFE_INTEGER + 1) as i64
}

/// How many rows of `id` sort before `seq` (the position of the row at
/// `seq`, for messages).
fn rows_before(conn: &Connection, id: &str, seq: u64) -> u64 {
    conn.query_row(
        "SELECT count(*) FROM events WHERE session_id = ?1 AND seq < ?2",
        rusqlite::params![id, sql_seq(seq)],
        |r| r.get::<_, i64>(0),
    )
    .map_or(0, |n| n.max(0) as u64)
}

/// The row a walk stopped at.
#[derive(Debug)]
struct Bad {
    /// Its index among the rows walked.
    index: usize,
    /// Its `seq` column (`-1` when it is not an integer).
    seq_key: i64,
    /// The seq it should have held.
    expected: u64,
    reason: CutReason,
    detail: String,
    /// Whether a later row holds a `turn/end`: the row had been committed.
    committed: bool,
}

impl Bad {
    /// The refusal of a bad committed row.
    fn refusal(&self, path: &Path, id: &str, before: Before<'_>) -> Error {
        Error::from(Corruption {
            path: path.to_owned(),
            offset: before() + self.index as u64,
            unit: crate::error::Unit::Row,
            seq: Some(self.expected),
            reason: format!(
                "session {id:?}: invalid committed row (its seq column is {}) at seq {}: {} \
                 [{}]; a later row holds a turn/end, so this row had been committed [rule: {}]",
                self.seq_key,
                self.expected,
                self.detail,
                self.reason,
                Proof::LaterCommit.code()
            ),
        })
    }
}

/// Rows walked from `base`.
#[derive(Debug)]
struct Walk {
    base: u64,
    /// The events of the good rows before the first bad one.
    events: Vec<Event>,
    /// The first seq of each good row.
    starts: Vec<u64>,
    bad: Option<Bad>,
    rows: usize,
    bytes: u64,
}

/// Where the rows walked start, for messages: their count before the span.
type Before<'a> = &'a dyn Fn() -> u64;

/// Decodes `rows` (the rows from seq `base` on) up to the first bad row or
/// gap, noting whether a later row holds a `turn/end` (the bad row had been
/// committed: [`classify`] refuses it, or an explicit salvage cuts it).
fn walk(rows: &[RowIn], base: u64) -> Walk {
    // Reverse pass: the last row that decodes to a turn/end (only a scalar
    // row of that type can).
    let mut cache: Vec<Option<Result<Vec<Event>, codec::RowError>>> =
        (0..rows.len()).map(|_| None).collect();
    let mut commit_row = None;
    for (i, row) in rows.iter().enumerate().rev() {
        let candidate =
            !row.is_packed() && matches!(&row.event_type, codec::Col::Text(t) if t == b"turn/end");
        if !candidate {
            continue;
        }
        let decoded = codec::decode_row(row);
        let commits = matches!(&decoded, Ok(events) if events[0].kind() == EventKind::TurnEnd);
        cache[i] = Some(decoded);
        if commits {
            commit_row = Some(i);
            break;
        }
    }
    let mut w = Walk {
        base,
        events: Vec::new(),
        starts: Vec::new(),
        bad: None,
        rows: rows.len(),
        bytes: rows.iter().map(RowIn::data_len).sum(),
    };
    let mut expected = base;
    for (i, row) in rows.iter().enumerate() {
        let decoded = cache[i].take().unwrap_or_else(|| codec::decode_row(row));
        let problem = match decoded {
            Ok(events) if events[0].seq() == expected => {
                w.starts.push(expected);
                expected += events.len() as u64;
                w.events.extend(events);
                continue;
            }
            Ok(events) => (
                CutReason::Invalid,
                format!("row holds seq {}, expected {expected}", events[0].seq()),
            ),
            Err(e) => (e.reason, e.detail),
        };
        let (reason, detail) = problem;
        w.bad = Some(Bad {
            index: i,
            seq_key: row.seq_key(),
            expected,
            reason,
            detail,
            committed: commit_row.is_some_and(|c| i <= c),
        });
        break;
    }
    w
}

/// What a repair deletes and re-inserts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    /// Rows with `seq >=` this are deleted.
    pub delete_from: i64,
    /// Kept events of a packed row the cut starts inside, inserted again.
    pub reinsert: Vec<Event>,
}

/// A classified span of a session.
#[derive(Debug)]
pub(super) struct Classified {
    pub scan: Scan,
    /// The kept events from the span's first seq on.
    pub events: Vec<Event>,
    /// What repair deletes, when there is a cut.
    pub plan: Option<Plan>,
    /// Valid contiguous events stored (debris included), counted from 0.
    pub valid: u64,
}

/// Splits a walk into committed prefix, kept tail, cut and closers. `None`
/// when the span does not start at seq 0 and its commit point does not
/// carry its turn number (a full scan must count the turns).
fn classify(
    w: Walk,
    row: &SessionRow,
    before: Before<'_>,
    path: &Path,
    on_damage: OnDamage,
) -> Result<Option<Classified>> {
    let policy = row.policy();
    let committed_rel = w
        .events
        .iter()
        .rposition(|e| e.kind() == EventKind::TurnEnd)
        .map_or(0, |i| i + 1);
    if committed_rel == 0 && w.base > 0 {
        return Ok(None);
    }
    let committed = w.base + committed_rel as u64;
    let committed_turn = match committed_rel.checked_sub(1).map(|i| w.events[i].facts()) {
        None => 0,
        Some(Ok(facts)) if matches!(facts.turn, Num::Int(_)) => facts.turn.get().unwrap_or(0),
        Some(_) if w.base == 0 => w.events[..committed_rel]
            .iter()
            .filter(|e| e.kind() == EventKind::TurnStart)
            .count() as u64,
        Some(_) => return Ok(None),
    };
    let tail = &w.events[committed_rel..];
    let verdict = classify_tail(policy, committed, committed_turn, tail);
    let stored_len = committed + verdict.kept as u64;
    let kept_rel = (stored_len - w.base) as usize;
    let row_of = |seq: u64| w.starts.partition_point(|&s| s <= seq).saturating_sub(1);
    let debris = verdict.debris.as_ref().map(|v| {
        let r = row_of(stored_len);
        let start = w.starts[r];
        let then = w
            .bad
            .as_ref()
            .map(|b| format!("; then {} at seq {}: {}", b.reason, b.expected, b.detail))
            .unwrap_or_default();
        (
            Cut {
                offset: before() + r as u64,
                seq: stored_len,
                len: (w.rows - r) as u64,
                reason: CutReason::Debris,
                detail: format!("{v}{then}"),
            },
            Plan {
                delete_from: start as i64,
                reinsert: w.events[(start - w.base) as usize..kept_rel].to_vec(),
            },
        )
    });
    let bad = w.bad.as_ref().map(|b| {
        (
            Cut {
                offset: before() + b.index as u64,
                seq: b.expected,
                len: (w.rows - b.index) as u64,
                reason: b.reason,
                detail: b.detail.clone(),
            },
            Plan {
                delete_from: if b.seq_key >= 0 {
                    b.seq_key
                } else {
                    b.expected as i64
                },
                reinsert: Vec::new(),
            },
        )
    });
    let evidence = Evidence {
        invalid: w.bad.as_ref().map(|b| b.reason),
        proof: w
            .bad
            .as_ref()
            .is_some_and(|b| b.committed)
            .then_some(Proof::LaterCommit),
        debris: debris.is_some(),
        interrupted_repair: false,
        open_turn: !verdict.closers.is_empty(),
    };
    let outcome = decide(&evidence, on_damage);
    let (cut, plan) = match outcome {
        Outcome::Clean | Outcome::CloseOpenTurn | Outcome::RedoInterruptedRepair => (None, None),
        Outcome::CutTorn => bad.unzip(),
        Outcome::CutDebris => debris.unzip(),
        Outcome::RefuseCorrupt(_) => {
            let b = w.bad.as_ref().expect("a committed bad row");
            return Err(b.refusal(path, &row.header.id, before));
        }
        Outcome::CutDamaged(_) => {
            let b = w.bad.as_ref().expect("a committed bad row");
            let detail = format!(
                "damaged committed row {} (its seq column is {}), cut by a salvage repair: {} \
                 [{}]",
                before() + b.index as u64,
                b.seq_key,
                b.detail,
                b.reason
            );
            // From the first row any cut would take, whatever the kept rows
            // hold.
            let (cut, plan) = debris.or(bad).expect("a cut");
            let detail = if cut.reason == CutReason::Debris {
                cut.detail.clone()
            } else {
                detail
            };
            (
                Some(Cut {
                    reason: CutReason::Damaged,
                    detail,
                    ..cut
                }),
                Some(plan),
            )
        }
    };
    let valid = w.base + w.events.len() as u64;
    let mut events = w.events;
    let tail = events[committed_rel..].to_vec();
    events.truncate(kept_rel);
    let extent = Extent {
        bytes: w.bytes,
        committed,
        committed_turn,
        committed_time: events[..committed_rel].last().map(Event::time),
    };
    let scan = Scan::new(
        row.header.clone(),
        policy,
        extent,
        tail,
        verdict,
        outcome,
        cut,
    );
    Ok(Some(Classified {
        scan,
        events,
        plan,
        valid,
    }))
}

/// Reads and classifies every row of a session.
pub(super) fn full_scan(conn: &Connection, path: &Path, row: &SessionRow) -> Result<Classified> {
    full_scan_for(conn, path, row, false)
}

/// [`full_scan`], or with `salvage` the salvage read: a bad committed row
/// (which [`full_scan`] refuses) is cut with every row after it
/// ([`CutReason::Damaged`]), keeping the rows before it.
pub(super) fn full_scan_for(
    conn: &Connection,
    path: &Path,
    row: &SessionRow,
    salvage: bool,
) -> Result<Classified> {
    let id = &row.header.id;
    let rows = rows_from(conn, path, id, 0)?;
    let on_damage = if salvage {
        OnDamage::Salvage
    } else {
        OnDamage::Refuse
    };
    classify(walk(&rows, 0), row, &|| 0, path, on_damage)?.ok_or_else(|| {
        Error::io(
            "scan",
            path,
            std::io::Error::other("a scan from seq 0 always classifies"),
        )
    })
}

/// The seq of the last row that decodes to a `turn/end`, reading rows back
/// from the end of the session.
fn last_commit_row(conn: &Connection, path: &Path, id: &str) -> Result<Option<u64>> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 AND type = 'turn/end' \
             AND (ignorable IS NULL OR ignorable <> 0) ORDER BY seq DESC"
        ))
        .map_err(|e| sql_error("read events", path, e))?;
    let mut rows = stmt
        .query([id])
        .map_err(|e| sql_error("read events", path, e))?;
    while let Some(r) = rows.next().map_err(|e| sql_error("read events", path, e))? {
        let row = RowIn::from_row(r).map_err(|e| sql_error("read events", path, e))?;
        if let Ok(events) = codec::decode_row(&row)
            && events[0].kind() == EventKind::TurnEnd
        {
            return Ok(Some(events[0].seq()));
        }
    }
    Ok(None)
}

/// Where a read of the rows holding `from` starts: the earliest packed row
/// in `[from - 1023, from)` that covers `from` (or is malformed, so the read
/// fails closed), else `from`.
fn span_base(conn: &Connection, path: &Path, id: &str, from: u64) -> Result<u64> {
    let floor = from.saturating_sub(MAX_PACKED_MEMBERS as u64 - 1);
    let predecessors = query_rows(
        conn,
        path,
        &format!(
            "SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3 \
             AND ignorable = 0 ORDER BY seq"
        ),
        rusqlite::params![id, sql_seq(floor), sql_seq(from)],
    )?;
    let mut base = from;
    for row in &predecessors {
        let start = row.seq_key().max(0) as u64;
        match codec::decode_row(row) {
            Ok(events) if events.last().is_some_and(|e| e.seq() >= from) => base = base.min(start),
            Ok(_) => {}
            Err(_) => base = base.min(start),
        }
    }
    Ok(base)
}

/// The kept events from `from` on, reading only the rows from the commit
/// row (or the packed row holding `from`, when earlier) to the end.
pub(super) fn read_from(
    conn: &Connection,
    path: &Path,
    row: &SessionRow,
    from: u64,
) -> Result<Vec<Event>> {
    let id = &row.header.id;
    let span = span_base(conn, path, id, from)?;
    let start = last_commit_row(conn, path, id)?.map_or(0, |c| c.min(span));
    let rows = rows_from(conn, path, id, start)?;
    let before = || rows_before(conn, id, start);
    let c = match classify(walk(&rows, start), row, &before, path, OnDamage::Refuse)? {
        Some(c) => c,
        None => full_scan(conn, path, row)?,
    };
    Ok(c.events.into_iter().filter(|e| e.seq() >= from).collect())
}

/// A listing row: the header, and the state from the rows after the commit
/// row (a session that cannot be read is listed as corrupt, with why).
pub(super) fn summarize(conn: &Connection, path: &Path, row: &SessionRow) -> SessionSummary {
    match tail_summary(conn, path, row) {
        Ok(summary) => summary,
        Err(e) => SessionSummary::corrupt(row.header.id.clone(), 0, e.to_string())
            .with_header(row.header.clone()),
    }
}

fn tail_summary(conn: &Connection, path: &Path, row: &SessionRow) -> Result<SessionSummary> {
    let id = &row.header.id;
    let start = last_commit_row(conn, path, id)?.unwrap_or(0);
    let rows = rows_from(conn, path, id, start)?;
    let before = || rows_before(conn, id, start);
    let c = match classify(walk(&rows, start), row, &before, path, OnDamage::Refuse)? {
        Some(c) => c,
        None => full_scan(conn, path, row)?,
    };
    let bytes: i64 = conn
        .prepare_cached(
            "SELECT coalesce(sum(octet_length(data)), 0) FROM events WHERE session_id = ?1",
        )
        .and_then(|mut stmt| stmt.query_row([id], |r| r.get(0)))
        .map_err(|e| sql_error("read events", path, e))?;
    Ok(SessionSummary::scanned(
        id.clone(),
        &c.scan,
        c.valid,
        bytes.max(0) as u64,
        c.scan.cut.as_ref().map(|cut| cut.problem("row")),
    ))
}

/// The seq an append to `id` must start at, from the last two rows and the
/// packed row within 1023 seqs that may cover them. A tail that does not
/// decode is refused: appends never start after a torn tail.
pub(super) fn stored_next_seq(conn: &Connection, path: &Path, id: &str) -> Result<u64> {
    let tail = query_rows(
        conn,
        path,
        &format!(
            "SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 2"
        ),
        [id],
    )?;
    let Some(lowest) = tail.last() else {
        return Ok(0);
    };
    let base = span_base(conn, path, id, lowest.seq_key().max(0) as u64)?;
    let rows = rows_from(conn, path, id, base)?;
    let before = || rows_before(conn, id, base);
    let w = walk(&rows, base);
    if let Some(b) = w.bad.as_ref().filter(|b| b.committed) {
        return Err(b.refusal(path, id, &before));
    }
    if let Some(b) = &w.bad {
        return Err(Error::from(Corruption {
            path: path.to_owned(),
            offset: before() + b.index as u64,
            unit: crate::error::Unit::Row,
            seq: Some(b.expected),
            reason: format!(
                "session {id:?} has an invalid physical tail at seq {}: {} [{}]; recover the \
                 session before appending",
                b.expected, b.detail, b.reason
            ),
        }));
    }
    Ok(base + w.events.len() as u64)
}

/// Deletes what `plan` cuts and inserts its kept events again.
pub(super) fn apply_plan(conn: &Connection, path: &Path, id: &str, plan: &Plan) -> Result<()> {
    conn.execute(
        "DELETE FROM events WHERE session_id = ?1 AND seq >= ?2",
        rusqlite::params![id, plan.delete_from],
    )
    .map_err(|e| sql_error("delete events", path, e))?;
    if !plan.reinsert.is_empty() {
        super::insert_rows(conn, path, id, &encode(&plan.reinsert)?)?;
    }
    Ok(())
}

/// The rows `plan` deletes (every row of `id` with `seq >= delete_from`),
/// one JSON object a line with their columns exactly, for the quarantine
/// file (docs/SQLITE.md, "Quarantine").
pub(super) fn cut_rows(conn: &Connection, path: &Path, id: &str, plan: &Plan) -> Result<Vec<u8>> {
    let rows = query_rows(
        conn,
        path,
        &format!(
            "SELECT {ROW_COLUMNS} FROM events WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq"
        ),
        rusqlite::params![id, plan.delete_from],
    )?;
    let mut out = Vec::new();
    for row in &rows {
        out.extend_from_slice(row_json(id, row).as_bytes());
        out.push(b'\n');
    }
    Ok(out)
}

/// One `events` row as a JSON object, its columns in table order: NULL is
/// `null`, INTEGER a number, TEXT a string (`{"text_hex":…}` when it is not
/// UTF-8), BLOB `{"blob_hex":…}`, REAL `{"real":"…"}`.
pub(super) fn row_json(id: &str, row: &RowIn) -> String {
    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
    fn col(c: &codec::Col) -> String {
        match c {
            codec::Col::Null => "null".to_owned(),
            codec::Col::Integer(n) => n.to_string(),
            codec::Col::Real(f) => format!("{{\"real\":\"{f}\"}}"),
            codec::Col::Text(t) => match std::str::from_utf8(t) {
                Ok(text) => serde_json::to_string(text).expect("a string serializes"),
                Err(_) => format!("{{\"text_hex\":\"{}\"}}", hex(t)),
            },
            codec::Col::Blob(b) => format!("{{\"blob_hex\":\"{}\"}}", hex(b)),
        }
    }
    format!(
        "{{\"session_id\":{},\"seq\":{},\"type\":{},\"time\":{},\"data\":{},\
         \"source_event_seqs\":{},\"surface_op\":{},\"ignorable\":{}}}",
        serde_json::to_string(id).expect("a string serializes"),
        col(&row.seq),
        col(&row.event_type),
        col(&row.time),
        col(&row.data),
        col(&row.source_event_seqs),
        col(&row.surface_op),
        col(&row.ignorable)
    )
}

/// Every row of a session that decodes, in seq order, past any damage: a
/// row that does not decode, or whose seqs were already read, is a gap of
/// its row (adjacent ones are one gap; offset and length in rows), and a row
/// whose first seq skips ahead is a gap of the missing seqs (zero rows long
/// when no bad row sits there).
pub(super) fn salvage(conn: &Connection, path: &Path, row: &SessionRow) -> Result<Salvage> {
    let rows = rows_from(conn, path, &row.header.id, 0)?;
    let mut events: Vec<Event> = Vec::new();
    let mut gaps = Vec::new();
    let mut open: Option<Gap> = None;
    let mut expected = 0u64;
    for (i, r) in rows.iter().enumerate() {
        let i = i as u64;
        let problem = match codec::decode_row(r) {
            Ok(decoded) if decoded[0].seq() >= expected => {
                let first = decoded[0].seq();
                match open.take() {
                    Some(mut gap) => {
                        gap.next_seq = Some(first);
                        gaps.push(gap);
                    }
                    None if first > expected => gaps.push(Gap {
                        offset: i,
                        len: 0,
                        first_seq: expected,
                        next_seq: Some(first),
                        reason: format!(
                            "{}: missing rows before row {i} (expected seq {expected}, got {first})",
                            CutReason::Invalid
                        ),
                        damaged: true,
                    }),
                    None => {}
                }
                expected = decoded.last().map_or(first, Event::seq) + 1;
                events.extend(decoded);
                continue;
            }
            Ok(decoded) => format!(
                "{}: row {i} holds seq {}, but seq {} was already read",
                CutReason::Invalid,
                decoded[0].seq(),
                expected - 1
            ),
            Err(e) => format!(
                "{}: row {i} (its seq column is {}): {}",
                e.reason,
                r.seq_key(),
                e.detail
            ),
        };
        match &mut open {
            Some(gap) => gap.len += 1,
            None => {
                open = Some(Gap {
                    offset: i,
                    len: 1,
                    first_seq: expected,
                    next_seq: None,
                    reason: problem,
                    damaged: true,
                });
            }
        }
    }
    gaps.extend(open);
    Ok(Salvage {
        header: row.header.clone(),
        events,
        gaps,
    })
}
