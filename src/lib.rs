//! The `turnwal` command line ([`cli`]) and its benchmark suite ([`bench`]),
//! over the engine (the `turnwal` crate). The binary is `src/main.rs`.

pub mod bench;
pub mod cli;
