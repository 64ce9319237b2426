//! Buffered append (`--sync never`) of validated events: turnwal vs the
//! same encoded bytes written with plain `write` calls vs a serde_json +
//! `BufWriter` JSONL writer vs turnwal's SQLite backend with
//! `synchronous=NORMAL` (`turnwal_sqlite_normal`); and ingest from JSON text (the `turnwal append`
//! path) vs serde_json's bare validation of the same text.
//!
//! `cargo bench --bench append` (about 40 s). Figures: docs/PERFORMANCE.md.

mod harness;

use criterion::{Criterion, criterion_group, criterion_main};
use turnwal_cli::bench::ScratchDir;
use turnwal_cli::bench::fixtures::AppendFixture;
use turnwal_cli::bench::measure;

/// 60 turns of the shared workload (about 4.5 MB of JSONL) per run.
const TURNS: usize = 60;

fn append(c: &mut Criterion) {
    let scratch = ScratchDir::new().expect("a scratch directory");
    let fx = AppendFixture::new(1, TURNS);
    println!(
        "fixture: {} turns, {} events, {} bytes of JSONL, {} bytes encoded",
        fx.turns.len(),
        fx.events,
        fx.jsonl_bytes,
        fx.encoded_bytes
    );
    harness::compare(
        c,
        measure::append(&fx, scratch.path()),
        harness::quick_group,
    );
    harness::compare(
        c,
        measure::ingest(&fx, scratch.path()),
        harness::quick_group,
    );
}

criterion_group!(benches, append);
criterion_main!(benches);
