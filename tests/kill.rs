//! Real processes killed with SIGKILL: `turnwal append` children are fed
//! realistic sessions and killed at random moments, under every durability
//! mode. Guards against an acknowledged event going missing, a recovered log
//! that is not a prefix of what was sent (plus the right closers), a log that
//! does not verify clean after recovery, and a log that cannot be resumed.
//!
//! `sigkill_at_random_moments_loses_nothing_acknowledged` kills one writer
//! per round; `TURNWAL_KILL_ROUNDS` sets the number of rounds (default 24).
//!
//! `many_writers_sigkilled_at_once_lose_nothing_acknowledged` runs several
//! writers at once in one store, each on its own session with its own pacing
//! and its own kill moment; sessions carry over between rounds, so a later
//! writer resumes a recovered session without `--create`. Each round also
//! checks that a second writer is locked out of a held session, that
//! `Store::list` reports every session clean with the right count, and that
//! `turnwal verify` passes the whole store. `TURNWAL_SOAK_ROUNDS` (default
//! 20), `TURNWAL_SOAK_WRITERS` (default 4) and `TURNWAL_SOAK_SEED` set the
//! soak; run with `--nocapture` to see its summary.
//!
//! CI runs the defaults; a soak can run thousands of rounds.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use turnwal::backend::wal::{LOCK_EXTENSION, WalBackend, encode_file_name};
use turnwal::{Event, LogState, SessionHeader, Store, interrupted_turn_closers};

const BIN: &str = env!("CARGO_BIN_EXE_turnwal");
const SIGKILL: i32 = 9;
const MODES: [&str; 3] = ["turn", "batch", "never"];

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

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| {
        let v = v.trim();
        match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        }
    })
}

fn turns_started(events: &[Event]) -> u64 {
    events
        .iter()
        .filter(|e| e.event_type() == "turn/start")
        .count() as u64
}

/// A session of `turns` turns with explicit seqs and times, so recovered
/// events compare exactly with what was sent. Some tool results are large
/// (up to 96 KiB) so kills often land in the middle of a write.
fn session(rng: &mut Rng, turns: u64) -> Vec<Event> {
    session_after(rng, &[], turns)
}

