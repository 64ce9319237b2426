//! The differential check of the backends: the same operations run against
//! a native WAL store, a SQLite store and (when the [`Config`] asks) the
//! upstream JSONL store raw (`session.jsonl`), zstd (`session.jsonl.zstd`)
//! or both, and every answer must be the same as the WAL's
//! (docs/RELIABILITY.md, "Differential").
//!
//! - [`LogGen`] generates valid logs built to exercise the SQLite and JSONL
//!   row encodings: `assistant/chunk` runs of every packed kind (text,
//!   reasoning, tool-call deltas) and length (1, 2, 3, longer, now and then
//!   1024+ and runs over the 1 MiB row bound), deltas that must stay scalar
//!   rows (keys reordered, whitespace, escapes `JSON.stringify` would not
//!   write, extra keys), run breaks (index, tool id, `name` presence, time
//!   jumps past the safe integers), decreasing times, tool calls and
//!   results (including producer-written results shaped like recovery's
//!   closers), `surfaceOp`/`sourceEventSeqs` in both key orders, ignorable
//!   and plain events named like the packed tags, plugin events, large
//!   payloads; and, under `Lenient`, events between turns.
//! - [`Differential`] holds the stores in a scratch directory and applies
//!   [`DiffOp`]s to each: appends in any partition, flush, close, reopen
//!   (fresh `Store`s over the same storage: a crash), torn tails written
//!   into each backend's own storage, recover, load, delete, reads. After
//!   every operation it compares the results, and [`Differential::check`]
//!   compares everything a reader can see: `inspect`, `view`, `verify`,
//!   `list`, `read_from` at every seq from 0 to length+1, and that reads
//!   leave the revision alone while appends and repairs move every
//!   backend's revision in lockstep.
//!
//! Events are compared by their full content: type, seq, time, the exact
//! `data` bytes, `ignorable`, `sourceEventSeqs` and `surfaceOp` text and
//! their key order. What is the backend's own and so never compared: byte
//! sizes, the byte offset or row position of a cut and the decoder's words
//! for it (of `list`'s `problem`, the reason code is compared), revision
//! token text (only whether it moved).
//!
//! Limits of the model, each a rule of a backend, not a tolerance:
//!
//! - SQLite commits a transaction whole, so a torn tail never splits the
//!   closers of a WAL repair (a crash inside a WAL repair has no SQLite
//!   counterpart; `recovery.rs` and the crash lab test it on the WAL), and
//!   a cut never falls inside a packed row or line: a crash would lose the
//!   whole row in SQLite and the whole line in JSONL, one event in the WAL.
//!   `CutLast` on a log whose last row or JSONL line is packed tears a
//!   partial next record instead; `DropLast` across a packed row or line
//!   replaces it with its kept members, packed as a batch of them would be.
//! - `sourceEventSeqs` is generated in its canonical spelling (`[1,2]`,
//!   the only one SQLite keeps); parsing gives any other spelling that one
//!   (`tests/store/differential.rs::source_event_seqs_spelling_is_the_same_in_every_backend`).
//! - JSONL (docs/JSONL.md): a JSONL log cannot hold an event whose type is
//!   a packed tag (`text-chunks`, …) — a JSONL store refuses the batch,
//!   naming the seq (`tests/store/differential.rs::jsonl_refuses_an_event_named_like_a_packed_tag`)
//!   — so with a JSONL store the generator names those events
//!   `plugin/<tag>`. A JSONL header always stores `delegationDepth` (0
//!   when none was given; a live session shows it too:
//!   `jsonl_header_depth_is_the_same_live_and_reopened`), and a line
//!   holding `surfaceOp` without `sourceEventSeqs` cannot show their key
//!   order (the reader takes the default for the event's shape): the WAL's
//!   answers are compared with both applied ([`Kind`]).
//!   Every generated event reads through JSONL's read-time normalization
//!   unchanged (no `trigger`, no legacy `turn/end` reasons or message
//!   shapes, no retired types; unknown `turn/end` kinds pass as they are).
//! - JSONL torn tails are written as upstream's writer could leave them:
//!   raw, a fragment of a line without its newline (`PartialNext`: half a
//!   copy of the last line; `CutLast(k)`: the last line cut to 1 to all of
//!   its bytes); zstd, a torn final frame, built as two blocks (the lines
//!   to keep, a flush, then the rest) and cut inside the second, so
//!   upstream's reader recovers exactly the complete records before the
//!   cut (`CutLast`: every line of the last batch but the last;
//!   `PartialNext`: alternately all of the last batch, rewritten by the
//!   repair through a temp file, or a torn frame of nothing after it).
//!   `DropLast` on zstd re-compresses the frame it cuts with its kept
//!   lines (the log a smaller batch would have left: a crash inside a
//!   frame leaves a torn frame, which `CutLast` covers).
//!
//! A divergence panics with every answer (for long ones, the lines that
//! differ from the WAL's) and the recent operations, which is what the
//! property test (`tests/store/differential.rs`) and the fuzz target
//! (`fuzz/fuzz_targets/differential.rs`, through [`fuzz_differential`])
//! report.

