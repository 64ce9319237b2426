//! Operation sequences over a simulated disk, checked against the oracle:
//! the structure-aware fuzz target decodes them from bytes, and the
//! crash-point enumeration runs fixed ones with the power cut at every
//! operation.

use std::path::{Path, PathBuf};

use super::oracle::{self, Model, Target};
use super::workload::Generator;
use crate::simdisk::{CrashMode, Fault, FaultError, OpKind, SimDisk};
use turnwal::backend::SyncMode;
use turnwal::error::Error;
use turnwal::event::Event;
use turnwal::rng::Rng;
use turnwal::store::{Store, StoreOptions};

/// Sessions a run writes to.
pub const SESSIONS: usize = 3;

/// One step of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Append the next `events` events of a session (creating it if this
    /// process has not), or re-send a batch a failure left unaccepted.
    Append {
        /// Which session.
        session: usize,
        /// How many events.
        events: usize,
    },
    /// Flush a session.
    Flush {
        /// Which session.
        session: usize,
    },
    /// Flush and release a session.
    Close {
        /// Which session.
        session: usize,
    },
    /// Compact a session (seal its closed turns by an atomic rewrite).
    Compact {
        /// Which session.
        session: usize,
    },
    /// The store's idle work on a session (`Store::seal_due`: a seal when
    /// enough closed turns are plain).
    SealDue {
        /// Which session.
        session: usize,
    },
    /// Cut the power after this many more disk operations.
    CutPowerAfter(u64),
    /// Arm a fault.
    Fault(Fault),
    /// Make writes short (or not).
    ShortWrites(bool),
    /// Crash (the process dies, the disk keeps what `mode` keeps), recover
    /// every session and check the oracle.
    Crash(CrashMode),
}

/// Decodes an operation sequence from arbitrary bytes (at most `limit` ops).
/// Every byte string decodes to something.
pub fn decode(bytes: &[u8], limit: usize) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut it = bytes.iter().copied();
    let arg = |it: &mut dyn Iterator<Item = u8>| it.next().unwrap_or(0) as u64;
    while ops.len() < limit {
        let Some(code) = it.next() else { break };
        let op = match code % 16 {
            0..=6 => Op::Append {
                session: arg(&mut it) as usize % SESSIONS,
                events: 1 + arg(&mut it) as usize % 24,
            },
            7 => Op::Flush {
                session: arg(&mut it) as usize % SESSIONS,
            },
            8 => Op::Close {
                session: arg(&mut it) as usize % SESSIONS,
            },
            9 | 10 => Op::CutPowerAfter(arg(&mut it) % 12),
            11 | 12 => {
                let a = arg(&mut it);
                let kind = [
                    OpKind::Write,
                    OpKind::Sync,
                    OpKind::SetLen,
                    OpKind::Create,
                    OpKind::Rename,
                    OpKind::SyncDir,
                ][(a % 6) as usize];
                Op::Fault(Fault {
                    kind,
                    nth: arg(&mut it) % 6,
                    error: if a & 8 == 0 {
                        FaultError::Io
                    } else {
                        FaultError::NoSpace
                    },
                    persistent: a & 16 != 0,
                })
            }
            13 => Op::ShortWrites(arg(&mut it) % 2 == 1),
            14 => Op::Crash(CrashMode::ALL[arg(&mut it) as usize % CrashMode::ALL.len()]),
            _ => {
                // One argument byte picks the session and which of the two.
                let a = arg(&mut it) as usize;
                let session = a % SESSIONS;
                if (a / SESSIONS).is_multiple_of(2) {
                    Op::Compact { session }
                } else {
                    Op::SealDue { session }
                }
            }
        };
        ops.push(op);
    }
    ops
}

/// Counts from a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Crashes simulated (each followed by a full oracle check).
    pub crashes: u64,
    /// Faults the disk injected.
    pub faults: u64,
    /// Appends that returned an error.
    pub failed_appends: u64,
    /// Acknowledged events the oracle found intact.
    pub acked_events_checked: u64,
    /// Sessions recovery closed with synthetic closers.
    pub closed_turns: u64,
}

/// A workload in progress: a store over a simulated disk, one generator per
/// session, the model of what was sent and acknowledged.
pub struct Run {
    target: Target,
    root: PathBuf,
    disk: SimDisk,
    store: Store,
    options: StoreOptions,
    model: Model,
    rng: Rng,
    gens: Vec<Generator>,
    /// A batch a failure left unaccepted, re-sent by the next append.
    unaccepted: Vec<Option<Vec<Event>>>,
    created: Vec<bool>,
    /// Sessions whose stored log may have moved on without the generator
    /// (closed and not yet re-read).
    stale: Vec<bool>,
    /// Stats so far.
    pub stats: Stats,
    /// The run's seed (a new realistic session follows from it).
    seed: u64,
    workload: Workload,
}

