//! After any turnwal operation an upstream JSONL root holds exactly the
//! files the upstream harness would hold (issue 15): project directories,
//! session directories, `session.jsonl[.zstd]`, and on a repair the
//! quarantine file of what was cut. The writer lock is the OFD hold on the
//! transcript, the durability proof lives in the state directory, and no
//! policy is recorded (docs/JSONL.md, "Layout").
//!
//! Every test uses temporary directories for the root and the state
//! directory; the real home is never touched.

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Barrier};

use support::{BIN, T0, ev, lines, turn};
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::{Error, Event, LogState, Policy, SessionHeader, Store, StoreOptions};

/// Every file below `dir`, relative, sorted (directories are implied by
/// their files; an empty directory is listed with a trailing `/`).
fn files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        let mut empty = true;
        for entry in fs::read_dir(dir).unwrap() {
            empty = false;
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                walk(base, &path, out);
            } else {
                out.push(path.strip_prefix(base).unwrap().display().to_string());
            }
        }
        if empty && dir != base {
            out.push(format!("{}/", dir.strip_prefix(base).unwrap().display()));
        }
    }
    let mut out = Vec::new();
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out.sort();
    out
}

/// Retries `f` while it is refused as locked, for up to a second. The
/// writer lock of a JSONL transcript is an OFD lock, held by its open file
/// description: a child process another test thread is spawning at the
/// instant a store drops the transcript shares that description until its
/// `exec` closes it, and holds the lock that long. Only a test that drops a
/// writer and takes the transcript again at once, in a process that spawns
/// children meanwhile, can see it.
fn unlocked<T>(mut f: impl FnMut() -> turnwal::Result<T>) -> turnwal::Result<T> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        match f() {
            Err(Error::Locked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// A root and a state directory, both temporary.
struct Place {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
}

impl Place {
    fn new() -> Place {
        let tmp = tempfile::tempdir().unwrap();
        Place {
            root: tmp.path().join("root"),
            state: tmp.path().join("state"),
            _tmp: tmp,
        }
    }

    fn backend(&self, compression: Compression) -> JsonlBackend {
        JsonlBackend::open(&self.root, compression)
            .unwrap()
            .with_state_dir(&self.state)
            .unwrap()
    }

    fn store(&self, compression: Compression, policy: Policy) -> Store {
        Store::with_backend(
            Arc::new(self.backend(compression)),
            StoreOptions {
                policy,
                ..StoreOptions::default()
            },
        )
    }

    /// `turnwal --store SPEC ARGS` with this place's state directory.
    fn cli(&self, spec: &str, args: &[&str], stdin: &str) -> support::Output {
        let mut all = vec!["--store", spec];
        all.extend_from_slice(args);
        self.cli_bare(&all, stdin)
    }

    /// `turnwal ARGS` with this place's state directory.
    fn cli_bare(&self, args: &[&str], stdin: &str) -> support::Output {
        let mut cmd = crate::support::native(BIN);
        cmd.env_remove("TURNWAL_STORE")
            .env("TURNWAL_STATE_DIR", &self.state)
            .args(args);
        support::run_cmd(&mut cmd, stdin)
    }

    /// The proof files the state directory should hold: one per
    /// transcript, named as the backend names them.
    fn proofs_of(&self, compression: Compression, transcripts: &[&str]) -> Vec<String> {
        let backend = self.backend(compression);
        let mut out: Vec<String> = transcripts
            .iter()
            .map(|t| {
                backend
                    .proof_path(&self.root.join(t))
                    .unwrap()
                    .strip_prefix(&self.state)
                    .unwrap()
                    .display()
                    .to_string()
            })
            .collect();
        out.sort();
        out
    }

    /// The state directory and its proof directory are private.
    fn assert_state_private(&self) {
        for dir in [self.state.clone(), self.state.join("jsonl-proof")] {
            let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", dir.display());
        }
    }
}

fn upstream(compression: Compression, sessions: &[&str]) -> Vec<String> {
    let name = match compression {
        Compression::None => "session.jsonl",
        Compression::Zstd => "session.jsonl.zstd",
    };
    let mut out: Vec<String> = sessions.iter().map(|s| format!("{s}/{name}")).collect();
    out.sort();
    out
}

/// The tail a crash mid-append leaves: a cut line (raw), or the first half
/// of a frame holding a line no decoder can finish (zstd, as the contract
/// suite tears it: nothing of it is recovered).
fn torn(compression: Compression) -> Vec<u8> {
    match compression {
        Compression::None => br#"{"type":"turn/start","seq":18,"ti"#.to_vec(),
        Compression::Zstd => {
            let noise: String = (0..3000u32)
                .map(|i| char::from(b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 26))
                .collect();
            let frame = turnwal::backend::jsonl::zstd::compress_frame(
                format!("{{\"type\":\"assistant/chunk\",\"seq\":18,\"noise\":\"{noise}\"}}\n")
                    .as_bytes(),
            );
            frame[..frame.len() / 2].to_vec()
        }
    }
}

/// Whether some open file description holds the writer's OFD lock on
/// `path` (the byte at 2^62): asked with `F_OFD_GETLK`, which takes
/// nothing.
fn ofd_held(path: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(file) = fs::File::open(path) else {
        return false;
    };
    // SAFETY: a zeroed `flock` is valid; the fields the call reads are set.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = 1 << 62;
    lock.l_len = 1;
    // SAFETY: a valid descriptor and a pointer to an initialized `flock`.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut lock) };
    rc == 0 && lock.l_type != libc::F_UNLCK as libc::c_short
}

fn events(lines: &[String]) -> Vec<Event> {
    lines
        .iter()
        .map(|l| Event::from_json(l.as_bytes()).unwrap())
        .collect()
}

/// A WAL store with three sessions in two cwds, one of them lenient with a
/// plugin event between turns (marked ignorable, so JSONL takes it) and
/// one with an open final turn.
fn wal_source(dir: &Path) {
    let store = Store::open(dir).unwrap();
    store
        .create(SessionHeader::new("alpha", 1).with_cwd("/work/app"))
        .unwrap();
    store.append("alpha", &events(&turn(1, 0, T0))).unwrap();
    store
        .append("alpha", &events(&turn(2, 6, T0 + 10)))
        .unwrap();
    store
        .create_with_policy(
            SessionHeader::new("beta", 1).with_cwd("/work/app"),
            Policy::Lenient,
        )
        .unwrap();
    store.append("beta", &events(&turn(1, 0, T0))).unwrap();
    let note = Event::from_json(
        br#"{"type":"plugin/note","seq":6,"time":1700000000100,"data":{},"ignorable":true}"#,
    )
    .unwrap();
    store.append("beta", &[note]).unwrap();
    store
        .create(SessionHeader::new("gamma", 1).with_cwd("/srv/other"))
        .unwrap();
    store
        .append("gamma", &events(&turn(1, 0, T0)[..3]))
        .unwrap();
}

const SESSIONS: [&str; 3] = [
    "--work-app--/alpha",
    "--work-app--/beta",
    "--srv-other--/gamma",
];

fn transcripts(compression: Compression) -> Vec<String> {
    upstream(compression, &SESSIONS)
}

#[test]
fn convert_recover_and_append_leave_only_upstream_files() {
    for (compression, prefix) in [
        (Compression::None, "jsonl+none:"),
        (Compression::Zstd, "jsonl+zstd:"),
        (Compression::Zstd, "jsonl:"),
    ] {
        let place = Place::new();
        let wal = place._tmp.path().join("wal");
        wal_source(&wal);
        let spec = format!("{prefix}{}", place.root.display());
        let label = spec.clone();

        // convert
        let out = place.cli_bare(
            &["convert", "--from", wal.to_str().unwrap(), "--to", &spec],
            "",
        );
        assert_eq!(out.status, 0, "{label}: {}", out.stderr);
        assert_eq!(files(&place.root), transcripts(compression), "{label}");
        let names: Vec<String> = transcripts(compression);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let proofs = place.proofs_of(compression, &names);
        assert_eq!(files(&place.state), proofs, "{label}");
        assert_eq!(proofs.len(), 3);
        place.assert_state_private();

        // recover, with nothing to do, on every session
        for id in ["alpha", "beta", "gamma"] {
            let out = place.cli(&spec, &["recover", id], "");
            assert_eq!(out.status, 0, "{label} {id}: {}", out.stderr);
            assert_eq!(files(&place.root), transcripts(compression), "{label} {id}");
        }
        assert_eq!(files(&place.state), proofs, "{label}");

        // append via the CLI: to a stored session, and a new one
        let out = place.cli(&spec, &["append", "alpha"], &lines(&turn(3, 12, T0 + 20)));
        assert_eq!(out.status, 0, "{label}: {}", out.stderr);
        let out = place.cli(
            &spec,
            &["append", "delta", "--create", "--cwd", "/work/app"],
            &lines(&turn(1, 0, T0)),
        );
        assert_eq!(out.status, 0, "{label}: {}", out.stderr);
        let mut sessions = SESSIONS.to_vec();
        sessions.push("--work-app--/delta");
        assert_eq!(
            files(&place.root),
            upstream(compression, &sessions),
            "{label}"
        );
        let all = upstream(compression, &sessions);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        assert_eq!(
            files(&place.state),
            place.proofs_of(compression, &all),
            "{label}"
        );

        // a real repair: a torn tail is cut and quarantined in the session
        // directory, as documented; nothing else appears
        let log = place
            .root
            .join(upstream(compression, &["--work-app--/alpha"])[0].clone());
        let mut bytes = fs::read(&log).unwrap();
        let torn_at = bytes.len();
        bytes.extend_from_slice(&torn(compression));
        fs::write(&log, &bytes).unwrap();
        let out = place.cli(&spec, &["recover", "alpha"], "");
        assert_eq!(out.status, 0, "{label}: {}", out.stderr);
        assert_eq!(fs::read(&log).unwrap().len(), torn_at, "{label}");
        let mut expected = upstream(compression, &sessions);
        let quarantined: Vec<String> = files(&place.root)
            .into_iter()
            .filter(|f| !expected.contains(f))
            .collect();
        assert_eq!(quarantined.len(), 1, "{label}: {quarantined:?}");
        assert!(
            quarantined[0].starts_with(&format!(
                "--work-app--/alpha/.turnwal-quarantine/alpha.at-{torn_at}.seq-18."
            )) && quarantined[0].ends_with(".jsonl-cut"),
            "{label}: {quarantined:?}"
        );
        expected.extend(quarantined);
        expected.sort();
        assert_eq!(files(&place.root), expected, "{label}");
    }
}

#[test]
fn the_library_leaves_only_upstream_files_and_proves_into_the_state_dir() {
    for compression in [Compression::None, Compression::Zstd] {
        let place = Place::new();
        let store = place.store(compression, Policy::Strict);
        store
            .create(SessionHeader::new("s", 1).with_cwd("/w"))
            .unwrap();
        assert_eq!(files(&place.root), Vec::<String>::new(), "lazy create");
        store.append("s", &events(&turn(1, 0, T0))).unwrap();
        store.append("s", &events(&turn(2, 6, T0))).unwrap();
        store
            .create(SessionHeader::new("t", 1).with_cwd("/x"))
            .unwrap();
        store.append("t", &events(&turn(1, 0, T0)[..2])).unwrap();
        let expected = upstream(compression, &["--w--/s", "--x--/t"]);
        assert_eq!(files(&place.root), expected);
        drop(store);

        // load, recover (closing t's open turn), append
        let store = place.store(compression, Policy::Strict);
        assert_eq!(unlocked(|| store.load("s")).unwrap().events.len(), 12);
        let report = store.recover("t", false).unwrap();
        assert!(report.committed);
        store.append("s", &events(&turn(3, 12, T0))).unwrap();
        assert_eq!(files(&place.root), expected);
        let names: Vec<&str> = expected.iter().map(String::as_str).collect();
        assert_eq!(files(&place.state), place.proofs_of(compression, &names));
        place.assert_state_private();

        // delete takes the proof with the transcript
        store.delete("t").unwrap();
        let left = upstream(compression, &["--w--/s"]);
        assert_eq!(files(&place.root), left);
        let names: Vec<&str> = left.iter().map(String::as_str).collect();
        assert_eq!(files(&place.state), place.proofs_of(compression, &names));
    }
}

#[test]
fn a_second_writer_is_refused_while_the_first_holds_the_transcript() {
    let place = Place::new();
    let first = place.store(Compression::None, Policy::Strict);
    first
        .create(SessionHeader::new("s", 1).with_cwd("/w"))
        .unwrap();
    first.append("s", &events(&turn(1, 0, T0))).unwrap();
    let transcript = place.root.join("--w--/s/session.jsonl");

    // Another store in this process.
    let second = place.store(Compression::None, Policy::Strict);
    match second.append("s", &events(&turn(2, 6, T0))) {
        Err(Error::Locked { id, path, holder }) => {
            assert_eq!((id.as_str(), path, holder), ("s", transcript.clone(), None))
        }
        other => panic!("second store: {other:?}"),
    }
    // Another process.
    let out = place.cli(
        &format!("jsonl:{}", place.root.display()),
        &["append", "s"],
        &lines(&turn(2, 6, T0)),
    );
    assert_eq!(out.status, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "session \"s\" is locked by another writer (pid unknown); lock file {}",
            transcript.display()
        )),
        "{}",
        out.stderr
    );
    assert_eq!(files(&place.root), ["--w--/s/session.jsonl"]);

    // Released with the first store: the second goes on.
    drop(first);
    unlocked(|| second.append("s", &events(&turn(2, 6, T0)))).unwrap();
    assert_eq!(second.load("s").unwrap().events.len(), 12);
}

