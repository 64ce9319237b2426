//! Faults and damage: crashes (the crash lab, SIGKILLed processes), damaged and hostile inputs, locks, the fuzz corpus.
//!
//! One test crate (one link target) per concern; each module below was
//! its own crate before. `support` is shared by all three.

#[path = "../support/mod.rs"]
mod support;

mod crashlab;
mod damage;
mod fuzz_corpus;
mod hostile_inputs;
#[cfg(unix)]
mod hostile_jsonl;
// Unix only: SIGKILL statuses, OFD locks read from /proc, symlinks
// (docs/PLATFORMS.md, "Windows"); `terminate` kills writers everywhere.
#[cfg(unix)]
mod hostile_locks;
mod hostile_sqlite;
mod hostile_units;
#[cfg(unix)]
mod hostile_wal;
#[cfg(unix)]
mod kill;
#[cfg(unix)]
mod sqlite_lock;
#[cfg(unix)]
mod sync_kill;
mod terminate;
