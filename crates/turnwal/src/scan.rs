//! The scan result model shared by every backend: how a stored log splits
//! into a committed prefix, a kept tail, bytes to cut and closers to add.

use std::fmt;

use crate::contract::{Policy, Tracker, Violation, interrupted_turn_closers};
use crate::event::{Event, EventKind};
use crate::header::SessionHeader;

/// What a backend found in one stored log, before any repair.
#[derive(Debug, Clone)]
pub struct Scan {
    /// The session header.
    pub header: SessionHeader,
    /// The policy the log was written under.
    pub policy: Policy,
    /// Events in the committed prefix: everything through the last `turn/end`.
    pub committed: u64,
    /// Latest turn number started within the committed prefix.
    pub committed_turn: u64,
    /// Valid events kept after the commit point: the real events of an open
    /// final turn, or (under `Lenient`) loose events between turns.
    pub tail: Vec<Event>,
    /// What recovery cuts: torn, zero or garbage bytes, or debris records.
    pub cut: Option<Cut>,
    /// Synthetic closers for the open final turn (empty when balanced).
    pub closers: Vec<Event>,
    /// Latest turn number started, counting the kept tail.
    pub last_turn: u64,
    /// Size of the stored log in bytes (rows for backends without bytes).
    pub bytes: u64,
    /// Time of the last kept event.
    pub last_time: Option<i64>,
    /// What recovery does with the log: the decision [`decide`] made from
    /// the evidence the backend found.
    pub outcome: Outcome,
}

/// The part of a stored log that recovery removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// Where the cut starts: a byte offset for file backends.
    pub offset: u64,
    /// The seq the first removed record has or should have (the stored length).
    pub seq: u64,
    /// How much is removed: bytes for file backends.
    pub len: u64,
    /// Why.
    pub reason: CutReason,
    /// Details for people (which check failed, which rule the debris broke).
    pub detail: String,
}

impl Cut {
    /// A cut from `offset` to `end`, the end of the log (a cut always runs
    /// to the end), in the log's unit: bytes for file backends.
    pub(crate) fn to_end(
        offset: u64,
        end: u64,
        seq: u64,
        reason: CutReason,
        detail: String,
    ) -> Cut {
        debug_assert!(offset <= end, "a cut at {offset} past the end {end}");
        Cut {
            offset,
            seq,
            len: end - offset,
            reason,
            detail,
        }
    }

    /// The cut as a listing's problem: `<reason> at <unit> <offset>: <detail>`.
    pub(crate) fn problem(&self, unit: &str) -> String {
        format!("{} at {unit} {}: {}", self.reason, self.offset, self.detail)
    }
}

/// Why bytes or records are cut. None of them was ever acknowledged, except
/// for [`CutReason::Damaged`], which only an explicit salvage cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CutReason {
    /// A record that ends past the end of the file (a torn write).
    Incomplete,
    /// Zero bytes after the last valid record (size persisted before data).
    ZeroFill,
    /// Bytes that do not form a valid record (checksum, framing, stale seq).
    Invalid,
    /// Valid records after the commit point that break the turn contract
    /// (crash debris under `Strict`).
    Debris,
    /// Closers of a repair that was interrupted before its `turn/end` was
    /// written; the repair is redone from the real events.
    InterruptedRepair,
    /// Damaged data, possibly acknowledged, with everything after it: cut
    /// only by an explicit salvage repair (`recover --salvage`), never by an
    /// automatic one, and quarantined first.
    Damaged,
}

impl CutReason {
    /// A stable identifier.
    pub fn code(self) -> &'static str {
        match self {
            CutReason::Incomplete => "incomplete-record",
            CutReason::ZeroFill => "zero-fill",
            CutReason::Invalid => "invalid-record",
            CutReason::Debris => "debris",
            CutReason::InterruptedRepair => "interrupted-repair",
            CutReason::Damaged => "damaged",
        }
    }
}