mod compare;
mod fuzz;
mod generator;
mod keys;
mod pg;
mod storage;

pub use fuzz::{decode, encode, fuzz_differential};
pub use generator::{LogGen, RunStats, Shapes};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use keys::{events_key, report_key, view_key};
use storage::{JsonlFile, last_row_is_scalar, stored_events, tear_sqlite, tear_wal, wal_tail};
use turnwal::backend::SyncMode;
use turnwal::backend::jsonl::{Compression, JsonlBackend};
use turnwal::backend::sqlite::{SqliteOptions, Synchronous};
use turnwal::contract::Policy;
use turnwal::error::Result;
use turnwal::event::Event;
use turnwal::header::SessionHeader;
use turnwal::rng::Rng;
use turnwal::store::{Receipt, Store, StoreOptions};

// ---------------------------------------------------------------------------
// Two stores, one history
// ---------------------------------------------------------------------------

/// A scratch directory removed when dropped.
#[derive(Debug)]
struct Scratch(PathBuf);

impl Scratch {
    fn new(base: &Path) -> Scratch {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = base.join(format!(
            "turnwal-differential-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How a torn tail is left in each backend's own storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TornTail {
    /// A partial record after the last one: WAL, half of a copy of its last
    /// record; SQLite, a row at the next seq whose JSON text ends early.
    PartialNext,
    /// The last event itself cut short (when it is a scalar row in SQLite
    /// and recovery did not write it; otherwise [`TornTail::PartialNext`]):
    /// WAL, the file truncated inside its last record; SQLite, that row's
    /// `data` cut to its first `(len - 1) * k / 255` bytes (rounded down to
    /// a character) for `CutLast(k)`, so anywhere from nothing to all but
    /// the last byte: inside a key, a string, a number, a literal, a `\u`
    /// escape, a compressed frame.
    CutLast(u8),
    /// The last `n` events (at most all of them) never reached the disk,
    /// as a crash in the middle of writing a batch leaves the WAL: the WAL
    /// file cut at a record boundary; SQLite, the rows from that seq on
    /// deleted (a packed row across the cut replaced by rows of its kept
    /// members, as the codec packs them).
    DropLast(u8),
}

/// One operation applied to both stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffOp {
    /// Append the next `events` generated events of a session (creating it
    /// first if needed; a session whose stored log moved on without the
    /// generator is resumed from it first).
    Append {
        /// Which session.
        session: usize,
        /// How many events.
        events: usize,
    },
    /// `Store::flush`.
    Flush {
        /// Which session.
        session: usize,
    },
    /// `Store::close`.
    Close {
        /// Which session.
        session: usize,
    },
    /// Drop both stores (a crash: nothing is closed) and open fresh ones
    /// over the same storage, then [`Differential::check`].
    Reopen,
    /// A crash that leaves a torn tail in a session, then reopen.
    Tear {
        /// Which session.
        session: usize,
        /// How.
        how: TornTail,
    },
    /// `Store::recover`.
    Recover {
        /// Which session.
        session: usize,
        /// Only report.
        dry_run: bool,
    },
    /// `Store::load`.
    Load {
        /// Which session.
        session: usize,
    },
    /// `Store::delete`.
    Delete {
        /// Which session.
        session: usize,
    },
    /// An append both stores must refuse, changing nothing: `how` picks a
    /// batch that starts past the next seq, one that re-sends the stored
    /// last seq, or one that breaks the turn contract.
    Reject {
        /// Which session.
        session: usize,
        /// Which refusal.
        how: u8,
    },
    /// `Store::read_from` at one seq.
    ReadFrom {
        /// Which session.
        session: usize,
        /// From where.
        seq: u64,
    },
    /// `Store::compact` of the WAL store alone (the others have nothing to
    /// compact), after a flush of every store opened the session in
    /// lockstep; then [`Differential::check`]: a compaction changes nothing
    /// a reader sees.
    Compact {
        /// Which session.
        session: usize,
    },
    /// [`Differential::check`].
    Check,
}

/// Counts from a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiffStats {
    /// Operations applied.
    pub ops: u64,
    /// Append batches accepted (by both).
    pub batches: u64,
    /// Events appended (to each store).
    pub events: u64,
    /// Full comparisons.
    pub checks: u64,
    /// `read_from` calls compared.
    pub reads: u64,
    /// WAL compactions that rewrote a log.
    pub compactions: u64,
    /// Reopens (crashes).
    pub reopens: u64,
    /// Torn tails written.
    pub tears: u64,
    /// Repairs committed (by both).
    pub repairs: u64,
    /// Synthetic closers committed by those repairs.
    pub closers: u64,
    /// Packed rows in the SQLite database at the last check, by tag.
    pub packed_rows: [u64; 3],
    /// Events those packed rows hold.
    pub packed_members: u64,
    /// The most events one packed row held.
    pub largest_row: u64,
    /// Packed lines in the JSONL logs at the last check (the most of any
    /// JSONL store), by tag.
    pub jsonl_packed_rows: [u64; 3],
    /// Events those packed lines hold.
    pub jsonl_packed_members: u64,
    /// The most events one packed JSONL line held.
    pub jsonl_largest_row: u64,
    /// Generator coverage.
    pub generated: RunStats,
}

/// What a [`Differential`] run drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Drives the generated content and headers.
    pub seed: u64,
    /// One session per entry (at most [`SESSION_IDS`]`.len()`), with its
    /// policy.
    pub policies: Vec<Policy>,
    /// The costly run shapes.
    pub shapes: Shapes,
    /// `true`: the WAL store fsyncs every batch and SQLite runs with
    /// `synchronous = FULL` (the default). `false`: neither fsyncs a batch
    /// (WAL `SyncMode::Never`, SQLite `NORMAL`). Either way a receipt
    /// reports every accepted event durable on both sides, so receipts are
    /// compared whole.
    pub durable: bool,
    /// Which seqs a check reads from.
    pub sweep: Sweep,
    /// Where the scratch directory goes; `None`: the system's temporary
    /// directory.
    pub scratch: Option<PathBuf>,
    /// The JSONL stores taking part (raw, zstd, both or none), each opened
    /// with the WAL's `SyncMode`. With any, the generator names no event
    /// like a packed row tag ([`LogGen::without_row_tags`]).
    pub jsonl: Vec<Compression>,
    /// A PostgreSQL database holding no sessions, for a PostgreSQL store
    /// to take part (its connection string); `None`: none does. Needs the
    /// `postgres` feature.
    pub postgres: Option<String>,
}

