//! The crash lab against the SQLite backend.
//!
//! The simulated disk is the WAL backend's storage layer; SQLite does its
//! own file I/O, so these tests use what is real: a child process (this
//! test binary, re-executed to run only [`child_process`]) runs a workload
//! through `Store::open_sqlite` with `synchronous=FULL`, under a shim VFS
//! ([`crate::crashlab::sqlite_vfs`]) that counts every create, write, truncate, sync
//! and delete SQLite makes on the database, its `-wal` and its `-journal`,
//! and at a chosen one either
//!
//! - dies with SIGKILL, leaving the files as a process crash (`kill`), a
//!   power loss (`power`: only what was synced, and directory entries only
//!   after a directory sync) or a torn power loss (`torn`: unsynced sectors
//!   at random) would; or
//! - fails the operation (disk full, I/O error, a journal that cannot be
//!   created as in a read-only directory; once, or from then on).
//!
//! The workload covers appends (packed chunk runs, 9 KiB tool results),
//! repairs (a session released with its turn open and loaded again: the
//! closers are committed in one transaction) and reopening the store (the
//! last connection's close checkpoints the WAL into the database), in every
//! journal mode. The child reports, line by line into a file, every event
//! it hands to `append`, every acknowledgement, every failure and what the
//! store held right after it; the parent rebuilds the crash lab's model
//! from that and checks the one oracle (`crashlab::oracle::check_sqlite`),
//! plus exactly what SQLite's atomic commits promise: each session keeps
//! all its acknowledged events and at most the one batch in flight, whole.
//!
//! `cargo test` runs a sample: for each phase × file × operation kind, one
//! crash point (modes rotating), one fault point (transient or persistent in
//! turn), and 6 crashes inside each of 8 recoveries. `TURNWAL_CRASHLAB_SCALE`
//! widens them: at 2, three crash points per group each in another mode,
//! three fault points with both runs, every operation of each recovery in
//! one mode; at 3, those crash points in every mode, four fault points, every
//! recovery operation in every mode; from 4, every operation of the workload
//! in every crash mode and with both fault runs.
//!
//! A known limit is asserted as it is (docs/RELIABILITY.md, "Known
//! limits"): in a rollback journal mode, when the sync that ends a commit
//! fails after the database was synced, SQLite has committed the batch but
//! reports the commit as failed; the store then holds the batch (whole) and
//! refuses its retry with "stored next seq is N".

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use turnwal::backend::sqlite::{JournalMode, SqliteOptions, Synchronous};
use turnwal::rng::Rng;
use turnwal::{Error, Event, SessionHeader, Store, StoreOptions, interrupted_turn_closers};
use turnwal_testkit::crashlab::oracle::{self, Model};
use turnwal_testkit::crashlab::workload::Generator;

use crate::crashlab::scale;
use crate::crashlab::sqlite_vfs::{self as vfs, CrashMode, OpKind, Role};

/// The environment variable that makes this test binary a child.
const CHILD_ENV: &str = "TURNWAL_CRASHLAB_SQLITE_CHILD";

const JOURNALS: [JournalMode; 4] = [
    JournalMode::Wal,
    JournalMode::Delete,
    JournalMode::Truncate,
    JournalMode::Persist,
];

const SESSIONS: usize = 3;

fn id(session: usize) -> String {
    format!("session-{session}")
}

fn options(journal: JournalMode) -> SqliteOptions {
    SqliteOptions {
        journal_mode: journal,
        synchronous: Synchronous::Full,
        ..SqliteOptions::default()
    }
}

// ---------------------------------------------------------------------------
// The child
// ---------------------------------------------------------------------------

/// One step of the child's workload.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Append the next `n` events of a session (creating it first).
    Append(usize, usize),
    /// Release a session and load it again: a turn it left open is closed
    /// by a repair transaction.
    Close(usize),
    /// Drop the store (the connection closes, checkpointing a WAL) and open
    /// it again; each session is loaded (and repaired) at its next append.
    Reopen,
}

/// Three sessions, batches of 1 to 24 events, a release with a turn open,
/// two reopens (the second with turns open), turns open at the end.
fn workload() -> Vec<Step> {
    use Step::*;
    vec![
        Append(0, 1),
        Append(0, 6),
        Append(1, 3),
        Append(0, 14),
        Append(1, 9),
        Close(0),
        Append(2, 5),
        Append(0, 8),
        Reopen,
        Append(2, 17),
        Append(1, 6),
        Append(0, 3),
        Close(2),
        Append(2, 11),
        Append(1, 12),
        Append(0, 24),
        Reopen,
        Append(1, 20),
        Append(2, 4),
        Append(0, 9),
        Append(2, 22),
    ]
}

/// How a child ends once the workload is done (or given up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// Drops the store (its connection closes) and exits.
    Close,
    /// Crashes in this mode with the store still open.
    Crash(CrashMode),
}

/// What a child does.
#[derive(Clone, Debug)]
struct Spec {
    db: PathBuf,
    out: PathBuf,
    journal: JournalMode,
    seed: u64,
    crash_at: Option<u64>,
    crash_mode: CrashMode,
    fault_at: Option<u64>,
    full: bool,
    persistent: bool,
    end: End,
    /// Reports every operation's kind and file.
    trace: bool,
    /// Runs only recovery (open, load every session, close) instead of the
    /// workload.
    recover_only: bool,
}

