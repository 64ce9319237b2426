//! Classifying a JSONL log without holding it: the scan of
//! [`super::scan`] keeping, instead of every event, what the turn contract
//! and upstream's read rules need — the events after the last `turn/end`,
//! counts, and the first event each of upstream's refusals would name —
//! while each event is migrated as it is decoded and then let go. A read
//! then lends the events from a second pass over the file
//! ([`super::cursor`]), so a whole-session read of a JSONL log of any size
//! holds one window of the file, one line's events and the open turn.

use std::path::Path;

use super::scan::{Keep, Parsed, Rec};
use crate::contract::Policy;
use crate::error::{Corruption, Error, Result, Unit};
use crate::event::{Event, EventKind};
use crate::scan::{Extent, Scan, TailRule};
use crate::upstream::normalize::{NormalizeError, Normalizer};

/// What a classifying scan keeps.
pub(crate) struct Classifier {
    /// Upstream's migrations, run over every event as it is decoded; `None`
    /// for a read of the events as stored (`cat --raw`), which refuses
    /// nothing they would refuse.
    normalizer: Option<Normalizer>,
    /// Whether the last record's events are held as stored (zstd: a repair
    /// writes a damaged frame's good events again).
    hold_last: bool,
    count: u64,
    turn_starts: u64,
    committed: u64,
    committed_turn: u64,
    committed_time: Option<i64>,
    /// The migrated events after the last `turn/end`.
    tail: Vec<Event>,
    /// The last record, and its events as stored when they are held (they
    /// are classified once the next record starts, or at the end).
    last: Option<Rec>,
    held: Vec<Event>,
    /// The first event a migration refused.
    failed: Option<NormalizeError>,
    /// Where the events a refusal may name are: (seq, record start).
    named: Vec<(u64, u64)>,
}

impl Classifier {
    /// A classifier of session `id`'s log; `migrate` runs upstream's read
    /// migrations, `hold_last` keeps the last record's events as stored.
    pub(crate) fn new(id: &str, migrate: bool, hold_last: bool) -> Classifier {
        Classifier {
            normalizer: migrate.then(|| Normalizer::new(id)),
            hold_last,
            count: 0,
            turn_starts: 0,
            committed: 0,
            committed_turn: 0,
            committed_time: None,
            tail: Vec::new(),
            last: None,
            held: Vec::new(),
            failed: None,
            named: Vec::new(),
        }
    }

    fn classify_held(&mut self) {
        let start = self.last.map_or(0, |r| r.start);
        for event in std::mem::take(&mut self.held) {
            self.classify(event, start);
        }
    }

    /// Migrates one event and follows the turns: the commit point moves at
    /// each `turn/end`, the tail restarts after it.
    fn classify(&mut self, mut event: Event, record: u64) {
        if let Some(normalizer) = self.normalizer.as_mut() {
            let seq = event.seq();
            if normalizer.note(&event) {
                self.named.push((seq, record));
            }
            if self.failed.is_none()
                && Normalizer::touches(event.event_type())
                && let Err(e) = normalizer.migrate(&mut event)
            {
                self.failed = Some(e);
                self.named.push((seq, record));
            }
        }
        match event.kind() {
            EventKind::TurnEnd => {
                self.committed = event.seq() + 1;
                self.committed_turn = self.turn_starts;
                self.committed_time = Some(event.time());
                self.tail.clear();
            }
            kind => {
                self.turn_starts += u64::from(kind == EventKind::TurnStart);
                // A log that will be refused needs no tail.
                if self.failed.is_none() && self.named.is_empty() {
                    self.tail.push(event);
                }
            }
        }
    }
}

impl Keep for Classifier {
    fn kept(&self) -> u64 {
        self.count
    }

    fn push(&mut self, rec: Rec, new_record: bool, events: Vec<Event>) {
        if new_record {
            self.classify_held();
            self.last = Some(rec);
        }
        self.count += events.len() as u64;
        if self.hold_last {
            self.held.extend(events);
        } else {
            for event in events {
                self.classify(event, rec.start);
            }
        }
    }

    /// Only the last record can start at or after a damaged byte: the scan
    /// keeps no line after the first defect.
    fn first_seq_from(&self, at: u64) -> Option<u64> {
        self.last.filter(|r| r.start >= at).map(|r| r.first_seq)
    }
}

/// A JSONL log classified: the scan, what a read lends after the file's
/// kept bytes, and where those bytes are.
pub(crate) struct Classification {
    pub scan: Scan,
    /// Where the records start and the bytes kept as they are end.
    pub records_start: u64,
    pub keep_bytes: u64,
    /// The kept events `..keep_bytes` does not hold (the good events of a
    /// damaged or torn final frame), as stored.
    pub rewrite: Vec<Event>,
}

/// Applies upstream's read rules and the turn contract to a log a
/// classifying scan read: what [`super::scan::plan`] makes of a log it
/// holds, from what the classifier kept.
pub(crate) fn classify(
    parsed: Parsed<Classifier>,
    policy: Policy,
    path: &Path,
) -> Result<Classification> {
    let Parsed {
        header,
        kept: mut c,
        keep_bytes,
        rewrite_from,
        torn,
        file_len,
        records_start,
    } = parsed;
    let rewrite = match c.last {
        Some(last) if rewrite_from < c.count => {
            let from = rewrite_from.saturating_sub(last.first_seq) as usize;
            c.held.get(from..).unwrap_or_default().to_vec()
        }
        _ => Vec::new(),
    };
    c.classify_held();
    let refusal = c
        .normalizer
        .as_ref()
        .and_then(|n| n.refusal(c.failed.clone()));
    if let Some(e) = refusal {
        let offset = if e.seq >= rewrite_from {
            keep_bytes
        } else {
            c.named
                .iter()
                .find(|(seq, _)| *seq == e.seq)
                .map_or(keep_bytes, |(_, at)| *at)
        };
        return Err(Error::from(Corruption {
            path: path.to_owned(),
            offset,
            unit: Unit::Byte,
            seq: Some(e.seq),
            reason: format!(
                "stored session {:?} failed validation: {}",
                header.id, e.reason
            ),
        }));
    }
    // Upstream's reader keeps every decoded event (KeepAll), as the
    // whole-log plan does.
    let verdict = crate::scan::judge_tail(
        policy,
        c.committed,
        c.committed_turn,
        &c.tail,
        TailRule::KeepAll,
    );
    let cut = torn.map(|(reason, detail)| {
        crate::scan::Cut::to_end(keep_bytes, file_len, c.count, reason, detail)
    });
    let outcome = crate::scan::Outcome::of_cut(cut.as_ref(), !verdict.closers.is_empty());
    let extent = Extent {
        bytes: file_len,
        committed: c.committed,
        committed_turn: c.committed_turn,
        committed_time: c.committed_time,
    };
    let scan = Scan::new(header, policy, extent, c.tail, verdict, outcome, cut);
    Ok(Classification {
        scan,
        records_start,
        keep_bytes,
        rewrite,
    })
}