/// Which seqs [`Differential::check`] calls `read_from` at. A sweep costs
/// the square of the log's length (every call returns the rest of the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// Every seq from 0 to length+1.
    Every,
    /// Every seq when there are at most this many; otherwise the first and
    /// last eight and the rest spread evenly, this many in all, plus every
    /// seq within one of where a packed SQLite row starts or ends (where
    /// `read_from` seeks to a covering row). The fuzz target's bound on the
    /// time one input takes, and the cheap path for logs of 1,024+ runs.
    AtMost(u64),
}

impl Sweep {
    /// The seqs to read a log of `stored` events from.
    pub fn seqs(self, stored: u64) -> Vec<u64> {
        let every = stored + 2;
        match self {
            Sweep::AtMost(k) if every > k && k >= 16 => {
                let mut seqs: Vec<u64> = (0..8).chain(every - 8..every).collect();
                let middle = k - 16;
                seqs.extend((0..middle).map(|i| 8 + (i + 1) * (every - 16) / (middle + 1)));
                seqs.sort_unstable();
                seqs.dedup();
                seqs
            }
            _ => (0..every).collect(),
        }
    }
}

/// Per-session bookkeeping.
#[derive(Debug)]
struct Session {
    id: String,
    header: SessionHeader,
    policy: Policy,
    generator: LogGen,
    seed: u64,
    /// Created (pending or live) in the current stores.
    created: bool,
    /// Materialized on disk.
    on_disk: bool,
    /// The stored log may have moved on without the generator (a crash,
    /// close or repair since): resume it from the store before appending.
    stale: bool,
    /// A torn tail was written and not repaired since (a second tear would
    /// damage the damage, not a log).
    torn: bool,
}

