//! [`Store::follow`]: a session's stored events from a position, in order,
//! each once, and then each new one as it is acknowledged (docs/CLI.md,
//! "Following a session").
//!
//! A follower serves what [`Store::read_from`] serves: stored events only.
//! A live turn's synthetic closers are never served as if they were
//! stored; a crashed writer's closers are served once recovery writes them
//! (the next writer's open, `turnwal recover`), as the stored events they
//! then are.
//!
//! Between two reads a follower waits on the backend's
//! [`crate::storage::watch::Watch`]
//! (inotify on Linux, PostgreSQL's `LISTEN`, a 20 ms poll of the log's
//! revision elsewhere) and reads only when the revision moved. Each read
//! starts one event before the next one wanted and checks that this event
//! is still the one served last, and that the header is the one the
//! follow started with: a log rewritten with the same events (a
//! compaction) goes on; a log removed, or removed and created again, ends
//! the follow with [`Error::FollowLost`] and never serves the new
//! incarnation's events after the old one's.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::event::Event;
use crate::header::SessionHeader;
use crate::store::Store;

/// How long a cancelled follower may go on waiting before it sees it.
const CANCEL_SLICE: Duration = Duration::from_millis(25);

/// The quick looks after a sign that showed nothing ([`Follow::wait`]):
/// this many, the first after this long, each twice the one before.
const SETTLE_LOOKS: u32 = 5;
const SETTLE_FIRST: Duration = Duration::from_millis(1);

/// Stops a follower from another thread ([`Follow::canceller`]): its wait
/// returns within a few tens of milliseconds, and its iterator ends.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// Stops the follower.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether it was stopped.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

enum StoreRef<'s> {
    Borrowed(&'s Store),
    Shared(Arc<Store>),
}

impl std::ops::Deref for StoreRef<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        match self {
            StoreRef::Borrowed(store) => store,
            StoreRef::Shared(store) => store,
        }
    }
}

/// A session followed from a position ([`Store::follow`]). Blocking: use
/// it from a thread of its own, and stop it with a [`Cancel`].
pub struct Follow<'s> {
    store: StoreRef<'s>,
    id: String,
    /// The incarnation followed: the header read when the follow started.
    header: SessionHeader,
    /// The seq of the next event to serve.
    next: u64,
    /// The stored event at `next - 1`, when it was read: what the log must
    /// still hold there.
    last: Option<Event>,
    /// The revision the last read was made at.
    seen: Option<String>,
    /// The incarnation of the log the last read was made from
    /// ([`crate::backend::Backend::incarnation`]).
    incarnation: Option<String>,
    /// The seq the follow started from, and a digest of every event served
    /// since: what a replaced log must still hold.
    started: u64,
    digest: u64,
    /// Keeps the log read last from being replaced by one that looks the
    /// same ([`crate::backend::Backend::pin`]).
    pin: Option<Box<dyn Send>>,
    watch: Box<dyn crate::storage::watch::Watch>,
    cancel: Cancel,
    /// Read and not yet taken by the iterator.
    pending: VecDeque<Event>,
    /// Set once the iterator has returned an error: it then ends.
    failed: bool,
    /// Whether events are served as stored ([`Follow::raw`]).
    raw: bool,
}

impl Store {
    /// Follows session `id` from seq `from_seq`: the stored events from
    /// there on, in order, each once, then each new one as it is
    /// acknowledged (module docs). `from_seq` past the end waits for the
    /// log to reach it. Fails with [`Error::NotFound`] when the session has
    /// nothing stored.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// use std::time::Duration;
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(dir.path()).unwrap();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    ///
    /// let mut follow = store.follow("s", 0).unwrap();
    /// assert_eq!(follow.wait(Some(Duration::from_secs(5))).unwrap()[0].seq(), 0);
    /// store.append("s", &[Event::new("user/message", 1, 6, r#"{"id":"u"}"#).unwrap()]).unwrap();
    /// let next = follow.wait(Some(Duration::from_secs(5))).unwrap();
    /// assert_eq!((next.len(), next[0].seq(), follow.next_seq()), (1, 1, 2));
    /// // Nothing new: the wait times out empty.
    /// assert!(follow.wait(Some(Duration::from_millis(50))).unwrap().is_empty());
    /// ```
    pub fn follow(&self, id: &str, from_seq: u64) -> Result<Follow<'_>> {
        Follow::start(StoreRef::Borrowed(self), id, from_seq)
    }

    /// [`Store::follow`] holding the store by an `Arc`, for a follower that
    /// lives on a thread of its own.
    pub fn follow_shared(self: &Arc<Store>, id: &str, from_seq: u64) -> Result<Follow<'static>> {
        Follow::start(StoreRef::Shared(self.clone()), id, from_seq)
    }
}

