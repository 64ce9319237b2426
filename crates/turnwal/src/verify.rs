//! `verify`: the full offline check of a stored log — framing, checksums,
//! every payload's JSON, and the turn contract over the committed prefix.

use crate::contract::Tracker;
use crate::error::{Error, Result};
use crate::json;
use crate::scan::{Cut, LogState};
use crate::store::Store;
use crate::upstream::normalize::Normalizer;

/// What `verify` found in one session.
#[derive(Debug, Clone)]
pub struct VerifyReport {
    /// The session id.
    pub id: String,
    /// The verdict.
    pub state: LogState,
    /// Stored events kept by recovery (0 when corrupt).
    pub events: u64,
    /// Turns started.
    pub turns: u64,
    /// Size of the stored log.
    pub bytes: u64,
    /// What recovery would cut.
    pub cut: Option<Cut>,
    /// How many closers recovery would append.
    pub closers: usize,
    /// For a corrupt log: where and why.
    pub problem: Option<String>,
}

impl VerifyReport {
    /// The `turnwal verify` exit code: 0 clean, 1 recoverable tail, 2 corrupt.
    pub fn exit_code(&self) -> u8 {
        match self.state {
            LogState::Clean => 0,
            LogState::OpenTurn | LogState::Torn => 1,
            LogState::Corrupt => 2,
        }
    }
}

impl Store {
    /// Checks one session without writing: framing and checksums of every
    /// record, every payload's JSON, and the turn contract over the committed
    /// prefix (the tail is classified as recovery would). Corruption is a
    /// report, not an error; errors are for a missing session or failed I/O.
    pub fn verify(&self, id: &str) -> Result<VerifyReport> {
        self.verify_visiting(id, |_| {})
    }

