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

use super::codec::{self, MAX_PACKED_MEMBERS, RowIn};
use crate::contract::Policy;
use crate::error::{Corruption, Error, Result};
use crate::event::{Event, EventKind, MAX_SAFE_INTEGER};
use crate::header::SessionHeader;
use crate::json::Num;
use crate::scan::{
    Cut, CutReason, Evidence, Extent, Findings, Gap, OnDamage, Outcome, Proof, Salvage, Scan,
    SessionSummary, TailVerdict, classify_tail, decide,
};
use crate::upstream::chunks::{PackedRun, Record};

/// One session's rows, wherever a store of rows keeps them: what every
/// read of this module asks of the store. The SQLite store
/// (`backend::sqlite`) and the PostgreSQL store
/// (`backend::postgres`) answer it from one transaction each, so both
/// classify a session by the same code.
pub(crate) trait Rows {
    /// The store, for messages.
    fn path(&self) -> &Path;
    /// The session's header.
    fn header(&self) -> &SessionHeader;
    /// The session's policy.
    fn policy(&self) -> Policy;
    /// Every row of the session in seq order, rows with a damaged
    /// (negative) seq first.
    fn all(&self) -> Result<Vec<RowIn>>;
    /// The rows whose `seq` column is at least `key`, in seq order.
    fn at_or_after(&self, key: i64) -> Result<Vec<RowIn>>;
    /// The packed rows (`ignorable` the packed discriminator) whose `seq`
    /// column is in `[lo, hi)`, in seq order.
    fn packed_between(&self, lo: i64, hi: i64) -> Result<Vec<RowIn>>;
    /// At most `limit` rows whose `seq` column is in `[lo, hi)`, in seq
    /// order: one page of a streamed read.
    fn page(&self, lo: i64, hi: i64, limit: usize) -> Result<Vec<RowIn>>;
    /// How many rows sort before `key` (a row's position, for messages).
    fn count_before(&self, key: i64) -> u64;
    /// Up to `limit` rows of type `turn/end` that are not packed, whose
    /// `seq` column is below `below` (all when `None`), from the end.
    fn turn_ends_before(&self, below: Option<i64>, limit: usize) -> Result<Vec<RowIn>>;
    /// The seq of the last row that decodes to a `turn/end`, reading rows
    /// back from the end of the session a few at a time. A source holding
    /// the rows already answers from them.
    fn last_commit_row(&self) -> Result<Option<u64>> {
        const PAGE: usize = 8;
        let mut below = None;
        loop {
            let page = self.turn_ends_before(below, PAGE)?;
            for row in &page {
                if let Ok(events) = codec::decode_row(row)
                    && events[0].kind() == EventKind::TurnEnd
                {
                    return Ok(Some(events[0].seq()));
                }
            }
            match page.last() {
                Some(last) if page.len() == PAGE => below = Some(last.seq_key()),
                _ => return Ok(None),
            }
        }
    }
    /// The first `n` rows with a non-negative seq.
    fn first(&self, n: usize) -> Result<Vec<RowIn>>;
    /// The last `n` rows, from the end.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    fn last(&self, n: usize) -> Result<Vec<RowIn>>;
    /// Bytes of `data` the session's rows hold.
    fn data_bytes(&self) -> Result<u64>;
}

/// Every row of the session with `seq >= start`, in seq order.
fn rows_from(src: &dyn Rows, start: u64) -> Result<Vec<RowIn>> {
    if start == 0 {
        // Rows with a damaged (negative) seq sort first and count too.
        return src.all();
    }
    src.at_or_after(sql_seq(start))
}

/// A seq as an SQL integer (seqs past 2^53 are clamped just above it).
pub(crate) fn sql_seq(seq: u64) -> i64 {
    seq.min(MAX_SAFE_INTEGER + 1) as i64
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
        committed_row_refusal(
            path,
            id,
            before() + self.index as u64,
            self.seq_key,
            self.expected,
            self.reason,
            &self.detail,
        )
    }
}

/// The refusal of the bad row at position `at` among a session's rows
/// (its `seq` column `seq_key`, where seq `expected` belonged), which a
/// later `turn/end` row proves committed.
pub(crate) fn committed_row_refusal(
    path: &Path,
    id: &str,
    at: u64,
    seq_key: i64,
    expected: u64,
    reason: CutReason,
    detail: &str,
) -> Error {
    Error::from(Corruption {
        path: path.to_owned(),
        offset: at,
        unit: crate::error::Unit::Row,
        seq: Some(expected),
        reason: format!(
            "session {id:?}: invalid committed row (its seq column is {seq_key}) at seq \
             {expected}: {detail} [{reason}]; a later row holds a turn/end, so this row had \
             been committed [rule: {}]",
            Proof::LaterCommit.code()
        ),
    })
}