/// `turns` more turns of a session whose log is `prior` (balanced): seqs
/// continue at `prior.len()`, turn numbers after its last turn.
fn session_after(rng: &mut Rng, prior: &[Event], turns: u64) -> Vec<Event> {
    let start = prior.len() as u64;
    let first_turn = turns_started(prior) + 1;
    let mut events = Vec::new();
    let mut push = |t: &str, data: String| {
        let seq = start + events.len() as u64;
        events.push(Event::new(t, seq, 1_000 + seq as i64 * 3, &data).unwrap());
    };
    for turn in first_turn..first_turn + turns {
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

// ------------------------------------------------------------ child processes

/// Children are spawned under the shared side of this guard; this process
/// takes session locks (a `Store` that loads or appends) only under the
/// exclusive side, and lets go of them before leaving it. A child holds a copy
/// of every open file of this process from its fork until close-on-exec runs
/// inside its exec, which is after `Command::spawn` has returned (a vfork
/// parent resumes as soon as the child's new address space is in place).
/// Were a lock taken here while another test thread spawns, the half-started
/// child would keep it held for a moment after this process lets go, and
/// whoever opens the session next (this process, or the next writer) would
/// get `Locked` naming this process's own pid.
static SPAWNING: RwLock<()> = RwLock::new(());

fn spawn(command: &mut Command) -> Child {
    let _spawning = SPAWNING.read().unwrap_or_else(|e| e.into_inner());
    command.spawn().unwrap()
}

fn output(command: &mut Command) -> std::process::Output {
    let _spawning = SPAWNING.read().unwrap_or_else(|e| e.into_inner());
    command.output().unwrap()
}

/// Runs `f`, which opens sessions for writing in this process and closes them
/// again, while no child is being spawned (see [`SPAWNING`]). `f` must not
/// spawn.
fn holding_sessions<R>(f: impl FnOnce() -> R) -> R {
    let _no_spawns = SPAWNING.write().unwrap_or_else(|e| e.into_inner());
    f()
}

/// A child process that is SIGKILLed and reaped when dropped, so a failing
/// assertion never leaves a process behind.
struct ChildGuard(Child);

impl ChildGuard {
    fn spawn(command: &mut Command) -> ChildGuard {
        ChildGuard(spawn(command))
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// SIGKILL and reap. The status tells whether it was still running.
    fn kill(&mut self) -> ExitStatus {
        let _ = self.0.kill();
        self.0.wait().unwrap()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        // A no-op once reaped: std never signals a pid it has waited for.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How a producer paces its lines.
#[derive(Clone, Copy, Debug)]
enum Pacing {
    /// 300 µs after about one line in eight, each line written at once.
    Paced,
    /// Everything through a 64 KiB buffer, no pauses: large reads, large
    /// batches.
    Burst,
    /// 20–200 µs after every line, like streamed model output.
    Streaming,
    /// 1–4 ms of think time after about one line in four.
    Slow,
}

impl Pacing {
    fn pick(rng: &mut Rng) -> Pacing {
        [
            Pacing::Paced,
            Pacing::Burst,
            Pacing::Streaming,
            Pacing::Slow,
        ][rng.below(4) as usize]
    }

    /// The pause after each of `n` lines.
    fn pauses(self, rng: &mut Rng, n: usize) -> Vec<Option<Duration>> {
        (0..n)
            .map(|_| match self {
                Pacing::Paced => (rng.below(8) == 0).then_some(Duration::from_micros(300)),
                Pacing::Burst => None,
                Pacing::Streaming => Some(Duration::from_micros(20 + rng.below(180))),
                Pacing::Slow => {
                    (rng.below(4) == 0).then(|| Duration::from_micros(1_000 + rng.below(3_000)))
                }
            })
            .collect()
    }
}

/// When a writer is killed.
#[derive(Clone, Copy, Debug)]
enum KillAt {
    /// Once input line `line` (0-based; past the end: every line) has been
    /// handed to the child, plus `delay`: before the file exists, mid-batch,
    /// mid-record, between turns.
    AfterLine { line: usize, delay: Duration },
    /// Once every event is acknowledged and the child waits for more input,
    /// plus `delay`.
    Idle { delay: Duration },
}

/// One `turnwal append` child and what it is fed.
struct Writer<'a> {
    store: &'a Path,
    id: &'a str,
    create: bool,
    mode: &'a str,
    sent: &'a [Event],
    pauses: Vec<Option<Duration>>,
    buffered: bool,
    kill_at: KillAt,
    /// Where the child's stderr goes.
    stderr: PathBuf,
    label: &'a str,
}

/// Runs the writer, calls `before_kill` while the child runs, SIGKILLs it at
/// its moment and returns the seqs it acknowledged, in order.
fn run_and_kill(w: Writer, before_kill: impl FnOnce(&mut ChildGuard)) -> Vec<u64> {
    let mut command = Command::new(BIN);
    command
        .arg("--store")
        .arg(w.store)
        .args(["append", w.id, "--sync", w.mode]);
    if w.create {
        command.arg("--create");
    }
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(File::create(&w.stderr).unwrap());
    let acked = Mutex::new(Vec::new());
    let lines: Vec<String> = w.sent.iter().map(Event::to_json).collect();
    std::thread::scope(|s| {
        // Declared inside the scope: on a panic here the child is killed
        // before the scope waits for the threads that talk to it.
        let mut child = ChildGuard::spawn(&mut command);
        let stdout = child.0.stdout.take().unwrap();
        let stdin = child.0.stdin.take().unwrap();
        let reader = s.spawn(|| read_acks(stdout, &acked));
        let (handed_over, kill_signal) = mpsc::channel();
        let (stop, stopped) = mpsc::channel::<()>();
        let kill_line = match w.kill_at {
            KillAt::AfterLine { line, .. } => line,
            KillAt::Idle { .. } => usize::MAX,
        };
        let (lines, pauses, buffered) = (&lines, &w.pauses, w.buffered);
        let feeder = s.spawn(move || {
            let stdin: Box<dyn Write> = if buffered {
                Box::new(BufWriter::with_capacity(64 * 1024, stdin))
            } else {
                Box::new(stdin)
            };
            feed(stdin, lines, pauses, kill_line, handed_over, stopped);
        });
        before_kill(&mut child);
        match w.kill_at {
            KillAt::AfterLine { delay, .. } => {
                kill_signal
                    .recv_timeout(Duration::from_secs(20))
                    .unwrap_or_else(|e| panic!("{}: the kill moment never came: {e}", w.label));
                std::thread::sleep(delay);
            }
            KillAt::Idle { delay } => {
                let deadline = Instant::now() + Duration::from_secs(30);
                while acked.lock().unwrap().len() < w.sent.len() {
                    assert!(
                        Instant::now() < deadline,
                        "{}: {} of {} events acked 30 s after the last line was sent",
                        w.label,
                        acked.lock().unwrap().len(),
                        w.sent.len()
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
                std::thread::sleep(delay);
            }
        }
        let status = child.kill();
        drop(stop);
        feeder.join().unwrap();
        reader.join().unwrap();
        assert_eq!(
            status.signal(),
            Some(SIGKILL),
            "{}: the writer ended on its own ({status}) before the kill; stderr: {}",
            w.label,
            std::fs::read_to_string(&w.stderr).unwrap_or_default()
        );
    });
    acked.into_inner().unwrap()
}

/// Writes the lines, pausing as told; reports when line `kill_line` (or the
/// last line) has been handed over, then keeps stdin open until `stop`.
fn feed(
    mut stdin: Box<dyn Write>,
    lines: &[String],
    pauses: &[Option<Duration>],
    kill_line: usize,
    handed_over: Sender<()>,
    stop: Receiver<()>,
) {
    for (i, (line, pause)) in lines.iter().zip(pauses).enumerate() {
        if writeln!(stdin, "{line}").is_err() {
            return; // the child is dead
        }
        if pause.is_some() || i == kill_line {
            let _ = stdin.flush();
        }
        if i == kill_line {
            let _ = handed_over.send(());
        }
        if let Some(pause) = pause {
            std::thread::sleep(*pause);
        }
    }
    let _ = stdin.flush();
    let _ = handed_over.send(());
    // Keep stdin open: the child must be killed, not finish.
    let _ = stop.recv();
}

fn read_acks(stdout: ChildStdout, acked: &Mutex<Vec<u64>>) {
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
}

// ------------------------------------------------------------------ the oracle

/// The log recovery left of one session.
struct Recovered {
    /// The whole log after recovery.
    events: Vec<Event>,
    /// Events the killed writer sent that were kept.
    kept: usize,
    /// Closers recovery added after them.
    closers: usize,
    /// The state before recovery.
    state: LogState,
}

/// What recovery left of session `id` after its writer was killed, checked
/// against what the writer was sent and acknowledged. `prior` is the log as
/// it stood when the writer started (empty for a new session). Commits the
/// repair (`load`). `None` when the session was never published.
fn check_recovery(
    store: &Store,
    id: &str,
    prior: &[Event],
    sent: &[Event],
    acked: &[u64],
    label: &str,
) -> Option<Recovered> {
    for (i, seq) in acked.iter().enumerate() {
        assert_eq!(
            *seq,
            prior.len() as u64 + i as u64,
            "{label}: acks arrive in seq order"
        );
    }
    let view = match store.load(id) {
        Ok(view) => view,
        // Killed before the session file was published: nothing was acked.
        Err(turnwal::Error::NotFound { .. }) if prior.is_empty() => {
            assert!(
                acked.is_empty(),
                "{label}: acked {} events of a session that is absent",
                acked.len()
            );
            return None;
        }
        Err(e) => panic!("{label}: recovery failed: {e}"),
    };
    assert!(
        view.events.len() >= prior.len() && view.events[..prior.len()] == *prior,
        "{label}: the log as it stood before this writer is intact"
    );
    let after = &view.events[prior.len()..];
    let kept = after
        .iter()
        .zip(sent)
        .take_while(|(got, want)| got == want)
        .count();
    assert!(
        kept >= acked.len(),
        "{label}: {} events acked but only {kept} recovered: {} acknowledged events lost",
        acked.len(),
        acked.len() - kept
    );
    let log: Vec<Event> = prior.iter().chain(&sent[..kept]).cloned().collect();
    let closers = interrupted_turn_closers(&log);
    if std::env::var_os("TURNWAL_KILL_VERBOSE").is_some() {
        eprintln!(
            "{label}: sent {} acked {} kept {kept} closers {} (was {})",
            sent.len(),
            acked.len(),
            closers.len(),
            view.state.code()
        );
    }
    assert_eq!(
        &after[kept..],
        &closers[..],
        "{label}: after the {kept} real events come exactly the closers"
    );
    let report = store.verify(id).unwrap();
    assert_eq!(report.state, LogState::Clean, "{label}: {report:?}");
    assert_eq!(report.events, view.events.len() as u64, "{label}");
    Some(Recovered {
        kept,
        closers: closers.len(),
        state: view.state,
        events: view.events,
    })
}

/// The log can be resumed: the next turn continues the seq, and the log
/// keeps its prefix. Returns the log after that turn.
fn check_resume(dir: &Path, id: &str, log: &[Event], label: &str) -> Vec<Event> {
    let next_seq = log.len() as u64;
    let next_turn = turns_started(log) + 1;
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
    let store = Store::open(dir).unwrap();
    store.append(id, &resume).unwrap();
    drop(store);
    let again = Store::open(dir).unwrap().load(id).unwrap();
    assert_eq!(
        &again.events[..log.len()],
        log,
        "{label}: resumed log keeps its prefix"
    );
    assert_eq!(&again.events[log.len()..], &resume[..], "{label}");
    again.events
}

// ------------------------------------------------------------ one writer

fn kill_round(round: u64) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (round + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let turns = 3 + rng.below(5);
    let sent = session(&mut rng, turns);
    let mode = MODES[round as usize % 3];
    let label = format!("round {round} ({mode})");
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    // Kill after a random line has been handed to the child, plus a random
    // delay, so kills spread over the whole session: before the file exists,
    // mid-batch, mid-record, between turns, after the last line.
    let line = rng.below(sent.len() as u64 + 3) as usize;
    let pauses = Pacing::Paced.pauses(&mut rng, sent.len());
    let delay = Duration::from_micros(rng.below(3_000));
    let acked = run_and_kill(
        Writer {
            store: &store_dir,
            id: "s",
            create: true,
            mode,
            sent: &sent,
            pauses,
            buffered: false,
            kill_at: KillAt::AfterLine { line, delay },
            stderr: dir.path().join("stderr"),
            label: &label,
        },
        |_| {},
    );
    holding_sessions(|| {
        let store = Store::open(&store_dir).unwrap();
        let recovered = check_recovery(&store, "s", &[], &sent, &acked, &label);
        drop(store);
        if let Some(recovered) = recovered {
            check_resume(&store_dir, "s", &recovered.events, &label);
        }
    });
}

#[test]
fn sigkill_at_random_moments_loses_nothing_acknowledged() {
    let rounds: u64 = env_u64("TURNWAL_KILL_ROUNDS").unwrap_or(24);
    for round in 0..rounds {
        kill_round(round);
    }
}

#[test]
fn the_session_header_survives_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = ChildGuard::spawn(
        Command::new(BIN)
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
            .stdout(Stdio::piped()),
    );
    let mut stdin = child.0.stdin.take().unwrap();
    writeln!(stdin, r#"{{"type":"turn/start","data":{{"turn":1}}}}"#).unwrap();
    writeln!(
        stdin,
        r#"{{"type":"turn/end","data":{{"turn":1,"reason":{{"kind":"completed"}}}}}}"#
    )
    .unwrap();
    stdin.flush().unwrap();
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ack 0");
    assert_eq!(lines.next().unwrap().unwrap(), "ack 1");
    child.kill();
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

// ------------------------------------------------------------ many writers

/// Rounds that share one store directory before a fresh one starts, so the
/// per-round whole-store checks stay cheap in a long soak.
const ROUNDS_PER_STORE: u64 = 10;

/// A session a writer slot carries into the next round.
struct Carried {
    id: String,
    log: Vec<Event>,
    /// Rounds it has been written in.
    rounds: u64,
}

/// One writer of one soak round.
struct Plan {
    id: String,
    /// A new session (`--create`); otherwise a recovered one is continued.
    create: bool,
    /// The session's log when the writer starts.
    prior: Vec<Event>,
    sent: Vec<Event>,
    mode: &'static str,
    pacing: Pacing,
    pauses: Vec<Option<Duration>>,
    kill_at: KillAt,
    /// Whether another writer is raced against this one while it runs.
    lock_check: bool,
    /// The session rounds it has been written in so far, this one included.
    rounds: u64,
    label: String,
}

#[derive(Default, Debug)]
struct SoakStats {
    rounds: u64,
    kills: u64,
    idle_kills: u64,
    /// Writers that resumed a recovered session without `--create`.
    continued: u64,
    acked: u64,
    /// Sent but unacknowledged events that recovery kept anyway.
    unacked_kept: u64,
    lost: u64,
    closers: u64,
    /// Sessions killed before their file was published.
    absent: u64,
    lock_checks: u64,
    /// Recovered sessions by their state before recovery.
    states: BTreeMap<&'static str, u64>,
    /// Sessions `list` and `turnwal verify` checked, summed over rounds.
    listed: u64,
}

/// Second `turnwal append` on a session `holder` holds: it fails at once
/// with exit status 4, naming the holder's pid, and writes no ack.
fn assert_locked_out(store: &Path, id: &str, holder: &mut ChildGuard, label: &str) {
    // Held once the holder's pid is in the lock file (written after the
    // flock is taken) and the log is published (so the contender finds a
    // session to open rather than none).
    let lock = store
        .join("sessions")
        .join(format!("{}{LOCK_EXTENSION}", encode_file_name(id)));
    let log = WalBackend::open(store).unwrap().log_path(id);
    let pid = holder.pid();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let held = std::fs::read_to_string(&lock).is_ok_and(|text| text.trim() == pid.to_string());
        if held && log.exists() {
            break;
        }
        if let Some(status) = holder.0.try_wait().unwrap() {
            panic!("{label}: the writer ended ({status}) before it held the session");
        }
        assert!(
            Instant::now() < deadline,
            "{label}: the writer did not hold the session within 20 s"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    let started = Instant::now();
    let mut second = ChildGuard::spawn(
        Command::new(BIN)
            .arg("--store")
            .arg(store)
            .args(["append", id, "--sync", "batch"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let status = loop {
        if let Some(status) = second.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{label}: a second writer waited instead of failing at once"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    let elapsed = started.elapsed();
    let mut stdout = String::new();
    let mut stderr = String::new();
    second
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    second
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(
        (status.code(), stdout.as_str()),
        (Some(4), ""),
        "{label}: second writer; stderr: {stderr}"
    );
    assert!(
        stderr.contains(&format!("is locked by another writer (pid {pid})")),
        "{label}: stderr names the holder {pid}: {stderr}"
    );
    assert!(
        elapsed < Duration::from_secs(5),
        "{label}: the second writer took {elapsed:?} to fail"
    );
    assert!(
        holder.0.try_wait().unwrap().is_none(),
        "{label}: the holder still runs after the contender gave up"
    );
}

/// Chooses this round's writers: slot `w` continues its carried session or
/// starts a new one.
fn plan_round(seed: u64, round: u64, slots: &[Option<Carried>]) -> Vec<Plan> {
    let mut rng =
        Rng((seed ^ 0x9e37_79b9_7f4a_7c15 ^ (round + 1).wrapping_mul(0x2545_f491_4f6c_dd1d)) | 1);
    let lock_writer = rng.below(slots.len() as u64) as usize;
    slots
        .iter()
        .enumerate()
        .map(|(w, slot)| {
            let (id, prior, rounds) = match slot {
                Some(c) => (c.id.clone(), c.log.clone(), c.rounds + 1),
                None => (format!("w{w}-r{round}"), Vec::new(), 1),
            };
            let create = slot.is_none();
            let turns = 2 + rng.below(4);
            let sent = session_after(&mut rng, &prior, turns);
            let mode = MODES[(round as usize + w) % 3];
            let pacing = Pacing::pick(&mut rng);
            let pauses = pacing.pauses(&mut rng, sent.len());
            let kill_at = if rng.below(5) == 0 {
                KillAt::Idle {
                    delay: Duration::from_micros(rng.below(5_000)),
                }
            } else {
                KillAt::AfterLine {
                    line: rng.below(sent.len() as u64) as usize,
                    delay: Duration::from_micros(rng.below(3_000)),
                }
            };
            let lock_check = w == lock_writer;
            let label = format!(
                "seed {seed:#x} round {round} writer {w} session {id} ({}, {mode}, {pacing:?}, {kill_at:?}{}, {} events sent after {})",
                if create { "--create" } else { "continued" },
                if lock_check { ", lock check" } else { "" },
                sent.len(),
                prior.len()
            );
            Plan {
                id,
                create,
                prior,
                sent,
                mode,
                pacing,
                pauses,
                kill_at,
                lock_check,
                rounds,
                label,
            }
        })
        .collect()
}

/// On a failing round, leaves what each writer was sent and acknowledged next
/// to the pre-recovery images of its log.
struct Evidence<'a> {
    dir: &'a Path,
    plans: &'a [Plan],
    acks: Vec<Option<Vec<u64>>>,
}

impl Drop for Evidence<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let _ = std::fs::create_dir_all(self.dir);
        for (w, plan) in self.plans.iter().enumerate() {
            let mut sent = String::new();
            for e in &plan.sent {
                sent.push_str(&e.to_json());
                sent.push('\n');
            }
            let _ = std::fs::write(self.dir.join(format!("{}.sent.jsonl", plan.id)), sent);
            let _ = std::fs::write(
                self.dir.join(format!("{}.plan.txt", plan.id)),
                format!("{}\nprior events: {}\n", plan.label, plan.prior.len()),
            );
            if let Some(Some(acks)) = self.acks.get(w) {
                let text: String = acks.iter().map(|s| format!("ack {s}\n")).collect();
                let _ = std::fs::write(self.dir.join(format!("{}.acked.txt", plan.id)), text);
            }
        }
    }
}

/// One soak round: the writers run at once and are killed, then every
/// session is checked. `expected` maps every session in the store to its
/// event count after recovery.
fn soak_round(
    seed: u64,
    round: u64,
    root: &Path,
    slots: &mut [Option<Carried>],
    expected: &mut BTreeMap<String, u64>,
    stats: &mut SoakStats,
) {
    let store_dir = root.join("store");
    // Made before the writers start: `turnwal` classifies a missing --store
    // path with `is_dir` and then `exists`, so a writer can fail with "not a
    // directory, so not a store" when another writer creates the store
    // between the two (src/cli/location.rs; reported, not yet fixed). Remove
    // this line to run the soak against that race too.
    std::fs::create_dir_all(&store_dir).unwrap();
    let plans = plan_round(seed, round, slots);
    let evidence_dir = root.join(format!("evidence-round-{round}"));
    let mut evidence = Evidence {
        dir: &evidence_dir,
        plans: &plans,
        acks: Vec::new(),
    };

    let acks: Vec<Vec<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = plans
            .iter()
            .enumerate()
            .map(|(w, plan)| {
                let store_dir = &store_dir;
                s.spawn(move || {
                    let writer = Writer {
                        store: store_dir,
                        id: &plan.id,
                        create: plan.create,
                        mode: plan.mode,
                        sent: &plan.sent,
                        pauses: plan.pauses.clone(),
                        buffered: matches!(plan.pacing, Pacing::Burst),
                        kill_at: plan.kill_at,
                        stderr: root.join(format!("writer-{w}.stderr")),
                        label: &plan.label,
                    };
                    run_and_kill(writer, |child| {
                        if plan.lock_check {
                            assert_locked_out(store_dir, &plan.id, child, &plan.label);
                        }
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| resume_unwind(panic)))
            .collect()
    });
    stats.kills += plans.len() as u64;
    stats.lock_checks += 1;
    evidence.acks = acks.iter().cloned().map(Some).collect();

    // The logs as the kills left them, for a reproducer.
    let pre = root.join("pre-recovery");
    let _ = std::fs::remove_dir_all(&pre);
    std::fs::create_dir_all(&pre).unwrap();
    let wal = WalBackend::open(&store_dir).unwrap();
    for plan in &plans {
        let log = wal.log_path(&plan.id);
        if log.exists() {
            std::fs::copy(&log, pre.join(log.file_name().unwrap())).unwrap();
        }
    }

    // Recovery, the oracle and resumes open sessions for writing here: no
    // child may be spawned meanwhile (see `SPAWNING`).
    holding_sessions(|| {
        // The oracle, per session, against that writer's acks.
        let store = Store::open(&store_dir).unwrap();
        let mut recovered = Vec::new();
        for (plan, acked) in plans.iter().zip(&acks) {
            if matches!(plan.kill_at, KillAt::Idle { .. }) {
                stats.idle_kills += 1;
                assert_eq!(acked.len(), plan.sent.len(), "{}", plan.label);
            }
            if !plan.create {
                stats.continued += 1;
            }
            let r = check_recovery(
                &store,
                &plan.id,
                &plan.prior,
                &plan.sent,
                acked,
                &plan.label,
            );
            stats.acked += acked.len() as u64;
            match &r {
                Some(r) => {
                    stats.lost += (acked.len() as u64).saturating_sub(r.kept as u64);
                    stats.unacked_kept += (r.kept - acked.len()) as u64;
                    stats.closers += r.closers as u64;
                    *stats.states.entry(r.state.code()).or_default() += 1;
                }
                None => stats.absent += 1,
            }
            recovered.push(r);
        }
        // Releases the sessions `load` opened, so the next writers can take them.
        drop(store);

        // Some sessions end here and prove the next turn appends; the others are
        // carried into the next round, where a new writer continues them.
        let mut rng = Rng(seed ^ round.wrapping_mul(0xd6e8_feb8_6659_fd93) ^ 0x5bd1_e995);
        for (w, (plan, r)) in plans.iter().zip(recovered).enumerate() {
            slots[w] = None;
            let Some(r) = r else { continue };
            if plan.rounds >= 4 || rng.below(3) == 0 {
                let log = check_resume(&store_dir, &plan.id, &r.events, &plan.label);
                expected.insert(plan.id.clone(), log.len() as u64);
            } else {
                expected.insert(plan.id.clone(), r.events.len() as u64);
                slots[w] = Some(Carried {
                    id: plan.id.clone(),
                    log: r.events,
                    rounds: plan.rounds,
                });
            }
        }
    });

    // `list` sees every session, with its count, clean.
    let listed: BTreeMap<String, (u64, LogState)> = Store::open(&store_dir)
        .unwrap()
        .list()
        .unwrap()
        .into_iter()
        .map(|s| (s.id, (s.events, s.state)))
        .collect();
    let want: BTreeMap<String, (u64, LogState)> = expected
        .iter()
        .map(|(id, n)| (id.clone(), (*n, LogState::Clean)))
        .collect();
    assert_eq!(listed, want, "seed {seed:#x} round {round}: Store::list");

    // And so does the real `turnwal verify`, over the whole store.
    let out = output(
        Command::new(BIN)
            .arg("--store")
            .arg(&store_dir)
            .arg("verify"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "seed {seed:#x} round {round}: turnwal verify\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.lines().count(), expected.len(), "{stdout}");
    for (id, n) in expected.iter() {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("{id}: clean, {n} event"))),
            "seed {seed:#x} round {round}: turnwal verify on {id} ({n} events):\n{stdout}"
        );
    }
    stats.listed += expected.len() as u64;
    stats.rounds += 1;
}

#[test]
fn many_writers_sigkilled_at_once_lose_nothing_acknowledged() {
    let rounds = env_u64("TURNWAL_SOAK_ROUNDS").unwrap_or(20);
    let writers = env_u64("TURNWAL_SOAK_WRITERS").unwrap_or(4).max(1) as usize;
    let seed = env_u64("TURNWAL_SOAK_SEED").unwrap_or(0x005e_ed0f_50a4);
    let started = Instant::now();
    let mut stats = SoakStats::default();
    let mut root = tempfile::tempdir().unwrap();
    let mut slots: Vec<Option<Carried>> = (0..writers).map(|_| None).collect();
    let mut expected = BTreeMap::new();
    for round in 0..rounds {
        if round > 0 && round % ROUNDS_PER_STORE == 0 {
            root = tempfile::tempdir().unwrap();
            slots.iter_mut().for_each(|s| *s = None);
            expected.clear();
        }
        let result = catch_unwind(AssertUnwindSafe(|| {
            soak_round(
                seed,
                round,
                root.path(),
                &mut slots,
                &mut expected,
                &mut stats,
            )
        }));
        if let Err(panic) = result {
            let kept = std::mem::replace(&mut root, tempfile::tempdir().unwrap()).keep();
            eprintln!(
                "REPRODUCER: TURNWAL_SOAK_SEED={seed:#x} TURNWAL_SOAK_WRITERS={writers}, round {round} \
                 (plans depend only on seed and round; kill timing does not replay). Kept: \
                 {}/store (after the failed check), pre-recovery/ (this round's logs as the kills \
                 left them), evidence-round-{round}/ (what each writer was sent and acked), \
                 writer-*.stderr.\nstats so far: {stats:?}",
                kept.display()
            );
            resume_unwind(panic);
        }
    }
    eprintln!(
        "soak: {} rounds x {writers} writers (seed {seed:#x}) in {:.1?}: {} kills ({} idle), \
         {} writers continued a recovered session, {} lock checks; {} acknowledged events checked, \
         {} events lost; {} unacknowledged events kept, {} closers added, {} sessions never \
         published; states before recovery {:?}; {} session listings checked",
        stats.rounds,
        started.elapsed(),
        stats.kills,
        stats.idle_kills,
        stats.continued,
        stats.lock_checks,
        stats.acked,
        stats.lost,
        stats.unacked_kept,
        stats.closers,
        stats.absent,
        stats.states,
        stats.listed,
    );
    // A soak that silently ran nothing fails.
    assert!(rounds >= 1, "TURNWAL_SOAK_ROUNDS must be at least 1");
    assert_eq!(stats.rounds, rounds);
    assert_eq!(stats.kills, rounds * writers as u64);
    assert_eq!(stats.lock_checks, rounds);
    assert_eq!(stats.lost, 0);
    assert!(stats.acked > 0, "no event was acknowledged: {stats:?}");
    if stats.kills >= 40 {
        assert!(stats.idle_kills > 0, "no writer was killed idle: {stats:?}");
        assert!(
            stats.continued > 0,
            "no writer continued a session: {stats:?}"
        );
        assert!(
            stats.states.len() >= 2,
            "kills all left the same state: {stats:?}"
        );
    }
}
