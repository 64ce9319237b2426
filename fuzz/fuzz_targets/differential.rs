//! The WAL, SQLite and (chosen by the seed byte) JSONL raw or zstd backends
//! on the same operation sequence, every answer compared
//! (`crashlab::differential::fuzz_differential`).
#![no_main]
libfuzzer_sys::fuzz_target!(
    |bytes: &[u8]| turnwal_testkit::crashlab::differential::fuzz_differential(bytes)
);
