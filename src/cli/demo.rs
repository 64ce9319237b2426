//! `turnwal demo`: writes a sample store, kills a real writer process in the
//! middle of a turn, and shows `ls`, `verify`, `recover`, `cat` and `verify`
//! again, through the same functions the subcommands use.

use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use super::location::{self, Location};
use super::output::count;
use super::{Failure, Outcome, check, exit, read, sessions};
use turnwal::event::Event;
use turnwal::header::SessionHeader;
use turnwal::scan::LogState;
use turnwal::store::{Store, now_ms};

/// `turnwal verify`, every session, as text.
const VERIFY_ALL: super::args::VerifyArgs = super::args::VerifyArgs {
    session: None,
    json: false,
    deep: false,
    problems_only: false,
};

/// The session whose writer is killed.
const CRASHED: &str = "refactor-parser";
const CRASHED_CWD: &str = "/home/dev/turnwal";
const HOUR: i64 = 3_600_000;

/// Runs the demo on `--store` if it names an empty or missing directory,
/// else on a new temporary directory. The store is left in place.
pub(crate) fn run(store_arg: Option<&str>, out: &mut dyn Write) -> Outcome {
    let (dir, note) = choose_dir(store_arg)?;
    writeln!(
        out,
        "turnwal demo: a sample store, a writer killed in the middle of a turn, and its recovery."
    )?;
    if let Some(note) = note {
        writeln!(out, "{note}")?;
    }
    writeln!(
        out,
        "store: {0} (left in place; explore it with `turnwal --store {0} ls`)",
        dir.display()
    )?;
    let start = now_ms() as i64 - 3 * HOUR;
    write_finished_sessions(&dir, start, out)?;
    crash_writer(&dir, out)?;
    show_recovery(&dir, out)?;
    Ok(exit::SUCCESS)
}

fn write_finished_sessions(dir: &Path, start: i64, out: &mut dyn Write) -> Result<(), Failure> {
    writeln!(out)?;
    writeln!(
        out,
        "Writing three finished sessions through the library: user requests, streamed \
         assistant chunks, tool calls and their results."
    )?;
    let store = Store::open(dir)?;
    for (i, (id, cwd, script)) in sample_sessions(start).into_iter().enumerate() {
        let created = (start + i as i64 * HOUR / 2) as u64;
        store.create(SessionHeader::new(id, created).with_cwd(cwd))?;
        store.append(id, &script.events)?;
        store.close(id)?;
        writeln!(
            out,
            "  {id}: {}, {}",
            count(script.turn, "turn"),
            count(script.events.len() as u64, "event")
        )?;
    }
    Ok(())
}