impl fmt::Display for CutReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// What proves that data a repair would cut had been acknowledged (or
/// committed), so that no automatic repair may cut it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Proof {
    /// The log's durability proof states a durable length past it (WAL).
    Proven,
    /// The log is shorter than its durability proof states (WAL).
    Missing,
    /// A later record's watermark covers it (WAL).
    Watermark,
    /// A later record was written with the first batch, which is published
    /// only complete and fsynced (WAL).
    Materialized,
    /// A later record or row holds a `turn/end`: it lies in the committed
    /// region (the upstream formats' rule, and turnwal's).
    LaterCommit,
    /// The record's frame is intact and the next record follows it in seq,
    /// but its checksum fails, where no torn or lost sector could have
    /// left the frame intact: damage after the fact, not a tear (WAL).
    DamagedInPlace,
    /// It is the log's first record, written with the file, which is
    /// published only complete and fsynced (WAL).
    FirstRecord,
    /// A valid record states that the file it was published in, fsynced
    /// whole before its name pointed at it, reaches past it (WAL).
    Published,
    /// It is a sealed unit with an intact frame: units reach a log only in
    /// a file published whole, never appended (WAL).
    SealedUnit,
}

impl Proof {
    /// A stable identifier, named in corruption errors as `[rule: …]`.
    pub fn code(self) -> &'static str {
        match self {
            Proof::Proven => "inside-proven-length",
            Proof::Missing => "shorter-than-proven",
            Proof::Watermark => "below-later-watermark",
            Proof::Materialized => "inside-materialized-batch",
            Proof::LaterCommit => "before-a-later-commit",
            Proof::DamagedInPlace => "damaged-in-place",
            Proof::FirstRecord => "first-record",
            Proof::Published => "inside-published-copy",
            Proof::SealedUnit => "sealed-unit",
        }
    }
}

/// What the recovery of a damaged log may do with data proven acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OnDamage {
    /// Refuse the log as corrupt: every automatic path (`load`, opening a
    /// writer, `commitRepair`, `recover`, `verify`).
    Refuse,
    /// Cut from the damage on ([`CutReason::Damaged`]): an explicit salvage
    /// (`recover --salvage`).
    Salvage,
}

/// The backend-neutral evidence a backend reduces a stored log to: what
/// follows its valid records, what follows its commit point, and what
/// proves any of that acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Evidence {
    /// The kind of the first unusable bytes or rows after the valid ones
    /// ([`CutReason::Incomplete`], [`CutReason::ZeroFill`] or
    /// [`CutReason::Invalid`]), if the valid ones do not reach the end.
    pub invalid: Option<CutReason>,
    /// What proves the data a repair would cut acknowledged, if anything.
    pub proof: Option<Proof>,
    /// Whether a valid record after the commit point breaks the turn
    /// contract (it and everything after it are debris).
    pub debris: bool,
    /// Whether synthetic closers of an interrupted repair follow the real
    /// events.
    pub interrupted_repair: bool,
    /// Whether the kept events leave a turn open.
    pub open_turn: bool,
}

/// What recovery does with a stored log: the one decision, made by
/// [`decide`] for every backend and every entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Balanced, nothing to repair.
    Clean,
    /// Close the open final turn with synthetic closers; cut nothing.
    CloseOpenTurn,
    /// Cut torn bytes (or rows) never acknowledged; close an open turn.
    CutTorn,
    /// Cut debris after the commit point; close an open turn.
    CutDebris,
    /// Cut the closers of an interrupted repair and redo it.
    RedoInterruptedRepair,
    /// Refuse the log as corrupt: cut nothing, change nothing.
    RefuseCorrupt(Proof),
    /// An explicit salvage: cut from the damage on, close the open turn.
    CutDamaged(Proof),
}

