//! Listing a store of 10,000 sessions (`Store::list` on a fresh `Store`,
//! page-cached). The store is written file by file with the library's
//! encoder (about 150 MB), not through 10,000 fsynced materializations.
//!
//! `cargo bench --bench list` (about 15 s).

mod harness;

use criterion::{Criterion, criterion_group, criterion_main};
use turnwal::bench::ScratchDir;
use turnwal::bench::fixtures::ListFixture;
use turnwal::bench::measure;

fn list(c: &mut Criterion) {
    let scratch = ScratchDir::new().expect("a scratch directory");
    let fx = ListFixture::build(scratch.path(), 10_000, 6).expect("the store");
    println!("fixture: {} sessions, {} bytes", fx.sessions, fx.bytes);
    harness::compare(c, measure::list(&fx), harness::quick_group);
}

criterion_group!(benches, list);
criterion_main!(benches);
