//! Issue 13, hostile file systems: a native WAL store whose sessions
//! directory holds what turnwal did not put there (symlinks where its lock
//! and sidecar files go, files and directories of another user, a FIFO or a
//! directory named like a log, a log copied under another name). Each test
//! builds the attack with real files and asserts the exact answer, and that
//! nothing outside the store was written.

use crate::support;

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::{BIN, Output, T0, lines, on, turn};

/// The longest any command here may take; a command still running then is
/// blocked (on a FIFO), which is the bug.
const BOUND: Duration = Duration::from_secs(20);

/// A uid no one here runs as, for files "another user" owns.
const OTHER_UID: u32 = 54_321;

fn sessions(store: &Path) -> PathBuf {
    store.join("sessions")
}

/// A store holding session `s` (one complete turn).
fn store_with_s() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("w");
    let out = on(
        &store,
        &["append", "s", "--create"],
        &lines(&turn(1, 0, T0)),
    );
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    (dir, store)
}

/// Creates session `id` in `store`, returning how it went.
fn create(store: &Path, id: &str) -> Output {
    on(store, &["append", id, "--create"], &lines(&turn(1, 0, T0)))
}

/// `turnwal --store STORE ARGS` with no stdin, killed and failed if it has
/// not finished within [`BOUND`]: proves it did not block.
fn bounded(store: &Path, args: &[&str]) -> Output {
    let child = crate::support::native(BIN)
        .env_remove("TURNWAL_STORE")
        .arg("--store")
        .arg(store)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn turnwal");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(BOUND) {
        Ok(out) => {
            let out = out.unwrap();
            Output {
                status: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8(out.stdout).unwrap(),
                stderr: String::from_utf8(out.stderr).unwrap(),
            }
        }
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("turnwal {args:?} still running after {BOUND:?}: it blocked");
        }
    }
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), None).unwrap();
}

fn victim(dir: &Path) -> PathBuf {
    let victim = dir.join("victim");
    fs::write(&victim, "IMPORTANT-CONTENT\n").unwrap();
    victim
}

// Item 2: lock and sidecar files, and their directory.

#[test]
fn a_lock_symlink_is_refused_and_its_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("w");
    fs::create_dir_all(sessions(&store)).unwrap();
    let victim = victim(dir.path());
    let lock = sessions(&store).join("s.lock");
    symlink(&victim, &lock).unwrap();
    let out = create(&store, "s");
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr),
        (
            4,
            "",
            format!(
                "turnwal: lock {}: is a symbolic link, which turnwal never follows for a \
                 store's files; remove it\n",
                lock.display()
            )
        )
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "IMPORTANT-CONTENT\n");
    assert!(!sessions(&store).join("s.twal").exists());
    // Once the symlink is gone, the session is created.
    fs::remove_file(&lock).unwrap();
    assert_eq!(create(&store, "s").status, 0);
}

#[test]
fn a_dangling_lock_symlink_creates_nothing_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("w");
    fs::create_dir_all(sessions(&store)).unwrap();
    let target = dir.path().join("planted");
    symlink(&target, sessions(&store).join("s.lock")).unwrap();
    let out = create(&store, "s");
    assert_eq!(out.status, 4);
    assert!(out.stderr.contains("is a symbolic link"), "{}", out.stderr);
    assert!(!target.exists(), "created through the symlink");
}

#[test]
fn a_durability_proof_symlink_is_refused_and_its_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("w");
    fs::create_dir_all(sessions(&store)).unwrap();
    let victim = victim(dir.path());
    let proof = sessions(&store).join(".s.durable");
    symlink(&victim, &proof).unwrap();
    let out = create(&store, "s");
    assert_eq!(
        (out.status, out.stderr),
        (
            4,
            format!(
                "turnwal: write {}: is a symbolic link, which turnwal never follows for a \
                 store's files; remove it\n",
                proof.display()
            )
        )
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "IMPORTANT-CONTENT\n");
    assert!(!sessions(&store).join("s.twal").exists());
}