impl Outcome {
    /// The state `ls` and `verify` report for a log with this outcome.
    pub fn state(self) -> LogState {
        match self {
            Outcome::Clean => LogState::Clean,
            Outcome::CloseOpenTurn => LogState::OpenTurn,
            Outcome::CutTorn | Outcome::CutDebris | Outcome::RedoInterruptedRepair => {
                LogState::Torn
            }
            Outcome::RefuseCorrupt(_) | Outcome::CutDamaged(_) => LogState::Corrupt,
        }
    }

    /// The reason recorded on the cut this outcome makes, if it cuts.
    pub fn cut_reason(self, invalid: Option<CutReason>) -> Option<CutReason> {
        match self {
            Outcome::Clean | Outcome::CloseOpenTurn | Outcome::RefuseCorrupt(_) => None,
            Outcome::CutTorn => invalid,
            Outcome::CutDebris => Some(CutReason::Debris),
            Outcome::RedoInterruptedRepair => Some(CutReason::InterruptedRepair),
            Outcome::CutDamaged(_) => Some(CutReason::Damaged),
        }
    }
}

impl Outcome {
    /// The outcome of a log whose cut the backend settled while parsing
    /// (a JSONL parse decides as it reads: a `Damaged` cut only under
    /// salvage, where it had proof), or that has none: the kept events add
    /// whether a turn is left to close.
    pub(crate) fn of_cut(cut: Option<&Cut>, open_turn: bool) -> Outcome {
        let damaged = cut.is_some_and(|c| c.reason == CutReason::Damaged);
        decide(
            &Evidence {
                invalid: cut.map(|c| c.reason),
                proof: damaged.then_some(Proof::LaterCommit),
                open_turn,
                ..Evidence::default()
            },
            if damaged {
                OnDamage::Salvage
            } else {
                OnDamage::Refuse
            },
        )
    }
}

/// The cuts a backend found past its valid records, each in the backend's
/// units and carrying what the backend needs to make it (`C`: a [`Cut`],
/// or a cut with its row plan). Backends report these; [`Findings::chosen`]
/// turns [`decide`]'s outcome into the one cut made.
#[derive(Debug)]
pub(crate) struct Findings<C> {
    /// Torn, zero or garbage bytes (rows) after the valid ones.
    pub torn: Option<C>,
    /// Valid records after the commit point that break the contract.
    pub debris: Option<C>,
    /// An interrupted repair's closers.
    pub interrupted: Option<C>,
}

impl<C> Findings<C> {
    /// The cut `outcome` makes: none for a clean log or an open turn, else
    /// the torn bytes, the debris or the interrupted repair's closers. The
    /// damage outcomes give `None`: a refusal names positions only the
    /// backend knows, and a salvage cuts from the first of the cuts found
    /// or the damage, whichever comes first, in the backend's units.
    pub(crate) fn chosen(self, outcome: Outcome) -> Option<C> {
        match outcome {
            Outcome::CutTorn => self.torn,
            Outcome::CutDebris => self.debris,
            Outcome::RedoInterruptedRepair => self.interrupted,
            Outcome::Clean
            | Outcome::CloseOpenTurn
            | Outcome::RefuseCorrupt(_)
            | Outcome::CutDamaged(_) => None,
        }
    }
}

/// The recovery decision. Proof of acknowledgement outranks everything:
/// such data is never cut automatically, only by an explicit salvage.
/// Otherwise debris is cut (with whatever follows it), then an interrupted
/// repair's closers, then torn bytes; an open turn left over is closed.
pub fn decide(evidence: &Evidence, on_damage: OnDamage) -> Outcome {
    if let Some(proof) = evidence.proof {
        return match on_damage {
            OnDamage::Refuse => Outcome::RefuseCorrupt(proof),
            OnDamage::Salvage => Outcome::CutDamaged(proof),
        };
    }
    if evidence.debris {
        Outcome::CutDebris
    } else if evidence.interrupted_repair {
        Outcome::RedoInterruptedRepair
    } else if evidence.invalid.is_some() {
        Outcome::CutTorn
    } else if evidence.open_turn {
        Outcome::CloseOpenTurn
    } else {
        Outcome::Clean
    }
}

