//! Helpers shared by the integration tests: run the real binary, build
//! event lines, read a store back, build a session log ([`log::Log`]).

#![allow(dead_code)] // each test crate uses its own subset

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use turnwal::backend::sqlite::SqliteOptions;
use turnwal::{SessionHeader, Store, StoreOptions};

pub const BIN: &str = env!("CARGO_BIN_EXE_turnwal");
pub const T0: i64 = 1_700_000_000_000;

// /proc/locks and a Debian PostgreSQL server: Linux only (docs/PLATFORMS.md).
#[cfg(unix)]
pub mod fd_locks;
pub mod log;
#[cfg(unix)]
pub mod pg;
#[cfg(unix)]
pub mod stores;

/// What a run printed and how it exited.
#[derive(Debug)]
pub struct Output {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

/// A command running `program`, a binary this build made (the `turnwal`
/// CLI, or this test binary re-executed as a child): directly, or through
/// the emulator named by `TURNWAL_TEST_RUNNER` (an executable and its
/// arguments, split at spaces) when the tests themselves run under one —
/// `scripts/cross-test` sets it to `qemu-aarch64 -L /usr/aarch64-linux-gnu`:
/// without binfmt_misc the kernel cannot start a foreign binary itself.
pub fn native(program: impl AsRef<std::ffi::OsStr>) -> Command {
    match std::env::var("TURNWAL_TEST_RUNNER") {
        Ok(runner) if !runner.trim().is_empty() => {
            let mut words = runner.split_whitespace();
            let mut cmd = Command::new(words.next().expect("a non-empty runner"));
            cmd.args(words).arg(program);
            cmd
        }
        _ => Command::new(program),
    }
}

/// `turnwal ARGS` without `$TURNWAL_STORE`.
pub fn command(args: &[&str]) -> Command {
    let mut cmd = native(BIN);
    cmd.env_remove("TURNWAL_STORE").args(args);
    cmd
}

/// Runs `turnwal ARGS` with `stdin`, without `$TURNWAL_STORE`.
pub fn turnwal(args: &[&str], stdin: &str) -> Output {
    run_cmd(&mut command(args), stdin)
}

/// Runs a prepared command with `stdin` and waits for it.
pub fn run_cmd(cmd: &mut Command, stdin: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn turnwal");
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.to_owned();
    // Fed from another thread: the command's output may fill its pipe
    // before all input is written, and a command that stops reading early
    // (a rejected line) closes it.
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().expect("wait for turnwal");
    writer.join().unwrap();
    Output {
        status: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// `turnwal --store STORE ARGS`.
pub fn on(store: &Path, args: &[&str], stdin: &str) -> Output {
    let mut all = vec!["--store", store.to_str().unwrap()];
    all.extend_from_slice(args);
    turnwal(&all, stdin)
}

/// `turnwal convert --from FROM --to TO EXTRA`.
pub fn convert(from: &Path, to: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "convert",
        "--from",
        from.to_str().unwrap(),
        "--to",
        to.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    turnwal(&args, "")
}

/// An event line as `cat` prints it.
pub fn ev(event_type: &str, seq: u64, time: i64, data: &str) -> String {
    format!(r#"{{"type":"{event_type}","seq":{seq},"time":{time},"data":{data}}}"#)
}

/// Lines joined, each ending in a newline.
pub fn lines(events: &[String]) -> String {
    events.iter().map(|e| format!("{e}\n")).collect()
}

/// `ack` lines for `seqs`.
pub fn acks(seqs: std::ops::Range<u64>) -> String {
    seqs.map(|s| format!("ack {s}\n")).collect()
}

/// A complete turn of six events, seqs from `seq0`, times from `t0`.
pub fn turn(n: u64, seq0: u64, t0: i64) -> Vec<String> {
    turn_saying(n, seq0, t0, &format!("hi {n}"), "x")
}

/// [`turn`] with the user's text and the one assistant delta given.
pub fn turn_saying(n: u64, seq0: u64, t0: i64, user: &str, delta: &str) -> Vec<String> {
    let data = [
        ("turn/start", format!(r#"{{"turn":{n}}}"#)),
        (
            "user/message",
            format!(r#"{{"id":"u{n}","text":"{user}"}}"#),
        ),
        ("step/start", format!(r#"{{"turn":{n},"step":1}}"#)),
        (
            "assistant/chunk",
            format!(
                r#"{{"turn":{n},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{delta}"}}}}"#
            ),
        ),
        ("step/end", format!(r#"{{"turn":{n},"step":1}}"#)),
        (
            "turn/end",
            format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#),
        ),
    ];
    data.iter()
        .enumerate()
        .map(|(i, (t, d))| ev(t, seq0 + i as u64, t0 + i as i64, d))
        .collect()
}

/// Appends `events` with `turnwal append ARGS`, which must succeed.
pub fn append(store: &Path, args: &[&str], events: &[String]) {
    let out = on(store, args, &lines(events));
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (0, ""),
        "append {args:?}"
    );
}

/// `turnwal cat ID` (with `--raw`), which must succeed.
pub fn cat(store: &Path, id: &str, raw: bool) -> String {
    let args: &[&str] = if raw {
        &["cat", id, "--raw"]
    } else {
        &["cat", id]
    };
    let out = on(store, args, "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""), "cat {id}");
    out.stdout
}

/// Whether `store` names an SQLite store, as the CLI decides it.
pub fn is_sqlite(store: &Path) -> bool {
    matches!(
        store.extension().and_then(|e| e.to_str()),
        Some("sqlite" | "db")
    )
}

/// Opens `store` through the library, with the backend the CLI would pick.
pub fn open(store: &Path) -> Store {
    if is_sqlite(store) {
        Store::open_sqlite(store, SqliteOptions::default(), StoreOptions::default()).unwrap()
    } else {
        Store::open(store).unwrap()
    }
}

/// A session's header as the library reads it.
pub fn header(store: &Path, id: &str) -> SessionHeader {
    open(store).inspect(id).unwrap().header
}

/// Copies a directory tree (a fixture root into a temporary one).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Events as their JSON envelopes, for comparing logs whole.
pub fn jsons(events: &[turnwal::Event]) -> Vec<String> {
    events.iter().map(turnwal::Event::to_json).collect()
}

/// The log file of session `id` in the WAL store at `store`, named as the
/// store names it.
/// The bytes a WAL session occupies: its log and its archive.
pub fn wal_bytes(store: &Path, id: &str) -> u64 {
    turnwal::backend::wal::WalBackend::open(store)
        .unwrap()
        .session_bytes(id)
        .unwrap()
}

pub fn wal_log(store: &Path, id: &str) -> std::path::PathBuf {
    store.join("sessions").join(format!(
        "{}{}",
        turnwal::backend::wal::encode_file_name(id),
        turnwal::backend::wal::LOG_EXTENSION
    ))
}