/// What the sessions of a run hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// The synthetic workload ([`Generator::new`]): every shape the
    /// contract allows, in small random steps.
    Synthetic,
    /// Realistic sessions ([`Generator::realistic`]): streamed deltas in
    /// chunk runs, as harness sessions are.
    Realistic,
}

/// Session `session`'s generator for a new session.
fn fresh(workload: Workload, seed: u64, session: usize) -> Generator {
    match workload {
        Workload::Synthetic => Generator::new(),
        Workload::Realistic => Generator::realistic(seed ^ session as u64),
    }
}

fn id(session: usize) -> String {
    format!("session-{session}")
}

impl Run {
    /// A fresh run of a WAL store on an empty disk.
    pub fn new(seed: u64, sync: SyncMode) -> Run {
        Run::on(Target::Wal, seed, sync)
    }

    /// A fresh run of a store of kind `target` on an empty disk.
    pub fn on(target: Target, seed: u64, sync: SyncMode) -> Run {
        let root = PathBuf::from("/store");
        let disk = SimDisk::new(seed);
        let options = StoreOptions {
            sync,
            ..StoreOptions::default()
        };
        Run {
            store: target.store_on(&disk, &root, options),
            target,
            root,
            disk,
            options,
            model: Model::new(),
            rng: Rng::new(seed),
            gens: vec![Generator::new(); SESSIONS],
            unaccepted: vec![None; SESSIONS],
            created: vec![false; SESSIONS],
            stale: vec![false; SESSIONS],
            stats: Stats::default(),
            seed,
            workload: Workload::Synthetic,
        }
    }

    /// The run with sessions of `workload` (before its first operation).
    pub fn with_workload(mut self, workload: Workload) -> Run {
        self.workload = workload;
        self.gens = (0..SESSIONS)
            .map(|s| fresh(workload, self.seed, s))
            .collect();
        self
    }

    /// The disk.
    pub fn disk(&self) -> &SimDisk {
        &self.disk
    }

    /// What was sent and acknowledged so far.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The store root on the disk.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Applies one operation; an `Err` is an oracle violation.
    pub fn apply(&mut self, op: &Op) -> Result<(), String> {
        // With the power off the process is gone: only the crash follows.
        if self.disk.is_dead() && !matches!(op, Op::Crash(_)) {
            return Ok(());
        }
        match op {
            Op::Append { session, events } => self.append(*session, *events),
            Op::Flush { session } => {
                if self.stale[*session] {
                    return self.resync(*session);
                }
                if let Ok(durable) = self.store.flush(&id(*session)) {
                    self.model.synced(&id(*session), durable);
                }
                Ok(())
            }
            Op::Close { session } => {
                // Closing ends this process's hold on the session; a turn it
                // left open is closed as interrupted when it is opened again,
                // so resume from what is stored.
                if self.store.close(&id(*session)).is_ok() {
                    self.stale[*session] = true;
                    self.resync(*session)?;
                }
                Ok(())
            }
            Op::Compact { session } => {
                if self.stale[*session] {
                    return self.resync(*session);
                }
                // A compaction first makes every accepted event durable.
                if self.store.compact(&id(*session)).is_ok()
                    && let Ok(durable) = self.store.flush(&id(*session))
                {
                    self.model.synced(&id(*session), durable);
                }
                Ok(())
            }
            Op::SealDue { session } => {
                if self.stale[*session] {
                    return self.resync(*session);
                }
                // A seal first makes every accepted event durable.
                if matches!(self.store.seal_due(&id(*session)), Ok(true))
                    && let Ok(durable) = self.store.flush(&id(*session))
                {
                    self.model.synced(&id(*session), durable);
                }
                Ok(())
            }
            Op::CutPowerAfter(n) => {
                self.disk.cut_power_at(self.disk.ops() + n);
                Ok(())
            }
            Op::Fault(fault) => {
                self.disk.inject(*fault);
                Ok(())
            }
            Op::ShortWrites(on) => {
                self.disk.short_writes(*on);
                Ok(())
            }
            Op::Crash(mode) => self.crash(*mode),
        }
    }