/// The state of a stored log, as `ls` and `verify` report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogState {
    /// Balanced, nothing to repair.
    Clean,
    /// The final turn is open; recovery adds closers.
    OpenTurn,
    /// Bytes or records after the commit point must be cut.
    Torn,
    /// Committed data fails validation; the session is refused.
    Corrupt,
}

impl LogState {
    /// `clean`, `open-turn`, `torn` or `corrupt`.
    pub fn code(self) -> &'static str {
        match self {
            LogState::Clean => "clean",
            LogState::OpenTurn => "open-turn",
            LogState::Torn => "torn",
            LogState::Corrupt => "corrupt",
        }
    }
}

impl fmt::Display for LogState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A stored log's size and its committed prefix, as a backend found them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extent {
    /// Size of the stored log ([`Scan::bytes`]).
    pub bytes: u64,
    /// Events in the committed prefix ([`Scan::committed`]).
    pub committed: u64,
    /// Latest turn number started within it ([`Scan::committed_turn`]).
    pub committed_turn: u64,
    /// Time of its last event, if any: the scan's last time when no tail
    /// event is kept.
    pub committed_time: Option<i64>,
}

impl Scan {
    /// A scan from what a backend found: the log's [`Extent`], the valid
    /// events after the commit point (`tail`, of which the `verdict` on them
    /// keeps the first `verdict.kept`), the `outcome` [`decide`] made and
    /// the `cut` it makes. The closers and the latest turn are the
    /// verdict's; the last time is the last kept event's.
    pub(crate) fn new(
        header: SessionHeader,
        policy: Policy,
        extent: Extent,
        mut tail: Vec<Event>,
        verdict: TailVerdict,
        outcome: Outcome,
        cut: Option<Cut>,
    ) -> Scan {
        debug_assert!(
            verdict.kept <= tail.len() && (verdict.debris.is_none() || verdict.kept < tail.len()),
            "the verdict keeps {} of {} tail events, debris {:?}",
            verdict.kept,
            tail.len(),
            verdict.debris
        );
        tail.truncate(verdict.kept);
        debug_assert!(
            tail.first().is_none_or(|e| e.seq() == extent.committed)
                && tail.windows(2).all(|w| w[1].seq() == w[0].seq() + 1),
            "the kept tail follows the committed prefix"
        );
        debug_assert!(extent.committed_turn <= verdict.last_turn);
        debug_assert!(
            match outcome {
                Outcome::Clean => verdict.closers.is_empty(),
                Outcome::CloseOpenTurn => !verdict.closers.is_empty(),
                _ => true,
            },
            "{outcome:?} with {} closers",
            verdict.closers.len()
        );
        let reason = cut.as_ref().map(|c| c.reason);
        debug_assert!(
            match outcome {
                Outcome::CutTorn => reason.is_some_and(|r| r != CutReason::Damaged),
                _ => reason == outcome.cut_reason(None),
            },
            "{outcome:?} with a cut for {reason:?}"
        );
        let last_time = tail.last().map(Event::time).or(extent.committed_time);
        let scan = Scan {
            header,
            policy,
            committed: extent.committed,
            committed_turn: extent.committed_turn,
            tail,
            cut,
            closers: verdict.closers,
            last_turn: verdict.last_turn,
            bytes: extent.bytes,
            last_time,
            outcome,
        };
        debug_assert!(
            scan.cut.as_ref().is_none_or(|c| c.seq == scan.stored_len()),
            "a cut starts at the stored length {}: {:?}",
            scan.stored_len(),
            scan.cut
        );
        scan
    }