/// Streams an unfinished turn into a real `turnwal append` process and kills
/// it with SIGKILL once it has acknowledged every event.
fn crash_writer(dir: &Path, out: &mut dyn Write) -> Result<(), Failure> {
    let mut script = Script::new(now_ms() as i64 - HOUR / 4);
    script.user_turn("Split parse_record into smaller functions.");
    script.open_step(
        "Let me find every caller of parse_record before changing it.",
        Some(("run_command", r#"{"command":"grep -rn parse_record src/"}"#)),
    );
    let last = script.events.len() - 1;
    // Only type and data: the writer assigns seq and time, as for any producer.
    let input: String = script
        .events
        .iter()
        .map(|e| {
            format!(
                "{{\"type\":{},\"data\":{}}}\n",
                quote(e.event_type()),
                e.data()
            )
        })
        .collect();
    writeln!(out)?;
    out.flush()?;
    writeln!(
        out,
        "Starting a real writer process (turnwal append {CRASHED} --create --sync batch) and \
         streaming a turn into it: a user request, assistant chunks, and a tool call whose \
         result never arrives."
    )?;
    let exe = std::env::current_exe()
        .map_err(|e| Failure::Other(format!("demo: cannot find the turnwal executable: {e}")))?;
    let mut child = Command::new(exe)
        .arg("--store")
        .arg(dir)
        .args(["append", CRASHED, "--create", "--sync", "batch"])
        .args(["--cwd", CRASHED_CWD])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Failure::Other(format!("demo: cannot start the writer: {e}")))?;
    let fed = feed_until_acked(&mut child, &input, last);
    // Killed whatever happened above, so no writer outlives the demo; with
    // stdin still open, the writer is mid-turn and has no chance to finish.
    let _ = child.kill();
    let status = child.wait();
    let stdin = fed?;
    drop(stdin);
    writeln!(
        out,
        "  the writer acknowledged seqs 0 to {last}: durable on disk, the turn still open"
    )?;
    let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
    writeln!(
        out,
        "Killed the writer with SIGKILL in the middle of that turn ({status})."
    )?;
    Ok(())
}

/// Writes `input` to the writer and reads its acks up to `ack {last}`.
/// Returns its stdin, which must stay open until the kill: at end of input
/// the writer would flush and exit cleanly.
fn feed_until_acked(child: &mut Child, input: &str, last: usize) -> Result<ChildStdin, Failure> {
    let broken = |what: &str, e: io::Error| Failure::Other(format!("demo: writer {what}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin is piped");
    stdin
        .write_all(input.as_bytes())
        .and_then(|()| stdin.flush())
        .map_err(|e| broken("stdin", e))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let expected = format!("ack {last}");
    for line in BufReader::new(stdout).lines() {
        if line.map_err(|e| broken("stdout", e))? == expected {
            return Ok(stdin);
        }
    }
    Err(Failure::Other(format!(
        "demo: the writer exited before printing {expected:?}"
    )))
}

fn show_recovery(dir: &Path, out: &mut dyn Write) -> Result<(), Failure> {
    let store = Store::open(dir)?;
    let state = store.verify(CRASHED)?.state;
    if state != LogState::OpenTurn {
        return Err(Failure::Other(format!(
            "demo: expected the crashed session to have an open turn, found {state}"
        )));
    }
    step(
        out,
        "ls",
        "the crashed session's last turn is still open (state open-turn).",
    )?;
    let args = super::args::LsArgs {
        json: false,
        sort: super::args::LsSort::Id,
        state: Vec::new(),
        since: None,
        cwd: None,
        limit: None,
    };
    sessions::ls(&store, &args, out)?;
    step(
        out,
        "verify",
        "every committed record checks out; the crashed session has a recoverable tail, \
         so verify exits 1.",
    )?;
    expect_status(check::verify(&store, &VERIFY_ALL, out)?, exit::RECOVERABLE)?;
    step(
        out,
        &format!("recover {CRASHED}"),
        "the real events are kept and the interrupted turn is closed: an error result for \
         the unanswered tool call (TOOL_OUTCOME_UNKNOWN), step/end, and turn/end with \
         reason interrupted.",
    )?;
    check::recover(&store, CRASHED, false, false, false, out)?;
    step(
        out,
        &format!("cat {CRASHED}"),
        "the repaired log as JSONL: what the writer acknowledged, then the closers.",
    )?;
    read::cat(&store, CRASHED, None, false, out)?;
    step(
        out,
        "verify",
        "every session is clean again, so verify exits 0.",
    )?;
    expect_status(check::verify(&store, &VERIFY_ALL, out)?, exit::SUCCESS)?;
    writeln!(out)?;
    writeln!(
        out,
        "Done. The interrupted turn was closed and the store is clean; it stays at {}.",
        dir.display()
    )?;
    Ok(())
}

/// The plain-language line before each shown command. Flushes what came
/// before, so someone watching sees the demo advance step by step.
fn step(out: &mut dyn Write, command: &str, why: &str) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "$ turnwal {command}    # {why}")?;
    out.flush()
}

fn expect_status(got: u8, want: u8) -> Result<(), Failure> {
    if got == want {
        Ok(())
    } else {
        Err(Failure::Other(format!(
            "demo: verify exited {got}, expected {want}"
        )))
    }
}

