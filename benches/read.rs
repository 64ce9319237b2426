//! Reading sessions of a thousand and of a million events: a full load
//! (`Store::view`, payloads borrowed from the map, every event touched) with
//! the resident memory it costs against the file size, and a tail read of
//! the last 50 events (`Store::read_from`), the large session vs the small.
//!
//! `cargo bench --bench read` (about a minute; the million-event session is
//! about 700 MB, built once). `TURNWAL_BENCH_BIG=0` uses 100,000 events.

mod harness;

use criterion::{Criterion, criterion_group, criterion_main};
use turnwal_cli::bench::ScratchDir;
use turnwal_cli::bench::fixtures::{SessionFixture, Until};
use turnwal_cli::bench::measure;

fn read(c: &mut Criterion) {
    let scratch = ScratchDir::new().expect("a scratch directory");
    let large_events = if harness::big() { 1_000_000 } else { 100_000 };
    let build = |id: &str, seed, events| {
        SessionFixture::build(
            &scratch.path().join(id),
            id,
            seed,
            Until::Events(events),
            false,
        )
        .expect("a read fixture")
    };
    let small = build("small", 4, 1_000);
    let large = build("large", 5, large_events);
    for fx in [&small, &large] {
        let memory = measure::load_memory(fx).expect("a load");
        println!(
            "\nfull load of {} events ({}): resident set +{:.1} MiB = {:.2}× the file, heap +{:.1} MiB = {:.3}×, VmHWM {:.1} MiB",
            fx.events,
            measure::size_label(fx.log_bytes),
            memory.loaded.rss.saturating_sub(memory.before.rss) as f64 / (1 << 20) as f64,
            memory.rss_ratio(),
            memory.loaded.anon.saturating_sub(memory.before.anon) as f64 / (1 << 20) as f64,
            memory.anon_ratio(),
            memory.loaded.hwm as f64 / (1 << 20) as f64,
        );
        let group = if fx.events >= 1_000_000 {
            harness::slow_group
        } else {
            harness::quick_group
        };
        harness::compare(c, measure::load(fx).expect("load side"), group);
    }
    let tail = measure::tail_read(&large, &small, 50).expect("tail sides");
    harness::compare(c, tail, harness::quick_group);
}

criterion_group!(benches, read);
criterion_main!(benches);