impl Spec {
    fn new(db: &Path, out: &Path, journal: JournalMode) -> Spec {
        Spec {
            db: db.to_owned(),
            out: out.to_owned(),
            journal,
            seed: WORKLOAD_SEED,
            crash_at: None,
            crash_mode: CrashMode::Kill,
            fault_at: None,
            full: false,
            persistent: false,
            end: End::Close,
            trace: false,
            recover_only: false,
        }
    }

    fn encode(&self) -> String {
        let opt = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
        let end = match self.end {
            End::Close => "close",
            End::Crash(mode) => mode.name(),
        };
        format!(
            "db={}\nout={}\njournal={}\nseed={}\ncrash_at={}\ncrash_mode={}\nfault_at={}\nfull={}\npersistent={}\nend={end}\ntrace={}\nrecover_only={}",
            self.db.display(),
            self.out.display(),
            self.journal,
            self.seed,
            opt(self.crash_at),
            self.crash_mode.name(),
            opt(self.fault_at),
            self.full,
            self.persistent,
            self.trace,
            self.recover_only,
        )
    }

    fn decode(text: &str) -> Spec {
        let map: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
        let opt = |k: &str| map[k].parse().ok();
        Spec {
            db: PathBuf::from(map["db"]),
            out: PathBuf::from(map["out"]),
            journal: map["journal"].parse().unwrap(),
            seed: map["seed"].parse().unwrap(),
            crash_at: opt("crash_at"),
            crash_mode: CrashMode::parse(map["crash_mode"]).unwrap(),
            fault_at: opt("fault_at"),
            full: map["full"] == "true",
            persistent: map["persistent"] == "true",
            end: match map["end"] {
                "close" => End::Close,
                mode => End::Crash(CrashMode::parse(mode).unwrap()),
            },
            trace: map["trace"] == "true",
            recover_only: map["recover_only"] == "true",
        }
    }
}

/// Not a test of its own: the body of a child process (see the module
/// docs). Run by `cargo test` (without `TURNWAL_CRASHLAB_SQLITE_CHILD`) it
/// returns at once.
#[test]
fn child_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let spec = Spec::decode(&spec);
    vfs::install(vfs::Config {
        crash_at: spec.crash_at,
        crash_mode: Some(spec.crash_mode),
        fault_at: spec.fault_at,
        full: spec.full,
        persistent: spec.persistent,
        seed: spec.seed ^ spec.crash_at.unwrap_or(0),
    });
    let mut child = Child::new(spec);
    if child.spec.recover_only {
        child.recover();
    } else {
        child.run(&workload());
    }
    child.finish();
}

/// The workload in the child, reporting as it goes.
struct Child {
    spec: Spec,
    out: std::fs::File,
    store: Option<Store>,
    rng: Rng,
    gens: Vec<Generator>,
    created: Vec<bool>,
    /// Sessions to load again before their next append.
    stale: Vec<bool>,
    /// Each session's log as acknowledged (or loaded).
    stored: Vec<Vec<Event>>,
}

