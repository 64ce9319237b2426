//! A panic while a session is held (issue 30): the session's slot is
//! poisoned, and the store says so once (`Poisoned`), lets the writer go and
//! opens the session from disk at the next operation, with every
//! acknowledged event. Other sessions never notice.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use turnwal::backend::memory::MemoryBackend;
use turnwal::backend::{Backend, LogWriter, Stored, SyncMode};
use turnwal::{Error, Event, Placement, Policy, Scan, SessionHeader, SessionSummary, Store};

/// The memory backend, with writers that panic when handed an event whose
/// data says `"panic":true`.
struct Panicky(MemoryBackend);

struct PanickyWriter(Box<dyn LogWriter>);

impl LogWriter for PanickyWriter {
    fn scan(&mut self) -> turnwal::Result<Scan> {
        self.0.scan()
    }
    fn read_from(&mut self, from_seq: u64) -> turnwal::Result<Vec<Event>> {
        self.0.read_from(from_seq)
    }
    fn repair(&mut self, scan: &Scan) -> turnwal::Result<Option<std::path::PathBuf>> {
        self.0.repair(scan)
    }
    fn append(
        &mut self,
        batch: &[Event],
        placements: &[Placement],
        sync: SyncMode,
    ) -> turnwal::Result<u64> {
        assert!(
            !batch
                .iter()
                .any(|e| e.data().get().contains(r#""panic":true"#)),
            "a writer that panics (the test's)"
        );
        self.0.append(batch, placements, sync)
    }
    fn sync(&mut self) -> turnwal::Result<u64> {
        self.0.sync()
    }
    fn durable_events(&self) -> u64 {
        self.0.durable_events()
    }
    fn delete(self: Box<Self>) -> turnwal::Result<()> {
        self.0.delete()
    }
}

impl Backend for Panicky {
    fn location(&self) -> String {
        self.0.location()
    }
    fn list(&self) -> turnwal::Result<Vec<SessionSummary>> {
        self.0.list()
    }
    fn exists(&self, id: &str) -> turnwal::Result<bool> {
        self.0.exists(id)
    }
    fn revision(&self, id: &str) -> turnwal::Result<Option<String>> {
        self.0.revision(id)
    }
    fn scan(&self, id: &str) -> turnwal::Result<Option<Scan>> {
        self.0.scan(id)
    }
    fn load(&self, id: &str) -> turnwal::Result<Option<Stored>> {
        self.0.load(id)
    }
    fn read_from(&self, id: &str, from_seq: u64) -> turnwal::Result<Option<Vec<Event>>> {
        self.0.read_from(id, from_seq)
    }
    fn create(
        &self,
        header: &SessionHeader,
        policy: Policy,
        batch: &[Event],
        placements: &[Placement],
    ) -> turnwal::Result<Box<dyn LogWriter>> {
        let writer = self.0.create(header, policy, batch, placements)?;
        Ok(Box::new(PanickyWriter(writer)))
    }
    fn delete_if(
        &self,
        id: &str,
        check: &mut dyn FnMut(&SessionSummary) -> bool,
    ) -> turnwal::Result<turnwal::Deletion> {
        self.0.delete_if(id, check)
    }
    fn open(&self, id: &str) -> turnwal::Result<Option<Box<dyn LogWriter>>> {
        Ok(self
            .0
            .open(id)?
            .map(|w| Box::new(PanickyWriter(w)) as Box<dyn LogWriter>))
    }
}

fn turn(n: u64, seq: u64) -> Vec<Event> {
    turn_saying(n, seq, r#"{"id":"u","text":"hi"}"#)
}

fn turn_saying(n: u64, seq: u64, message: &str) -> Vec<Event> {
    vec![
        Event::new("turn/start", seq, 1, &format!(r#"{{"turn":{n}}}"#)).unwrap(),
        Event::new("user/message", seq + 1, 1, message).unwrap(),
        Event::new(
            "turn/end",
            seq + 2,
            1,
            &format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#),
        )
        .unwrap(),
    ]
}

#[test]
fn a_panic_while_a_session_is_held_is_reported_once_and_the_session_reopens_from_disk() {
    let store = Store::with_backend(Arc::new(Panicky(MemoryBackend::new())), Default::default());
    for id in ["s", "other"] {
        store.create(SessionHeader::new(id, 1)).unwrap();
        store.append(id, &turn(1, 0)).unwrap();
        store.append(id, &turn(2, 3)).unwrap();
    }
    // The writer panics mid-append, with the session held.
    let poison = turn_saying(3, 6, r#"{"id":"u","text":"hi","panic":true}"#);
    let panicked = catch_unwind(AssertUnwindSafe(|| store.append("s", &poison)));
    assert!(panicked.is_err(), "the writer panicked");

    // Said once, naming the session and what happens next.
    match store.append("s", &turn(3, 6)) {
        Err(Error::Poisoned { id, cause }) => {
            assert_eq!(id, "s");
            assert!(cause.contains("panicked"), "{cause}");
            assert!(cause.contains("opens the session from disk"), "{cause}");
        }
        other => panic!("expected Poisoned, got {other:?}"),
    }
    // Then opened from disk: every acknowledged event, nothing of the
    // batch that panicked; the session goes on.
    let before: Vec<Event> = turn(1, 0).into_iter().chain(turn(2, 3)).collect();
    assert_eq!(store.load("s").unwrap().events, before);
    store.append("s", &turn(3, 6)).unwrap();
    let after: Vec<Event> = before.iter().cloned().chain(turn(3, 6)).collect();
    assert_eq!(store.load("s").unwrap().events, after);
    // The other session never noticed.
    store.append("other", &turn(3, 6)).unwrap();
    assert_eq!(store.load("other").unwrap().events, after);
    // A clean close after all.
    store.close_all().unwrap();
}
