//! The criterion glue every bench file shares: run each side of a library
//! [`Comparison`] as a criterion function in one group, keep every run's
//! time, and print the library's table (medians, events/s, MiB/s, ratios to
//! the baselines) after the group, the same table `turnwal bench` prints.
//! What is timed is the library's [`Side::once`], so the benches and the
//! CLI measure exactly the same thing. The table's medians include
//! criterion's warm-up runs (they are runs like the others; criterion's own
//! estimates, printed above the table, leave them out).
//!
//! [`Side::once`]: turnwal_cli::bench::Side::once

#![allow(dead_code)]

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
use turnwal_cli::bench::{Comparison, Outcome};

/// Whether the big cases (1 GiB logs, the session of a million events)
/// run: on unless `TURNWAL_BENCH_BIG=0`.
pub fn big() -> bool {
    std::env::var("TURNWAL_BENCH_BIG").map_or(true, |v| v != "0")
}

/// How long criterion spends on each side: short, since every run already
/// repeats thousands of operations and the machine is noisy anyway.
pub fn quick_group(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
}

/// For sides whose one run takes a second or more: ten flat samples.
pub fn slow_group(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat);
}

/// Runs every side of `comparison` in criterion group `comparison.name`,
/// then prints the comparison's table. Returns the outcome, or `None` when
/// a filter skipped a side (no ratio can be formed then).
pub fn compare(
    c: &mut Criterion,
    mut comparison: Comparison<'_>,
    configure: fn(&mut BenchmarkGroup<'_, WallTime>),
) -> Option<Outcome> {
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); comparison.sides.len()];
    let mut group = c.benchmark_group(comparison.name.clone());
    configure(&mut group);
    for (side, samples) in comparison.sides.iter_mut().zip(&mut samples) {
        let bytes = side.bytes().unwrap_or(comparison.bytes);
        // Events, or the comparison's own unit (sessions listed, reopens).
        let elements = match (comparison.events, comparison.ops) {
            (0, Some((n, _))) => n,
            (n, _) => n,
        };
        group.throughput(if bytes == 0 {
            Throughput::Elements(elements)
        } else {
            Throughput::ElementsAndBytes { elements, bytes }
        });
        let name = side.name().to_owned();
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t = side.once().expect("a bench run failed");
                    samples.push(t);
                    total += t;
                }
                total
            })
        });
    }
    group.finish();
    if samples.iter().any(Vec::is_empty) {
        return None;
    }
    let outcome = comparison.outcome(samples);
    println!("\n{}", outcome.table());
    Some(outcome)
}