impl Child {
    fn new(spec: Spec) -> Child {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.out)
            .unwrap();
        Child {
            rng: Rng::new(spec.seed),
            spec,
            out,
            store: None,
            gens: vec![Generator::new(); SESSIONS],
            created: vec![false; SESSIONS],
            stale: vec![false; SESSIONS],
            stored: vec![Vec::new(); SESSIONS],
        }
    }

    /// One report line, written at once (it survives the SIGKILL).
    fn say(&mut self, line: String) {
        self.out.write_all(format!("{line}\n").as_bytes()).unwrap();
    }

    fn store(&self) -> &Store {
        self.store.as_ref().expect("open")
    }

    /// Marks where a phase of the work begins (for the crash points'
    /// labels): its name and the operations counted so far.
    fn phase(&mut self, name: &str) {
        self.say(format!("phase\t{name}\t{}", vfs::ops()));
    }

    /// Opens the store, trying twice.
    fn open(&mut self) -> bool {
        for _ in 0..2 {
            self.phase("open");
            match Store::open_sqlite(
                &self.spec.db,
                options(self.spec.journal),
                StoreOptions::default(),
            ) {
                Ok(store) => {
                    self.store = Some(store);
                    return true;
                }
                Err(e) => self.say(format!("failed\t-\topen: {e}")),
            }
        }
        false
    }

    fn run(&mut self, steps: &[Step]) {
        if !self.open() {
            self.say("gave-up".into());
            return;
        }
        for (i, step) in steps.iter().enumerate() {
            self.say(format!("step\t{i}\t{}", vfs::ops()));
            let ok = match *step {
                Step::Append(session, n) => self.append(session, n),
                Step::Close(session) => self.close(session),
                Step::Reopen => self.reopen(),
            };
            if !ok {
                self.say("gave-up".into());
                return;
            }
        }
    }

    /// Opens the store and loads (repairing) every session.
    fn recover(&mut self) {
        if !self.open() {
            self.say("gave-up".into());
            return;
        }
        for session in 0..SESSIONS {
            self.created[session] = true;
            if !self.resync(session) {
                self.say("gave-up".into());
                return;
            }
        }
    }

    fn append(&mut self, session: usize, n: usize) -> bool {
        let name = id(session);
        if self.stale[session] && !self.resync(session) {
            return false;
        }
        if !self.created[session] {
            match self.store().create(SessionHeader::new(name.clone(), 1)) {
                Ok(()) | Err(Error::AlreadyExists { .. }) => self.created[session] = true,
                Err(e) => {
                    self.say(format!("failed\t{name}\tcreate: {e}"));
                    return false;
                }
            }
        }
        let batch = self.gens[session].batch(&mut self.rng, n);
        for event in &batch {
            self.say(format!("sent\t{name}\t{}", event.to_json()));
        }
        for _ in 0..2 {
            self.phase("append");
            match self.store().append(&name, &batch) {
                Ok(receipt) => {
                    let next = batch.last().map_or(0, |e| e.seq() + 1);
                    assert_eq!(
                        (receipt.next_seq, receipt.durable),
                        (next, next),
                        "{name}: every acknowledged event is durable"
                    );
                    self.say(format!("acked\t{name}\t{}", receipt.durable));
                    self.stored[session].extend(batch);
                    return true;
                }
                Err(e) => {
                    self.say(format!("failed\t{name}\t{e}"));
                    // Nothing of the failed call is in the store: read from
                    // the database itself (the store answers NotFound for a
                    // session whose first append failed without looking).
                    let now = self
                        .store()
                        .backend()
                        .read_from(&name, 0)
                        .map(Option::unwrap_or_default);
                    let line = match now {
                        Ok(events) if events == self.stored[session] => {
                            format!("unchanged\t{name}")
                        }
                        Ok(events) => format!(
                            "changed\t{name}\t{}\t{}\t{}",
                            events.len(),
                            self.stored[session].len(),
                            batch.len()
                        ),
                        Err(e) => format!("unreadable\t{name}\t{e}"),
                    };
                    self.say(line);
                }
            }
        }
        false
    }

    /// Loads a session (committing its repair) and continues from it.
    fn resync(&mut self, session: usize) -> bool {
        let name = id(session);
        for _ in 0..2 {
            self.phase("load+repair");
            match self.store().load(&name) {
                Ok(view) => {
                    let acked = &self.stored[session];
                    if view.events.len() < acked.len() || view.events[..acked.len()] != acked[..] {
                        self.say(format!(
                            "violation\t{name}\tacknowledged events changed while the process lived"
                        ));
                    }
                    let mut lines = String::new();
                    for event in &view.events {
                        writeln!(lines, "view\t{name}\t{}", event.to_json()).unwrap();
                    }
                    write!(lines, "recovered\t{name}\t{}", view.events.len()).unwrap();
                    self.say(lines);
                    self.gens[session] = Generator::resume(&view.events);
                    self.stored[session] = view.events;
                    self.stale[session] = false;
                    return true;
                }
                Err(Error::NotFound { .. }) if self.stored[session].is_empty() => {
                    self.stale[session] = false;
                    self.created[session] = false;
                    return true;
                }
                Err(e) => self.say(format!("failed\t{name}\tload: {e}")),
            }
        }
        false
    }

    fn close(&mut self, session: usize) -> bool {
        let name = id(session);
        if let Err(e) = self.store().close(&name) {
            self.say(format!("failed\t{name}\tclose: {e}"));
            return false;
        }
        self.stale[session] = true;
        self.resync(session)
    }

    fn reopen(&mut self) -> bool {
        self.phase("reopen: close");
        drop(self.store.take());
        for session in 0..SESSIONS {
            self.stale[session] |= self.created[session];
        }
        self.open()
    }

    fn finish(mut self) {
        self.phase("close");
        if self.spec.end == End::Close {
            drop(self.store.take());
        }
        if self.spec.trace {
            let mut lines = String::new();
            for (kind, role) in vfs::trace() {
                writeln!(lines, "trace\t{}\t{}", kind.name(), role.name()).unwrap();
            }
            self.out.write_all(lines.as_bytes()).unwrap();
        }
        let line = format!("ops\t{}\t{}", vfs::ops(), vfs::faults());
        self.say(line);
        if let End::Crash(mode) = self.spec.end {
            vfs::crash_now(mode);
        }
    }
}

// ---------------------------------------------------------------------------
// The parent
// ---------------------------------------------------------------------------

/// The workload's seed (the generator's choices).
const WORKLOAD_SEED: u64 = 4;

/// Where a run's database lives, copied from a template made by this
/// process (schema and identity, synced for real).
struct Place {
    dir: tempfile::TempDir,
    db: PathBuf,
    journal: JournalMode,
}

fn template(journal: JournalMode) -> Place {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("template.sqlite");
    drop(Store::open_sqlite(&db, options(journal), StoreOptions::default()).unwrap());
    Place { dir, db, journal }
}

impl Place {
    /// A fresh copy of the template database, in its own directory.
    fn copy(&self, name: &str) -> (PathBuf, PathBuf) {
        let dir = self.dir.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        let db = dir.join("store.sqlite");
        std::fs::copy(&self.db, &db).unwrap();
        (db, dir.join("report.txt"))
    }
}

/// What a child reported.
#[derive(Debug, Default)]
struct Report {
    model: Model,
    /// Per session: events acknowledged (or loaded) so far.
    acked: BTreeMap<String, u64>,
    /// `failed` lines: (session, error).
    failures: Vec<(String, String)>,
    /// After each failed append, whether the store still held exactly the
    /// acknowledged log.
    unchanged: u64,
    /// Reads that found the store changed after a failed append: (session,
    /// detail, and for an append [events stored, acknowledged, in the
    /// failed batch]).
    changed: Vec<(String, String, Vec<u64>)>,
    unreadable: Vec<String>,
    gave_up: bool,
    /// Operations the shim counted and failed, when the child finished.
    ops: Option<(u64, u64)>,
    trace: Vec<(OpKind, Role)>,
    /// Where each workload step began (its first operation's index).
    steps: Vec<u64>,
    /// Where each phase began (its first operation's index), and its name.
    phases: Vec<(u64, String)>,
}