impl<'s> Follow<'s> {
    fn start(store: StoreRef<'s>, id: &str, from_seq: u64) -> Result<Follow<'s>> {
        crate::store::check_from_seq(from_seq)?;
        // The watch first: a change after it is a sign at the next wait.
        let watch = store.backend().watch(Some(id))?;
        let header = store.header(id)?;
        Ok(Follow {
            store,
            id: id.to_owned(),
            header,
            next: from_seq,
            last: None,
            seen: None,
            incarnation: None,
            started: from_seq,
            digest: FNV_OFFSET,
            pin: None,
            watch,
            cancel: Cancel::default(),
            pending: VecDeque::new(),
            failed: false,
            raw: false,
        })
    }

    /// Continues from `last`, an event the caller read before the follow
    /// began (the last one `tail -n` printed): the follow's first read
    /// checks that the log still holds it, as if this follower had served
    /// it, so a session replaced between the caller's read and the follow
    /// is refused, not spliced. `last` must be the event just before the
    /// follow's position.
    ///
    /// ```
    /// use turnwal::{Error, Event, SessionHeader, Store};
    /// let store = Store::in_memory();
    /// store.create(SessionHeader::new("s", 1)).unwrap();
    /// store.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// let last = store.read_last("s", 1).unwrap().pop().unwrap();
    /// let follow = store.follow("s", 1).unwrap().continuing(last).unwrap();
    /// assert_eq!(follow.next_seq(), 1);
    /// let other = Event::new("turn/start", 0, 6, r#"{"turn":1}"#).unwrap();
    /// assert!(matches!(store.follow("s", 2).unwrap().continuing(other), Err(Error::InvalidArgument(_))));
    /// ```
    pub fn continuing(mut self, last: Event) -> Result<Follow<'s>> {
        if last.seq() + 1 != self.next || !self.pending.is_empty() || self.last.is_some() {
            return Err(Error::InvalidArgument(format!(
                "a follow from seq {} continues the event at seq {}, not {}",
                self.next,
                self.next.saturating_sub(1),
                last.seq()
            )));
        }
        self.started = last.seq();
        self.digest = digest(std::slice::from_ref(&last));
        self.last = Some(last);
        Ok(self)
    }