    /// A scan of a whole decoded log (every event from seq 0) split by
    /// [`split_log`], `bytes` long.
    pub(crate) fn of_split(
        header: SessionHeader,
        policy: Policy,
        events: &[Event],
        split: Split,
        bytes: u64,
        outcome: Outcome,
        cut: Option<Cut>,
    ) -> Scan {
        let committed = split.committed;
        let extent = Extent {
            bytes,
            committed: committed as u64,
            committed_turn: split.committed_turn,
            committed_time: events[..committed].last().map(Event::time),
        };
        let tail = events[committed..].to_vec();
        Scan::new(header, policy, extent, tail, split.verdict, outcome, cut)
    }

    /// Events stored and kept (committed prefix plus kept tail).
    pub fn stored_len(&self) -> u64 {
        self.committed + self.tail.len() as u64
    }

    /// The state before repair.
    pub fn state(&self) -> LogState {
        self.outcome.state()
    }

    /// Whether `load` or opening a writer has anything to commit.
    pub fn needs_repair(&self) -> bool {
        self.cut.is_some() || !self.closers.is_empty()
    }

    /// Complete turns once repaired.
    pub fn turns(&self) -> u64 {
        self.last_turn
    }

    /// A tracker positioned after the repaired log.
    pub fn resume_tracker(&self) -> Tracker {
        Tracker::resume(
            self.policy,
            self.stored_len() + self.closers.len() as u64,
            self.last_turn,
        )
    }
}

/// How the valid records after the commit point split.
#[derive(Debug)]
pub(crate) struct TailVerdict {
    /// How many leading tail events satisfy the contract and are kept.
    pub kept: usize,
    /// The first event that breaks the contract, if any: it and everything
    /// after it are debris.
    pub debris: Option<Violation>,
    /// Closers for the open turn among the kept events.
    pub closers: Vec<Event>,
    /// Latest turn number started, counting the kept events.
    pub last_turn: u64,
}

/// Runs the tracker over the events after the commit point.
pub(crate) fn classify_tail(
    policy: Policy,
    committed: u64,
    committed_turn: u64,
    tail: &[Event],
) -> TailVerdict {
    let mut tracker = Tracker::resume(policy, committed, committed_turn);
    let mut debris = None;
    let mut kept = tail.len();
    for (i, event) in tail.iter().enumerate() {
        if let Err(v) = tracker.accept(event) {
            debris = Some(v);
            kept = i;
            break;
        }
    }
    let closers = if tracker.in_turn() {
        let start = tail[..kept]
            .iter()
            .rposition(|e| e.kind() == EventKind::TurnStart)
            .expect("an open turn started in the tail");
        interrupted_turn_closers(&tail[start..kept])
    } else {
        Vec::new()
    };
    TailVerdict {
        kept,
        debris,
        closers,
        last_turn: u64::from(tracker.placement().turn),
    }
}

/// How the events after the commit point are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TailRule {
    /// turnwal's: the turn contract runs over them, and the first event that
    /// breaks it is debris, cut with everything after it.
    Contract,
    /// The upstream reader's (its JSONL and SQLite stores): every decoded
    /// event is kept whatever the contract says, and an open final turn
    /// gets `interruptedTurnClosers` of what is there.
    KeepAll,
}

/// A whole log's decoded events split at the commit point (after the last
/// `turn/end`): how many events it covers, the turns started before it, and
/// the verdict on the events after it.
pub(crate) struct Split {
    /// Events up to and including the last `turn/end`.
    pub committed: usize,
    /// Turns started among them.
    pub committed_turn: u64,
    /// How the events after the commit point split.
    pub verdict: TailVerdict,
}

/// Splits a whole decoded log (every event from seq 0) at its commit point
/// and judges the rest by `rule`.
pub(crate) fn split_log(policy: Policy, events: &[Event], rule: TailRule) -> Split {
    let committed = events
        .iter()
        .rposition(|e| e.kind() == EventKind::TurnEnd)
        .map_or(0, |i| i + 1);
    let committed_turn = events[..committed]
        .iter()
        .filter(|e| e.kind() == EventKind::TurnStart)
        .count() as u64;
    let verdict = judge_tail(
        policy,
        committed as u64,
        committed_turn,
        &events[committed..],
        rule,
    );
    debug_assert!(
        rule == TailRule::Contract
            || (verdict.debris.is_none() && committed + verdict.kept == events.len()),
        "upstream's rule keeps every event"
    );
    Split {
        committed,
        committed_turn,
        verdict,
    }
}

