//! `Store::sync_to` between every pair of stores (issue 34): a new session
//! copied whole, a grown one by its suffix, a second sync copying nothing;
//! another history refused with both positions named and the destination
//! untouched; a destination session a writer holds never written; a
//! source session with a live writer copied as stored, open turn and all.

use crate::support;

use support::log::Log;
use support::stores::{ALL, Kind, open};
use turnwal::{Error, Event, SessionHeader, Store};

const T0: u64 = support::T0 as u64;

/// Two sessions in `src`: a balanced one with chunks and tool calls, and
/// one whose last turn is open (its writer still holds it).
fn fill(src: &Store) -> (Log, Log) {
    let mut a = Log::new();
    a.prompt_turn("hello", "hi").tool_turn("c1").chunk_turn(40);
    src.create(SessionHeader::new("a", T0).with_cwd("/w"))
        .unwrap();
    src.append("a", &a.batch()).unwrap();
    let mut b = Log::new();
    b.prompt_turn("one", "1");
    b.turn_start()
        .user("u2", "still going")
        .step_start()
        .chunk("par");
    src.create(SessionHeader::new("b", T0 + 1).with_cwd("/w"))
        .unwrap();
    src.append("b", &b.batch()).unwrap();
    (a, b)
}

fn same(src: &Store, dst: &Store, id: &str, kinds: (Kind, Kind)) {
    assert_eq!(
        dst.read_raw(id, 0).unwrap(),
        src.read_raw(id, 0).unwrap(),
        "{kinds:?} {id}"
    );
    // As the destination stores headers (a JSONL root writes
    // `delegationDepth` 0 where others leave it out).
    let theirs = dst.backend().admit_header(src.header(id).unwrap()).unwrap();
    assert_eq!(dst.header(id).unwrap(), theirs, "{kinds:?}");
}

#[test]
fn sync_copies_new_and_grown_sessions_between_every_pair_of_stores() {
    for from in ALL {
        for to in ALL {
            if from == to {
                continue;
            }
            let kinds = (from, to);
            let dir = tempfile::tempdir().unwrap();
            let src = open(&from.place(dir.path(), "src"));
            let dst = open(&to.place(dir.path(), "dst"));
            let (mut a, mut b) = fill(&src);
            let first = src.sync_to(&dst, "a").unwrap();
            assert_eq!(
                (first.created, first.before, first.copied),
                (true, 0, a.next_seq())
            );
            let open_turn = src.sync_to(&dst, "b").unwrap();
            assert_eq!(open_turn.copied, b.next_seq(), "{kinds:?}");
            same(&src, &dst, "a", kinds);
            same(&src, &dst, "b", kinds);
            // The open turn stays open in the copy: no closers stored.
            assert_eq!(dst.summary("b").unwrap().events, b.next_seq(), "{kinds:?}");
            // Nothing new: nothing copied, nothing written.
            let revision = dst.revision("a").unwrap();
            assert_eq!(src.sync_to(&dst, "a").unwrap().copied, 0, "{kinds:?}");
            assert_eq!(dst.revision("a").unwrap(), revision, "{kinds:?}");
            // Grown: only the new events are copied, the open turn closed.
            a.prompt_turn("more", "m");
            src.append("a", &a.batch()).unwrap();
            b.chunk("tly")
                .assistant("partly", &[])
                .step_end()
                .turn_end();
            b.prompt_turn("three", "3");
            src.append("b", &b.batch()).unwrap();
            let grown = src.sync_to(&dst, "a").unwrap();
            assert_eq!((grown.created, grown.copied), (false, 6), "{kinds:?}");
            let before = open_turn.after;
            let grown = src.sync_to(&dst, "b").unwrap();
            assert_eq!(
                (grown.before, grown.after),
                (before, b.next_seq()),
                "{kinds:?}"
            );
            same(&src, &dst, "a", kinds);
            same(&src, &dst, "b", kinds);
            // The policy goes with the session where both ends keep one (a
            // JSONL root keeps none: its sessions read as Permissive).
            if src.backend().keeps_policy() && dst.backend().keeps_policy() {
                assert_eq!(
                    dst.policy("a").unwrap(),
                    src.policy("a").unwrap(),
                    "{kinds:?}"
                );
            }
        }
    }
}