/// Whether two answers are the same (the flag: the second is a JSONL
/// store's, see [`Kind::reads_as_jsonl`]).
type SameAs<T> = dyn Fn(&Result<T>, &Result<T>, bool) -> bool;

/// One backend of a [`Differential`] run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The native WAL (the reference every other answer is compared with).
    Wal,
    /// SQLite.
    Sqlite,
    /// The upstream JSONL logs, raw or zstd.
    Jsonl(Compression),
    /// A PostgreSQL database.
    Postgres,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Wal => "wal",
            Kind::Sqlite => "sqlite",
            Kind::Jsonl(Compression::None) => "jsonl",
            Kind::Jsonl(Compression::Zstd) => "jsonl+zstd",
            Kind::Postgres => "postgres",
        }
    }

    /// Whether this backend's answers are compared with the WAL's as a
    /// JSONL store gives them (docs/JSONL.md): a header stored without
    /// `delegationDepth` reads back with `delegationDepth: 0` ("The header
    /// line"), and an event with `surfaceOp` but no `sourceEventSeqs` reads
    /// back in the key order its shape has by default ("Records"; see
    /// `as_jsonl_reads`), so the WAL's answer is compared with those
    /// applied.
    fn reads_as_jsonl(self) -> bool {
        matches!(self, Kind::Jsonl(_))
    }
}

/// A WAL store, a SQLite store and 0 to 2 JSONL stores (raw, zstd) in one
/// scratch directory, driven in lockstep. Every answer is compared with
/// the WAL's; a divergence panics.
pub struct Differential {
    scratch: Scratch,
    /// The stores, the WAL first.
    stores: Vec<(Kind, Store)>,
    wal_options: StoreOptions,
    sqlite_options: SqliteOptions,
    /// The PostgreSQL store's database, when one takes part.
    postgres: Option<String>,
    sweep: Sweep,
    /// Inside [`Differential::check`].
    in_check: bool,
    sessions: Vec<Session>,
    rng: Rng,
    /// Counts so far.
    pub stats: DiffStats,
    /// The operations applied so far (for failure messages).
    log: Vec<String>,
}

/// Session ids used, in order: plain, a path-like one, a non-ASCII one.
pub const SESSION_IDS: [&str; 3] = ["alpha", "team/b:1", "sé-ß 😀"];

impl Differential {
    /// Two empty stores in a fresh scratch directory.
    pub fn new(config: &Config) -> Differential {
        let Config {
            seed,
            ref policies,
            shapes,
            durable,
            sweep,
            ref scratch,
            ref jsonl,
            ref postgres,
        } = *config;
        assert!(!policies.is_empty() && policies.len() <= SESSION_IDS.len());
        let mut kinds = vec![Kind::Wal, Kind::Sqlite];
        kinds.extend(jsonl.iter().map(|&c| Kind::Jsonl(c)));
        if postgres.is_some() {
            kinds.push(Kind::Postgres);
        }
        let scratch = Scratch::new(&scratch.clone().unwrap_or_else(std::env::temp_dir));
        // A JSONL root records no policy: a reopened JSONL session is
        // appended to under its store's policy (docs/JSONL.md, "Layout").
        // Modelled, not tolerated: when a JSONL store takes part, every
        // session has the first configured policy, and the stores are
        // opened with it (the WAL's and SQLite's keep each session's own).
        let jsonl_policy = (!jsonl.is_empty()).then_some(policies[0]);
        let wal_options = StoreOptions {
            sync: if durable {
                SyncMode::Batch
            } else {
                SyncMode::Never
            },
            policy: jsonl_policy.unwrap_or_default(),
            ..StoreOptions::default()
        };
        let sqlite_options = SqliteOptions {
            synchronous: if durable {
                Synchronous::Full
            } else {
                Synchronous::Normal
            },
            ..SqliteOptions::default()
        };
        let stores = open_stores(
            &scratch.0,
            &kinds,
            wal_options,
            &sqlite_options,
            postgres.as_deref(),
        );
        let no_row_tags = !jsonl.is_empty();
        let mut rng = Rng::new(seed ^ 0x5eed);
        let sessions = policies
            .iter()
            .enumerate()
            .map(|(i, &policy)| {
                let policy = jsonl_policy.unwrap_or(policy);
                let id = SESSION_IDS[i].to_owned();
                let mut header = SessionHeader::new(id.clone(), 1_700_000_000_000 + i as u64);
                if rng.below(2) == 0 {
                    header.cwd = Some(format!("/work/{i}"));
                }
                if rng.below(3) == 0 {
                    header.parent_session = Some("root".into());
                    header.seed_length = Some(rng.below(5));
                    header.origin = Some("subagent".into());
                    header.delegation_depth = Some(1 + rng.below(3));
                    header.agent_preset = Some("reviewer".into());
                }
                let seed = seed.wrapping_add(i as u64 * 0x9e37_79b9);
                let mut generator = LogGen::new(seed, policy, shapes);
                generator.no_row_tags = no_row_tags;
                Session {
                    id,
                    header,
                    policy,
                    generator,
                    seed,
                    created: false,
                    on_disk: false,
                    stale: false,
                    torn: false,
                }
            })
            .collect();
        Differential {
            scratch,
            stores,
            wal_options,
            sqlite_options,
            postgres: postgres.clone(),
            sweep,
            in_check: false,
            sessions,
            rng,
            stats: DiffStats::default(),
            log: Vec::new(),
        }
    }