    fn append(&mut self, session: usize, events: usize) -> Result<(), String> {
        let name = id(session);
        if self.stale[session] {
            self.resync(session)?;
            if self.stale[session] {
                return Ok(()); // still unreadable (an injected fault)
            }
        }
        if !self.created[session] {
            match self.store.create(self.target.header(&name)) {
                Ok(()) | Err(Error::AlreadyExists { .. }) => self.created[session] = true,
                Err(_) => return Ok(()),
            }
        }
        let resent = self.unaccepted[session].is_some();
        let batch = match self.unaccepted[session].take() {
            Some(batch) => batch,
            None => self.gens[session].batch(&mut self.rng, events),
        };
        self.model.sent(&name, &batch);
        match self.store.append(&name, &batch) {
            Ok(receipt) => {
                if receipt.next_seq != batch.last().map_or(0, |e| e.seq() + 1) {
                    return Err(format!(
                        "{name}: append returned next seq {}",
                        receipt.next_seq
                    ));
                }
                // Materialization fsyncs the first batch; otherwise only the
                // durable modes fsync before acknowledging.
                let first = batch[0].seq() == 0;
                if self.options.sync != SyncMode::Never || first {
                    self.model.synced(
                        &name,
                        if first {
                            batch.len() as u64
                        } else {
                            receipt.durable
                        },
                    );
                }
                self.model.acked(&name, receipt.durable);
                Ok(())
            }
            Err(Error::Io { .. } | Error::Poisoned { .. } | Error::NotFound { .. }) => {
                self.stats.failed_appends += 1;
                self.unaccepted[session] = Some(batch);
                Ok(())
            }
            // The session was reopened (and its open turn closed) since this
            // batch was first sent: continue from what is stored.
            Err(Error::SeqMismatch { .. }) if resent => self.resync(session),
            Err(e) => Err(format!("{name}: unexpected append error: {e}")),
        }
    }

    /// Continues a session from what the store holds now, checking that
    /// every acknowledged event is still there.
    fn resync(&mut self, session: usize) -> Result<(), String> {
        let name = id(session);
        let Ok(view) = self.store.load(&name) else {
            return Ok(());
        };
        if let Some(written) = self.model.sessions().get(&name) {
            let acked = written.acked as usize;
            if view.events.len() < acked || view.events[..acked] != written.sent[..acked] {
                return Err(format!(
                    "{name}: acknowledged events changed while the process lived"
                ));
            }
        }
        self.gens[session] = self.gens[session].resume_like(&view.events);
        self.unaccepted[session] = None;
        self.stale[session] = false;
        self.model.recovered(&name, view.events);
        Ok(())
    }

    /// The process dies and the disk keeps what `mode` keeps; every session
    /// is recovered and checked, and the run continues from the recovered
    /// logs.
    pub fn crash(&mut self, mode: CrashMode) -> Result<(), String> {
        self.stats.faults = self.disk.faults_injected();
        let placeholder = self
            .target
            .store_on(&SimDisk::new(0), &self.root, self.options);
        drop(std::mem::replace(&mut self.store, placeholder));
        let after = self.disk.crash(mode);
        let checked = oracle::check_on(self.target, &after, &self.root, &mut self.model, mode)
            .map_err(|e| format!("after crash {mode:?}: {e}"))?;
        self.stats.crashes += 1;
        self.stats.acked_events_checked += checked.acked_events;
        self.stats.closed_turns += checked.closed_turns;
        for session in 0..SESSIONS {
            self.gens[session] = match self.model.sessions().get(&id(session)) {
                Some(written) => self.gens[session].resume_like(&written.sent),
                None => fresh(self.workload, self.seed, session),
            };
        }
        self.unaccepted = vec![None; SESSIONS];
        self.created = vec![false; SESSIONS];
        self.stale = vec![false; SESSIONS];
        self.disk = after;
        self.store = self.target.store_on(&self.disk, &self.root, self.options);
        Ok(())
    }

    /// Runs `ops`, then a final power loss and check.
    pub fn run(mut self, ops: &[Op]) -> Result<Stats, String> {
        for op in ops {
            self.apply(op)?;
        }
        self.crash(CrashMode::LoseUnsynced)?;
        self.stats.faults = self.stats.faults.max(self.disk.faults_injected());
        Ok(self.stats)
    }
}

/// The fuzz entry for operation sequences: decodes `bytes` and runs them on
/// the store kind and sync mode the first byte picks, panicking on an
/// oracle violation (which is what a fuzzer reports).
pub fn fuzz_ops(bytes: &[u8]) {
    let (seed, rest) = match bytes.split_first() {
        Some((s, rest)) => (u64::from(*s), rest),
        None => (0, bytes),
    };
    let sync = [SyncMode::Turn, SyncMode::Batch, SyncMode::Never][seed as usize % 3];
    let target = Target::ALL[seed as usize / 3 % Target::ALL.len()];
    let ops = decode(rest, 64);
    if let Err(violation) = Run::on(target, seed, sync).run(&ops) {
        panic!("oracle violation on {target:?}: {violation}\nops: {ops:?}");
    }
}
