//! The scanner on arbitrary bytes read as a session file (`fuzz_scan`).
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| turnwal_testkit::crashlab::fuzz_scan(bytes));
