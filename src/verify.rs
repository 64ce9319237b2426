//! `verify`: the full offline check of a stored log — framing, checksums,
//! every payload's JSON, and the turn contract over the committed prefix.

use crate::contract::Tracker;
use crate::error::{Error, Result};
use crate::event::RawJson;
use crate::scan::{Cut, LogState};
use crate::store::Store;

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
        // Read in place (the WAL's map): the events are checked one by one,
        // so the heap holds the view's index and one event, not the log.
        let view = match self.backend().view(id) {
            Ok(Some(view)) => view,
            Ok(None) => return Err(Error::NotFound { id: id.to_owned() }),
            Err(e @ (Error::Corrupt(_) | Error::Unsupported { .. })) => {
                return Ok(corrupt(e.to_string()));
            }
            Err(e) => return Err(e),
        };
        let scan = view.scan().expect("a backend's view carries its scan");
        if let Err(detail) = scan.header.check_version() {
            return Ok(corrupt(detail));
        }
        // What a read of a Permissive session refuses (upstream's read
        // rules), verify reports.
        if scan.policy == crate::Policy::Permissive {
            let stored: Vec<_> = view
                .iter()
                .take(view.stored())
                .map(|e| e.to_event())
                .collect();
            if let Err(e) = self.migrate(scan.policy, id, stored) {
                return Ok(corrupt(e.to_string()));
            }
        }
        let committed = scan.committed as usize;
        let mut tracker =
            Tracker::new(scan.policy).require_known_types(self.options().require_known_types);
        for (i, stored) in view.iter().take(view.stored()).enumerate() {
            let event = stored.to_event();
            let place = || {
                let region = if i < committed { "committed" } else { "tail" };
                format!(
                    "{region} event seq {} ({})",
                    event.seq(),
                    event.event_type()
                )
            };
            if let Err(e) = RawJson::parse(event.data().get()) {
                return Ok(corrupt(format!("{}: data is not valid JSON: {e}", place())));
            }
            for extra in [event.surface_op(), event.source_event_seqs()]
                .into_iter()
                .flatten()
            {
                if let Err(e) = RawJson::parse(extra.get()) {
                    return Ok(corrupt(format!(
                        "{}: envelope field is not valid JSON: {e}",
                        place()
                    )));
                }
            }
            if i < committed
                && let Err(v) = tracker.accept(&event)
            {
                return Ok(corrupt(format!(
                    "{} breaks the turn contract: {v}",
                    place()
                )));
            }
        }
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