#[test]
fn a_lock_file_of_another_user_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("w");
    fs::create_dir_all(sessions(&store)).unwrap();
    let lock = sessions(&store).join("s.lock");
    fs::write(&lock, "theirs\n").unwrap();
    chown(&lock, OTHER_UID);
    let euid = unsafe { libc::geteuid() };
    let out = create(&store, "s");
    assert_eq!(
        (out.status, out.stderr),
        (
            4,
            format!(
                "turnwal: lock {}: is owned by uid {OTHER_UID}, not by this user ({euid}); \
                 turnwal writes only files of its own: remove it, or run as its owner\n",
                lock.display()
            )
        )
    );
    assert_eq!(fs::read_to_string(&lock).unwrap(), "theirs\n");
}

#[test]
fn a_lock_that_is_a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("w");
    fs::create_dir_all(sessions(&store)).unwrap();
    let lock = sessions(&store).join("s.lock");
    mkfifo(&lock);
    let out = bounded(&store, &["rm", "s"]);
    // Nothing to remove: `rm` of a missing session never takes the lock.
    assert_ne!(out.status, 0);
    let (_dir, store) = store_with_s();
    let lock = sessions(&store).join("s.lock");
    fs::remove_file(&lock).unwrap();
    mkfifo(&lock);
    let out = bounded(&store, &["rm", "s"]);
    assert_eq!(
        (out.status, out.stderr),
        (
            4,
            format!(
                "turnwal: lock {}: is a FIFO (named pipe), not a regular file; remove or \
                 rename it\n",
                lock.display()
            )
        )
    );
    assert!(sessions(&store).join("s.twal").exists());
}

