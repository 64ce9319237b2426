//! The reference in-memory backend. It never tears, so it shows the
//! contract without any file-format concerns; the backend contract suite
//! runs against it and against every real backend. Clones share the same
//! sessions, so a second `Store` over a clone behaves like a restarted
//! process.

use std::collections::BTreeMap;
use std::sync::{Arc, MutexGuard};

use crate::sync::Resource;

use super::{Backend, LogWriter, Stored, SyncMode};
use crate::contract::{Placement, Policy};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::header::SessionHeader;
use crate::scan::{
    Cut, CutReason, Evidence, Findings, OnDamage, Scan, SessionSummary, TailRule, decide, split_log,
};

/// Sessions held in memory.
#[derive(Debug, Clone)]
pub struct MemoryBackend {
    sessions: Arc<Resource<BTreeMap<String, MemSession>>>,
}

#[derive(Debug)]
struct MemSession {
    header: SessionHeader,
    policy: Policy,
    events: Vec<Event>,
    locked: bool,
    revision: u64,
}

impl Default for MemoryBackend {
    fn default() -> MemoryBackend {
        MemoryBackend {
            sessions: Arc::new(Resource::new(BTreeMap::new(), "sessions")),
        }
    }
}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> MemoryBackend {
        MemoryBackend::default()
    }

    fn sessions(&self) -> Result<MutexGuard<'_, BTreeMap<String, MemSession>>> {
        self.sessions.lock("memory")
    }

    fn locked_error(id: &str) -> Error {
        Error::Locked {
            id: id.to_owned(),
            path: format!("memory:{id}").into(),
            holder: Some(std::process::id()),
        }
    }
}

/// Classifies an in-memory event list exactly as a file scan would.
pub(crate) fn scan_events(header: &SessionHeader, policy: Policy, events: &[Event]) -> Scan {
    let split = split_log(policy, events, TailRule::Contract);
    let kept = (split.committed + split.verdict.kept) as u64;
    let debris = split.verdict.debris.as_ref().map(|v| {
        Cut::to_end(
            kept,
            events.len() as u64,
            kept,
            CutReason::Debris,
            v.to_string(),
        )
    });
    let outcome = decide(
        &Evidence {
            debris: debris.is_some(),
            open_turn: !split.verdict.closers.is_empty(),
            ..Evidence::default()
        },
        OnDamage::Refuse,
    );
    let cut = Findings {
        torn: None,
        debris,
        interrupted: None,
    }
    .chosen(outcome);
    let bytes = events.iter().map(|e| e.data().get().len() as u64).sum();
    Scan::of_split(header.clone(), policy, events, split, bytes, outcome, cut)
}

impl MemSession {
    fn scan(&self) -> Scan {
        scan_events(&self.header, self.policy, &self.events)
    }

    fn stored(&self) -> Stored {
        let scan = self.scan();
        let events = self.events[..scan.stored_len() as usize].to_vec();
        Stored { scan, events }
    }

    fn read_from(&self, from_seq: u64) -> Vec<Event> {
        let end = self.scan().stored_len() as usize;
        let start = usize::try_from(from_seq).unwrap_or(usize::MAX).min(end);
        self.events[start..end].to_vec()
    }
}

impl Backend for MemoryBackend {
    fn location(&self) -> String {
        "memory".into()
    }

    fn list(&self) -> Result<Vec<SessionSummary>> {
        Ok(self
            .sessions()?
            .iter()
            .map(|(id, s)| {
                let scan = s.scan();
                let mut summary = SessionSummary::scanned(
                    id.clone(),
                    &scan,
                    s.events.len() as u64,
                    scan.bytes,
                    None,
                );
                // Debris included, as `events` counts it.
                summary.last_activity = s.events.last().map(Event::time);
                summary
            })
            .collect())
    }

    fn exists(&self, id: &str) -> Result<bool> {
        Ok(self.sessions()?.contains_key(id))
    }

    fn revision(&self, id: &str) -> Result<Option<String>> {
        Ok(self
            .sessions()?
            .get(id)
            .map(|s| format!("memory:{id}:{}", s.revision)))
    }

    fn scan(&self, id: &str) -> Result<Option<Scan>> {
        Ok(self.sessions()?.get(id).map(MemSession::scan))
    }

    fn load(&self, id: &str) -> Result<Option<Stored>> {
        Ok(self.sessions()?.get(id).map(MemSession::stored))
    }

    fn policy(&self, id: &str) -> Result<Option<Policy>> {
        Ok(self.sessions()?.get(id).map(|session| session.policy))
    }