/// Rows walked from `base`.
#[derive(Debug)]
struct Walk {
    base: u64,
    /// How many events of the good rows come before `events` (kept by the
    /// caller as stored records, not decoded): none, or all those before
    /// the last `turn/end`, which `events` then starts with.
    skipped: usize,
    /// How many `turn/start`s the skipped events hold.
    skipped_turn_starts: usize,
    /// The events of the good rows before the first bad one (after the
    /// skipped ones).
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
    let mut cache = decode_cache(rows.len());
    let commit_row = commit_row(rows, &mut cache);
    let mut w = Walk {
        base,
        skipped: 0,
        skipped_turn_starts: 0,
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

type Decoded = Result<Vec<Event>, codec::RowError>;

fn decode_cache(rows: usize) -> Vec<Option<Decoded>> {
    (0..rows).map(|_| None).collect()
}

/// The last row that decodes to a `turn/end` (only a scalar row of that
/// type can), decoding the candidates from the end; their decodings are
/// left in `cache`.
fn commit_row(rows: &[RowIn], cache: &mut [Option<Decoded>]) -> Option<usize> {
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
            return Some(i);
        }
    }
    None
}

/// A good row read for its storage records: a packed row as stored (when
/// it is in the canonical spelling) or the events it decodes to.
#[derive(Debug)]
pub(crate) enum Item {
    /// A scalar row's event.
    Event(Event),
    /// A packed row decoded (it is not in the canonical spelling).
    Events(Vec<Event>),
    /// A packed row as stored.
    Packed(PackedRun),
}

impl Item {
    fn of(mut events: Vec<Event>) -> Item {
        if events.len() == 1 {
            Item::Event(events.pop().expect("one event"))
        } else {
            Item::Events(events)
        }
    }

    fn events(&self) -> &[Event] {
        match self {
            Item::Event(event) => std::slice::from_ref(event),
            Item::Events(events) => events,
            Item::Packed(_) => &[],
        }
    }

    fn first_seq(&self) -> u64 {
        match self {
            Item::Packed(run) => run.seq0(),
            other => other.events()[0].seq(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Item::Packed(run) => run.len(),
            other => other.events().len(),
        }
    }

    fn into_events(self) -> Vec<Event> {
        match self {
            Item::Event(event) => vec![event],
            Item::Events(events) => events,
            Item::Packed(run) => run.events(),
        }
    }

    /// The item as a storage record's source.
    pub(crate) fn records(&self) -> impl Iterator<Item = Record<'_>> {
        let (events, packed) = match self {
            Item::Packed(run) => (&[][..], Some(Record::Packed(run))),
            other => (other.events(), None),
        };
        events.iter().map(|e| Record::Event(e.into())).chain(packed)
    }
}

/// [`walk`] of every row of a session (from seq 0) that leaves the good
/// rows before the last `turn/end` as they are stored: packed rows in the
/// canonical spelling are checked, not decoded, and those rows are given
/// back as items beside the walk (whose `events` start at the last
/// `turn/end`). A packed row is checked to decode exactly when it would
/// decode ([`codec::stored_run`]), so the walk classifies as [`walk`]'s
/// does.
fn walk_items(rows: Vec<RowIn>) -> (Walk, Vec<Item>) {
    let mut cache = decode_cache(rows.len());
    let commit_row = commit_row(&rows, &mut cache);
    let count = rows.len();
    let bytes = rows.iter().map(RowIn::data_len).sum();
    let mut items: Vec<Item> = Vec::with_capacity(count);
    let mut starts = Vec::with_capacity(count);
    let mut bad = None;
    let mut expected = 0u64;
    for (i, mut row) in rows.into_iter().enumerate() {
        let seq_key = row.seq_key();
        let decoded = match cache[i].take() {
            Some(decoded) => decoded.map(Item::of),
            None => match codec::stored_run(&mut row) {
                Some(run) => Ok(Item::Packed(run)),
                None => codec::decode_row(&row).map(Item::of),
            },
        };
        let problem = match decoded {
            Ok(item) if item.first_seq() == expected => {
                starts.push(expected);
                expected += item.len() as u64;
                items.push(item);
                continue;
            }
            Ok(item) => (
                CutReason::Invalid,
                format!("row holds seq {}, expected {expected}", item.first_seq()),
            ),
            Err(e) => (e.reason, e.detail),
        };
        let (reason, detail) = problem;
        bad = Some(Bad {
            index: i,
            seq_key,
            expected,
            reason,
            detail,
            committed: commit_row.is_some_and(|c| i <= c),
        });
        break;
    }
    let split = items
        .iter()
        .rposition(|item| item.events().iter().any(|e| e.kind() == EventKind::TurnEnd))
        .unwrap_or(0);
    let tail: Vec<Event> = items.drain(split..).flat_map(Item::into_events).collect();
    let w = Walk {
        base: 0,
        skipped: items.iter().map(Item::len).sum(),
        skipped_turn_starts: items
            .iter()
            .flat_map(Item::events)
            .filter(|e| e.kind() == EventKind::TurnStart)
            .count(),
        events: tail,
        starts,
        bad,
        rows: count,
        bytes,
    };
    (w, items)
}