/// Reads a child's report; `base` holds what was sent and acknowledged
/// before the child started (a recovery child continues a crashed one).
fn parse(text: &str, base: Option<&Report>) -> Report {
    let mut r = Report {
        model: base.map(|b| b.model.clone()).unwrap_or_default(),
        acked: base.map(|b| b.acked.clone()).unwrap_or_default(),
        ..Report::default()
    };
    let mut view: Vec<Event> = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.splitn(3, '\t').collect();
        match fields[..] {
            ["sent", name, json] => {
                let event = Event::from_json(json.as_bytes()).unwrap();
                r.model.sent(name, &[event]);
            }
            ["acked", name, durable] => {
                let durable = durable.parse().unwrap();
                // synchronous=FULL: an acknowledged batch is synced.
                r.model.synced(name, durable);
                r.acked.insert(name.to_owned(), durable);
            }
            ["view", _, json] => view.push(Event::from_json(json.as_bytes()).unwrap()),
            ["recovered", name, n] => {
                assert_eq!(view.len(), n.parse::<usize>().unwrap(), "{line}");
                let log = loaded(&r.model, name, &std::mem::take(&mut view));
                r.acked.insert(name.to_owned(), log.len() as u64);
                r.model.recovered(name, log);
            }
            ["failed", name, error] => r.failures.push((name.to_owned(), error.to_owned())),
            ["unchanged", _] => r.unchanged += 1,
            ["violation", name, detail] => panic!("{name}: {detail}"),
            ["changed", name, detail] => {
                let counts: Vec<u64> = detail.split('\t').filter_map(|n| n.parse().ok()).collect();
                r.changed.push((name.to_owned(), detail.to_owned(), counts));
            }
            ["unreadable", name, error] => r.unreadable.push(format!("{name}: {error}")),
            ["gave-up"] => r.gave_up = true,
            ["step", _, ops] => r.steps.push(ops.parse().unwrap()),
            ["phase", name, ops] => r.phases.push((ops.parse().unwrap(), name.to_owned())),
            ["ops", ops, faults] => r.ops = Some((ops.parse().unwrap(), faults.parse().unwrap())),
            ["trace", kind, role] => r
                .trace
                .push((OpKind::parse(kind).unwrap(), Role::parse(role).unwrap())),
            _ => panic!("unexpected report line {line:?}"),
        }
    }
    r
}

/// The log a child loaded (`view`, parsed from its JSON lines), which must
/// be what it had sent of the session plus exactly the closers recovery
/// owes it — rebuilt from the model, because JSON does not carry an event's
/// key-order flag when only `surfaceOp` is present: the closers recovery
/// writes hold it set (`surfaceOp` first, as upstream writes them), an event
/// parsed from their JSON does not, and `Event`'s equality compares it.
fn loaded(model: &Model, name: &str, view: &[Event]) -> Vec<Event> {
    let sent = model.sessions().get(name).map_or(&[][..], |w| &w.sent[..]);
    let k = view
        .iter()
        .zip(sent)
        .take_while(|(a, b)| a.to_json() == b.to_json())
        .count();
    let mut log = sent[..k].to_vec();
    log.extend(interrupted_turn_closers(&log));
    let json = |events: &[Event]| events.iter().map(Event::to_json).collect::<Vec<_>>();
    assert_eq!(
        json(view),
        json(&log),
        "{name}: a load in the child gave more than the sent prefix and its closers"
    );
    log
}

/// Runs a child to its end (or its crash) and returns its report (`base`:
/// see [`parse`]).
fn run_child(spec: &Spec, context: &str) -> (Report, std::process::ExitStatus) {
    run_child_after(spec, None, context)
}

fn run_child_after(
    spec: &Spec,
    base: Option<&Report>,
    context: &str,
) -> (Report, std::process::ExitStatus) {
    let mut child = crate::support::native(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crashlab::sqlite::child_process",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env(CHILD_ENV, spec.encode())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Reaped on every path: a child that hangs is killed.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{context}: the child ran for more than 60 s");
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stderr);
    }
    let crashed = status.signal() == Some(9);
    assert!(
        crashed || status.success(),
        "{context}: the child failed ({status}): {stderr}"
    );
    let text = std::fs::read_to_string(&spec.out).unwrap_or_default();
    (parse(&text, base), status)
}

/// Counts for the printed summary and the lower bounds.
#[derive(Debug, Default)]
struct Tally {
    runs: u64,
    crashes: u64,
    acked_events_checked: u64,
    closed_turns: u64,
    /// Sessions whose batch in flight survived whole / vanished whole.
    in_flight_kept: u64,
    in_flight_lost: u64,
    faults: u64,
    failed_calls: u64,
    by_journal: BTreeMap<String, u64>,
    /// Crash or fault points by the operation they hit.
    by_op: BTreeMap<String, u64>,
}

