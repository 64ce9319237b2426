//! Durable turns (`--sync turn`, one fdatasync per turn): turnwal vs a raw
//! loop writing each turn's encoded bytes and calling fdatasync, vs SQLite
//! (WAL mode, `synchronous=FULL`) inserting each turn in one transaction,
//! vs turnwal's SQLite backend with the same settings
//! (`turnwal_sqlite_full`), and turnwal writing an upstream JSONL root in
//! upstream's default encoding, zstd, with its durability proof
//! (`turnwal_jsonl_zstd`).
//! Prints turns/s and the commit latency p50/p99 of every side.
//!
//! `cargo bench --bench durable` (about 40 s; bound by the disk's flush).

mod harness;

use criterion::{Criterion, criterion_group, criterion_main};
use turnwal::backend::jsonl::Compression;
use turnwal_cli::bench::ScratchDir;
use turnwal_cli::bench::fixtures::AppendFixture;
use turnwal_cli::bench::measure::{self, Engine, Feed, StoreAppend};

/// Turns committed per run.
const TURNS: usize = 60;

fn durable(c: &mut Criterion) {
    let scratch = ScratchDir::new().expect("a scratch directory");
    let fx = AppendFixture::new(2, TURNS);
    println!(
        "fixture: {} turns, {} events, {} bytes of JSONL, {} bytes encoded",
        fx.turns.len(),
        fx.events,
        fx.jsonl_bytes,
        fx.encoded_bytes
    );
    let mut comparison = measure::durable(&fx, scratch.path());
    comparison.sides.push(Box::new(StoreAppend::on(
        &fx,
        scratch.path(),
        Feed::Durable,
        Engine::Jsonl(Compression::Zstd),
    )));
    harness::compare(c, comparison, harness::quick_group);
}

criterion_group!(benches, durable);
criterion_main!(benches);