/// What a repair deletes and re-inserts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Rows with `seq >=` this are deleted.
    pub delete_from: i64,
    /// Kept events of a packed row the cut starts inside, inserted again.
    pub reinsert: Vec<Event>,
}

/// A classified span of a session.
#[derive(Debug)]
pub(crate) struct Classified {
    pub scan: Scan,
    /// The kept events from the span's first seq on (after the skipped
    /// ones, when the walk skipped some).
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
    src: &dyn Rows,
    before: Before<'_>,
    on_damage: OnDamage,
) -> Result<Option<Classified>> {
    let policy = src.policy();
    let path = src.path();
    // Positions relative to `base` count the skipped events; `w.events`
    // starts after them (at the last turn/end when any are skipped).
    let skipped = w.skipped;
    let committed_rel = w
        .events
        .iter()
        .rposition(|e| e.kind() == EventKind::TurnEnd)
        .map_or(0, |i| skipped + i + 1);
    debug_assert!(skipped == 0 || committed_rel == skipped + 1);
    if committed_rel == 0 && w.base > 0 {
        return Ok(None);
    }
    let committed = w.base + committed_rel as u64;
    let Some(committed_turn) = committed_turn(&w, committed_rel) else {
        return Ok(None);
    };
    let tail = &w.events[committed_rel - skipped..];
    let verdict = classify_tail(policy, committed, committed_turn, tail);
    let stored_len = committed + verdict.kept as u64;
    let kept_rel = (stored_len - w.base) as usize;
    let debris = debris_cut(&w, &verdict, stored_len, kept_rel, before);
    let bad = bad_cut(&w, before);
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
        Outcome::RefuseCorrupt(_) => {
            let b = w.bad.as_ref().expect("a committed bad row");
            return Err(b.refusal(path, &src.header().id, before));
        }
        Outcome::CutDamaged(_) => {
            let b = w.bad.as_ref().expect("a committed bad row");
            let (cut, plan) = salvage_cut(b, debris.or(bad).expect("a cut"), before);
            (Some(cut), Some(plan))
        }
        _ => Findings {
            torn: bad,
            debris,
            interrupted: None,
        }
        .chosen(outcome)
        .unzip(),
    };
    let valid = w.base + (skipped + w.events.len()) as u64;
    let mut events = w.events;
    let tail = events[committed_rel - skipped..].to_vec();
    events.truncate(kept_rel - skipped);
    let extent = Extent {
        bytes: w.bytes,
        committed,
        committed_turn,
        committed_time: events[..committed_rel - skipped].last().map(Event::time),
    };
    let scan = Scan::new(
        src.header().clone(),
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

/// The turn number at the commit point `committed_rel` (relative to the
/// walk's base): what its `turn/end` names, else (from seq 0) the
/// `turn/start`s counted; `None` when neither can tell.
fn committed_turn(w: &Walk, committed_rel: usize) -> Option<u64> {
    let skipped = w.skipped;
    match committed_rel
        .checked_sub(1)
        .map(|i| w.events[i - skipped].facts())
    {
        None => Some(0),
        Some(Ok(facts)) if matches!(facts.turn, Num::Int(_)) => Some(facts.turn.get().unwrap_or(0)),
        Some(_) if w.base == 0 => Some(
            (w.skipped_turn_starts
                + w.events[..committed_rel - skipped]
                    .iter()
                    .filter(|e| e.kind() == EventKind::TurnStart)
                    .count()) as u64,
        ),
        Some(_) => None,
    }
}

/// The cut of the debris after the kept events (from the row holding
/// `stored_len`), with its plan: delete from that row and put back the
/// kept events it held.
fn debris_cut(
    w: &Walk,
    verdict: &TailVerdict,
    stored_len: u64,
    kept_rel: usize,
    before: Before<'_>,
) -> Option<(Cut, Plan)> {
    let v = verdict.debris.as_ref()?;
    let row_of = |seq: u64| w.starts.partition_point(|&s| s <= seq).saturating_sub(1);
    let r = row_of(stored_len);
    let start = w.starts[r];
    let then = w
        .bad
        .as_ref()
        .map(|b| format!("; then {} at seq {}: {}", b.reason, b.expected, b.detail))
        .unwrap_or_default();
    Some((
        Cut {
            offset: before() + r as u64,
            seq: stored_len,
            len: (w.rows - r) as u64,
            reason: CutReason::Debris,
            detail: format!("{v}{then}"),
        },
        Plan {
            delete_from: start as i64,
            reinsert: w.events[(start - w.base) as usize - w.skipped..kept_rel - w.skipped]
                .to_vec(),
        },
    ))
}

/// The cut of the first bad row and everything after it, with its plan.
fn bad_cut(w: &Walk, before: Before<'_>) -> Option<(Cut, Plan)> {
    let b = w.bad.as_ref()?;
    Some((
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
    ))
}

/// A salvage's cut of the damaged committed row `b`: from the first row
/// any cut would take (`first`), whatever the kept rows hold.
fn salvage_cut(b: &Bad, first: (Cut, Plan), before: Before<'_>) -> (Cut, Plan) {
    let (cut, plan) = first;
    let detail = if cut.reason == CutReason::Debris {
        cut.detail.clone()
    } else {
        format!(
            "damaged committed row {} (its seq column is {}), cut by a salvage repair: {} [{}]",
            before() + b.index as u64,
            b.seq_key,
            b.detail,
            b.reason
        )
    };
    (
        Cut {
            reason: CutReason::Damaged,
            detail,
            ..cut
        },
        plan,
    )
}

/// Refuses a repair decided from `scan` when the session, read again under
/// the writer's transaction, scans to something else (`now`): another
/// kept length or tail, or other closers (empty closers with a cut are a
/// cut alone, which a live writer adopting the log asks for).
pub(crate) fn check_unchanged(id: &str, now: &Scan, scan: &Scan) -> Result<()> {
    if now.stored_len() != scan.stored_len()
        || now.tail != scan.tail
        || (!scan.closers.is_empty() && now.closers != scan.closers)
    {
        return Err(Error::StaleRepair {
            id: id.to_owned(),
            detail: format!(
                "the stored tail changed since it was scanned (stored next seq is {}; the \
                 repair's closers start at seq {})",
                now.stored_len(),
                scan.stored_len()
            ),
        });
    }
    Ok(())
}

/// Reads and classifies every row of a session.
pub(crate) fn full_scan(src: &dyn Rows) -> Result<Classified> {
    full_scan_for(src, false)
}

/// A classification from seq 0, which always classifies.
fn from_zero(src: &dyn Rows, c: Option<Classified>) -> Result<Classified> {
    c.ok_or_else(|| {
        Error::io(
            "scan",
            src.path(),
            std::io::Error::other("a scan from seq 0 always classifies"),
        )
    })
}

/// [`full_scan`], or with `salvage` the salvage read: a bad committed row
/// (which [`full_scan`] refuses) is cut with every row after it
/// ([`CutReason::Damaged`]), keeping the rows before it.
pub(crate) fn full_scan_for(src: &dyn Rows, salvage: bool) -> Result<Classified> {
    let rows = src.all()?;
    let on_damage = if salvage {
        OnDamage::Salvage
    } else {
        OnDamage::Refuse
    };
    let c = classify(walk(&rows, 0), src, &|| 0, on_damage)?;
    from_zero(src, c)
}

/// [`full_scan`] that leaves the good rows before the last `turn/end` as
/// stored ([`walk_items`]): the classification, and those rows as items
/// (the kept events after them are the classification's `events`).
pub(crate) fn full_scan_items(src: &dyn Rows) -> Result<(Classified, Vec<Item>)> {
    let (w, items) = walk_items(src.all()?);
    let c = classify(w, src, &|| 0, OnDamage::Refuse)?;
    Ok((from_zero(src, c)?, items))
}

/// Where a read of the rows holding `from` starts: the earliest packed row
/// in `[from - 1023, from)` that covers `from` (or is malformed, so the read
/// fails closed), else `from`.
fn span_base(src: &dyn Rows, from: u64) -> Result<u64> {
    let floor = from.saturating_sub(MAX_PACKED_MEMBERS as u64 - 1);
    let predecessors = src.packed_between(sql_seq(floor), sql_seq(from))?;
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

/// Classifies the rows from `start` on (a commit row, or earlier), or the
/// whole session when the span cannot be classified alone.
fn classify_from(src: &dyn Rows, start: u64) -> Result<Classified> {
    let rows = rows_from(src, start)?;
    let before = || src.count_before(sql_seq(start));
    match classify(walk(&rows, start), src, &before, OnDamage::Refuse)? {
        Some(c) => Ok(c),
        None => full_scan(src),
    }
}

/// Classifies a session from its rows after the commit row (the whole
/// session when that span cannot be classified alone): what a writer's
/// open reads, whatever the session's length.
pub(crate) fn tail_scan(src: &dyn Rows) -> Result<Classified> {
    let start = src.last_commit_row()?.unwrap_or(0);
    classify_from(src, start)
}

/// The kept events from `from` on, reading only the rows from the commit
/// row (or the packed row holding `from`, when earlier) to the end.
pub(crate) fn read_from(src: &dyn Rows, from: u64) -> Result<Vec<Event>> {
    let span = span_base(src, from)?;
    let start = src.last_commit_row()?.map_or(0, |c| c.min(span));
    let c = classify_from(src, start)?;
    Ok(c.events.into_iter().filter(|e| e.seq() >= from).collect())
}

/// The first `n` stored events of a session, from its first rows: each
/// row decoded and its events checked against the turn contract; the first
/// row that does not decode or events that break the contract end the read
/// (what a scan would cut is never served).
pub(crate) fn read_first(src: &dyn Rows, n: usize) -> Result<Vec<Event>> {
    let rows = src.first(n)?;
    let mut tracker = crate::contract::Tracker::new(src.policy());
    let mut events: Vec<Event> = Vec::new();
    'rows: for r in &rows {
        let Ok(decoded) = codec::decode_row(r) else {
            break;
        };
        for event in decoded {
            if event.seq() != events.len() as u64 || tracker.accept(&event).is_err() {
                break 'rows;
            }
            events.push(event);
        }
        if events.len() >= n {
            break;
        }
    }
    events.truncate(n);
    Ok(events)
}

/// A listing row: the header, and the state from the rows after the commit
/// row (a session that cannot be read is listed as corrupt, with why).
pub(crate) fn summarize(src: &dyn Rows) -> SessionSummary {
    match tail_summary(src) {
        Ok(summary) => summary,
        Err(e) => SessionSummary::corrupt(
            src.header().id.clone(),
            src.data_bytes().unwrap_or(0),
            e.to_string(),
        )
        .with_header(src.header().clone()),
    }
}

fn tail_summary(src: &dyn Rows) -> Result<SessionSummary> {
    let c = tail_scan(src)?;
    Ok(SessionSummary::scanned(
        src.header().id.clone(),
        &c.scan,
        c.valid,
        src.data_bytes()?,
        c.scan.cut.as_ref().map(|cut| cut.problem("row")),
    ))
}

/// The seq an append to the session must start at, from the last two rows
/// and the packed row within 1023 seqs that may cover them. A tail that
/// does not decode is refused: appends never start after a torn tail.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(crate) fn stored_next_seq(src: &dyn Rows) -> Result<u64> {
    let tail = src.last(2)?;
    let Some(lowest) = tail.last() else {
        return Ok(0);
    };
    let base = span_base(src, lowest.seq_key().max(0) as u64)?;
    let rows = rows_from(src, base)?;
    let before = || src.count_before(sql_seq(base));
    let w = walk(&rows, base);
    let (path, id) = (src.path(), &src.header().id);
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

/// The rows `plan` deletes (every row with `seq >= delete_from`), one JSON
/// object a line with their columns exactly, for the quarantine file
/// (docs/SQLITE.md, "Quarantine").
pub(crate) fn cut_rows(src: &dyn Rows, plan: &Plan) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for row in &src.at_or_after(plan.delete_from)? {
        out.extend_from_slice(row_json(&src.header().id, row).as_bytes());
        out.push(b'\n');
    }
    Ok(out)
}

/// One `events` row as a JSON object, its columns in table order: NULL is
/// `null`, INTEGER a number, TEXT a string (`{"text_hex":…}` when it is not
/// UTF-8), BLOB `{"blob_hex":…}`, REAL `{"real":"…"}`.
pub(crate) fn row_json(id: &str, row: &RowIn) -> String {
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
pub(crate) fn salvage(src: &dyn Rows) -> Result<Salvage> {
    let rows = src.all()?;
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
        header: src.header().clone(),
        events,
        gaps,
    })
}