    fn read_from(&self, id: &str, from_seq: u64) -> Result<Option<Vec<Event>>> {
        let sessions = self.sessions()?;
        let Some(session) = sessions.get(id) else {
            return Ok(None);
        };
        // `Store::read_from` has no header to check, and a file backend
        // refuses a foreign version while decoding its header: do the same.
        session
            .header
            .check_version()
            .map_err(|detail| Error::Unsupported {
                path: self.location().into(),
                detail: detail.to_string(),
            })?;
        Ok(Some(session.read_from(from_seq)))
    }

    fn create(
        &self,
        header: &SessionHeader,
        policy: Policy,
        batch: &[Event],
        _placements: &[Placement],
    ) -> Result<Box<dyn LogWriter>> {
        let mut sessions = self.sessions()?;
        if sessions.contains_key(&header.id) {
            return Err(Error::AlreadyExists {
                id: header.id.clone(),
                on_disk: true,
            });
        }
        sessions.insert(
            header.id.clone(),
            MemSession {
                header: header.clone(),
                policy,
                events: batch.to_vec(),
                locked: true,
                revision: 1,
            },
        );
        Ok(Box::new(MemWriter {
            backend: self.clone(),
            id: header.id.clone(),
        }))
    }

    fn holder(&self, id: &str) -> Result<Option<crate::backend::Holder>> {
        Ok(self
            .sessions()?
            .get(id)
            .filter(|s| s.locked)
            .map(|_| crate::backend::Holder::of_pid(Some(std::process::id()))))
    }

    fn open(&self, id: &str) -> Result<Option<Box<dyn LogWriter>>> {
        let mut sessions = self.sessions()?;
        let Some(session) = sessions.get_mut(id) else {
            return Ok(None);
        };
        if session.locked {
            return Err(MemoryBackend::locked_error(id));
        }
        session.locked = true;
        Ok(Some(Box::new(MemWriter {
            backend: self.clone(),
            id: id.to_owned(),
        })))
    }

    fn delete_if(
        &self,
        id: &str,
        check: &mut dyn FnMut(&SessionSummary) -> bool,
    ) -> Result<super::Deletion> {
        use super::Deletion;
        if self.sessions()?.get(id).is_some_and(|s| s.locked) {
            return Err(MemoryBackend::locked_error(id));
        }
        let Some(summary) = self.summary(id)? else {
            return Ok(Deletion::NotFound);
        };
        let mut sessions = self.sessions()?;
        match sessions.get(id) {
            None => Ok(Deletion::NotFound),
            Some(s) if s.locked => Err(MemoryBackend::locked_error(id)),
            Some(_) if !check(&summary) => Ok(Deletion::Kept(summary)),
            Some(_) => {
                sessions.remove(id);
                Ok(Deletion::Deleted(summary))
            }
        }
    }
}

/// The writer of one in-memory session; dropping it releases the session.
struct MemWriter {
    backend: MemoryBackend,
    id: String,
}

impl MemWriter {
    fn with<T>(&self, f: impl FnOnce(&mut MemSession) -> T) -> Result<T> {
        let mut sessions = self.backend.sessions()?;
        let session = sessions.get_mut(&self.id).ok_or_else(|| Error::NotFound {
            id: self.id.clone(),
        })?;
        Ok(f(session))
    }
}

impl LogWriter for MemWriter {
    fn scan(&mut self) -> Result<Scan> {
        self.with(|s| s.scan())
    }

    fn read_from(&mut self, from_seq: u64) -> Result<Vec<Event>> {
        self.with(|s| s.read_from(from_seq))
    }

    fn repair(&mut self, scan: &Scan) -> Result<Option<std::path::PathBuf>> {
        // Nothing of a memory store outlives the process: there is nothing
        // to quarantine the cut events to.
        self.with(|s| {
            s.events.truncate(scan.stored_len() as usize);
            s.events.extend(scan.closers.iter().cloned());
            s.revision += 1;
        })?;
        Ok(None)
    }

    fn append(&mut self, batch: &[Event], _: &[Placement], _: SyncMode) -> Result<u64> {
        self.with(|s| {
            s.events.extend(batch.iter().cloned());
            s.revision += 1;
            s.events.len() as u64
        })
    }

    fn sync(&mut self) -> Result<u64> {
        self.with(|s| s.events.len() as u64)
    }

    fn durable_events(&self) -> u64 {
        self.with(|s| s.events.len() as u64).unwrap_or(0)
    }

    fn delete(self: Box<Self>) -> Result<()> {
        self.backend.sessions()?.remove(&self.id);
        Ok(())
    }
}

impl Drop for MemWriter {
    fn drop(&mut self) {
        if let Some(s) = self.backend.sessions.lock_to_release().get_mut(&self.id) {
            s.locked = false;
        }
    }
}
