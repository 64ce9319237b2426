//! Real processes killed with SIGKILL: a `turnwal append` child is fed a
//! realistic session and killed at a random moment, under every durability
//! mode. Guards against an acknowledged event going missing, a recovered log
//! that is not a prefix of what was sent (plus the right closers), a log that
//! does not verify clean after recovery, and a log that cannot be resumed.
//!
//! `TURNWAL_KILL_ROUNDS` sets the number of rounds (default 24); CI runs the
//! default, a soak can run thousands.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use turnwal::{Event, LogState, SessionHeader, Store, interrupted_turn_closers};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A session of `turns` turns with explicit seqs and times, so recovered
/// events compare exactly with what was sent. Some tool results are large
/// (up to 96 KiB) so kills often land in the middle of a write.
fn session(rng: &mut Rng, turns: u64) -> Vec<Event> {
    let mut events = Vec::new();
    let mut push = |t: &str, data: String| {
        let seq = events.len() as u64;
        events.push(Event::new(t, seq, 1_000 + seq as i64 * 3, &data).unwrap());
    };
    for turn in 1..=turns {
        push("turn/start", format!(r#"{{"turn":{turn}}}"#));
        push(
            "user/message",
            format!(
                r#"{{"id":"u{turn}","role":"user","content":[{{"type":"text","text":"do thing {turn} \u00e9\ud83d\ude00"}}]}}"#
            ),
        );
        for step in 1..=1 + rng.below(3) {
            push("step/start", format!(r#"{{"turn":{turn},"step":{step}}}"#));
            for i in 0..rng.below(12) {
                push(
                    "assistant/chunk",
                    format!(
                        r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"text-delta","index":0,"text":"part {i} \"q\" {}"}}}}"#,
                        "x".repeat(rng.below(150) as usize)
                    ),
                );
            }
            let calls = rng.below(3);
            let blocks: Vec<String> =
                (0..calls).map(|c| format!(r#"{{"type":"tool-call","id":"c{turn}-{step}-{c}","name":"run","arguments":"{{}}"}}"#)).collect();
            push(
                "assistant/message",
                format!(
                    r#"{{"turn":{turn},"step":{step},"message":{{"role":"assistant","content":[{}]}}}}"#,
                    blocks.join(",")
                ),
            );
            for c in 0..calls {
                let id = format!("c{turn}-{step}-{c}");
                push(
                    "tool/call",
                    format!(
                        r#"{{"turn":{turn},"step":{step},"callId":"{id}","name":"run","arguments":"{{}}"}}"#
                    ),
                );
                let body = "y".repeat(rng.below(96 * 1024) as usize);
                push(
                    "tool/result",
                    format!(
                        r#"{{"turn":{turn},"step":{step},"message":{{"id":"r-{id}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"{body}"}}]}}]}}}}"#
                    ),
                );
            }
            push("step/end", format!(r#"{{"turn":{turn},"step":{step}}}"#));
        }
        push(
            "turn/end",
            format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
        );
    }
    events
}

/// What one killed child left behind, checked against what was sent.
fn check_recovery(dir: &std::path::Path, sent: &[Event], acked: &[u64], label: &str) {
    for (i, seq) in acked.iter().enumerate() {
        assert_eq!(*seq, i as u64, "{label}: acks arrive in seq order");
    }
    let store = Store::open(dir).unwrap();
    let view = match store.load("s") {
        Ok(view) => view,
        // Killed before the session file was published: nothing was acked.
        Err(turnwal::Error::NotFound { .. }) => {
            assert!(
                acked.is_empty(),
                "{label}: acked {} events of a session that is absent",
                acked.len()
            );
            return;
        }
        Err(e) => panic!("{label}: recovery failed: {e}"),
    };
    let kept = view
        .events
        .iter()
        .zip(sent)
        .take_while(|(got, want)| got == want)
        .count();
    assert!(
        kept >= acked.len(),
        "{label}: {} events acked but only {kept} recovered",
        acked.len()
    );
    let closers = interrupted_turn_closers(&sent[..kept]);
    if std::env::var_os("TURNWAL_KILL_VERBOSE").is_some() {
        eprintln!(
            "{label}: sent {} acked {} kept {kept} closers {}",
            sent.len(),
            acked.len(),
            closers.len()
        );
    }
    assert_eq!(
        &view.events[kept..],
        &closers[..],
        "{label}: after the {kept} real events come exactly the closers"
    );
    let report = store.verify("s").unwrap();
    assert_eq!(report.state, LogState::Clean, "{label}: {report:?}");
    assert_eq!(report.events, (kept + closers.len()) as u64, "{label}");

    // The log can be resumed: the next turn continues the seq.
    let next_seq = view.events.len() as u64;
    let next_turn = sent[..kept]
        .iter()
        .filter(|e| e.event_type() == "turn/start")
        .count()
        + 1;
    let resume = [
        Event::new(
            "turn/start",
            next_seq,
            9,
            &format!(r#"{{"turn":{next_turn}}}"#),
        )
        .unwrap(),
        Event::new(
            "turn/end",
            next_seq + 1,
            9,
            &format!(r#"{{"turn":{next_turn},"reason":{{"kind":"completed"}}}}"#),
        )
        .unwrap(),
    ];
    store.append("s", &resume).unwrap();
    drop(store);
    let again = Store::open(dir).unwrap().load("s").unwrap();
    assert_eq!(
        &again.events[..view.events.len()],
        &view.events[..],
        "{label}: resumed log keeps its prefix"
    );
    assert_eq!(&again.events[view.events.len()..], &resume[..], "{label}");
}

fn kill_round(round: u64) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (round + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let turns = 3 + rng.below(5);
    let sent = session(&mut rng, turns);
    let mode = ["turn", "batch", "never"][round as usize % 3];
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_turnwal"))
        .args([
            "--store",
            dir.path().to_str().unwrap(),
            "append",
            "s",
            "--create",
            "--sync",
            mode,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let acked = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let stdout = child.stdout.take().unwrap();
        let acked = Arc::clone(&acked);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let seq = line
                    .strip_prefix("ack ")
                    .and_then(|s| s.parse::<u64>().ok());
                acked
                    .lock()
                    .unwrap()
                    .push(seq.unwrap_or_else(|| panic!("unexpected output {line:?}")));
            }
        })
    };
    // Kill after a random line has been handed to the child, plus a random
    // delay, so kills spread over the whole session: before the file exists,
    // mid-batch, mid-record, between turns, after the last line.
    let kill_after_line = rng.below(sent.len() as u64 + 3) as usize;
    let (handed_over, kill_signal) = std::sync::mpsc::channel();
    let writer = {
        let mut stdin = child.stdin.take().unwrap();
        let lines: Vec<String> = sent.iter().map(Event::to_json).collect();
        let pauses: Vec<bool> = lines.iter().map(|_| rng.below(8) == 0).collect();
        std::thread::spawn(move || {
            for (i, (line, pause)) in lines.iter().zip(pauses).enumerate() {
                if writeln!(stdin, "{line}").is_err() {
                    return; // the child is dead
                }
                if pause || i == kill_after_line {
                    let _ = stdin.flush();
                }
                if i == kill_after_line {
                    let _ = handed_over.send(());
                }
                if pause {
                    std::thread::sleep(Duration::from_micros(300));
                }
            }
            let _ = stdin.flush();
            let _ = handed_over.send(());
            // Keep stdin open: the child must be killed, not finish.
            std::thread::sleep(Duration::from_secs(30));
        })
    };
    kill_signal.recv_timeout(Duration::from_secs(20)).unwrap();
    std::thread::sleep(Duration::from_micros(rng.below(3_000)));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    reader.join().unwrap();
    drop(writer); // detached; it exits at its next write or when its sleep ends
    let acked = acked.lock().unwrap().clone();
    check_recovery(
        dir.path(),
        &sent,
        &acked,
        &format!("round {round} ({mode})"),
    );
}

#[test]
fn sigkill_at_random_moments_loses_nothing_acknowledged() {
    let rounds: u64 = std::env::var("TURNWAL_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    for round in 0..rounds {
        kill_round(round);
    }
}

#[test]
fn the_session_header_survives_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_turnwal"))
        .args([
            "--store",
            dir.path().to_str().unwrap(),
            "append",
            "s",
            "--create",
            "--cwd",
            "/work/x",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"type":"turn/start","data":{{"turn":1}}}}"#).unwrap();
    writeln!(
        stdin,
        r#"{{"type":"turn/end","data":{{"turn":1,"reason":{{"kind":"completed"}}}}}}"#
    )
    .unwrap();
    stdin.flush().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ack 0");
    assert_eq!(lines.next().unwrap().unwrap(), "ack 1");
    child.kill().unwrap();
    child.wait().unwrap();
    let view = Store::open(dir.path()).unwrap().load("s").unwrap();
    assert_eq!(
        view.header,
        SessionHeader {
            created_at: view.header.created_at,
            ..SessionHeader::new("s", 0).with_cwd("/work/x")
        }
    );
    assert_eq!(view.events.len(), 2);
}
