//! [`Store::sync_to`]: copies to another store what it lacks of a session —
//! the whole session when it has none of it, the new suffix when it holds a
//! prefix — between any two stores (docs/CLI.md, "Keeping stores in
//! step").
//!
//! - **As stored.** The source's stored events are copied exactly as its
//!   log holds them ([`Store::read_raw`]): a live session's open turn stays
//!   open in the copy, a crashed one gets no closers (they are copied once
//!   the source's recovery stores them), torn bytes are never read. The
//!   header and the policy go with a new session.
//! - **A prefix, always.** The copy is appended in batches, each one append
//!   of the destination (a transaction of SQLite and PostgreSQL, one write
//!   of the WAL and JSONL, each fsynced), ending at a turn's end where a
//!   turn fits in one. A sync killed at any moment leaves the destination
//!   holding a prefix of the source's stored events (a torn last batch is
//!   cut by the next sync, as recovery cuts it: it was never acknowledged),
//!   and the next sync goes on from it. A second sync copies nothing.
//! - **Never over another history.** A destination session with the same
//!   id but another header, more events than the source, or another event
//!   at its last seq is refused ([`Error::Diverged`], naming both stores
//!   and positions) and nothing of it is written. Only the last event the
//!   destination holds is compared, not every one (the cost of a sync is
//!   that of what it copies); [`SyncOptions::verify`] compares them all.
//! - **Never over a live writer.** A destination session another writer
//!   holds (a process, a PostgreSQL lease on any host, or the destination
//!   store itself) is refused with that writer's lock error, untouched.

use crate::error::{Divergence, Error, Result};
use crate::event::Event;
use crate::header::SessionHeader;
use crate::store::{RepairBasis, Store};

/// At most this many events go in one batch: a longer turn is split (each
/// part still a prefix of it).
pub const BATCH_EVENTS: usize = 4096;

/// At most about this many bytes of events go in one batch.
pub const BATCH_BYTES: usize = 4 << 20;

/// How [`Store::sync_to_with`] syncs.
#[derive(Default)]
pub struct SyncOptions<'a> {
    /// Compare every event the destination holds with the source's, not
    /// only its last one (reads both sessions whole).
    pub verify: bool,
    /// Called after each batch is acknowledged by the destination, with
    /// the destination's stored length then.
    pub on_batch: Option<&'a mut dyn FnMut(u64)>,
}

/// What a sync of one session did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced {
    /// Whether the destination had none of the session.
    pub created: bool,
    /// The destination's stored events before the sync.
    pub before: u64,
    /// Events copied (`after - before`).
    pub copied: u64,
    /// The destination's stored events after it: the source's, as read.
    pub after: u64,
    /// Batches appended.
    pub batches: u64,
}

impl Store {
    /// Copies session `id` to `dst` as far as this store has stored it
    /// (module docs): nothing when `dst` is up to date, the new suffix when
    /// it holds a prefix, the whole session when it holds none.
    ///
    /// ```
    /// use turnwal::{Event, SessionHeader, Store};
    /// let src = Store::in_memory();
    /// let dst = Store::in_memory();
    /// src.create(SessionHeader::new("s", 1)).unwrap();
    /// src.append("s", &[Event::new("turn/start", 0, 5, r#"{"turn":1}"#).unwrap()]).unwrap();
    /// assert_eq!(src.sync_to(&dst, "s").unwrap().copied, 1);
    /// src.append("s", &[Event::new("turn/end", 1, 6, r#"{"turn":1,"reason":{"kind":"completed"}}"#).unwrap()]).unwrap();
    /// let synced = src.sync_to(&dst, "s").unwrap();
    /// assert_eq!((synced.before, synced.copied), (1, 1));
    /// assert_eq!(src.sync_to(&dst, "s").unwrap().copied, 0, "a second sync copies nothing");
    /// assert_eq!(dst.read_raw("s", 0).unwrap(), src.read_raw("s", 0).unwrap());
    /// ```
    pub fn sync_to(&self, dst: &Store, id: &str) -> Result<Synced> {
        self.sync_to_with(dst, id, SyncOptions::default())
    }

    /// [`Store::sync_to`] with options.
    pub fn sync_to_with(
        &self,
        dst: &Store,
        id: &str,
        mut options: SyncOptions<'_>,
    ) -> Result<Synced> {
        if dst.writes_here(id) {
            return Err(Error::OpenTurn {
                id: id.to_owned(),
                reason: format!(
                    "the destination store {} writes this session itself: sync never writes a \
                     session a live writer holds",
                    dst.backend().location()
                ),
            });
        }
        let header = self.header(id)?;
        // One read of the source serves the join check and the copy, so
        // what is copied continues what the destination holds.
        let (created, before, events) = match dst.header(id) {
            Ok(theirs) => {
                let (before, events) = self.join(dst, id, &header, &theirs, options.verify)?;
                (false, before, events)
            }
            Err(Error::NotFound { .. }) => (true, 0, self.read_raw(id, 0)?),
            Err(e) => return Err(e),
        };
        // A source recreated between its header's read and its events'.
        let now = self.header(id)?;
        if now != header {
            return Err(Error::Diverged(Box::new(Divergence {
                id: id.to_owned(),
                src: format!(
                    "{} (createdAt {}, now {})",
                    self.backend().location(),
                    header.created_at,
                    now.created_at
                ),
                dst: dst.backend().location(),
                detail: "the source session was recreated while it was read; sync again".into(),
            })));
        }
        let mut synced = Synced {
            created,
            before,
            copied: 0,
            after: before,
            batches: 0,
        };
        if events.is_empty() {
            return Ok(synced);
        }
        if created {
            dst.create_with_policy(header, self.policy(id)?)?;
        } else {
            open_as_stored(dst, id)?;
        }
        let copied = (|| -> Result<()> {
            for batch in batches(&events) {
                dst.append(id, batch)?;
                synced.batches += 1;
                synced.after += batch.len() as u64;
                if let Some(report) = options.on_batch.as_mut() {
                    report(synced.after);
                }
            }
            dst.flush(id)?;
            Ok(())
        })();
        // Let go whatever happened: the session is another writer's to take.
        let closed = dst.close(id);
        if copied.is_err() && created && synced.batches == 0 {
            // Nothing published: forget the session created for it.
            let _ = dst.delete(id);
        }
        copied?;
        closed?;
        synced.copied = synced.after - before;
        Ok(synced)
    }