    /// The WAL store's directory.
    pub fn wal_dir(&self) -> PathBuf {
        self.scratch.0.join("wal")
    }

    /// Changes which seqs later checks read from.
    pub fn set_sweep(&mut self, sweep: Sweep) {
        self.sweep = sweep;
    }

    /// The SQLite database.
    pub fn sqlite_path(&self) -> PathBuf {
        self.scratch.0.join("sessions.db")
    }

    /// The root of the JSONL store in `compression`.
    pub fn jsonl_root(&self, compression: Compression) -> PathBuf {
        self.scratch.0.join(match compression {
            Compression::None => "jsonl-raw",
            Compression::Zstd => "jsonl-zstd",
        })
    }

    /// The JSONL compressions taking part.
    fn jsonl_kinds(&self) -> Vec<Compression> {
        self.stores
            .iter()
            .filter_map(|(k, _)| match k {
                Kind::Jsonl(c) => Some(*c),
                _ => None,
            })
            .collect()
    }

    /// How many sessions the run drives.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Applies one operation to both stores and compares the results.
    pub fn apply(&mut self, op: &DiffOp) {
        self.stats.ops += 1;
        self.log.push(format!("{op:?}"));
        match *op {
            DiffOp::Append { session, events } => self.append(session, events),
            DiffOp::Flush { session } => {
                self.flush(session);
            }
            DiffOp::Close { session } => {
                let id = self.sessions[session].id.clone();
                let _ = self.mutate(
                    &format!("close {id:?}"),
                    session,
                    |s| s.close(&id),
                    |(), _| "ok".into(),
                    |_| Some(false),
                );
                let s = &mut self.sessions[session];
                s.created = false;
                s.stale = s.on_disk;
            }
            DiffOp::Reopen => {
                self.reopen();
                self.check();
            }
            DiffOp::Tear { session, how } => self.tear(session, how),
            DiffOp::Recover { session, dry_run } => {
                let id = self.sessions[session].id.clone();
                let (r, moved) = self.mutate(
                    &format!("recover {id:?} dry_run={dry_run}"),
                    session,
                    |s| s.recover(&id, dry_run),
                    report_key,
                    |r| r.as_ref().ok().map(|r| r.committed),
                );
                if let Ok(r) = &r
                    && r.committed
                {
                    self.stats.closers += r.closers.len() as u64;
                }
                self.after_repair(session, r.is_ok() && moved);
            }
            DiffOp::Load { session } => {
                let id = self.sessions[session].id.clone();
                let (r, moved) = self.mutate(
                    &format!("load {id:?}"),
                    session,
                    |s| s.load(&id),
                    view_key,
                    |_| None,
                );
                self.after_repair(session, r.is_ok() && moved);
            }
            DiffOp::Delete { session } => {
                let id = self.sessions[session].id.clone();
                let (r, _) = self.mutate(
                    &format!("delete {id:?}"),
                    session,
                    |s| s.delete(&id),
                    |(), _| "ok".into(),
                    |_| None,
                );
                if r.is_ok() {
                    let s = &mut self.sessions[session];
                    s.seed = s.seed.wrapping_add(1);
                    let fresh = LogGen::new(s.seed, s.policy, s.generator.shapes);
                    let (stats, no_row_tags) = (s.generator.stats, s.generator.no_row_tags);
                    s.generator = LogGen {
                        stats,
                        no_row_tags,
                        ..fresh
                    };
                    s.created = false;
                    s.on_disk = false;
                    s.stale = false;
                    s.torn = false;
                }
            }
            DiffOp::Reject { session, how } => self.reject(session, how),
            DiffOp::ReadFrom { session, seq } => {
                let id = self.sessions[session].id.clone();
                self.stats.reads += 1;
                let _ = self.read_events(&format!("read_from {id:?} {seq}"), |s| {
                    s.read_from(&id, seq)
                });
            }
            DiffOp::Compact { session } => self.compact(session),
            DiffOp::Check => self.check(),
        }
    }

