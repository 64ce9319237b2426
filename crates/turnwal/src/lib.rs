//! turnwal: a durable session-persistence storage engine for AI-agent
//! harnesses.
//!
//! A harness records each session as an append-only log of events
//! (`turn/start`, `user/message`, `assistant/chunk`, `tool/call`, …,
//! `turn/end`). turnwal stores those logs so that nothing acknowledged is ever
//! lost and a crash never leaves a log that cannot be resumed: the last
//! complete `turn/end` is the commit point; after a crash, torn bytes are cut
//! and an open final turn keeps its real events and is closed with synthetic
//! closers ending in `turn/end {"reason":{"kind":"interrupted"}}`.
//!
//! ```
//! use turnwal::{Event, SessionHeader, Store};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path())?;
//! store.create(SessionHeader::new("demo", 1_700_000_000_000).with_cwd("/work"))?;
//! store.append("demo", &[
//!     Event::new("turn/start", 0, 1_700_000_000_001, r#"{"turn":1}"#)?,
//!     Event::new("step/start", 1, 1_700_000_000_002, r#"{"turn":1,"step":1}"#)?,
//! ])?;
//! drop(store); // a crash: the turn never ended
//!
//! let store = Store::open(dir.path())?;
//! let view = store.inspect("demo")?; // writes nothing
//! let types: Vec<&str> = view.events.iter().map(|e| e.event_type()).collect();
//! assert_eq!(types, ["turn/start", "step/start", "step/end", "turn/end"]);
//! assert_eq!(view.events[3].data().get(), r#"{"turn":1,"reason":{"kind":"interrupted"}}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The modules follow the layers (docs/ARCHITECTURE.md), each importing
//! only from the layers below it:
//!
//! - the model: [`event`], [`header`], [`json`] (the lossless JSON scanner),
//!   [`limits`], [`upstream`] (upstream's shared encodings: chunk-run
//!   packing, canonical strings, [`jsstr`]);
//! - the rules: [`contract`] (the turn contract and the closers), [`scan`]
//!   (the recovery model and the one recovery decision every backend
//!   shares), [`view`], [`verify`];
//! - [`storage`]: files, locks, memory maps and file names behind the
//!   `Storage` trait (the test kit's simulated disk implements it too);
//!   [`quarantine`];
//! - [`backend`]: the storage engines — [`backend::wal`] (the native WAL,
//!   whose bytes docs/FORMAT.md specifies), [`backend::memory`] (the
//!   reference), `backend::sqlite` (feature `sqlite`: upstream's schema 17
//!   and 14) and `backend::jsonl` (feature `jsonl`: upstream's JSONL roots);
//! - [`store`]: the API a harness calls; [`location`]: the one place a
//!   store's location (`--store`, `TURNWAL_STORE`) becomes a store;
//! - [`rng`]: the one seeded generator the tools share. The tools live in
//!   other crates of the workspace: the `turnwal` binary (`turnwal-cli`)
//!   and the crash lab, simulated disk and workloads (`turnwal-testkit`).
//!
//! Default features: the WAL, the memory backend and upstream's SQLite and
//! JSONL formats (`sqlite`, `jsonl`); `postgres` adds the PostgreSQL store.
//! With `default-features = false` the crate is the WAL and memory backends
//! alone (zstd for the WAL's sealed units).
//!
//! Each backend, opened directly:
//!
//! ```
//! use std::sync::Arc;
//! use turnwal::backend::wal::WalBackend;
//! use turnwal::{SessionHeader, Store, StoreOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let wal = Store::with_backend(Arc::new(WalBackend::open(dir.path())?), StoreOptions::default());
//! wal.create(SessionHeader::new("s", 1))?;
//! let memory = Store::in_memory();
//! memory.create(SessionHeader::new("s", 1))?;
//! # #[cfg(feature = "sqlite")] {
//! use turnwal::backend::sqlite::SqliteOptions;
//! let sqlite = Store::open_sqlite(dir.path().join("s.db"), SqliteOptions::default(), StoreOptions::default())?;
//! sqlite.create(SessionHeader::new("s", 1))?;
//! # }
//! # #[cfg(feature = "jsonl")] {
//! use turnwal::backend::jsonl::{Compression, JsonlBackend};
//! let root = JsonlBackend::open(dir.path().join("jsonl"), Compression::Zstd)?;
//! let jsonl = Store::with_backend(Arc::new(root), StoreOptions::default());
//! jsonl.create(SessionHeader::new("s", 1).with_cwd("/work"))?;
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

pub mod backend;
pub mod contract;
pub mod duration;
pub mod error;
pub mod event;
pub mod follow;
pub mod header;
pub mod json;
pub mod limits;
pub mod location;
pub mod mirror;
pub mod quarantine;
pub mod rng;
pub mod scan;
pub mod storage;
mod sync;
pub mod text;
pub mod upstream;
/// JavaScript strings in Rust (moved to [`upstream::jsstr`]).
pub use upstream::jsstr;
pub mod store;
pub mod verify;
pub mod view;

pub use backend::{Deletion, SyncMode};
pub use contract::{Placement, Policy, Rule, Tracker, Violation, interrupted_turn_closers};
pub use error::{Corruption, Divergence, Error, Result, Unit};
pub use event::{Event, EventError, EventKind, IncomingEvent, RawJson};
pub use follow::Follow;
pub use header::{ForeignVersion, HeaderError, SessionHeader};
pub use mirror::{SyncOptions, Synced};
pub use scan::{Cut, CutReason, Gap, LogState, Salvage, Scan, SessionSummary};
pub use store::{Receipt, RecoveryReport, RepairBasis, SessionView, Store, StoreOptions, now_ms};
pub use verify::VerifyReport;
pub use view::{Cursor, EventRef, LogReader, LogView};