/// Judges the events after the commit point by `rule`: the part of
/// [`split_log`] a scan that keeps only those events does (a JSONL read
/// that classifies a log without holding it).
pub(crate) fn judge_tail(
    policy: Policy,
    committed: u64,
    committed_turn: u64,
    tail: &[Event],
    rule: TailRule,
) -> TailVerdict {
    let verdict = classify_tail(policy, committed, committed_turn, tail);
    if rule == TailRule::KeepAll && verdict.debris.is_some() {
        let last_turn = tail
            .iter()
            .rev()
            .find(|e| e.kind() == EventKind::TurnStart)
            .and_then(|e| e.facts().ok()?.turn.get())
            .unwrap_or(committed_turn);
        return TailVerdict {
            kept: tail.len(),
            debris: None,
            closers: interrupted_turn_closers(tail),
            last_turn,
        };
    }
    verdict
}

/// One session in a listing.
#[derive(Debug, Clone)]
pub struct SessionSummary {
    /// The session id.
    pub id: String,
    /// The header, unless the log is too damaged to read it.
    pub header: Option<SessionHeader>,
    /// Stored events (before repair).
    pub events: u64,
    /// Turns started.
    pub turns: u64,
    /// Size on disk.
    pub bytes: u64,
    /// Time of the last stored event, unix ms.
    pub last_activity: Option<i64>,
    /// State of the log.
    pub state: LogState,
    /// For `corrupt` (or an unreadable file): what is wrong.
    pub problem: Option<String>,
    /// How much of the log `state` was judged from.
    pub checked: Checked,
}

impl SessionSummary {
    /// The summary of a log a full read classified: `events` valid events
    /// stored (debris included), `bytes` stored, the `problem` its cut
    /// makes, if reported; its state is the scan's outcome's.
    pub(crate) fn scanned(
        id: String,
        scan: &Scan,
        events: u64,
        bytes: u64,
        problem: Option<String>,
    ) -> SessionSummary {
        debug_assert_eq!(id, scan.header.id, "a summary under another id");
        debug_assert!(events >= scan.stored_len(), "fewer events than kept");
        SessionSummary {
            id,
            header: Some(scan.header.clone()),
            events,
            turns: scan.last_turn,
            bytes,
            last_activity: scan.last_time,
            state: scan.state(),
            checked: Checked::Full,
            problem,
        }
    }

    /// The summary of a log from its end alone (a quick listing): `events`
    /// stored, `turns` started, the time of the last event, and whether the
    /// end leaves a turn open; the end was found clean.
    pub fn from_tail(
        header: SessionHeader,
        bytes: u64,
        events: u64,
        turns: u64,
        last_activity: Option<i64>,
        open_turn: bool,
    ) -> SessionSummary {
        SessionSummary {
            id: header.id.clone(),
            header: Some(header),
            events,
            turns,
            bytes,
            last_activity,
            state: if open_turn {
                LogState::OpenTurn
            } else {
                LogState::Clean
            },
            checked: Checked::Tail,
            problem: None,
        }
    }

    /// The summary of a log that failed to read (`bytes` of it read): no
    /// header, no events, corrupt, with why (`problem`, when known).
    pub(crate) fn corrupt(
        id: String,
        bytes: u64,
        problem: impl Into<Option<String>>,
    ) -> SessionSummary {
        SessionSummary {
            id,
            header: None,
            events: 0,
            turns: 0,
            bytes,
            last_activity: None,
            state: LogState::Corrupt,
            checked: Checked::Full,
            problem: problem.into(),
        }
    }