    /// `Store::flush` of every store, compared; whether it succeeded. A cold
    /// session is opened (and repaired) by a flush.
    fn flush(&mut self, session: usize) -> bool {
        let id = self.sessions[session].id.clone();
        let (r, moved) = self.mutate(
            &format!("flush {id:?}"),
            session,
            |s| s.flush(&id),
            |n, _| format!("durable {n}"),
            |_| None,
        );
        self.after_repair(session, r.is_ok() && moved);
        r.is_ok()
    }

    fn compact(&mut self, session: usize) {
        // Opened (and repaired) by a flush in every store alike first:
        // compaction alone would open only the WAL's.
        if !self.flush(session) {
            return;
        }
        let id = self.sessions[session].id.clone();
        let (kind, wal) = &self.stores[0];
        debug_assert_eq!(*kind, Kind::Wal);
        match wal.compact(&id) {
            Ok(Some(_)) => self.stats.compactions += 1,
            Ok(None) => {}
            Err(e) => self.fail(&format!("compact {id:?}"), &[(Kind::Wal, e.to_string())]),
        }
        self.check();
    }

    fn after_repair(&mut self, session: usize, repaired: bool) {
        if repaired {
            self.stats.repairs += 1;
            self.sessions[session].stale = true;
            self.sessions[session].torn = false;
        }
    }

    /// Continues a session whose stored log moved on without the generator
    /// from what is stored: opening repairs a log a crash left open, in
    /// both stores alike.
    fn resync(&mut self, session: usize) {
        if !self.sessions[session].stale {
            return;
        }
        let id = self.sessions[session].id.clone();
        // Continue from what is stored: opening repairs a log a crash
        // left open, in both stores alike.
        let (r, moved) = self.mutate(
            &format!("resume {id:?}"),
            session,
            |s| s.resume(&id),
            |r: &Receipt, _| format!("{r:?}"),
            |_| None,
        );
        if moved {
            self.stats.repairs += 1;
            self.sessions[session].torn = false;
        }
        r.unwrap_or_else(|e| panic!("resume {id:?} failed on both: {e}"));
        let stored = self
            .read_events(&format!("read_from {id:?} 0 to resume"), |s| {
                s.read_from(&id, 0)
            })
            .unwrap_or_else(|e| panic!("read_from {id:?} 0 failed on both: {e}"));
        let s = &mut self.sessions[session];
        s.seed = s.seed.wrapping_add(1);
        s.generator = s.generator.resume(s.seed, &stored);
        s.stale = false;
        s.created = true;
    }

