//! The store's contract on every backend: what a harness sees through `Store` — recovery, reads, the upstream formats, live sessions, PostgreSQL.
//!
//! One test crate (one link target) per concern; each module below was
//! its own crate before. `support` is shared by all three.

#[path = "../support/mod.rs"]
mod support;

mod clean_root;
mod compact_bytes;
mod contract;
mod deep_nesting;
mod differential;
mod idle_seal;
mod jsonl;
mod jsonl_reads;
mod jsonl_upstream;
mod legacy_logs;
mod live_sessions;
mod open_files;
mod poison;
mod postgres;
mod recovery;
mod salvage_upstream;
mod sqlite14_upstream;
mod sqlite_upstream;
mod wal_v2;
mod wal_v3;
