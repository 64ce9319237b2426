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
//! The modules follow the architecture: [`event`] and [`header`] are the
//! model, [`contract`] the turn rules, [`scan`] the recovery model shared by
//! every backend, [`store`] the API a harness calls, and [`backend`] the
//! storage engines (the native WAL, whose bytes docs/FORMAT.md specifies, and
//! an in-memory reference).

#![warn(missing_docs)]

pub mod backend;
pub mod bench;
pub mod cli;
pub mod contract;
pub mod crashlab;
pub mod error;
pub mod event;
pub mod header;
pub mod json;
pub mod jsstr;
pub mod limits;
pub mod quarantine;
pub mod rng;
pub mod scan;
pub mod store;
pub mod verify;
pub mod view;
pub mod workload;

pub use backend::SyncMode;
pub use contract::{Placement, Policy, Rule, Tracker, Violation, interrupted_turn_closers};
pub use error::{Corruption, Error, Result};
pub use event::{Event, EventError, EventKind, IncomingEvent, RawJson};
pub use header::{HeaderError, SessionHeader};
pub use scan::{Cut, CutReason, Gap, LogState, Salvage, Scan, SessionSummary};
pub use store::{Receipt, RecoveryReport, RepairBasis, SessionView, Store, StoreOptions, now_ms};
pub use verify::VerifyReport;
pub use view::{EventRef, LogView};