/// `dst`'s copy of `id`, to show it was not touched.
fn snapshot(dst: &Store, id: &str) -> (Option<String>, Vec<Event>) {
    (dst.revision(id).unwrap(), dst.read_raw(id, 0).unwrap())
}

#[test]
fn another_history_in_the_destination_is_refused_and_left_as_it_is() {
    for kind in ALL {
        let dir = tempfile::tempdir().unwrap();
        let src = open(&Kind::Wal.place(dir.path(), "src"));
        let dst = open(&kind.place(dir.path(), "dst"));
        let mut log = Log::new();
        log.prompt_turn("one", "a").prompt_turn("two", "b");
        src.create(SessionHeader::new("s", T0)).unwrap();
        src.append("s", &log.batch()).unwrap();

        // Another event at the destination's last seq.
        let mut other = Log::new();
        other.prompt_turn("one", "a").prompt_turn("two", "B");
        dst.create(SessionHeader::new("s", T0)).unwrap();
        dst.append("s", &other.batch()[..10]).unwrap();
        dst.close("s").unwrap();
        let before = snapshot(&dst, "s");
        match src.sync_to(&dst, "s") {
            Err(Error::Diverged(d)) => {
                let (id, at_src, at_dst, detail) = (&d.id, &d.src, &d.dst, &d.detail);
                assert_eq!(
                    (id.as_str(), detail.as_str()),
                    ("s", "another event at seq 9")
                );
                assert!(
                    at_src.contains("seq 9: ") && at_dst.contains("seq 9: "),
                    "{at_src} / {at_dst}"
                );
                assert!(
                    at_dst.contains(&dst.backend().location()),
                    "{kind:?}: {at_dst}"
                );
            }
            other => panic!("{kind:?}: {other:?}"),
        }
        assert_eq!(snapshot(&dst, "s"), before, "{kind:?}");

        // The same events further: the destination holds more.
        dst.delete("s").unwrap();
        let mut longer = Log::new();
        longer
            .prompt_turn("one", "a")
            .prompt_turn("two", "b")
            .prompt_turn("3", "c");
        dst.create(SessionHeader::new("s", T0)).unwrap();
        dst.append("s", &longer.batch()).unwrap();
        dst.close("s").unwrap();
        let before = snapshot(&dst, "s");
        match src.sync_to(&dst, "s") {
            Err(Error::Diverged(d)) => {
                let (at_src, at_dst, detail) = (&d.src, &d.dst, &d.detail);
                assert_eq!(detail, "the destination holds more events than the source");
                assert!(at_src.contains("(12 stored events)"), "{at_src}");
                assert!(at_dst.contains("(18 stored events)"), "{at_dst}");
            }
            other => panic!("{kind:?}: {other:?}"),
        }
        assert_eq!(snapshot(&dst, "s"), before, "{kind:?}");

        // Another incarnation: the headers differ.
        dst.delete("s").unwrap();
        dst.create(SessionHeader::new("s", T0 + 5)).unwrap();
        dst.append("s", &log.all()[..6]).unwrap();
        dst.close("s").unwrap();
        let before = snapshot(&dst, "s");
        match src.sync_to(&dst, "s") {
            Err(Error::Diverged(d)) => {
                let (at_src, at_dst, detail) = (&d.src, &d.dst, &d.detail);
                assert_eq!(detail, "another incarnation: the headers differ");
                assert!(at_src.contains(&format!("createdAt {T0}")), "{at_src}");
                assert!(
                    at_dst.contains(&format!("createdAt {}", T0 + 5)),
                    "{at_dst}"
                );
            }
            other => panic!("{kind:?}: {other:?}"),
        }
        assert_eq!(snapshot(&dst, "s"), before, "{kind:?}");

        // Same last event, another one before it: only --verify sees it.
        dst.delete("s").unwrap();
        let mut middle = Log::new();
        middle.prompt_turn("ONE", "a").prompt_turn("two", "b");
        dst.create(SessionHeader::new("s", T0)).unwrap();
        dst.append("s", &middle.batch()[..8]).unwrap();
        dst.close("s").unwrap();
        let before = snapshot(&dst, "s");
        let verify = turnwal::SyncOptions {
            verify: true,
            on_batch: None,
        };
        match src.sync_to_with(&dst, "s", verify) {
            Err(Error::Diverged(d)) => assert_eq!(d.detail, "another event at seq 1"),
            other => panic!("{kind:?}: {other:?}"),
        }
        assert_eq!(snapshot(&dst, "s"), before, "{kind:?}");
    }
}

