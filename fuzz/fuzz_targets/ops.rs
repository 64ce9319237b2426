//! Operation sequences on the simulated disk against the oracle (`fuzz_ops`).
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| turnwal_testkit::crashlab::ops::fuzz_ops(bytes));
