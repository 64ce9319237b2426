//! Every line turnwal reads from input is refused while it is read, once
//! it passes the longest a line of its kind can be, in bounded memory
//! (issue 26, item 9): an `import` opening line of 200 MB costs a few MB,
//! not 200; an `append` line longer than any event is refused at the
//! event limit, after the lines before it were stored and acknowledged.
//! Peak memory is the child's own (`wait4`), whatever else the test binary
//! runs meanwhile.

use crate::support;

use std::io::Write;
use std::process::Stdio;

use support::{BIN, T0, ev, turn};

/// Runs `turnwal ARGS` feeding it `head`, then `filler` bytes of `b'A'`,
/// then `tail`; returns its exit status, stdout, stderr and peak resident
/// memory in bytes.
// The child is reaped by `wait4` (for its own rusage), not `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run_fed(args: &[&str], head: &[u8], filler: usize, tail: &[u8]) -> (i32, String, String, u64) {
    let mut child = crate::support::native(BIN)
        .env_remove("TURNWAL_STORE")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (head, tail) = (head.to_vec(), tail.to_vec());
    let feeder = std::thread::spawn(move || {
        // A refusal closes the pipe early: a broken pipe ends the feed.
        let chunk = vec![b'A'; 1 << 20];
        let _ = (|| -> std::io::Result<()> {
            stdin.write_all(&head)?;
            let mut left = filler;
            while left > 0 {
                let n = left.min(chunk.len());
                stdin.write_all(&chunk[..n])?;
                left -= n;
            }
            stdin.write_all(&tail)
        })();
    });
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).unwrap();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut s).unwrap();
        s
    });
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the child's pid, owned by this `Child`, waited exactly once.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    feeder.join().unwrap();
    assert!(libc::WIFEXITED(status), "killed: {status}");
    (
        libc::WEXITSTATUS(status),
        out.join().unwrap(),
        err.join().unwrap(),
        usage.ru_maxrss as u64 * 1024,
    )
}

const MB: u64 = 1 << 20;

#[test]
fn an_import_line_past_its_limit_is_refused_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    let opening =
        br#"{"turnwalExport":1,"header":{"version":0,"id":"x","createdAt":1},"policy":"strict","events":1,"pad":""#;
    let (status, out, err, rss) = run_fed(
        &["--store", store, "import", "-"],
        opening,
        200 << 20,
        b"\"}\n",
    );
    assert_eq!((status, out.as_str()), (2, ""), "{err}");
    assert_eq!(
        err,
        "turnwal: -: line 1: longer than 2097152 bytes, the most a line of a turnwal export \
         can be here; refused after reading that much of it\n"
    );
    assert!(rss < 32 * MB, "peak memory {} MB", rss / MB);
    assert!(
        !dir.path().join("store/sessions").exists(),
        "nothing created"
    );

    // An event line past the largest event, after a valid opening line.
    let opening = br#"{"turnwalExport":1,"header":{"version":0,"id":"x","createdAt":1},"policy":"strict","events":2}
{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}
{"type":"user/message","seq":1,"time":1,"data":{"id":"u","text":""#;
    let limit = turnwal::limits::MAX_RECORD_LEN;
    let (status, _, err, rss) = run_fed(
        &["--store", store, "import", "-"],
        opening,
        limit + (8 << 20),
        b"\"}}\n",
    );
    assert_eq!(status, 2, "{err}");
    assert!(
        err.starts_with(&format!(
            "turnwal: -: line 3: longer than {limit} bytes, the most a line of a turnwal export"
        )),
        "{err}"
    );
    assert!(
        rss < limit as u64 + 64 * MB,
        "peak memory {} MB for a {} MB limit",
        rss / MB,
        limit as u64 / MB
    );
}

#[test]
fn an_append_line_past_the_largest_event_is_refused_after_the_lines_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    let mut head: String = turn(1, 0, T0).iter().map(|l| format!("{l}\n")).collect();
    head.push_str(&ev("turn/start", 6, T0, r#"{"turn":2}"#));
    head.push('\n');
    head.push_str(r#"{"type":"user/message","data":{"id":"u","text":""#);
    let limit = turnwal::limits::MAX_RECORD_LEN;
    let (status, out, err, rss) = run_fed(
        &[
            "--store", store, "append", "s", "--create", "--sync", "batch",
        ],
        head.as_bytes(),
        limit + (8 << 20),
        b"\"}}\n",
    );
    assert_eq!(status, 3, "{err}");
    assert_eq!(out, support::acks(0..7));
    assert!(
        err.starts_with(&format!(
            "turnwal: line 8: the line is longer than {limit} bytes, the most one event can take"
        )),
        "{err}"
    );
    assert!(
        rss < limit as u64 + 64 * MB,
        "peak memory {} MB for a {} MB limit",
        rss / MB,
        limit as u64 / MB
    );
    let cat = support::on(std::path::Path::new(store), &["cat", "s", "--raw"], "");
    assert_eq!(cat.stdout.lines().count(), 7);
}
