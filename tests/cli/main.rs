//! The `turnwal` binary: every command, run as a user runs it.
//!
//! One test crate (one link target) per concern; each module below was
//! its own crate before. `support` is shared by all three.

#[path = "../support/mod.rs"]
mod support;

mod cli;
mod cli_bench;
mod cli_bounded_input;
mod cli_convert;
mod cli_damage;
mod cli_sqlite;
#[cfg(unix)]
mod cli_sync;
mod cli_terminal;
mod convert_pairs;
mod live_size;
mod prune;