    /// The same summary with the header it was listed under (a log whose
    /// header is known from elsewhere, as SQLite's sessions table).
    pub fn with_header(mut self, header: SessionHeader) -> SessionSummary {
        debug_assert_eq!(self.id, header.id);
        self.header = Some(header);
        self
    }
}

/// How much of a stored log a listing read to judge its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Checked {
    /// Its end alone (the WAL's and the JSONL store's quick listing): a
    /// `clean` state says the end is clean; damage further back is found by
    /// `verify`, `load` and `recover`, which read all of it.
    Tail,
    /// All of it.
    Full,
}

impl Checked {
    /// `tail` or `full`.
    pub fn code(self) -> &'static str {
        match self {
            Checked::Tail => "tail",
            Checked::Full => "full",
        }
    }
}

/// A region of a stored log that a salvage read could not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    /// Where it starts: a byte offset (a row index for SQLite).
    pub offset: u64,
    /// How long it is: bytes (rows for SQLite).
    pub len: u64,
    /// The seq the first lost event has or should have.
    pub first_seq: u64,
    /// The seq of the first intact event after the gap; `None` when the gap
    /// runs to the end of the log (how many events it held is unknown).
    pub next_seq: Option<u64>,
    /// Why the region is unusable (the failed check).
    pub reason: String,
    /// Whether it is damage recovery refuses to cut (`false`: a torn tail
    /// or debris an automatic repair cuts).
    pub damaged: bool,
}

impl Gap {
    /// How many seqs the gap lost, when an intact event follows it.
    pub fn seqs_lost(&self) -> Option<u64> {
        self.next_seq.map(|next| next - self.first_seq)
    }
}

/// Every intact event of a stored log, damaged or not (`cat --salvage`).
#[derive(Debug, Clone)]
pub struct Salvage {
    /// The session header.
    pub header: SessionHeader,
    /// The intact events, in seq order; seqs skip over the gaps.
    pub events: Vec<Event>,
    /// The regions that could not be used, in log order. Empty for an
    /// undamaged log with nothing to cut.
    pub gaps: Vec<Gap>,
}

impl Salvage {
    /// The salvage of a log that loads: its kept events, and its cut (a torn
    /// tail, debris) as the one gap.
    pub fn of_stored(stored: Stored) -> Salvage {
        let gaps = stored
            .scan
            .cut
            .iter()
            .map(|cut| Gap {
                offset: cut.offset,
                len: cut.len,
                first_seq: cut.seq,
                next_seq: None,
                reason: format!("{}: {}", cut.reason, cut.detail),
                damaged: cut.reason == CutReason::Damaged,
            })
            .collect();
        Salvage {
            header: stored.scan.header,
            events: stored.events,
            gaps,
        }
    }
}

/// A stored log read back: its scan and every kept event (committed prefix
/// plus kept tail, no closers).
#[derive(Debug, Clone)]
pub struct Stored {
    /// How the log splits.
    pub scan: Scan,
    /// The kept events, seq 0 to `scan.stored_len() - 1`.
    pub events: Vec<Event>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROOFS: [Proof; 6] = [
        Proof::Proven,
        Proof::Missing,
        Proof::Watermark,
        Proof::Materialized,
        Proof::LaterCommit,
        Proof::DamagedInPlace,
    ];
    const INVALID: [Option<CutReason>; 4] = [
        None,
        Some(CutReason::Incomplete),
        Some(CutReason::ZeroFill),
        Some(CutReason::Invalid),
    ];

    /// Every combination of the evidence, under both modes.
    fn every_evidence() -> Vec<Evidence> {
        let mut all = Vec::new();
        for invalid in INVALID {
            for proof in std::iter::once(None).chain(PROOFS.map(Some)) {
                for bits in 0..8u8 {
                    all.push(Evidence {
                        invalid,
                        proof,
                        debris: bits & 1 != 0,
                        interrupted_repair: bits & 2 != 0,
                        open_turn: bits & 4 != 0,
                    });
                }
            }
        }
        all
    }