/// The oracle on a child's database, plus SQLite's atomicity: every session
/// keeps all it acknowledged and at most the batch in flight, whole.
fn check_run(
    db: &Path,
    journal: JournalMode,
    report: &mut Report,
    context: &str,
    tally: &mut Tally,
) {
    let sent: BTreeMap<String, u64> = report
        .model
        .sessions()
        .iter()
        .map(|(name, w)| (name.clone(), w.sent.len() as u64))
        .collect();
    let kept: BTreeMap<String, Option<Vec<Event>>> = {
        let store = Store::open_sqlite(db, options(journal), StoreOptions::default())
            .unwrap_or_else(|e| panic!("{context}: the store does not open: {e}"));
        sent.keys()
            .map(|name| {
                let events = match store.inspect(name) {
                    // With the closers recovery owes the log: a repair a
                    // load committed and a power loss undid comes back the
                    // same.
                    Ok(view) => Some(view.events),
                    Err(Error::NotFound { .. }) => None,
                    Err(e) => panic!("{context}: {name}: inspect: {e}"),
                };
                (name.clone(), events)
            })
            .collect()
    };
    for (name, w) in report.model.sessions() {
        let acked = report.acked.get(name).copied().unwrap_or(0);
        let got = kept[name].as_ref().map_or(0, |events| {
            events
                .iter()
                .zip(&w.sent)
                .take_while(|(a, b)| a == b)
                .count() as u64
        });
        assert!(
            got == acked || got == sent[name],
            "{context}: {name}: kept {got} events; acknowledged {acked}, sent {} (a batch is \
             all or nothing, an acknowledged one is never lost); first difference: stored {:?}, \
             sent {:?}",
            sent[name],
            kept[name]
                .as_ref()
                .and_then(|events| events.get(got as usize))
                .map(Event::to_json),
            w.sent.get(got as usize).map(Event::to_json),
        );
        if sent[name] > acked {
            if got == acked {
                tally.in_flight_lost += 1;
            } else {
                tally.in_flight_kept += 1;
            }
        }
    }
    let checked = oracle::check_sqlite(db, &options(journal), &mut report.model)
        .unwrap_or_else(|e| panic!("{context}: oracle violation: {e}"));
    tally.acked_events_checked += checked.acked_events;
    tally.closed_turns += checked.closed_turns;
    tally.runs += 1;
    *tally.by_journal.entry(journal.to_string()).or_default() += 1;
}

/// The healthy run of the workload: its operations, each labelled with its
/// step and file, and its final logs.
struct Reference {
    ops: u64,
    trace: Vec<(OpKind, Role)>,
    steps: Vec<u64>,
    phases: Vec<(u64, String)>,
    /// Where the final close begins.
    closing: u64,
    /// The final log of each session as the child left it.
    logs: BTreeMap<String, Vec<Event>>,
}

impl Reference {
    fn run(place: &Place) -> Reference {
        let context = format!("journal {}: healthy run", place.journal);
        let (db, out) = place.copy("reference");
        let mut spec = Spec::new(&db, &out, place.journal);
        spec.trace = true;
        let (mut report, status) = run_child(&spec, &context);
        assert!(status.success(), "{context}");
        assert!(
            !report.gave_up && report.failures.is_empty(),
            "{context}: {report:?}"
        );
        let (ops, faults) = report.ops.expect("finished");
        assert_eq!((faults, report.trace.len() as u64), (0, ops), "{context}");
        let sessions = report.model.sessions();
        assert_eq!(sessions.len(), SESSIONS, "{context}");
        for (name, w) in sessions {
            assert_eq!(w.acked, w.sent.len() as u64, "{context}: {name}");
        }
        assert!(
            sessions[&id(0)]
                .sent
                .iter()
                .any(|e| e.data().get().contains("interrupted")),
            "{context}: a release left a turn open, which the load closed"
        );
        let logs = sessions
            .iter()
            .map(|(name, w)| (name.clone(), w.sent.clone()))
            .collect();
        let steps = report.steps.clone();
        let phases = report.phases.clone();
        let closing = phases.last().map(|(k, _)| *k).expect("finished");
        check_run(
            &db,
            place.journal,
            &mut report,
            &context,
            &mut Tally::default(),
        );
        // The same workload makes the same operations every time.
        let (_, out2) = place.copy("reference-again");
        let mut again = spec.clone();
        again.db = place.dir.path().join("reference-again/store.sqlite");
        again.out = out2;
        let (report2, _) = run_child(&again, &context);
        assert_eq!(
            report2.trace, report.trace,
            "{context}: operations differ between runs"
        );
        Reference {
            ops,
            trace: report.trace,
            steps,
            phases,
            closing,
            logs,
        }
    }

    /// Whether operation `k` is the sync of the rollback journal that ends a
    /// commit, after the database was synced (`truncate`: after the journal
    /// was truncated; `persist`: after its header was zeroed). SQLite has
    /// committed the transaction by then and reports this sync's failure as
    /// the commit's.
    fn settles_a_commit(&self, k: u64) -> bool {
        let k = k as usize;
        k >= 2
            && k < self.trace.len()
            && self.trace[k] == (OpKind::Sync, Role::Journal)
            && matches!(
                self.trace[k - 1],
                (OpKind::Truncate | OpKind::Write, Role::Journal)
            )
            && self.trace[k - 2] == (OpKind::Sync, Role::Db)
    }

    /// What the operation at `k` is: the phase it belongs to (opening the
    /// store, loading and repairing a session, an append, the close of a
    /// reopen, the final close), its file and its kind.
    fn label(&self, k: u64) -> String {
        if k >= self.ops {
            return "after the last operation".into();
        }
        let phase = self
            .phases
            .iter()
            .rev()
            .find(|(start, _)| *start <= k)
            .map_or("open", |(_, name)| name.as_str());
        let (kind, role) = self.trace[k as usize];
        format!("{phase}: {} {}", role.name(), kind.name())
    }
}

/// Up to `per` points spread evenly over `points` (all of them when
/// `per` is at least their number).
fn spread(points: &[u64], per: usize) -> Vec<u64> {
    if points.len() <= per {
        return points.to_vec();
    }
    (0..per)
        .map(|i| points[i * (points.len() - 1) / (per - 1).max(1)])
        .collect()
}