    /// [`Store::verify`], handing `visit` every stored event of the
    /// session's logical view, in order, as the check reads it: one pass
    /// for a reader that reports on a session as well as checking it
    /// (`turnwal stats`). A [`crate::contract::Policy::Permissive`] session's events
    /// are handed over once upstream's read migrations have run over them.
    /// When the report says corrupt, `visit` may have seen part of the log.
    pub fn verify_visiting(
        &self,
        id: &str,
        mut visit: impl FnMut(crate::view::EventRef<'_>),
    ) -> Result<VerifyReport> {
        let corrupt = |problem: String| VerifyReport {
            id: id.to_owned(),
            state: LogState::Corrupt,
            events: 0,
            turns: 0,
            bytes: 0,
            cut: None,
            closers: 0,
            problem: Some(problem),
        };
        // Read through the backend's cursor: the events are checked one by
        // one where they are stored, so the heap holds one chunk run or
        // sealed unit, not the log.
        let mut reader = match self.backend().read(id) {
            Ok(Some(reader)) => reader,
            Ok(None) => return Err(Error::NotFound { id: id.to_owned() }),
            Err(e @ (Error::Corrupt(_) | Error::Unsupported { .. })) => {
                return Ok(corrupt(e.to_string()));
            }
            Err(e) => return Err(e),
        };
        let scan = reader
            .scan()
            .expect("a backend's reader carries its scan")
            .clone();
        if let Err(detail) = scan.header.check_version() {
            return Ok(corrupt(detail.to_string()));
        }
        let mut checks = EventChecks {
            committed: scan.committed,
            permissive: scan.policy == crate::contract::Policy::Permissive,
            tracker: Tracker::new(scan.policy)
                .require_known_types(self.options().require_known_types),
        };
        // What a read of a Permissive session refuses (upstream's read
        // rules), verify reports, after any problem the checks find
        // anywhere in the log: the migrations run one event at a time, and
        // upstream's order of refusal is kept by noting every retired form
        // and the first event a migration refuses.
        let mut migrations =
            (checks.permissive && !self.backend().normalizes_reads()).then(|| Migrations::new(id));
        let mut problem = None;
        let walked = reader.for_each_stored(|event| -> Result<()> {
            if problem.is_some() {
                return Ok(());
            }
            problem = checks.problem(&event);
            if problem.is_some() {
                return Ok(());
            }
            match migrations.as_mut() {
                Some(migrations) => migrations.visit(event, &mut visit),
                None => visit(event),
            }
            Ok(())
        });
        match walked {
            Ok(()) => {}
            Err(e @ (Error::Corrupt(_) | Error::Unsupported { .. })) => {
                return Ok(corrupt(e.to_string()));
            }
            Err(e) => return Err(e),
        }
        if let Some(problem) = problem {
            return Ok(corrupt(problem));
        }
        if let Some(why) = migrations.and_then(Migrations::refusal) {
            return Ok(corrupt((self.refusal_of(id))(why).to_string()));
        }
        // The scan as the read settled it.
        let scan = reader.scan().unwrap_or(&scan);
        Ok(VerifyReport {
            id: id.to_owned(),
            state: scan.state(),
            events: scan.stored_len(),
            turns: scan.last_turn,
            bytes: scan.bytes,
            cut: scan.cut.clone(),
            closers: scan.closers.len(),
            problem: None,
        })
    }
}

/// The checks `verify` makes of each stored event, where it is stored.
struct EventChecks {
    committed: u64,
    permissive: bool,
    tracker: Tracker,
}

impl EventChecks {
    /// What is wrong with `event`, if anything: its `data` or an envelope
    /// field is not JSON, or (in the committed prefix) it breaks the turn
    /// contract.
    fn problem(&mut self, event: &crate::view::EventRef<'_>) -> Option<String> {
        let i = event.seq();
        let committed = i < self.committed;
        let place = || {
            let region = if committed { "committed" } else { "tail" };
            format!("{region} event seq {i} ({})", event.event_type())
        };
        // The contract check of the committed prefix reads `data` in one
        // pass that also validates it; the rest is validated here.
        if (!committed || self.permissive)
            && let Err(e) = json::validate(event.data())
        {
            return Some(format!("{}: data is not valid JSON: {e}", place()));
        }
        if committed && let Err(v) = self.tracker.accept(event) {
            return Some(format!("{} breaks the turn contract: {v}", place()));
        }
        for extra in [event.surface_op(), event.source_event_seqs()]
            .into_iter()
            .flatten()
        {
            if let Err(e) = json::validate(extra) {
                return Some(format!(
                    "{}: envelope field is not valid JSON: {e}",
                    place()
                ));
            }
        }
        None
    }
}

/// Upstream's read migrations over a Permissive session's events, one at a
/// time, noting what upstream's reader would refuse.
struct Migrations {
    normalizer: Normalizer,
    /// Set once a retired form or a refused migration is met: `Some(None)`
    /// for a retired form, `Some(Some(e))` for the first refused migration.
    failed: Option<Option<crate::upstream::normalize::NormalizeError>>,
}

impl Migrations {
    fn new(id: &str) -> Migrations {
        Migrations {
            normalizer: Normalizer::new(id),
            failed: None,
        }
    }

    /// Hands `event` to `visit` as upstream's reader reads it (migrated if
    /// a migration touches it); after a refusal, notes and hands nothing.
    fn visit(
        &mut self,
        event: crate::view::EventRef<'_>,
        visit: &mut impl FnMut(crate::view::EventRef<'_>),
    ) {
        let retired = self.normalizer.note(&event);
        if retired || self.failed.is_some() {
            self.failed = self.failed.take().or(Some(None));
            return;
        }
        if !Normalizer::touches(event.event_type()) {
            visit(event);
            return;
        }
        let mut migrated = event.to_event();
        match self.normalizer.migrate(&mut migrated) {
            Ok(()) => visit((&migrated).into()),
            Err(e) => self.failed = Some(Some(e)),
        }
    }

    /// What upstream's reader refuses the session with, if anything.
    fn refusal(self) -> Option<crate::upstream::normalize::NormalizeError> {
        let failed = self.failed?;
        Some(
            self.normalizer
                .refusal(failed)
                .expect("a retired form or a refused migration was met"),
        )
    }
}