    #[test]
    fn the_decision_table() {
        use Outcome::*;
        let e = |invalid, proof, debris, interrupted_repair, open_turn| Evidence {
            invalid,
            proof,
            debris,
            interrupted_repair,
            open_turn,
        };
        let torn = Some(CutReason::Incomplete);
        let bad = Some(CutReason::Invalid);
        let rows = [
            // (evidence, automatic outcome, salvage outcome)
            (e(None, None, false, false, false), Clean, Clean),
            (
                e(None, None, false, false, true),
                CloseOpenTurn,
                CloseOpenTurn,
            ),
            (e(torn, None, false, false, false), CutTorn, CutTorn),
            (e(bad, None, false, false, true), CutTorn, CutTorn),
            (e(bad, None, true, false, true), CutDebris, CutDebris),
            (e(None, None, true, true, false), CutDebris, CutDebris),
            (
                e(torn, None, false, true, true),
                RedoInterruptedRepair,
                RedoInterruptedRepair,
            ),
            (
                e(bad, Some(Proof::Watermark), false, false, false),
                RefuseCorrupt(Proof::Watermark),
                CutDamaged(Proof::Watermark),
            ),
            (
                e(None, Some(Proof::Missing), false, false, true),
                RefuseCorrupt(Proof::Missing),
                CutDamaged(Proof::Missing),
            ),
            (
                e(None, Some(Proof::Proven), true, false, true),
                RefuseCorrupt(Proof::Proven),
                CutDamaged(Proof::Proven),
            ),
            (
                e(bad, Some(Proof::LaterCommit), true, true, true),
                RefuseCorrupt(Proof::LaterCommit),
                CutDamaged(Proof::LaterCommit),
            ),
        ];
        for (evidence, automatic, salvage) in rows {
            assert_eq!(
                decide(&evidence, OnDamage::Refuse),
                automatic,
                "{evidence:?}"
            );
            assert_eq!(
                decide(&evidence, OnDamage::Salvage),
                salvage,
                "{evidence:?}"
            );
        }
    }

    #[test]
    fn every_combination_keeps_the_rule() {
        let all = every_evidence();
        assert_eq!(all.len(), 4 * 7 * 8);
        for e in all {
            let automatic = decide(&e, OnDamage::Refuse);
            let salvage = decide(&e, OnDamage::Salvage);
            match e.proof {
                // Proven acknowledged: never cut automatically, only by an
                // explicit salvage, and reported corrupt either way.
                Some(p) => {
                    assert_eq!(automatic, Outcome::RefuseCorrupt(p), "{e:?}");
                    assert_eq!(automatic.cut_reason(e.invalid), None, "{e:?}");
                    assert_eq!(salvage, Outcome::CutDamaged(p), "{e:?}");
                    assert_eq!(salvage.cut_reason(e.invalid), Some(CutReason::Damaged));
                    assert_eq!(automatic.state(), LogState::Corrupt);
                    assert_eq!(salvage.state(), LogState::Corrupt);
                }
                // Nothing proven: salvage is the automatic repair; it cuts
                // exactly when something is torn, debris or an interrupted
                // repair, and never reports corruption.
                None => {
                    assert_eq!(automatic, salvage, "{e:?}");
                    let cuts = e.invalid.is_some() || e.debris || e.interrupted_repair;
                    assert_eq!(automatic.cut_reason(e.invalid).is_some(), cuts, "{e:?}");
                    assert_ne!(automatic.state(), LogState::Corrupt, "{e:?}");
                    let state = match (cuts, e.open_turn) {
                        (true, _) => LogState::Torn,
                        (false, true) => LogState::OpenTurn,
                        (false, false) => LogState::Clean,
                    };
                    assert_eq!(automatic.state(), state, "{e:?}");
                    if e.debris {
                        assert_eq!(automatic, Outcome::CutDebris, "debris cuts first: {e:?}");
                    }
                }
            }
        }
    }
}
