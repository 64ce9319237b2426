//! The crash lab: the tools that prove crash safety rather than hope for it.
//!
//! - [`crate::simdisk`] is the simulated, fault-injecting disk;
//! - [`oracle`] holds the one oracle every crash test checks: the recovered
//!   log is a prefix of what was written plus closers only where the cut fell
//!   inside a turn, every acknowledged event is there byte for byte, the
//!   result verifies clean, recovery is durable and idempotent, and the next
//!   append continues the seq;
//! - [`workload`] generates valid event batches from a seed;
//! - [`differential`] runs the same operations against a WAL store and a
//!   SQLite store and requires identical answers (the differential property
//!   test and fuzz target share it);
//! - [`ops`] runs operation sequences (appends, flushes, faults, power cuts,
//!   crashes) against the oracle; the structure-aware fuzz target decodes
//!   them from bytes.
//!
//! They live in the library (not in `tests/`) because the fuzz crate and the
//! corpus-replay test share them.

pub mod differential;
pub mod ops;
pub mod oracle;
pub mod workload;

/// The fuzz entry for the scanner: any bytes, read as a session file, either
/// fail with a typed error or classify into a log whose every event is valid
/// and whose repaired form satisfies the turn contract. Never panics, never
/// allocates beyond the input's size.
pub fn fuzz_scan(bytes: &[u8]) {
    use turnwal::backend::wal::scan::scan_log;
    let path = std::path::Path::new("/fuzz/sessions/x.twal");
    let Ok(classified) = scan_log(bytes, path) else {
        return;
    };
    let scan = &classified.scan;
    assert!(classified.kept_end <= bytes.len() as u64);
    assert!(scan.committed <= classified.frames.records);
    if let Some(cut) = &scan.cut {
        assert_eq!(
            cut.offset + cut.len,
            bytes.len() as u64,
            "a cut runs to the end"
        );
    }
    // Every kept event decodes, and the kept log plus closers obeys the
    // contract from the committed state.
    let events = turnwal::backend::wal::decode_kept_events(bytes, &classified, path)
        .expect("kept records decode");
    // A version-3 file's events before its archive reference's count are
    // its archive's, not these bytes'.
    let archived = classified.frames.file.archive.map_or(0, |a| a.count);
    assert_eq!(events.len() as u64 + archived, scan.stored_len());
    let mut tracker =
        turnwal::contract::Tracker::resume(scan.policy, scan.committed, scan.committed_turn);
    tracker
        .accept_batch(&scan.tail)
        .expect("the kept tail obeys the contract");
    tracker
        .accept_batch(&scan.closers)
        .expect("closers obey the contract");
    assert!(!tracker.in_turn(), "closers close the open turn");
}

/// The fuzz entry for the event decoder and the `turnwal append` line
/// parser: any bytes either parse into an event whose JSON form parses back
/// to the same event, or are refused with a reason.
pub fn fuzz_decode(bytes: &[u8]) {
    use turnwal::event::{Event, IncomingEvent};
    if let Ok(event) = Event::from_json(bytes) {
        let json = event.to_json();
        let back = Event::from_json(json.as_bytes()).expect("our own output parses");
        assert_eq!(back, event);
    }
    match IncomingEvent::parse(bytes) {
        Ok(incoming) => {
            let seq = incoming.seq.unwrap_or(0);
            let time = incoming.time.unwrap_or(0);
            if let Ok(event) = incoming.complete(seq, time) {
                let back =
                    Event::from_json(event.to_json().as_bytes()).expect("our own output parses");
                assert_eq!(back, event);
            }
        }
        Err(e) => assert!(!e.reason.is_empty()),
    }
}