/// The reference's operations grouped by [`Reference::label`] (the step
/// kind, the file, the operation kind), in order.
fn groups(reference: &Reference) -> Vec<Vec<u64>> {
    let mut groups: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for k in 0..=reference.ops {
        groups.entry(reference.label(k)).or_default().push(k);
    }
    groups.into_values().collect()
}

/// Where to crash, and how: from `TURNWAL_CRASHLAB_SCALE` 4 on every
/// operation in every mode; else per group of operations ([`groups`]) one
/// point in a mode that rotates from group to group (scale 1), its first,
/// middle and last point each in another mode (2), or those three in every
/// mode (3).
fn crash_plan(reference: &Reference, rotation: usize) -> Vec<(u64, CrashMode)> {
    let modes = CrashMode::ALL;
    if scale() >= 4 {
        return (0..=reference.ops)
            .flat_map(|k| modes.map(|m| (k, m)))
            .collect();
    }
    let mut plan = Vec::new();
    for (g, ks) in groups(reference).iter().enumerate() {
        let three = spread(ks, 3);
        match scale() {
            1 => plan.push((ks[ks.len() / 2], modes[(g + rotation) % modes.len()])),
            2 => plan.extend(
                three
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| (k, modes[(g + rotation + i) % modes.len()])),
            ),
            _ => plan.extend(three.iter().flat_map(|&k| modes.map(|m| (k, m)))),
        }
    }
    plan.sort_unstable_by_key(|&(k, m)| (k, m.name()));
    plan.dedup();
    plan
}

#[test]
fn crash_at_every_file_operation() {
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut per_journal = Vec::new();
    for (j, journal) in JOURNALS.into_iter().enumerate() {
        let place = template(journal);
        let reference = Reference::run(&place);
        let before = tally.crashes;
        for (k, mode) in crash_plan(&reference, j) {
            let label = reference.label(k);
            let context = format!(
                "journal {journal}, {} at operation {k} of {} ({label})",
                mode.name(),
                reference.ops
            );
            let (db, out) = place.copy(&format!("{}-{k}", mode.name()));
            let mut spec = Spec::new(&db, &out, journal);
            if k < reference.ops {
                spec.crash_at = Some(k);
                spec.crash_mode = mode;
            } else {
                spec.end = End::Crash(mode);
            }
            let (mut report, status) = run_child(&spec, &context);
            assert_eq!(status.signal(), Some(9), "{context}: did not crash");
            assert!(
                report.failures.is_empty() && report.changed.is_empty(),
                "{context}: {report:?}"
            );
            check_run(&db, journal, &mut report, &context, &mut tally);
            tally.crashes += 1;
            *tally.by_op.entry(label).or_default() += 1;
            std::fs::remove_dir_all(db.parent().unwrap()).unwrap();
        }
        per_journal.push(format!(
            "{journal}: {} operations, {} crashes",
            reference.ops,
            tally.crashes - before
        ));
    }
    println!(
        "sqlite crash_at_every_file_operation: {} crashes ({}), {} acknowledged events checked, \
         {} turns closed by recovery, batches in flight kept whole {} / lost whole {}; by \
         operation {:?}; {:.1?}",
        tally.crashes,
        per_journal.join("; "),
        tally.acked_events_checked,
        tally.closed_turns,
        tally.in_flight_kept,
        tally.in_flight_lost,
        tally.by_op,
        started.elapsed()
    );
    assert!(tally.crashes >= 40, "{tally:?}");
    assert!(tally.in_flight_lost > 0, "{tally:?}");
    assert!(tally.closed_turns > 40, "{tally:?}");
}

/// Fault points: per group of operations ([`groups`], without the point
/// after the last operation) its middle operation (scale 1), `scale + 1`
/// points spread over it (2, 3), or every operation (from 4 on); and the
/// first sync that ends a rollback-journal commit in an append and in a
/// repair.
fn fault_points(reference: &Reference) -> Vec<u64> {
    let mut points: Vec<u64> = groups(reference)
        .iter()
        .map(|ks| {
            ks.iter()
                .copied()
                .filter(|&k| k < reference.ops)
                .collect::<Vec<_>>()
        })
        .filter(|ks| !ks.is_empty())
        .flat_map(|ks| match scale() {
            1 => vec![ks[ks.len() / 2]],
            n @ 2..=3 => spread(&ks, n as usize + 1),
            _ => ks,
        })
        .collect();
    // The syncs that end a rollback-journal commit (see
    // `Reference::settles_a_commit`): the first of an append and the first
    // of a repair.
    for phase in ["append", "load+repair"] {
        points.extend(
            (0..reference.ops)
                .find(|&k| reference.settles_a_commit(k) && reference.label(k).starts_with(phase)),
        );
    }
    points.sort_unstable();
    points.dedup();
    points
}

/// How an injected fault is run.
#[derive(Clone, Copy, Debug)]
enum FaultRun {
    /// The operation fails once; the child retries what failed.
    Transient,
    /// It and every later operation of its kind fail; the child gives up,
    /// then its process ends in this way.
    Persistent(End),
}

