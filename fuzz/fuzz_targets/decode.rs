//! The event decoder and the `turnwal append` line parser (`fuzz_decode`).
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| turnwal_testkit::crashlab::fuzz_decode(bytes));