/// `--store` when it names an empty or missing directory, else a new
/// temporary directory (with a note saying why).
fn choose_dir(store_arg: Option<&str>) -> Result<(PathBuf, Option<String>), Failure> {
    let Some(arg) = store_arg else {
        return Ok((temp_dir()?, None));
    };
    let dir = match location::resolve(Some(arg))? {
        Location::Wal(dir) => dir,
        Location::Sqlite(_) => {
            let note = format!(
                "--store {arg} is an SQLite store; the demo writes a native WAL store, in a \
                 new temporary directory."
            );
            return Ok((temp_dir()?, Some(note)));
        }
        Location::Jsonl(..) => {
            let note = format!(
                "--store {arg} is a JSONL root; the demo writes a native WAL store, in a \
                 new temporary directory."
            );
            return Ok((temp_dir()?, Some(note)));
        }
        Location::Postgres { shown, .. } => {
            let note = format!(
                "--store {} is a PostgreSQL store; the demo writes a native WAL store, in a \
                 new temporary directory.",
                shown.display()
            );
            return Ok((temp_dir()?, Some(note)));
        }
    };
    let fresh = match fs::read_dir(&dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => true,
        Err(e) => return Err(Failure::Other(format!("{}: {e}", dir.display()))),
    };
    if fresh {
        return Ok((dir, None));
    }
    let note = format!("--store {arg} is not empty, so the demo uses a new temporary directory.");
    Ok((temp_dir()?, Some(note)))
}

fn temp_dir() -> Result<PathBuf, Failure> {
    let base = std::env::temp_dir();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    for attempt in 0..100 {
        let name = format!("turnwal-demo-{}-{:x}", std::process::id(), stamp + attempt);
        let dir = base.join(name);
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(Failure::Other(format!("creating {}: {e}", dir.display())));
            }
        }
    }
    Err(Failure::Other(format!(
        "could not create a temporary directory in {}",
        base.display()
    )))
}

