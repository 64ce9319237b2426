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
mod hostile_jsonl;
mod hostile_locks;
mod hostile_sqlite;
mod hostile_units;
mod hostile_wal;
mod kill;
mod sqlite_lock;
