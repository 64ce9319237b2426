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
        let committed = scan.committed;
        let permissive = scan.policy == crate::contract::Policy::Permissive;
        let mut tracker =
            Tracker::new(scan.policy).require_known_types(self.options().require_known_types);
        // What a read of a Permissive session refuses (upstream's read
        // rules), verify reports, after any problem the checks find
        // anywhere in the log: the migrations run one event at a time, and
        // upstream's order of refusal is kept by noting every retired form
        // and the first event a migration refuses.
        let mut migrations =
            (permissive && !self.backend().normalizes_reads()).then(|| Normalizer::new(id));
        let mut failed = None;
        let mut problem = None;
        let walked = reader.for_each_stored(|event| -> Result<()> {
            if problem.is_some() {
                return Ok(());
            }
            let i = event.seq();
            let place = || {
                let region = if i < committed { "committed" } else { "tail" };
                format!("{region} event seq {i} ({})", event.event_type())
            };
            // The contract check of the committed prefix reads `data` in
            // one pass that also validates it; the rest is validated here.
            if i < committed && !permissive {
                if let Err(v) = tracker.accept(&event) {
                    problem = Some(format!("{} breaks the turn contract: {v}", place()));
                    return Ok(());
                }
            } else if let Err(e) = json::validate(event.data()) {
                problem = Some(format!("{}: data is not valid JSON: {e}", place()));
                return Ok(());
            } else if i < committed
                && let Err(v) = tracker.accept(&event)
            {
                problem = Some(format!("{} breaks the turn contract: {v}", place()));
                return Ok(());
            }
            for extra in [event.surface_op(), event.source_event_seqs()]
                .into_iter()
                .flatten()
            {
                if let Err(e) = json::validate(extra) {
                    problem = Some(format!(
                        "{}: envelope field is not valid JSON: {e}",
                        place()
                    ));
                    return Ok(());
                }
            }
            let Some(normalizer) = migrations.as_mut() else {
                visit(event);
                return Ok(());
            };
            let retired = normalizer.note(&event);
            if retired || failed.is_some() {
                failed = failed.take().or(Some(None));
                return Ok(());
            }
            if !Normalizer::touches(event.event_type()) {
                visit(event);
                return Ok(());
            }
            let mut migrated = event.to_event();
            match normalizer.migrate(&mut migrated) {
                Ok(()) => visit((&migrated).into()),
                Err(e) => failed = Some(Some(e)),
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
        if let (Some(normalizer), Some(failed)) = (&migrations, failed) {
            let why = normalizer
                .refusal(failed)
                .expect("a retired form or a refused migration was met");
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
