//! The store's contract on every backend: what a harness sees through `Store` — recovery, reads, the upstream formats, live sessions, PostgreSQL.
//!
//! One test crate (one link target) per concern; each module below was
//! its own crate before. `support` is shared by all three.

#[path = "../support/mod.rs"]
mod support;

// Unix only: open descriptors and locks read from /proc, POSIX modes,
// symlinks, a PostgreSQL server (docs/PLATFORMS.md, "Windows").
#[cfg(unix)]
mod clean_root;
mod compact_bytes;
mod contract;
mod deep_nesting;
#[cfg(unix)]
mod differential;
#[cfg(unix)]
mod follow;
mod idle_seal;
mod jsonl;
mod jsonl_reads;
mod jsonl_upstream;
mod legacy_logs;
#[cfg(unix)]
mod live_sessions;
#[cfg(unix)]
mod open_files;
mod poison;
#[cfg(unix)]
mod postgres;
mod recovery;
mod salvage_upstream;
mod sqlite14_upstream;
mod sqlite_upstream;
#[cfg(unix)]
mod sync;
mod wal_v2;
mod wal_v3;