#[test]
fn a_writer_process_holds_the_session_against_this_one() {
    let place = Place::new();
    let spec = format!("jsonl+none:{}", place.root.display());
    let out = place.cli(
        &spec,
        &["append", "s", "--create", "--cwd", "/w"],
        &lines(&turn(1, 0, T0)),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let transcript = place.root.join("--w--/s/session.jsonl");
    assert!(!ofd_held(&transcript));
    // A CLI writer waiting on its stdin holds the session.
    let mut child = crate::support::native(BIN)
        .env_remove("TURNWAL_STORE")
        .env("TURNWAL_STATE_DIR", &place.state)
        .args(["--store", &spec, "append", "s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // It opens its writer at its first batch, and then waits for more.
    let mut stdin = child.stdin.take().unwrap();
    {
        use std::io::Write;
        stdin.write_all(lines(&turn(2, 6, T0)).as_bytes()).unwrap();
        stdin.flush().unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !ofd_held(&transcript) {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer never held it"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let store = place.store(Compression::None, Policy::Strict);
    match store.append("s", &events(&turn(3, 12, T0))) {
        Err(Error::Locked { path, holder, .. }) => {
            assert_eq!((path, holder), (transcript.clone(), None))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(files(&place.root), ["--w--/s/session.jsonl"]);
    // Its end releases the session.
    drop(stdin);
    assert!(child.wait().unwrap().success());
    store.append("s", &events(&turn(3, 12, T0))).unwrap();
    assert_eq!(store.load("s").unwrap().events.len(), 18);
}

#[test]
fn concurrent_creators_never_both_win() {
    for round in 0..40 {
        let place = Arc::new(Place::new());
        let barrier = Arc::new(Barrier::new(2));
        let results: Vec<Result<(), Error>> = (0..2)
            .map(|w| {
                let (place, barrier) = (place.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let store = place.store(Compression::None, Policy::Strict);
                    store
                        .create(SessionHeader::new("s", 1).with_cwd("/w"))
                        .unwrap();
                    let mut batch = events(&turn(1, 0, T0));
                    // Tell the writers apart in the stored log.
                    batch[1] = Event::from_json(
                        ev(
                            "user/message",
                            1,
                            T0,
                            &format!(r#"{{"id":"u1","text":"w{w}"}}"#),
                        )
                        .as_bytes(),
                    )
                    .unwrap();
                    barrier.wait();
                    store.append("s", &batch).map(drop)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        let won: Vec<usize> = (0..2).filter(|&w| results[w].is_ok()).collect();
        assert_eq!(won.len(), 1, "round {round}: {results:?}");
        let lost = &results[1 - won[0]];
        assert!(
            matches!(
                lost,
                Err(Error::AlreadyExists { .. } | Error::Locked { .. })
            ),
            "round {round}: {lost:?}"
        );
        let text = fs::read_to_string(place.root.join("--w--/s/session.jsonl")).unwrap();
        assert!(
            text.contains(&format!("\"text\":\"w{}\"", won[0])),
            "round {round}"
        );
        assert!(!text.contains(&format!("\"text\":\"w{}\"", 1 - won[0])));
        assert_eq!(
            files(&place.root),
            ["--w--/s/session.jsonl"],
            "round {round}"
        );
    }
}

/// The three files an older turnwal left in a session directory.
fn plant_legacy(dir: &Path) {
    fs::write(dir.join(".turnwal-lock"), "     99999\n").unwrap();
    fs::write(dir.join(".turnwal-policy"), "strict\n").unwrap();
    fs::write(dir.join(".turnwal-durable"), vec![0xffu8; 28]).unwrap();
}

#[test]
fn an_older_turnwals_sidecars_are_ignored_and_removed_by_the_next_write() {
    let place = Place::new();
    let spec = format!("jsonl:{}", place.root.display());
    let store = place.store(Compression::None, Policy::Lenient);
    store
        .create(SessionHeader::new("s", 1).with_cwd("/w"))
        .unwrap();
    store.append("s", &events(&turn(1, 0, T0))).unwrap();
    drop(store);
    let dir = place.root.join("--w--/s");
    plant_legacy(&dir);
    let legacy = [
        "--w--/s/.turnwal-durable",
        "--w--/s/.turnwal-lock",
        "--w--/s/.turnwal-policy",
        "--w--/s/session.jsonl",
    ];

    // Reads and a recovery with nothing to do write nothing: the files stay,
    // and no lock file stops a writer.
    let out = place.cli(&spec, &["verify", "s"], "");
    assert_eq!(out.status, 0, "{}", out.stdout);
    let out = place.cli(&spec, &["recover", "s"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let store = place.store(Compression::None, Policy::Lenient);
    assert_eq!(store.load("s").unwrap().state, LogState::Clean);
    assert_eq!(files(&place.root), legacy);

    // `.turnwal-policy` says strict, and is not read: a Lenient store
    // appends a plugin event between turns.
    let note =
        Event::from_json(br#"{"type":"plugin/note","seq":6,"time":1700000000100,"data":{}}"#)
            .unwrap();
    store.append("s", &[note]).unwrap();
    assert_eq!(files(&place.root), ["--w--/s/session.jsonl"]);
    drop(store);

    // A Strict store refuses the same between turns: the policy is the
    // appending store's.
    let strict = place.store(Compression::None, Policy::Strict);
    let note =
        Event::from_json(br#"{"type":"plugin/note","seq":7,"time":1700000000100,"data":{}}"#)
            .unwrap();
    assert!(matches!(
        strict.append("s", &[note]),
        Err(Error::Contract(_))
    ));
}

/// Flips one byte inside the line holding `needle`.
fn damage(path: &Path, needle: &str) {
    let mut bytes = fs::read(path).unwrap();
    let at = String::from_utf8_lossy(&bytes).find(needle).unwrap();
    bytes[at] = b'#';
    fs::write(path, bytes).unwrap();
}

/// A proof file as docs/JSONL.md describes it: one slot stating that the
/// first `len` bytes, whose CRC-32 is `tag`, were durable in boot `boot`.
fn proof_slot(tag: u32, len: u64, boot: u64) -> Vec<u8> {
    let mut out = b"TWJP".to_vec();
    out.extend_from_slice(&tag.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&boot.to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Gives `path` a modification time long before the machine started, as a
/// transcript nobody has written since a power loss has.
fn written_before_this_boot(path: &Path) {
    let file = fs::OpenOptions::new().write(true).open(path).unwrap();
    let long_ago = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    file.set_modified(long_ago).unwrap();
}

/// The length of a raw transcript up to and including its first
/// `turn/end` line.
fn through_first_turn(bytes: &[u8]) -> usize {
    let text = String::from_utf8_lossy(bytes);
    let at = text.find("\"type\":\"turn/end\"").unwrap();
    at + text[at..].find('\n').unwrap() + 1
}

/// A proof in the state directory decides a recovery only for the bytes it
/// was written for. A proof from an earlier boot turns a hole followed by
/// intact lines (a later `turn/end` among them) into a tear, when nothing
/// has written the transcript since the machine started; the same proof
/// for another transcript, for a transcript since replaced at the same
/// path, or for one written in this boot (another writer appended after
/// the restart: issue 26, item 7) proves nothing, and upstream's rule
/// refuses the log.
#[test]
fn a_proof_counts_only_for_the_bytes_it_was_written_for() {
    let place = Place::new();
    let store = place.store(Compression::None, Policy::Strict);
    for (id, who) in [("a", "a"), ("b", "b")] {
        store
            .create(SessionHeader::new(id, 1).with_cwd("/w"))
            .unwrap();
        for n in 1..=3 {
            let mut batch = events(&turn(n, (n - 1) * 6, T0));
            batch[1] = Event::from_json(
                ev(
                    "user/message",
                    (n - 1) * 6 + 1,
                    T0,
                    &format!(r#"{{"id":"u{n}","text":"{who}{n}"}}"#),
                )
                .as_bytes(),
            )
            .unwrap();
            store.append(id, &batch).unwrap();
        }
    }
    drop(store);
    let backend = place.backend(Compression::None);
    let (a, b) = (
        place.root.join("--w--/a/session.jsonl"),
        place.root.join("--w--/b/session.jsonl"),
    );
    let proof_a = backend.proof_path(&a).unwrap();
    let proof_b = backend.proof_path(&b).unwrap();
    assert_ne!(proof_a, proof_b);
    assert!(proof_a.is_file() && proof_b.is_file());
    let (bytes_a, bytes_b) = (fs::read(&a).unwrap(), fs::read(&b).unwrap());

    // A proof of a's first turn, written in another boot (1 is no real
    // boot id), and a hole in turn 2: a tear, cut there.
    let len = through_first_turn(&bytes_a);
    let slot = proof_slot(crc32fast::hash(&bytes_a[..len]), len as u64, 1);
    fs::write(&proof_a, &slot).unwrap();
    damage(&a, "\"a2\"");
    // Written in this boot (the damage was): the proof licenses nothing,
    // and upstream's rule refuses the log, as it refuses it with no proof.
    let err = place
        .store(Compression::None, Policy::Strict)
        .inspect("a")
        .unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    written_before_this_boot(&a);
    // Cut from the damaged line (turn 2's user message, seq 7) on.
    let line = {
        let text = String::from_utf8_lossy(&bytes_a);
        let at = text.find("\"a2\"").unwrap();
        text[..at].rfind('\n').unwrap() + 1
    };
    let view = place
        .store(Compression::None, Policy::Strict)
        .inspect("a")
        .unwrap();
    assert_eq!(
        (view.stored, view.cut.as_ref().map(|c| c.offset)),
        (7, Some(line as u64))
    );

    // The same proof for b's bytes (b's first turn has the same length):
    // it does not describe a, and upstream's rule refuses a.
    let len_b = through_first_turn(&bytes_b);
    assert_eq!(len_b, len);
    fs::write(
        &proof_a,
        proof_slot(crc32fast::hash(&bytes_b[..len]), len as u64, 1),
    )
    .unwrap();
    let err = place
        .store(Compression::None, Policy::Strict)
        .inspect("a")
        .unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err}");

    // b's own proof file moved over a's: no better.
    fs::copy(&proof_b, &proof_a).unwrap();
    let err = place
        .store(Compression::None, Policy::Strict)
        .inspect("a")
        .unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err}");

    // a's proof again, but the transcript replaced at the same path by one
    // as long that differs inside the proven prefix: refused.
    fs::write(&proof_a, &slot).unwrap();
    let replaced = String::from_utf8(bytes_a.clone())
        .unwrap()
        .replace("\"a1\"", "\"A1\"");
    assert_eq!(replaced.len(), bytes_a.len());
    fs::write(&a, &replaced).unwrap();
    damage(&a, "\"a2\"");
    written_before_this_boot(&a);
    let err = place
        .store(Compression::None, Policy::Strict)
        .inspect("a")
        .unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err}");

    // And the original bytes with the proof: a tear again.
    fs::write(&a, &bytes_a).unwrap();
    damage(&a, "\"a2\"");
    written_before_this_boot(&a);
    let view = place
        .store(Compression::None, Policy::Strict)
        .inspect("a")
        .unwrap();
    assert_eq!(view.stored, 7);
}

/// Issue 26, item 7 (`g7`): a proof from an earlier boot, then turns
/// another writer (the upstream harness keeps no turnwal proof) appended
/// after the restart, one of them damaged. The proof licenses no cut:
/// `recover` refuses the log as corrupt and cuts nothing, exactly as it
/// refuses the same log with no proof at all, as upstream refuses it.
#[test]
fn a_proof_from_an_earlier_boot_licenses_no_cut_of_turns_appended_since() {
    let place = Place::new();
    let other_state = place._tmp.path().join("other-state");
    fs::create_dir(&other_state).unwrap();
    fs::set_permissions(&other_state, fs::Permissions::from_mode(0o700)).unwrap();
    let spec = format!("jsonl+none:{}", place.root.display());
    let cli = |state: &Path, args: &[&str], input: &str| {
        let mut child = crate::support::native(BIN)
            .env_remove("TURNWAL_STORE")
            .env("TURNWAL_STATE_DIR", state)
            .args(["--store", &spec])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
        let out = child.wait_with_output().unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let turns = |from: u64, to: u64| -> String {
        (from..=to)
            .map(|n| lines(&turn(n, (n - 1) * 6, T0 + n as i64)))
            .collect()
    };
    // Our writer: turns 1 and 2, with its proof.
    let (status, _, err) = cli(
        &place.state,
        &["append", "s", "--create", "-q"],
        &turns(1, 2),
    );
    assert_eq!((status, err.as_str()), (0, ""));
    // The proof, as if written in an earlier boot (1 is no real boot id).
    let log = place.root.join("_no-cwd/s/session.jsonl");
    let proof = place.backend(Compression::None).proof_path(&log).unwrap();
    let bytes = fs::read(&log).unwrap();
    let stale = proof_slot(crc32fast::hash(&bytes), bytes.len() as u64, 1);
    fs::write(&proof, &stale).unwrap();
    // After the restart another writer appends turns 3, 4 and 5, each on
    // its own, acknowledged, and keeps no proof in our state directory.
    for n in 3..=5 {
        let (status, _, err) = cli(&other_state, &["append", "s", "-q"], &turns(n, n));
        assert_eq!((status, err.as_str()), (0, ""), "turn {n}");
    }
    damage(&log, "\"hi 3\"");
    let damaged = fs::read(&log).unwrap();
    let copy = place._tmp.path().join("copy");
    fs::create_dir(&copy).unwrap();
    for state in [&place.state, &other_state] {
        let (status, out, err) = cli(state, &["recover", "s"], "");
        assert_eq!((status, out.as_str()), (2, ""), "{err}");
        assert!(
            err.contains("corrupt at byte") && err.contains("(seq 13)"),
            "{err}"
        );
        assert_eq!(fs::read(&log).unwrap(), damaged, "nothing was cut");
        let (status, out, _) = cli(state, &["verify", "s"], "");
        assert_eq!(status, 2, "{out}");
    }
    assert!(!place.root.join("_no-cwd/s/.turnwal-quarantine").exists());
    // The proof is as it was: a refusal writes nothing.
    assert_eq!(fs::read(&proof).unwrap(), stale);
}

/// A relative `TURNWAL_STATE_DIR` is refused (it would name another
/// directory from every working directory); a creation that fails after
/// making the session's directories (here: the proof cannot be written,
/// because a file stands where its directory goes) leaves no empty
/// directory in the root, and the error names what is in the way.
#[test]
fn a_failed_creation_leaves_the_root_as_it_was_and_says_why() {
    let place = Place::new();
    let spec = format!("jsonl+none:{}", place.root.display());
    let input = lines(&turn(1, 0, T0));
    let run = |state: &str| {
        let mut child = crate::support::native(BIN)
            .env_remove("TURNWAL_STORE")
            .env("TURNWAL_STATE_DIR", state)
            .args(["--store", &spec, "append", "s", "--create", "--cwd", "/w/p"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
        let out = child.wait_with_output().unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let before = files(&place.root);
    let (status, out, err) = run("relative/state");
    assert_eq!((status, out.as_str()), (4, ""));
    assert!(
        err.starts_with(
            "turnwal: invalid argument: TURNWAL_STATE_DIR must be an absolute path, not \
             relative/state"
        ),
        "{err}"
    );
    assert_eq!(files(&place.root), before);

    fs::create_dir(&place.state).unwrap();
    fs::set_permissions(&place.state, fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(place.state.join("jsonl-proof"), b"not a directory").unwrap();
    let (status, out, err) = run(place.state.to_str().unwrap());
    assert_eq!((status, out.as_str()), (4, ""));
    assert!(
        err.contains(&format!(
            "create directory {}: File exists (os error 17) (something that is not a directory \
             is in the way)",
            place.state.join("jsonl-proof").display()
        )),
        "{err}"
    );
    assert_eq!(files(&place.root), before, "no directory left behind");

    // Once the way is clear the same append creates the session.
    fs::remove_file(place.state.join("jsonl-proof")).unwrap();
    let (status, out, err) = run(place.state.to_str().unwrap());
    assert_eq!((status, err.as_str()), (0, ""));
    assert_eq!(out, support::acks(0..6));
}
