//! Recovery: scanning a page-cached log of 10 MiB, 100 MiB and 1 GiB, clean
//! and with an open final turn (`Backend::scan`), vs mmap + CRC-32 of the
//! same bytes vs serde_json parsing the same events as JSONL; and reopening
//! a writer (`Store::resume` on a fresh `Store`) on the largest clean log vs
//! on a 1 MiB one. Also prints the bytes on disk per event vs JSONL.
//!
//! The logs are built once per run in a temp dir (about 2.3 GiB with their
//! JSONL at the 1 GiB size). `cargo bench --bench recovery` takes about 4
//! minutes; `TURNWAL_BENCH_BIG=0` skips the 1 GiB log (about a minute).

mod harness;

use criterion::{Criterion, criterion_group, criterion_main};
use turnwal_cli::bench::ScratchDir;
use turnwal_cli::bench::fixtures::{SessionFixture, Until};
use turnwal_cli::bench::measure;

fn recovery(c: &mut Criterion) {
    let scratch = ScratchDir::new().expect("a scratch directory");
    let mut sizes = vec![10u64 << 20, 100 << 20];
    if harness::big() {
        sizes.push(1 << 30);
    }
    let small = SessionFixture::build(
        &scratch.path().join("small"),
        "small",
        9,
        Until::Bytes(1 << 20),
        false,
    )
    .expect("the 1 MiB session");
    let largest = *sizes.last().expect("a size");
    for size in sizes {
        let dir = scratch.path().join(format!("log-{size}"));
        let mut log = SessionFixture::build(&dir, "log", 3, Until::Bytes(size), true)
            .expect("the scan fixture");
        let label = measure::size_label(size);
        if size == 10 << 20 {
            println!(
                "\nbytes on disk per event: {:.1} (the same events as JSONL: {:.1}; {:.3}×)",
                log.log_bytes as f64 / log.events as f64,
                log.jsonl_bytes as f64 / log.events as f64,
                log.log_bytes as f64 / log.jsonl_bytes as f64,
            );
        }
        let group = if size >= 100 << 20 {
            harness::slow_group
        } else {
            harness::quick_group
        };
        let scan = measure::scan(&log, &format!("{label}/clean")).expect("scan sides");
        harness::compare(c, scan, group);
        if size == largest {
            harness::compare(c, measure::reopen(&log, &small), harness::quick_group);
        }
        log.open_final_turn().expect("an open final turn");
        let scan = measure::scan(&log, &format!("{label}/open_turn")).expect("scan sides");
        harness::compare(c, scan, group);
        drop(log);
        let _ = std::fs::remove_dir_all(dir);
    }
}

criterion_group!(benches, recovery);
criterion_main!(benches);
