//! The upstream harness's encodings that more than one format shares: the
//! packing of chunk-delta runs ([`chunks`]), JavaScript-canonical JSON
//! strings ([`strings`]) and JavaScript strings in Rust, lone surrogates
//! included ([`jsstr`]), and the read-time migrations and refusals of
//! upstream's reader ([`normalize`]). Pure functions over bytes and text: no I/O, and
//! nothing here imports a backend.

// Each store format uses part of the packing code (the native WAL's
// version 2 packs runs too); a build with only some of them leaves the rest
// unused.
#[cfg_attr(not(all(feature = "sqlite", feature = "jsonl")), allow(dead_code))]
pub mod chunks;
pub mod jsstr;
pub mod normalize;
pub mod strings;