#[test]
fn every_fault_fails_the_call_and_loses_nothing() {
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut transient_runs = 0;
    let mut persistent_runs = 0;
    let (mut settled_runs, mut settled_visible) = (0, 0);
    let mut per_journal = Vec::new();
    for (j, journal) in JOURNALS.into_iter().enumerate() {
        let place = template(journal);
        let reference = Reference::run(&place);
        let before = tally.runs;
        for (i, k) in fault_points(&reference).into_iter().enumerate() {
            let label = reference.label(k);
            // A fault in the final close needs the close to happen.
            let crash_end = if k >= reference.closing {
                End::Close
            } else {
                End::Crash(CrashMode::ALL[(i + j) % CrashMode::ALL.len()])
            };
            let ends = [End::Close, crash_end];
            let runs = [FaultRun::Transient, FaultRun::Persistent(ends[(i + j) % 2])];
            // Both runs from scale 2 on; else one, in turn.
            let runs = if scale() >= 2 {
                &runs[..]
            } else {
                &runs[(i + j) % 2..(i + j) % 2 + 1]
            };
            for &run in runs {
                let full = (i + j) % 2 == 1;
                let context = format!(
                    "journal {journal}, {run:?} fault{} at operation {k} of {} ({label})",
                    if full { " (disk full)" } else { "" },
                    reference.ops
                );
                let (db, out) = place.copy(&format!("fault-{k}-{run:?}"));
                let mut spec = Spec::new(&db, &out, journal);
                spec.fault_at = Some(k);
                spec.full = full;
                if let FaultRun::Persistent(end) = run {
                    spec.persistent = true;
                    spec.end = end;
                }
                let (mut report, status) = run_child(&spec, &context);
                assert_eq!(
                    status.signal() == Some(9),
                    matches!(spec.end, End::Crash(_)),
                    "{context}: {status}"
                );
                let (_, faults) = report.ops.expect("the child reports its end");
                assert!(faults >= 1, "{context}: the fault was never met");
                // A failed append leaves the store exactly as it was, except
                // when the operation that failed was the sync that ends a
                // rollback-journal commit after the database was synced
                // (docs/RELIABILITY.md, "Known limits"): SQLite has then
                // committed the batch, whole, and reports that sync's
                // failure as the commit's.
                let settled = reference.settles_a_commit(k);
                for (name, detail, counts) in &report.changed {
                    assert!(
                        settled && counts.len() == 3 && counts[0] == counts[1] + counts[2],
                        "{context}: {name}: the store changed after a failed append \
                         (stored, acknowledged, failed batch: {detail})"
                    );
                }
                if settled {
                    settled_runs += 1;
                    settled_visible += u64::from(!report.changed.is_empty());
                }
                let appends = report
                    .failures
                    .iter()
                    .filter(|(name, error)| {
                        name != "-" && !error.starts_with("load:") && !error.starts_with("close:")
                    })
                    .count() as u64;
                assert_eq!(
                    report.unchanged + report.changed.len() as u64 + report.unreadable.len() as u64,
                    appends,
                    "{context}: every failed append is followed by a look at the store"
                );
                // The retry of a batch SQLite had committed is refused: the
                // session exists, its stored next seq is past the batch.
                let refusal =
                    |e: &str| e.contains("stored next seq is") || e.contains("already exists");
                for (name, error) in &report.failures {
                    assert!(
                        if refusal(error) {
                            settled
                        } else {
                            error.contains(&db.display().to_string())
                        },
                        "{context}: {name}: the error names the database: {error}"
                    );
                }
                match run {
                    FaultRun::Transient if settled && report.gave_up => {
                        // The retry of the batch SQLite had committed is
                        // refused: the store has it.
                        assert!(
                            report.failures.last().is_some_and(|(_, e)| refusal(e)),
                            "{context}: {report:?}"
                        );
                        transient_runs += 1;
                    }
                    FaultRun::Transient => {
                        // Retried once and done: the logs the healthy run made.
                        assert!(
                            !report.gave_up && report.unreadable.is_empty(),
                            "{context}: {report:?}"
                        );
                        let logs: BTreeMap<String, Vec<Event>> = report
                            .model
                            .sessions()
                            .iter()
                            .map(|(name, w)| (name.clone(), w.sent.clone()))
                            .collect();
                        assert_eq!(logs, reference.logs, "{context}: the logs differ");
                        transient_runs += 1;
                    }
                    FaultRun::Persistent(_) => persistent_runs += 1,
                }
                tally.failed_calls += report.failures.len() as u64;
                tally.faults += faults;
                check_run(&db, journal, &mut report, &context, &mut tally);
                *tally.by_op.entry(label.clone()).or_default() += 1;
                std::fs::remove_dir_all(db.parent().unwrap()).unwrap();
            }
        }
        per_journal.push(format!("{journal}: {} runs", tally.runs - before));
    }
    println!(
        "sqlite every_fault_fails_the_call_and_loses_nothing: {} runs ({}; {transient_runs} \
         transient, {persistent_runs} persistent; {settled_runs} failed the sync that ends a \
         rollback-journal commit, {settled_visible} of them left the batch committed and \
         visible), {} operations failed, {} calls failed, {} \
         acknowledged events checked, batches in flight kept whole {} / lost whole {}; by \
         operation {:?}; {:.1?}",
        tally.runs,
        per_journal.join("; "),
        tally.faults,
        tally.failed_calls,
        tally.acked_events_checked,
        tally.in_flight_kept,
        tally.in_flight_lost,
        tally.by_op,
        started.elapsed()
    );
    assert!(transient_runs >= 20 && persistent_runs >= 20, "{tally:?}");
    assert!(settled_visible >= 2, "{settled_runs} {settled_visible}");
    assert!(tally.failed_calls >= tally.runs / 2, "{tally:?}");
}

