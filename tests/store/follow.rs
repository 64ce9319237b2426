//! `Store::follow` on every store (issue 34): every stored event from any
//! seq, in order, each once, as another store instance appends; through a
//! compaction; a removed or recreated session ends the follow with
//! `FollowLost`, never a splice; a crashed writer's closers are served only
//! once recovery stores them; a cancel stops a waiting follower.

use crate::support;

use std::time::{Duration, Instant};

use support::log::Log;
use support::stores::{ALL, Kind, open};
const T0: u64 = support::T0 as u64;
use turnwal::{Error, Event, Follow, SessionHeader, Store};

/// How long a test waits for what it expects before it fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// Everything `follow` serves until its position reaches `end`.
fn served_until(follow: &mut Follow<'_>, end: u64) -> Vec<Event> {
    let started = Instant::now();
    let mut got = Vec::new();
    while follow.next_seq() < end {
        assert!(
            started.elapsed() < PATIENCE,
            "stuck at {}",
            follow.next_seq()
        );
        got.extend(follow.wait(Some(Duration::from_secs(1))).unwrap());
    }
    got
}

/// A store of `kind` opened twice: a writer and a reader (as another
/// process would be), and the directory they live in.
fn two_instances(kind: Kind) -> (tempfile::TempDir, Store, Store) {
    let dir = tempfile::tempdir().unwrap();
    let spec = kind.place(dir.path(), "store");
    let (writer, reader) = (open(&spec), open(&spec));
    (dir, writer, reader)
}

#[test]
fn a_follower_serves_every_event_once_in_order_from_any_seq() {
    for kind in ALL {
        let (_dir, writer, reader) = two_instances(kind);
        writer.create(SessionHeader::new("s", T0)).unwrap();
        let mut log = Log::new();
        log.prompt_turn("first", "one");
        writer.append("s", &log.batch()).unwrap();
        let first_end = log.next_seq();
        // 40 more turns at 50 ms intervals, each in two batches (the turn
        // open between them), written while the followers wait.
        let mut turns = Log::after(log.all());
        for i in 0..40 {
            turns
                .turn_start()
                .user(&format!("u{i}"), &format!("prompt {i}"));
            turns
                .step_start()
                .chunk("a ")
                .chunk("b")
                .assistant("a b", &[]);
            turns.step_end().turn_end();
        }
        let all = turns.all().to_vec();
        let end = all.len() as u64;
        std::thread::scope(|scope| {
            let followers: Vec<_> = [0, 3, first_end, 50]
                .into_iter()
                .map(|from| {
                    let reader = &reader;
                    (
                        from,
                        scope.spawn(move || {
                            served_until(&mut reader.follow("s", from).unwrap(), end)
                        }),
                    )
                })
                .collect();
            let mut at = first_end as usize;
            while at < all.len() {
                // A batch ends after the user message or at the turn's end.
                let cut = all[at..]
                    .iter()
                    .position(|e| matches!(e.event_type(), "user/message" | "turn/end"))
                    .unwrap();
                writer.append("s", &all[at..=at + cut]).unwrap();
                at += cut + 1;
                std::thread::sleep(Duration::from_millis(25));
            }
            for (from, follower) in followers {
                let got = follower.join().unwrap();
                assert_eq!(got, all[from as usize..], "{kind:?} from seq {from}");
            }
        });
    }
}

#[test]
fn a_follower_goes_on_through_a_compaction() {
    for kind in ALL {
        let (_dir, writer, reader) = two_instances(kind);
        writer.create(SessionHeader::new("s", T0)).unwrap();
        let mut log = Log::new();
        for i in 0..6 {
            log.prompt_turn(&format!("p{i}"), "a");
            log.tool_turn(&format!("c{i}"));
        }
        writer.append("s", &log.batch()).unwrap();
        let mut follow = reader.follow("s", 0).unwrap();
        let mut got = follow.wait(Some(PATIENCE)).unwrap();
        // Compacted with no writer holding it (a version-2 rewrite on the
        // WAL; nothing to do elsewhere), then appended to again.
        writer.close("s").unwrap();
        let compacted = writer.compact("s").unwrap();
        assert_eq!(compacted.is_some(), kind == Kind::Wal, "{kind:?}");
        log.prompt_turn("after", "b");
        writer.append("s", &log.batch()).unwrap();
        writer.close("s").unwrap();
        writer.compact("s").unwrap();
        got.extend(served_until(&mut follow, log.next_seq()));
        assert_eq!(got, log.all(), "{kind:?}");
        // And it is still following: nothing more, no error.
        assert!(
            follow
                .wait(Some(Duration::from_millis(100)))
                .unwrap()
                .is_empty()
        );
    }
}