    /// Where the destination's copy of `id` joins this store's log: its
    /// stored length, once its header and its last event (every event with
    /// `verify`) are found to be this store's; and this store's events
    /// after it, read with the one compared.
    fn join(
        &self,
        dst: &Store,
        id: &str,
        ours: &SessionHeader,
        theirs: &SessionHeader,
        verify: bool,
    ) -> Result<(u64, Vec<Event>)> {
        // Both stores named, each with where it stands.
        let diverged = |at_src: String, at_dst: String, detail: String| {
            Error::Diverged(Box::new(Divergence {
                id: id.to_owned(),
                src: format!("{} ({at_src})", self.backend().location()),
                dst: format!("{} ({at_dst})", dst.backend().location()),
                detail,
            }))
        };
        // Compared as the destination stores headers (a JSONL root always
        // writes `delegationDepth`).
        if &dst.backend().admit_header(ours.clone())? != theirs {
            return Err(diverged(
                format!("createdAt {}", ours.created_at),
                format!("createdAt {}", theirs.created_at),
                "another incarnation: the headers differ".into(),
            ));
        }
        // The last stored event, as stored (a Permissive session's reads
        // are migrated; the source is compared as stored).
        let Some(seq) = dst.read_last(id, 1)?.pop().map(|e| e.seq()) else {
            return Ok((0, self.read_raw(id, 0)?));
        };
        let Some(last) = dst.read_raw(id, seq)?.into_iter().next() else {
            return Err(Error::InvalidArgument(format!(
                "session {id:?} changed in the destination while it was read"
            )));
        };
        let end = last.seq() + 1;
        let mut ours_there = self.read_raw(id, last.seq())?;
        let mine = ours_there.first().filter(|e| e.seq() == last.seq());
        let Some(mine) = mine else {
            let src_end = self.read_last(id, 1)?.pop().map_or(0, |e| e.seq() + 1);
            return Err(diverged(
                format!("{src_end} stored events"),
                format!("{end} stored events"),
                "the destination holds more events than the source".into(),
            ));
        };
        if mine != &last {
            return Err(diverged(
                format!("seq {}: {}", last.seq(), excerpt(mine)),
                format!("seq {}: {}", last.seq(), excerpt(&last)),
                format!("another event at seq {}", last.seq()),
            ));
        }
        if verify {
            let (ours, theirs) = (self.read_raw(id, 0)?, dst.read_raw(id, 0)?);
            if let Some(at) = (0..theirs.len()).find(|&i| ours.get(i) != Some(&theirs[i])) {
                return Err(diverged(
                    format!("seq {at}: {}", ours.get(at).map_or("none".into(), excerpt)),
                    format!("seq {at}: {}", excerpt(&theirs[at])),
                    format!("another event at seq {at}"),
                ));
            }
        }
        ours_there.remove(0);
        Ok((end, ours_there))
    }
}

/// Opens the destination's copy for appends as it is stored: an open turn
/// stays open (the source goes on with it); a torn last batch of a killed
/// sync, never acknowledged, is cut first.
fn open_as_stored(dst: &Store, id: &str) -> Result<()> {
    match dst.adopt(id) {
        Err(Error::StaleRepair { .. }) => {
            let view = dst.inspect(id)?;
            dst.commit_repair(id, &RepairBasis::of(&view), &[])?;
            Ok(())
        }
        other => other.map(drop),
    }
}

/// The events in batches of whole turns, as many as fit in
/// [`BATCH_EVENTS`] and about [`BATCH_BYTES`]; a turn longer than that is
/// cut at the limit (each part a prefix of it), and the last batch may end
/// inside an open turn, as the source does.
fn batches(events: &[Event]) -> impl Iterator<Item = &[Event]> {
    let mut rest = events;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let mut fits = 0;
        let mut turn_end = None;
        for (i, event) in rest.iter().enumerate().take(BATCH_EVENTS) {
            bytes += event.data().get().len() + 64;
            if i > 0 && bytes > BATCH_BYTES {
                break;
            }
            fits = i + 1;
            if event.event_type() == "turn/end" {
                turn_end = Some(i + 1);
            }
        }
        let end = if fits == rest.len() {
            fits
        } else {
            turn_end.unwrap_or(fits)
        };
        let (batch, tail) = rest.split_at(end);
        rest = tail;
        Some(batch)
    })
}

fn excerpt(event: &Event) -> String {
    crate::error::excerpt(&event.to_json())
}