/// The three finished sessions: `(id, cwd, events)`.
fn sample_sessions(start: i64) -> Vec<(&'static str, &'static str, Script)> {
    let mut login = Script::new(start);
    login.user_turn("The login form accepts an empty password. Please fix it.");
    login.tool_step(
        "I'll start by reading the login handler.",
        ("read_file", r#"{"path":"src/auth/login.ts"}"#),
        "export function login(user: string, password: string) {\n  return session.start(user);\n}",
    );
    login.tool_step(
        "The handler never checks the password. Adding a guard that rejects an empty one.",
        (
            "edit_file",
            r#"{"path":"src/auth/login.ts","insert_at":2,"text":"  if (!password) throw new HttpError(400);"}"#,
        ),
        "Applied 1 edit to src/auth/login.ts",
    );
    login.final_step("Fixed: login now answers 400 when the password is empty.");
    login.user_turn("Run the tests.");
    login.tool_step(
        "Running the test suite.",
        ("run_command", r#"{"command":"npm test"}"#),
        "42 passing (1.8s)",
    );
    login.final_step("All 42 tests pass.");

    let mut wal = Script::new(start + HOUR / 2);
    wal.user_turn("What does fdatasync guarantee that write does not?");
    wal.final_step(
        "write only hands the bytes to the page cache; fdatasync returns once they, and the \
         metadata needed to read them back, are on stable storage.",
    );

    let mut deps = Script::new(start + HOUR);
    deps.user_turn("Update the dependencies and check that nothing breaks.");
    deps.tool_step(
        "Updating within the allowed version ranges.",
        ("run_command", r#"{"command":"npm update"}"#),
        "updated 7 packages in 3s",
    );
    deps.tool_step(
        "Now the tests.",
        ("run_command", r#"{"command":"npm test"}"#),
        "42 passing (1.9s)",
    );
    deps.final_step("Updated 7 packages; all tests still pass.");

    vec![
        ("fix-login-bug", "/home/dev/webapp", login),
        ("explain-fdatasync", "/home/dev/turnwal", wal),
        ("update-deps", "/home/dev/webapp", deps),
    ]
}

/// Builds a realistic session log in the upstream event shapes.
struct Script {
    events: Vec<Event>,
    time: i64,
    turn: u64,
    step: u64,
}

impl Script {
    fn new(time: i64) -> Script {
        Script {
            events: Vec::new(),
            time,
            turn: 0,
            step: 0,
        }
    }

    fn push(&mut self, event_type: &str, after_ms: i64, data: String) {
        self.time += after_ms;
        let seq = self.events.len() as u64;
        let event = Event::new(event_type, seq, self.time, &data).expect("demo data is valid JSON");
        self.events.push(event);
    }

    /// `turn/start` and the user's message.
    fn user_turn(&mut self, text: &str) {
        self.turn += 1;
        self.step = 0;
        let turn = self.turn;
        self.push("turn/start", 20_000, format!(r#"{{"turn":{turn}}}"#));
        let message = format!(
            r#"{{"id":"user-{turn}","role":"user","content":[{{"type":"text","text":{}}}],"source":{{"kind":"user"}}}}"#,
            quote(text)
        );
        self.push("user/message", 2, message);
    }

    /// `step/start`, the streamed text, the assistant message and, with a
    /// tool, its `tool/call`; the step stays open.
    fn open_step(&mut self, says: &str, tool: Option<(&str, &str)>) {
        self.step += 1;
        let (turn, step) = (self.turn, self.step);
        self.push(
            "step/start",
            5,
            format!(r#"{{"turn":{turn},"step":{step}}}"#),
        );
        for piece in thirds(says) {
            let chunk = format!(
                r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"text-delta","index":0,"text":{}}}}}"#,
                quote(piece)
            );
            self.push("assistant/chunk", 180, chunk);
        }
        let mut content = format!(r#"{{"type":"text","text":{}}}"#, quote(says));
        if let Some((name, arguments)) = tool {
            content.push_str(&format!(
                r#",{{"type":"tool-call","id":"{}","name":{},"arguments":{}}}"#,
                self.call_id(),
                quote(name),
                quote(arguments)
            ));
        }
        let message = format!(
            r#"{{"turn":{turn},"step":{step},"message":{{"id":"assistant-{turn}-{step}","role":"assistant","content":[{content}],"source":{{"kind":"model","provider":"anthropic","model":"claude-sonnet-4"}}}},"usage":{{"inputTokens":{},"outputTokens":{}}}}}"#,
            1800 + 350 * step,
            says.len() / 4 + 12
        );
        self.push("assistant/message", 30, message);
        if let Some((name, arguments)) = tool {
            let call = format!(
                r#"{{"turn":{turn},"step":{step},"callId":"{}","name":{},"arguments":{}}}"#,
                self.call_id(),
                quote(name),
                quote(arguments)
            );
            self.push("tool/call", 3, call);
        }
    }

    /// A step that calls a tool and gets its result.
    fn tool_step(&mut self, says: &str, tool: (&str, &str), result: &str) {
        self.open_step(says, Some(tool));
        let (turn, step, id) = (self.turn, self.step, self.call_id());
        let result = format!(
            r#"{{"turn":{turn},"step":{step},"message":{{"id":"result-{id}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":{}}}]}}]}}}}"#,
            quote(result)
        );
        self.push("tool/result", 900, result);
        self.end_step();
    }

    /// The answering step, then `turn/end {completed}`.
    fn final_step(&mut self, says: &str) {
        self.open_step(says, None);
        self.end_step();
        let turn = self.turn;
        self.push(
            "turn/end",
            4,
            format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
        );
    }

    fn end_step(&mut self) {
        let (turn, step) = (self.turn, self.step);
        self.push("step/end", 2, format!(r#"{{"turn":{turn},"step":{step}}}"#));
    }

    fn call_id(&self) -> String {
        format!("call_{}_{}", self.turn, self.step)
    }
}

/// `text` in three pieces at word boundaries, as a model streams it.
fn thirds(text: &str) -> Vec<&str> {
    let words: Vec<usize> = text.match_indices(' ').map(|(i, _)| i + 1).collect();
    let cuts = [words.len() / 3, 2 * words.len() / 3].map(|k| words.get(k).copied());
    let mut pieces = Vec::new();
    let mut from = 0;
    for cut in cuts.into_iter().flatten() {
        if cut > from {
            pieces.push(&text[from..cut]);
            from = cut;
        }
    }
    pieces.push(&text[from..]);
    pieces
}

fn quote(text: &str) -> String {
    serde_json::to_string(text).expect("a string always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnwal::contract::{Policy, Tracker};

    #[test]
    fn sample_sessions_keep_the_contract() {
        for (_, _, script) in sample_sessions(1_700_000_000_000) {
            let mut tracker = Tracker::new(Policy::Strict);
            tracker.accept_batch(&script.events).unwrap();
            assert!(!tracker.in_turn());
        }
    }

    #[test]
    fn thirds_split_at_words() {
        assert_eq!(thirds("a b c d e f"), ["a b ", "c d ", "e f"]);
        assert_eq!(thirds("one"), ["one"]);
    }
}