#[test]
fn a_removed_or_recreated_session_ends_the_follow_and_is_never_spliced() {
    for kind in ALL {
        let (_dir, writer, reader) = two_instances(kind);
        let mut log = Log::new();
        log.prompt_turn("one", "a").prompt_turn("two", "b");
        let first = log.batch();

        // Removed.
        writer.create(SessionHeader::new("gone", T0)).unwrap();
        writer.append("gone", &first).unwrap();
        let mut follow = reader.follow("gone", 0).unwrap();
        assert_eq!(follow.wait(Some(PATIENCE)).unwrap(), first);
        writer.delete("gone").unwrap();
        match follow.wait(Some(PATIENCE)) {
            Err(Error::FollowLost {
                id,
                next,
                recreated: None,
            }) => {
                assert_eq!(
                    (id.as_str(), next),
                    ("gone", first.len() as u64),
                    "{kind:?}"
                );
            }
            other => panic!("{kind:?}: {other:?}"),
        }

        // Recreated with another header (created later): refused by it.
        writer.create(SessionHeader::new("again", T0)).unwrap();
        writer.append("again", &first).unwrap();
        let mut follow = reader.follow("again", 0).unwrap();
        assert_eq!(follow.wait(Some(PATIENCE)).unwrap(), first);
        writer.delete("again").unwrap();
        writer.create(SessionHeader::new("again", T0 + 1)).unwrap();
        let mut longer = Log::new();
        longer
            .prompt_turn("one", "a")
            .prompt_turn("two", "b")
            .prompt_turn("three", "c");
        writer.append("again", &longer.batch()).unwrap();
        match follow.wait(Some(PATIENCE)) {
            Err(Error::FollowLost {
                next,
                recreated: Some(why),
                ..
            }) => {
                assert_eq!(next, first.len() as u64, "{kind:?}");
                assert!(why.contains("header createdAt"), "{kind:?}: {why}");
            }
            other => panic!("{kind:?}: {other:?}"),
        }

        // Recreated with the same header and another event where the last
        // one served was: refused by that event.
        writer.create(SessionHeader::new("same", T0)).unwrap();
        writer.append("same", &first).unwrap();
        let mut follow = reader.follow("same", 0).unwrap();
        assert_eq!(follow.wait(Some(PATIENCE)).unwrap(), first);
        writer.delete("same").unwrap();
        writer.create(SessionHeader::new("same", T0)).unwrap();
        let mut other = Log::new();
        other
            .prompt_turn("one", "a")
            .prompt_turn("two", "B!")
            .prompt_turn("3", "c");
        writer.append("same", &other.batch()).unwrap();
        match follow.wait(Some(PATIENCE)) {
            Err(Error::FollowLost {
                recreated: Some(why),
                ..
            }) => {
                // Seen at the last event served, or (a new file or row set:
                // every store but the in-place ones) by every event served.
                let at = first.len() - 1;
                let shown = [
                    format!("its event at seq {at} is not the one read"),
                    format!("its events from seq 0 to {at} are not the ones read"),
                ];
                assert!(
                    shown.iter().any(|s| why.contains(s.as_str())),
                    "{kind:?}: {why}"
                );
            }
            other => panic!("{kind:?}: {other:?}"),
        }
    }
}

#[test]
fn a_crashed_writers_closers_are_served_once_recovery_stores_them() {
    for kind in ALL {
        let dir = tempfile::tempdir().unwrap();
        let spec = kind.place(dir.path(), "store");
        let reader = open(&spec);
        let mut log = Log::new();
        log.prompt_turn("one", "a");
        log.turn_start()
            .user("u2", "cut short")
            .step_start()
            .chunk("half");
        let stored = log.batch();
        {
            let writer = open(&spec);
            writer.create(SessionHeader::new("s", T0)).unwrap();
            writer.append("s", &stored).unwrap();
            // Dropped with its turn open: a crash, as far as the log knows.
        }
        let mut follow = reader.follow("s", 0).unwrap();
        assert_eq!(follow.wait(Some(PATIENCE)).unwrap(), stored, "{kind:?}");
        // The inspect view has closers; the follower does not serve them.
        assert!(reader.inspect("s").unwrap().events.len() > stored.len());
        assert!(
            follow
                .wait(Some(Duration::from_millis(150)))
                .unwrap()
                .is_empty()
        );
        // Recovery stores them; then they are served, as stored.
        let recovering = open(&spec);
        let view = recovering.load("s").unwrap();
        let closers = view.events[stored.len()..].to_vec();
        assert_eq!(closers.last().unwrap().event_type(), "turn/end");
        assert!(closers.last().unwrap().data().get().contains("interrupted"));
        let got = served_until(&mut follow, view.events.len() as u64);
        assert_eq!(got, closers, "{kind:?}");
    }
}

#[test]
fn a_cancel_stops_a_waiting_follower_and_ends_its_iterator() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.create(SessionHeader::new("s", T0)).unwrap();
    let mut log = Log::new();
    log.prompt_turn("one", "a");
    store.append("s", &log.batch()).unwrap();
    let mut follow = store.follow("s", 0).unwrap();
    let cancel = follow.canceller();
    std::thread::scope(|scope| {
        let served = scope.spawn(move || follow.by_ref().map(Result::unwrap).count());
        std::thread::sleep(Duration::from_millis(200));
        let asked = Instant::now();
        cancel.cancel();
        assert_eq!(served.join().unwrap(), log.all().len());
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "{:?}",
            asked.elapsed()
        );
    });
    // A follow of a session with nothing stored is refused.
    store.create(SessionHeader::new("pending", T0)).unwrap();
    assert!(matches!(
        store.follow("pending", 0),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.follow("s", 1 << 60),
        Err(Error::InvalidArgument(_))
    ));
}