    /// Stopped by `cancel` (a handle made before the follow, as a binding
    /// makes one before its follower thread opens the follow) instead of
    /// its own.
    pub fn with_cancel(mut self, cancel: Cancel) -> Follow<'s> {
        self.cancel = cancel;
        self
    }

    /// Serves the events exactly as the log stores them
    /// ([`Store::read_raw`]: before a JSONL root's or a Permissive
    /// session's read-time migrations), as the harness's own reads of
    /// stored events get them, instead of as [`Store::read_from`] serves
    /// them. Set before the first read.
    pub fn raw(mut self) -> Follow<'s> {
        self.raw = true;
        self
    }

    /// The session followed.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The seq of the next event to be served: every stored event before
    /// it has been (a cursor to follow again from).
    pub fn next_seq(&self) -> u64 {
        self.next - self.pending.len() as u64
    }

    /// A handle that stops this follower from another thread.
    pub fn canceller(&self) -> Cancel {
        self.cancel.clone()
    }

    /// The events stored since the last read, without waiting (none when
    /// the log has not changed).
    pub fn poll(&mut self) -> Result<Vec<Event>> {
        let new = self.read_new()?;
        let mut events: Vec<Event> = self.pending.drain(..).collect();
        events.extend(new);
        Ok(events)
    }

    /// Waits until there are new events and returns them (at least one),
    /// or returns none when `timeout` passes first or the follower is
    /// cancelled. `None` waits as long as it takes.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<Vec<Event>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        // Looks left after a sign that showed nothing yet.
        let mut settling = 0;
        loop {
            if self.cancel.is_cancelled() {
                return Ok(Vec::new());
            }
            let events = self.poll()?;
            if !events.is_empty() {
                return Ok(events);
            }
            // A sign can come before what it signals is readable: SQLite
            // writes a commit's frames (the sign) before it publishes them
            // in its index. So a sign that showed nothing is followed by a
            // few quick looks (1, 2, 4, 8, 16 ms) before waiting again.
            let look = if settling > 0 {
                settling -= 1;
                Instant::now() + SETTLE_FIRST * (1 << (SETTLE_LOOKS - 1 - settling))
            } else {
                Instant::now() + self.watch.recheck()
            };
            loop {
                let now = Instant::now();
                let until = deadline.map_or(look, |d| d.min(look));
                if now >= until || self.cancel.is_cancelled() {
                    break;
                }
                if self.watch.wait((until - now).min(CANCEL_SLICE))? {
                    settling = SETTLE_LOOKS;
                    break;
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return self.poll();
            }
        }
    }

    /// Reads what was stored since the last read, when the revision moved.
    fn read_new(&mut self) -> Result<Vec<Event>> {
        let store = &*self.store;
        let backend = store.backend();
        let id = self.id.as_str();
        let Some(revision) = store.revision(id)? else {
            return Err(self.lost(None));
        };
        if Some(&revision) == self.seen.as_ref() {
            return Ok(Vec::new());
        }
        let incarnation = backend.incarnation(&revision);
        // Another file or row set than the last read's: a compaction or a
        // seal, or a session removed and created again. Only the events
        // served can tell them apart: they are read again and compared.
        let replaced = self.incarnation.is_some() && incarnation != self.incarnation;
        // Otherwise one event before the next one: the one served last,
        // which the log must still hold.
        let from = if replaced {
            self.started
        } else {
            self.next.saturating_sub(1)
        };
        let events = if self.raw {
            store.read_raw(id, from)
        } else {
            store.read_from(id, from)
        };
        let read = events.and_then(|events| Ok((events, store.header(id)?)));
        let (mut events, header) = match read {
            Ok(read) => read,
            Err(Error::NotFound { .. }) => return Err(self.lost(None)),
            Err(e) => return Err(e),
        };
        // Replaced during the read: what was read may straddle the two
        // logs. Read again at the next look.
        match store.revision(id)? {
            None => return Err(self.lost(None)),
            Some(after) if backend.incarnation(&after) != incarnation => return Ok(Vec::new()),
            Some(_) => {}
        }
        if header != self.header {
            let why = format!(
                "header createdAt {}, now {}",
                self.header.created_at, header.created_at
            );
            return Err(self.lost(Some(why)));
        }
        // The events of this read that were read before (from `from` up to
        // `next`): all there again, as they were. In place that is the
        // last one; in a replaced log, every one, by the digest.
        let known = if self.last.is_some() {
            usize::try_from(self.next - from).unwrap_or(usize::MAX)
        } else {
            0
        };
        let why = if events.len() < known {
            Some(format!("it holds fewer events than the {} read", self.next))
        } else if known > 0 && Some(&events[known - 1]) != self.last.as_ref() {
            Some(format!(
                "its event at seq {} is not the one read",
                self.next - 1
            ))
        } else if replaced && digest(&events[..known]) != self.digest {
            Some(format!(
                "its events from seq {} to {} are not the ones read",
                self.started,
                self.next.saturating_sub(1)
            ))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(self.lost(Some(why)));
        }
        events.drain(..known);
        // The anchor of a follow from a seq past 0: the event before the
        // first one to serve, checked from now on as if it had been served.
        let unanchored = !replaced && self.last.is_none() && self.next > 0;
        if unanchored && events.first().is_some_and(|e| e.seq() == from) {
            let anchor = events.remove(0);
            self.started = from;
            self.digest = digest(std::slice::from_ref(&anchor));
            self.last = Some(anchor);
        }
        self.seen = Some(revision);
        if incarnation != self.incarnation {
            // Pinned after the read: a log replaced in between is another
            // incarnation than the one recorded, found at the next look.
            self.pin = backend.pin(id);
            self.incarnation = incarnation;
        }
        if let Some(event) = events.last() {
            self.next = event.seq() + 1;
            self.last = Some(event.clone());
        }
        self.digest = extend_digest(self.digest, &events);
        Ok(events)
    }

    fn lost(&self, recreated: Option<String>) -> Error {
        Error::FollowLost {
            id: self.id.clone(),
            next: self.next_seq(),
            recreated,
        }
    }
}

/// Blocking: each event as it is stored; ends when the follower is
/// cancelled, and after the first error.
impl Iterator for Follow<'_> {
    type Item = Result<Event>;

    fn next(&mut self) -> Option<Result<Event>> {
        if self.failed {
            return None;
        }
        while self.pending.is_empty() {
            if self.cancel.is_cancelled() {
                return None;
            }
            match self.wait(None) {
                Ok(events) => self.pending.extend(events),
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        self.pending.pop_front().map(Ok)
    }
}

/// A digest of events in order (64-bit FNV-1a over their JSON lines): what
/// a follower keeps of the events it served, to recognize them again.
fn digest(events: &[Event]) -> u64 {
    extend_digest(FNV_OFFSET, events)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn extend_digest(mut hash: u64, events: &[Event]) -> u64 {
    for event in events {
        for byte in event.to_json().bytes().chain([b'\n']) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}