#[test]
fn a_group_or_world_writable_sessions_directory_is_refused() {
    let (_dir, store) = store_with_s();
    let dir = sessions(&store);
    for mode in [0o775, 0o777, 0o722] {
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).unwrap();
        let out = create(&store, "t");
        assert_eq!(
            (out.status, out.stderr),
            (
                4,
                format!(
                    "turnwal: lock {}: its directory {} is writable by group or others (mode \
                     {mode:o}); chmod go-w it\n",
                    dir.join("t.lock").display(),
                    dir.display()
                )
            )
        );
        assert!(!dir.join("t.lock").exists() && !dir.join("t.twal").exists());
    }
    // Reading never writes there: still listed.
    let out = on(&store, &["ls", "--json"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(create(&store, "t").status, 0);
}

#[test]
fn a_sessions_directory_of_another_user_is_refused() {
    let (_dir, store) = store_with_s();
    let dir = sessions(&store);
    chown(&dir, OTHER_UID);
    let euid = unsafe { libc::geteuid() };
    let out = on(&store, &["append", "s"], &lines(&turn(2, 3, T0 + 10)));
    assert_eq!(
        (out.status, out.stderr),
        (
            4,
            format!(
                "turnwal: lock {}: its directory {} is owned by uid {OTHER_UID}, not by this \
                 user ({euid}); run as its owner or chown it\n",
                dir.join("s.lock").display(),
                dir.display()
            )
        )
    );
}

#[test]
fn a_symlinked_sessions_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let store = dir.path().join("w");
    fs::create_dir(&store).unwrap();
    symlink(&elsewhere, sessions(&store)).unwrap();
    let out = create(&store, "s");
    assert_eq!(
        (out.status, out.stderr),
        (
            4,
            format!(
                "turnwal: lock {}: its directory {} is not a real directory (a symbolic \
                 link); turnwal does not follow symlinks there: use the directory itself\n",
                sessions(&store).join("s.lock").display(),
                sessions(&store).display()
            )
        )
    );
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn new_store_directories_are_private() {
    let (_dir, store) = store_with_s();
    let mode = fs::metadata(sessions(&store)).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

// Item 6: entries named like logs that are not regular files.

#[test]
fn a_fifo_named_like_a_log_is_skipped_by_ls_and_verify_and_named_by_cat() {
    let (_dir, store) = store_with_s();
    let fifo = sessions(&store).join("x.twal");
    mkfifo(&fifo);
    let skipped = format!(
        "turnwal: skipped {}: a FIFO (named pipe), not a session log; remove or rename it\n",
        fifo.display()
    );
    let out = bounded(&store, &["ls", "--json"]);
    assert_eq!((out.status, &out.stderr), (0, &skipped));
    assert_eq!(out.stdout.lines().count(), 1);
    assert!(out.stdout.starts_with(r#"{"id":"s","#), "{}", out.stdout);
    let out = bounded(&store, &["verify"]);
    assert_eq!(
        (out.status, out.stdout.as_str(), &out.stderr),
        (
            0,
            "s: clean, 6 events, 1 turn, 591 bytes\n\
             1 session: 1 clean, 0 open-turn, 0 torn, 0 corrupt\n",
            &skipped
        )
    );
    for args in [&["cat", "x"][..], &["verify", "x"], &["stats", "x"]] {
        let out = bounded(&store, args);
        assert_eq!(
            (out.status, out.stderr),
            (
                4,
                format!(
                    "turnwal: open {}: is a FIFO (named pipe), not a regular file; remove or \
                     rename it\n",
                    fifo.display()
                )
            ),
            "{args:?}"
        );
    }
}

#[test]
fn a_directory_named_like_a_log_is_skipped_and_named() {
    let (_dir, store) = store_with_s();
    let dir = sessions(&store).join("x.twal");
    fs::create_dir(&dir).unwrap();
    let out = bounded(&store, &["ls"]);
    assert_eq!(
        (out.status, out.stderr),
        (
            0,
            format!(
                "turnwal: skipped {}: a directory, not a session log; remove or rename it\n",
                dir.display()
            )
        )
    );
    assert_eq!(
        out.stdout.lines().count(),
        2,
        "header and s: {}",
        out.stdout
    );
    let out = bounded(&store, &["cat", "x"]);
    assert_eq!(
        (out.status, out.stderr),
        (
            4,
            format!(
                "turnwal: open {}: is a directory, not a regular file; remove or rename it\n",
                dir.display()
            )
        )
    );
}

#[test]
fn a_symlink_named_like_a_log_is_skipped_and_not_followed() {
    let (dir, store) = store_with_s();
    // A real log of another store, linked in: not opened through the link.
    let other = dir.path().join("other");
    assert_eq!(create(&other, "x").status, 0);
    let link = sessions(&store).join("x.twal");
    symlink(sessions(&other).join("x.twal"), &link).unwrap();
    let out = bounded(&store, &["ls"]);
    assert_eq!(
        (out.status, out.stderr),
        (
            0,
            format!(
                "turnwal: skipped {}: a symbolic link, not a session log; remove or rename it\n",
                link.display()
            )
        )
    );
    let out = bounded(&store, &["cat", "x"]);
    assert_eq!(
        (out.status, out.stderr),
        (
            4,
            format!(
                "turnwal: open {}: is a symbolic link, which turnwal never follows for a \
                 store's files; remove it\n",
                link.display()
            )
        )
    );
}

// Item 8: a log copied under another session's name.

#[test]
fn a_copied_log_is_listed_and_verified_as_a_name_collision() {
    let (_dir, store) = store_with_s();
    let copy = sessions(&store).join("t.twal");
    fs::copy(sessions(&store).join("s.twal"), &copy).unwrap();
    let out = on(&store, &["ls", "--json"], "");
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    let rows: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["s", "t"]);
    assert_eq!(rows[0]["state"], "clean-end"); // judged from its end
    assert_eq!(rows[1]["state"], "corrupt");
    assert_eq!(
        rows[1]["problem"],
        "file t.twal holds session \"s\", not \"t\" (a file name collision: a copied or \
         renamed log; move it back to its own name or remove it)"
    );
    let out = on(&store, &["ls"], "");
    let t_row = out.stdout.lines().find(|l| l.starts_with("t ")).unwrap();
    assert!(t_row.contains(" corrupt "), "{t_row}");
    let out = on(&store, &["verify"], "");
    assert_eq!(
        (out.status, out.stdout),
        (
            2,
            format!(
                "s: clean, 6 events, 1 turn, 591 bytes\nt: corrupt: {}: corrupt at byte 0: \
                 file holds session \"s\", not \"t\" (a file name collision)\n\
                 2 sessions: 1 clean, 0 open-turn, 0 torn, 1 corrupt\n",
                copy.display()
            )
        )
    );
    let out = on(&store, &["cat", "t"], "");
    assert_eq!(out.status, 2);
}