/// Crashed images to recover: per journal mode, the workload crashed (each
/// mode in turn) in the middle of the append whose batch is the longest,
/// and in the middle of the first release and repair.
fn images(reference: &Reference, journal_index: usize) -> Vec<(u64, CrashMode)> {
    let appends: Vec<(usize, usize)> = workload()
        .iter()
        .enumerate()
        .filter_map(|(i, step)| match step {
            Step::Append(_, n) => Some((i, *n)),
            _ => None,
        })
        .collect();
    let longest = appends.iter().max_by_key(|(_, n)| *n).unwrap().0;
    let repair = workload()
        .iter()
        .position(|s| matches!(s, Step::Close(_)))
        .unwrap();
    let middle = |step: usize| {
        let start = reference.steps[step];
        let end = reference.steps[step + 1];
        start + (end - start) / 2
    };
    let modes = CrashMode::ALL;
    vec![
        (middle(longest), modes[journal_index % modes.len()]),
        (middle(repair), modes[(journal_index + 1) % modes.len()]),
    ]
}

#[test]
fn crash_inside_recovery_converges() {
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut images_recovered = 0;
    let mut recovery_ops = 0;
    for (j, journal) in JOURNALS.into_iter().enumerate() {
        let place = template(journal);
        let reference = Reference::run(&place);
        for (image_k, image_mode) in images(&reference, j) {
            let image_context = format!(
                "journal {journal}, image: {} at operation {image_k} ({})",
                image_mode.name(),
                reference.label(image_k)
            );
            let (image_db, image_out) = place.copy(&format!("image-{image_k}"));
            let mut spec = Spec::new(&image_db, &image_out, journal);
            spec.crash_at = Some(image_k);
            spec.crash_mode = image_mode;
            let (image, status) = run_child(&spec, &image_context);
            assert_eq!(status.signal(), Some(9), "{image_context}");
            let image_dir = image_db.parent().unwrap();

            // One uninterrupted recovery, in a child like the others.
            let copy_image = |name: &str| {
                let dir = place.dir.path().join(name);
                std::fs::create_dir(&dir).unwrap();
                for entry in std::fs::read_dir(image_dir).unwrap() {
                    let entry = entry.unwrap();
                    if entry.file_type().unwrap().is_file()
                        && entry
                            .file_name()
                            .to_string_lossy()
                            .starts_with("store.sqlite")
                    {
                        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
                    }
                }
                (dir.join("store.sqlite"), dir.join("report.txt"))
            };
            let (clean_db, clean_out) = copy_image(&format!("clean-recovery-{image_k}"));
            let mut clean = Spec::new(&clean_db, &clean_out, journal);
            clean.recover_only = true;
            clean.trace = true;
            let (mut clean_report, status) = run_child_after(&clean, Some(&image), &image_context);
            assert!(status.success(), "{image_context}: {clean_report:?}");
            assert!(
                clean_report.failures.is_empty() && !clean_report.gave_up,
                "{image_context}: {clean_report:?}"
            );
            let (n, _) = clean_report.ops.expect("finished");
            check_run(
                &clean_db,
                journal,
                &mut clean_report,
                &image_context,
                &mut tally,
            );
            let expected = clean_report.model.clone();
            // Every operation of the recovery in every mode from scale 3
            // on; each in one mode (rotating) at scale 2; else 6 of them.
            let all: Vec<u64> = (0..n).collect();
            let rotating = |k: u64| (k, CrashMode::ALL[(k as usize + j) % CrashMode::ALL.len()]);
            let plan: Vec<(u64, CrashMode)> = match scale() {
                1 => spread(&all, 6).into_iter().map(rotating).collect(),
                2 => all.into_iter().map(rotating).collect(),
                _ => all
                    .into_iter()
                    .flat_map(|k| CrashMode::ALL.map(|m| (k, m)))
                    .collect(),
            };
            for (k, mode) in plan {
                let context = format!(
                    "{image_context}; recovery crashed ({}) at its operation {k} of {n} ({:?})",
                    mode.name(),
                    clean_report.trace[k as usize]
                );
                let (db, out) = copy_image(&format!("recovery-{image_k}-{k}-{}", mode.name()));
                let mut spec = Spec::new(&db, &out, journal);
                spec.recover_only = true;
                spec.crash_at = Some(k);
                spec.crash_mode = mode;
                let (mut report, status) = run_child_after(&spec, Some(&image), &context);
                assert_eq!(status.signal(), Some(9), "{context}");
                // Recovering what the interrupted recovery left: the oracle
                // against what the workload sent and acknowledged (and the
                // recovery child loaded before it died), and the logs one
                // uninterrupted recovery gives.
                check_run(&db, journal, &mut report, &context, &mut tally);
                let logs = |m: &Model| {
                    m.sessions()
                        .iter()
                        .map(|(name, w)| (name.clone(), w.sent.clone()))
                        .collect::<BTreeMap<_, _>>()
                };
                assert_eq!(
                    logs(&report.model),
                    logs(&expected),
                    "{context}: recovery did not converge on the uninterrupted one's logs"
                );
                tally.crashes += 1;
                recovery_ops += 1;
                std::fs::remove_dir_all(db.parent().unwrap()).unwrap();
            }
            images_recovered += 1;
        }
    }
    println!(
        "sqlite crash_inside_recovery_converges: {images_recovered} crashed images, {recovery_ops} \
         crashes inside their recovery (SQLite's rollback or WAL replay, turnwal's repairs, the \
         close), {} acknowledged events checked; {:.1?}",
        tally.acked_events_checked,
        started.elapsed()
    );
    assert!(images_recovered >= 8 && tally.crashes >= 8 * 6, "{tally:?}");
}