    fn reject(&mut self, session: usize, how: u8) {
        self.resync(session);
        let id = self.sessions[session].id.clone();
        let next = self.sessions[session].generator.next_seq();
        let turn = self.sessions[session].generator.state.turn();
        let event = |t: &str, seq: u64, data: &str| Event::new(t, seq, 1, data).expect("valid");
        let batch = match how % 3 {
            0 => vec![event("plugin/x", next + 1, "{}")],
            1 => vec![event("plugin/x", next.checked_sub(1).unwrap_or(3), "{}")],
            _ => vec![
                event("plugin/x", next, "{}"),
                event(
                    "step/end",
                    next + 1,
                    &format!(r#"{{"turn":{},"step":999}}"#, turn + 7),
                ),
            ],
        };
        let (r, _) = self.mutate(
            &format!("reject {id:?} {how}"),
            session,
            |s| s.append(&id, &batch),
            |r, _| format!("{r:?}"),
            |_| Some(false),
        );
        if r.is_ok() {
            panic!(
                "both stores accepted a batch they must refuse: {}",
                events_key(&batch, false)
            );
        }
    }

    fn append(&mut self, session: usize, events: usize) {
        let id = self.sessions[session].id.clone();
        if events == 0 {
            // A no-op that reports where appends continue.
            let _ = self.mutate(
                &format!("append {id:?} nothing"),
                session,
                |s| s.append(&id, &[]),
                |r, _| format!("{r:?}"),
                |_| Some(false),
            );
            return;
        }
        self.resync(session);
        if !self.sessions[session].created && !self.sessions[session].on_disk {
            let header = self.sessions[session].header.clone();
            let policy = self.sessions[session].policy;
            let (r, _) = self.mutate(
                &format!("create {id:?}"),
                session,
                |s| s.create_with_policy(header.clone(), policy),
                |(), _| "ok".into(),
                |_| Some(false),
            );
            r.unwrap_or_else(|e| panic!("create {id:?} failed on both: {e}"));
            self.sessions[session].created = true;
        }
        let batch = self.sessions[session].generator.batch(events);
        let n = batch.len() as u64;
        let (r, _) = self.mutate(
            &format!(
                "append {id:?} seqs {}..{}",
                batch[0].seq(),
                batch[0].seq() + n
            ),
            session,
            |s| s.append(&id, &batch),
            |r, _| format!("{r:?}"),
            |_| Some(true),
        );
        if let Err(e) = r {
            panic!(
                "a generated batch was refused by both stores: {e}\n{}",
                events_key(&batch, false)
            );
        }
        self.stats.batches += 1;
        self.stats.events += n;
        let s = &mut self.sessions[session];
        s.on_disk = true;
        s.created = true;
    }

    /// Drops every store without closing anything (a crash) and opens
    /// fresh ones over the same storage.
    pub fn reopen(&mut self) {
        self.stats.reopens += 1;
        self.drop_stores();
        self.stores = open_stores(
            &self.scratch.0,
            &self.kinds(),
            self.wal_options,
            &self.sqlite_options,
            self.postgres.as_deref(),
        );
        for s in &mut self.sessions {
            s.created = false;
            s.stale = s.on_disk;
        }
    }

    fn kinds(&self) -> Vec<Kind> {
        self.stores.iter().map(|(k, _)| *k).collect()
    }

    /// Drops the stores (their writer locks are released first), leaving
    /// placeholders.
    fn drop_stores(&mut self) {
        for (_, store) in &mut self.stores {
            drop(std::mem::replace(store, Store::in_memory()));
        }
    }

    fn tear(&mut self, session: usize, how: TornTail) {
        let id = self.sessions[session].id.clone();
        // The crash: every store dropped, then the damage, then fresh ones.
        self.drop_stores();
        let events = if self.sessions[session].on_disk && !self.sessions[session].torn {
            stored_events(&self.sqlite_path(), &id).len() as u64
        } else {
            0
        };
        // A log without records has nothing to tear.
        if events > 0 {
            self.stats.tears += 1;
            let tail = wal_tail(&self.wal_dir(), &id, events);
            let jsonl = self.jsonl_kinds();
            let how = match how {
                // SQLite cannot cut a row short in a way a crash would; the
                // WAL's last record, if recovery wrote it, is the end of a
                // repair, which SQLite commits whole or not at all. A JSONL
                // line holding a packed row would lose every member with
                // it (a cut never falls inside a packed row).
                TornTail::CutLast(_)
                    if tail.last_synthetic
                        || tail.published.last() == Some(&true)
                        || !last_row_is_scalar(&self.sqlite_path(), &id)
                        || jsonl.iter().any(|&c| {
                            JsonlFile::read(&self.jsonl_root(c), c, &id).last_line_is_packed()
                        }) =>
                {
                    TornTail::PartialNext
                }
                // A crash inside a repair leaves the WAL with some of its
                // closers (recovery redoes the repair: an interrupted
                // repair); SQLite commits a repair whole or not at all. Cut
                // before a partial repair, as if it never ran.
                TornTail::DropLast(k) => {
                    let mut keep = events.saturating_sub(u64::from(k));
                    while keep > 0 && tail.partial_repair.get(keep as usize - 1) == Some(&true) {
                        keep -= 1;
                    }
                    // A sealed unit, and every record of a file published
                    // whole (materialization, a rewrite), is published by an
                    // atomic rename of a file fsynced first: a crash drops
                    // events after them only.
                    let published_end =
                        tail.published.iter().rposition(|&s| s).map_or(0, |i| i + 1);
                    let keep = keep.max(published_end as u64);
                    TornTail::DropLast(u8::try_from(events - keep).unwrap_or(u8::MAX))
                }
                other => other,
            };
            self.log.push(format!("  tear {id:?} as {how:?}"));
            tear_wal(&self.wal_dir(), &id, how, events);
            tear_sqlite(&self.sqlite_path(), &id, how, events);
            if let Some(url) = &self.postgres {
                pg::tear_postgres(url, &id, how, events);
            }
            for c in jsonl {
                JsonlFile::read(&self.jsonl_root(c), c, &id).tear(how, events);
            }
            // Cutting at a record boundary leaves nothing torn behind.
            self.sessions[session].torn = !matches!(how, TornTail::DropLast(_));
        }
        self.reopen();
        self.check();
    }

    /// The end of every run: compare; crash and compare; recover every
    /// session (alternating `recover` and `load`) and compare; append more
    /// to each; crash once more and compare. Returns the counts.
    pub fn finish(mut self) -> DiffStats {
        self.check();
        self.apply(&DiffOp::Reopen);
        for i in 0..self.sessions.len() {
            let op = if i % 2 == 0 {
                DiffOp::Recover {
                    session: i,
                    dry_run: false,
                }
            } else {
                DiffOp::Load { session: i }
            };
            self.apply(&op);
        }
        self.check();
        for i in 0..self.sessions.len() {
            let n = 1 + self.rng.below(40) as usize;
            self.apply(&DiffOp::Append {
                session: i,
                events: n,
            });
        }
        self.apply(&DiffOp::Reopen);
        for s in &self.sessions {
            self.stats.generated.add(&s.generator.stats);
        }
        self.stats
    }
}

fn open_stores(
    root: &Path,
    kinds: &[Kind],
    wal: StoreOptions,
    sqlite: &SqliteOptions,
    postgres: Option<&str>,
) -> Vec<(Kind, Store)> {
    let _ = postgres;
    kinds
        .iter()
        .map(|&kind| {
            let store = match kind {
                Kind::Wal => {
                    // Plain records (chunk runs packed as SQLite packs
                    // rows), never sealed by the writer: the tears model a
                    // crash's damage to the last records, which a sealed
                    // unit (published complete, never torn by a crash)
                    // has no counterpart of in the other backends. Sealing
                    // is checked by tests/store/wal_v2.rs and the crash lab.
                    let backend = turnwal::backend::wal::WalBackend::open(&root.join("wal"))
                        .expect("the WAL store opens")
                        .sealing_by_itself(false);
                    Store::with_backend(std::sync::Arc::new(backend), wal)
                }
                Kind::Sqlite => Store::open_sqlite(
                    root.join("sessions.db"),
                    sqlite.clone(),
                    StoreOptions::default(),
                )
                .expect("the SQLite store opens"),
                Kind::Jsonl(c) => {
                    let dir = root.join(match c {
                        Compression::None => "jsonl-raw",
                        Compression::Zstd => "jsonl-zstd",
                    });
                    // Proofs in the scratch directory, never the user's
                    // state directory (a fuzz binary runs outside cargo's
                    // environment).
                    let backend = JsonlBackend::open(dir, c)
                        .and_then(|b| b.with_state_dir(root.join("state")))
                        .expect("the JSONL store opens");
                    Store::with_backend(Arc::new(backend), wal)
                }
                Kind::Postgres => Store::open_postgres(
                    postgres.expect("a database for the PostgreSQL store"),
                    StoreOptions::default(),
                )
                .expect("the PostgreSQL store opens"),
            };
            (kind, store)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps() {
        assert_eq!(Sweep::Every.seqs(3), [0, 1, 2, 3, 4]);
        assert_eq!(Sweep::AtMost(64).seqs(62), (0..64).collect::<Vec<_>>());
        let sampled = Sweep::AtMost(20).seqs(1000);
        assert_eq!(
            sampled,
            [
                0, 1, 2, 3, 4, 5, 6, 7, 205, 402, 599, 796, 994, 995, 996, 997, 998, 999, 1000,
                1001
            ]
        );
    }
}
