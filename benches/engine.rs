//! Append and recovery throughput of the native WAL, each measured against
//! a baseline in the same run. `cargo bench --bench engine`; figures and
//! ratios are kept in docs/PERFORMANCE.md.

mod common;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde::Serialize;
use serde_json::value::RawValue;
use turnwal::backend::Backend;
use turnwal::backend::wal::{WalBackend, format};
use turnwal::{Event, SessionHeader, Store, StoreOptions, SyncMode, Tracker};

#[derive(Serialize)]
struct JsonLine<'a> {
    #[serde(rename = "type")]
    event_type: &'a str,
    seq: u64,
    time: i64,
    data: &'a RawValue,
}

fn write_jsonl(path: &std::path::Path, turns: &[Vec<Event>]) {
    let mut w = BufWriter::new(File::create(path).unwrap());
    for e in turns.iter().flatten() {
        let data: &RawValue = serde_json::from_str(e.data().get()).unwrap();
        let line = JsonLine {
            event_type: e.event_type(),
            seq: e.seq(),
            time: e.time(),
            data,
        };
        serde_json::to_writer(&mut w, &line).unwrap();
        w.write_all(b"\n").unwrap();
    }
    w.flush().unwrap();
}

fn encoded_turns(turns: &[Vec<Event>]) -> Vec<Vec<u8>> {
    let mut tracker = Tracker::new(turnwal::Policy::Strict);
    turns
        .iter()
        .map(|batch| {
            let placements = tracker.accept_batch(batch).unwrap();
            let mut bytes = Vec::new();
            for (e, p) in batch.iter().zip(placements) {
                format::encode_record(&mut bytes, e, p, 0, 7);
            }
            bytes
        })
        .collect()
}

fn append(c: &mut Criterion) {
    let turns = common::session(1, 60);
    let bytes = common::json_bytes(&turns);
    let encoded = encoded_turns(&turns);
    let mut group = c.benchmark_group("append_buffered");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(20);
    let options = StoreOptions {
        sync: SyncMode::Never,
        ..StoreOptions::default()
    };
    group.bench_function("turnwal", |b| {
        b.iter_batched(
            || {
                let dir = tempfile::tempdir().unwrap();
                let store = Store::open_with_options(dir.path(), options).unwrap();
                store.create(SessionHeader::new("bench", 1)).unwrap();
                (dir, store)
            },
            |(dir, store)| {
                for batch in &turns {
                    store.append("bench", batch).unwrap();
                }
                (dir, store)
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("raw_write_same_bytes", |b| {
        b.iter_batched(
            || tempfile::tempdir().unwrap(),
            |dir| {
                let file = File::create(dir.path().join("raw")).unwrap();
                let mut at = 0;
                for turn in &encoded {
                    file.write_all_at(turn, at).unwrap();
                    at += turn.len() as u64;
                }
                dir
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("jsonl_bufwriter", |b| {
        b.iter_batched(
            || tempfile::tempdir().unwrap(),
            |dir| {
                write_jsonl(&dir.path().join("log.jsonl"), &turns);
                dir
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn recovery(c: &mut Criterion) {
    let turns = common::session(2, 600);
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        sync: SyncMode::Never,
        ..StoreOptions::default()
    };
    let store = Store::open_with_options(dir.path(), options).unwrap();
    store.create(SessionHeader::new("big", 1)).unwrap();
    for batch in &turns {
        store.append("big", batch).unwrap();
    }
    drop(store);
    let backend = WalBackend::open(dir.path()).unwrap();
    let log = backend.log_path("big");
    let size = std::fs::metadata(&log).unwrap().len();
    let jsonl = dir.path().join("big.jsonl");
    write_jsonl(&jsonl, &turns);

    let mut group = c.benchmark_group("recovery_scan");
    group.throughput(Throughput::Bytes(size));
    group.sample_size(20);
    group.bench_function("turnwal_scan", |b| {
        b.iter(|| backend.scan("big").unwrap().unwrap().stored_len())
    });
    group.bench_function("mmap_crc32_baseline", |b| {
        b.iter(|| {
            let file = File::open(&log).unwrap();
            // SAFETY: the bench owns the file; nothing truncates it.
            let map = unsafe { memmap2::Mmap::map(&file).unwrap() };
            crc32fast::hash(&map)
        })
    });
    group.bench_function("jsonl_serde_parse", |b| {
        b.iter(|| {
            let text = std::fs::read(&jsonl).unwrap();
            let mut n = 0u64;
            for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                #[derive(serde::Deserialize)]
                #[allow(dead_code)]
                struct Line<'a> {
                    #[serde(rename = "type", borrow)]
                    event_type: std::borrow::Cow<'a, str>,
                    seq: u64,
                    time: i64,
                    #[serde(borrow)]
                    data: &'a RawValue,
                }
                let l: Line = serde_json::from_slice(line).unwrap();
                n += l.seq;
            }
            n
        })
    });
    group.finish();
}

criterion_group!(benches, append, recovery);
criterion_main!(benches);
