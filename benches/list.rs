//! Listing a store of 10,000 sessions (`Store::list` on a fresh `Store`,
//! page-cached). The store is written file by file with the library's
//! encoder (about 150 MB), not through 10,000 fsynced materializations.
//!
//! Then listing an upstream JSONL root of 1,000 sessions (raw, then zstd),
//! each a complete turn and an open one, against reading every header
//! alone (what upstream's `list` returns).
//!
//! `cargo bench --bench list` (about 30 s).

mod harness;

use criterion::{Criterion, criterion_group, criterion_main};
use turnwal::backend::jsonl::Compression;
use turnwal_cli::bench::ScratchDir;
use turnwal_cli::bench::fixtures::{JsonlListFixture, ListFixture};
use turnwal_cli::bench::measure;

fn list(c: &mut Criterion) {
    let scratch = ScratchDir::new().expect("a scratch directory");
    let fx = ListFixture::build(scratch.path(), 10_000, 6).expect("the store");
    println!("fixture: {} sessions, {} bytes", fx.sessions, fx.bytes);
    harness::compare(c, measure::list(&fx), harness::quick_group);
    for compression in [Compression::None, Compression::Zstd] {
        let root = scratch.path().join(compression.config_name());
        let fx = JsonlListFixture::build(&root, compression, 1_000, 6).expect("the root");
        println!(
            "fixture: {} JSONL sessions, {} bytes",
            fx.sessions, fx.bytes
        );
        harness::compare(c, measure::list_jsonl(&fx), harness::quick_group);
    }
}

criterion_group!(benches, list);
criterion_main!(benches);