#[test]
fn a_destination_session_a_writer_holds_is_never_written() {
    for kind in ALL {
        let dir = tempfile::tempdir().unwrap();
        let src = open(&Kind::Wal.place(dir.path(), "src"));
        let spec = kind.place(dir.path(), "dst");
        let dst = open(&spec);
        let mut log = Log::new();
        log.prompt_turn("one", "a");
        src.create(SessionHeader::new("s", T0)).unwrap();
        src.append("s", &log.batch()).unwrap();
        src.sync_to(&dst, "s").unwrap();
        log.prompt_turn("two", "b");
        src.append("s", &log.batch()).unwrap();
        // Another writer (another store instance, as another process or
        // host would be) holds the destination's copy.
        let writer = open(&spec);
        writer.hold("s").unwrap();
        let before = snapshot(&dst, "s");
        match src.sync_to(&dst, "s") {
            Err(Error::Locked { .. } | Error::Leased { .. }) => {}
            other => panic!("{kind:?}: {other:?}"),
        }
        assert_eq!(snapshot(&dst, "s"), before, "{kind:?}");
        // The store that writes it itself is refused too.
        match src.sync_to(&writer, "s") {
            Err(Error::OpenTurn { reason, .. }) => {
                assert!(reason.contains("writes this session itself"), "{reason}")
            }
            other => panic!("{kind:?}: {other:?}"),
        }
        // Let go, the next sync completes it.
        writer.close("s").unwrap();
        drop(writer);
        assert_eq!(src.sync_to(&dst, "s").unwrap().copied, 6, "{kind:?}");
        same(&src, &dst, "s", (Kind::Wal, kind));
    }
}

#[test]
fn a_source_session_with_a_live_writer_is_copied_as_stored() {
    for kind in ALL {
        let dir = tempfile::tempdir().unwrap();
        let spec = kind.place(dir.path(), "src");
        let writer = open(&spec);
        let reader = open(&spec);
        let dst = open(&Kind::Wal.place(dir.path(), "dst"));
        writer.create(SessionHeader::new("s", T0)).unwrap();
        let mut log = Log::new();
        log.prompt_turn("one", "a");
        log.turn_start().user("u", "go on").step_start().chunk("x");
        writer.append("s", &log.batch()).unwrap();
        // The writer holds the session with its turn open; a sync from
        // another instance copies what is stored, turn open.
        assert_eq!(reader.sync_to(&dst, "s").unwrap().copied, log.next_seq());
        assert_eq!(dst.read_raw("s", 0).unwrap(), log.all(), "{kind:?}");
        assert_eq!(dst.inspect("s").unwrap().state, turnwal::LogState::OpenTurn);
        // The writer goes on; the next sync continues the turn in the copy.
        log.chunk("y").assistant("xy", &[]).step_end().turn_end();
        writer.append("s", &log.batch()).unwrap();
        assert_eq!(reader.sync_to(&dst, "s").unwrap().copied, 4, "{kind:?}");
        assert_eq!(dst.read_raw("s", 0).unwrap(), log.all(), "{kind:?}");
        assert_eq!(dst.inspect("s").unwrap().state, turnwal::LogState::Clean);
    }
}
