//! `turnwal bench`, run once as a real binary: the JSON shape scripts rely
//! on, never the figures (the machine is shared and noisy).

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_turnwal");

/// The keys of the `ratios` map that have a target.
const RATIOS: [&str; 7] = [
    "append_vs_raw",
    "append_vs_jsonl",
    "ingest_vs_json_validate",
    "durable_vs_raw_fsync",
    "durable_vs_sqlite",
    "scan_vs_mmap_crc",
    "scan_vs_jsonl",
];

/// The further keys of the `ratios` map: turnwal's SQLite backend, no target.
const SQLITE_RATIOS: [&str; 5] = [
    "append_vs_turnwal_sqlite",
    "durable_vs_turnwal_sqlite",
    "scan_vs_turnwal_sqlite",
    "sqlite_backend_durable_vs_sqlite",
    "sqlite_backend_append_vs_sqlite",
];

/// The further keys of the ingest comparison, no target: the engine's parse
/// alone vs serde_json's validation, and ingest vs its physical floor.
const INGEST_RATIOS: [&str; 2] = ["ingest_parse_vs_json_validate", "ingest_vs_validate_write"];

/// The further keys of the realistic session's append, ingest and durable
/// comparisons (issue 31), no target in the map: each is the speed ratio
/// of turnwal over its baseline in the comparison of that name.
const REALISTIC_RATIOS: [(&str, &str, &str); 3] = [
    (
        "realistic_append_vs_raw",
        "append_buffered_realistic",
        "raw_write",
    ),
    (
        "realistic_ingest_vs_validate_write",
        "ingest_text_realistic",
        "validate_write",
    ),
    (
        "realistic_durable_vs_raw_fsync",
        "durable_turns_realistic",
        "raw_fsync",
    ),
];

/// The sides of the comparisons beyond the baselines, in order.
const SIDES: [(&str, &[&str]); 4] = [
    (
        "ingest_text",
        &[
            "turnwal",
            "serde_validate",
            "validate_write",
            "turnwal_parse",
        ],
    ),
    (
        "append_buffered",
        &[
            "turnwal",
            "raw_write",
            "jsonl_write",
            "turnwal_sqlite_normal",
            "sqlite_normal",
        ],
    ),
    (
        "durable_turns",
        &["turnwal", "raw_fsync", "sqlite_full", "turnwal_sqlite_full"],
    ),
    (
        "recovery_scan/64MiB/clean",
        &["turnwal", "mmap_crc32", "jsonl_parse", "turnwal_sqlite"],
    ),
];

fn positive_finite(v: &Value, what: &str) -> f64 {
    let x = v
        .as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {v}"));
    assert!(x.is_finite() && x > 0.0, "{what} = {x}");
    x
}

#[test]
fn bench_quick_json_has_every_ratio_and_cleans_up() {
    let parent = tempfile::tempdir().unwrap();
    let out = crate::support::native(BIN)
        .env_remove("TURNWAL_STORE")
        .args(["bench", "--quick", "--json", "--store"])
        .arg(parent.path())
        .output()
        .expect("run turnwal bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    // Progress goes to a terminal only; a pipe gets nothing.
    assert_eq!(stderr, "", "stderr is not a terminal here");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one JSON object on one line");
    let report: Value = serde_json::from_str(&stdout).unwrap();

    let ratios = report["ratios"].as_object().expect("a ratios map");
    let mut keys: Vec<&str> = ratios.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut expected = RATIOS.to_vec();
    expected.extend(SQLITE_RATIOS);
    expected.extend(INGEST_RATIOS);
    expected.extend(REALISTIC_RATIOS.map(|(key, _, _)| key));
    expected.sort_unstable();
    assert_eq!(keys, expected);
    for key in RATIOS {
        positive_finite(&ratios[key], key);
        let target = &report["targets"][key];
        positive_finite(&target["target"], &format!("{key} target"));
        assert!(target["met"].is_boolean(), "{key}: {target}");
    }
    // The SQLite backend's ratios have no target.
    let mut targets: Vec<&str> = report["targets"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    targets.sort_unstable();
    let mut expected = RATIOS.to_vec();
    expected.sort_unstable();
    assert_eq!(targets, expected);
    for &key in SQLITE_RATIOS.iter().chain(&INGEST_RATIOS) {
        positive_finite(&ratios[key], key);
    }
    // Each is the speed ratio of two sides of one comparison.
    let median = |comparison: &str, side: &str| -> f64 {
        let r = report["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == comparison)
            .unwrap_or_else(|| panic!("{comparison}"));
        let s = r["sides"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == side)
            .unwrap_or_else(|| panic!("{comparison} {side}"));
        s["median_s"].as_f64().unwrap()
    };
    for (key, comparison, side, base) in [
        (
            "ingest_parse_vs_json_validate",
            "ingest_text",
            "turnwal_parse",
            "serde_validate",
        ),
        (
            "ingest_vs_validate_write",
            "ingest_text",
            "turnwal",
            "validate_write",
        ),
        (
            "append_vs_turnwal_sqlite",
            "append_buffered",
            "turnwal",
            "turnwal_sqlite_normal",
        ),
        (
            "durable_vs_turnwal_sqlite",
            "durable_turns",
            "turnwal",
            "turnwal_sqlite_full",
        ),
        (
            "scan_vs_turnwal_sqlite",
            "recovery_scan/64MiB/clean",
            "turnwal",
            "turnwal_sqlite",
        ),
        (
            "sqlite_backend_durable_vs_sqlite",
            "durable_turns",
            "turnwal_sqlite_full",
            "sqlite_full",
        ),
        (
            "sqlite_backend_append_vs_sqlite",
            "append_buffered",
            "turnwal_sqlite_normal",
            "sqlite_normal",
        ),
    ]
    .into_iter()
    .chain(REALISTIC_RATIOS.map(|(key, comparison, base)| (key, comparison, "turnwal", base)))
    {
        let ratio = median(comparison, base) / median(comparison, side);
        let reported = ratios[key].as_f64().unwrap();
        assert!(
            (reported - ratio).abs() <= 1e-9 * ratio,
            "{key}: {reported} vs {ratio}"
        );
    }
    assert_eq!(report["quick"], true);

    // Every comparison: named sides with positive medians and rates, the
    // baselines with their ratio; durable turns with latency percentiles.
    let results = report["results"].as_array().expect("results");
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for prefix in [
        "append_buffered",
        "ingest_text",
        "durable_turns",
        "recovery_scan/",
        "tail_read_50",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(prefix)),
            "{prefix} in {names:?}"
        );
    }
    for (comparison, expected) in SIDES {
        let r = results.iter().find(|r| r["name"] == comparison).unwrap();
        let sides: Vec<&str> = r["sides"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(sides, expected, "{comparison}");
    }
    for r in results {
        let sides = r["sides"].as_array().unwrap();
        assert!(!sides.is_empty());
        for (i, side) in sides.iter().enumerate() {
            let what = format!("{} {}", r["name"], side["name"]);
            positive_finite(&side["median_s"], &what);
            positive_finite(&side["events_per_s"], &what);
            assert_eq!(side.get("turnwal_ratio").is_some(), i > 0, "{what}");
            if i > 0 {
                positive_finite(&side["turnwal_ratio"], &what);
            }
            if r["name"].as_str().unwrap().starts_with("durable_turns") {
                positive_finite(&side["turns_per_s"], &what);
                positive_finite(&side["p50_ms"], &what);
                positive_finite(&side["p99_ms"], &what);
            }
        }
    }
    positive_finite(&report["disk"]["bytes_per_event"], "bytes per event");
    positive_finite(&report["disk"]["ratio"], "disk ratio");
    // Bytes at rest, every turn closed, of one session in every format, and
    // the compact format against upstream's with the targets.
    let disk = &report["disk"];
    for key in [
        "jsonl_bytes_per_event",
        "at_rest_events",
        "compact_bytes",
        "v2_unsealed_bytes",
        "v1_bytes",
        "jsonl_zstd_bytes",
        "jsonl_raw_bytes",
        "compact_bytes_per_event",
        "v2_unsealed_bytes_per_event",
        "v1_bytes_per_event",
        "jsonl_zstd_bytes_per_event",
        "jsonl_raw_bytes_per_event",
    ] {
        positive_finite(&disk[key], key);
    }
    let bytes = |key: &str| disk[key].as_u64().unwrap_or_else(|| panic!("{key}"));
    let events = bytes("at_rest_events") as f64;
    for (key, per_event) in [
        ("compact_bytes", "compact_bytes_per_event"),
        ("jsonl_zstd_bytes", "jsonl_zstd_bytes_per_event"),
        ("jsonl_raw_bytes", "jsonl_raw_bytes_per_event"),
    ] {
        let expected = bytes(key) as f64 / events;
        let reported = disk[per_event].as_f64().unwrap();
        assert!(
            (reported - expected).abs() <= 1e-9 * expected,
            "{per_event}"
        );
    }
    // Sealing shrinks the log: compact < unsealed version 2 ≤ version 1.
    assert!(
        bytes("compact_bytes") < bytes("v2_unsealed_bytes"),
        "{disk}"
    );
    assert!(bytes("v2_unsealed_bytes") <= bytes("v1_bytes"), "{disk}");
    for (key, base, target) in [
        ("compact_vs_jsonl_zstd", "jsonl_zstd_bytes", 1.0),
        ("compact_vs_jsonl_raw", "jsonl_raw_bytes", 0.5),
    ] {
        let ratio = positive_finite(&disk[key]["ratio"], key);
        let expected = bytes("compact_bytes") as f64 / bytes(base) as f64;
        assert!((ratio - expected).abs() <= 1e-9 * expected, "{key}");
        assert_eq!(disk[key]["target"].as_f64(), Some(target), "{key}");
        assert_eq!(disk[key]["met"].as_bool(), Some(ratio <= target), "{key}");
    }
    positive_finite(&report["scaling"]["tail_large_vs_small"], "tail scaling");
    positive_finite(&report["tail_read"]["large_us"], "tail read");
    assert!(report["tail_read"]["met"].is_boolean());
    assert!(report["machine"]["cpus"].as_u64().unwrap() >= 1);

    // The scratch directory inside --store is gone.
    let left: Vec<_> = std::fs::read_dir(parent.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn bench_help_names_its_flags() {
    // The help is enough to check the flags exist without a second run.
    let out = crate::support::native(BIN)
        .args(["bench", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in ["--quick", "--json", "--store"] {
        assert!(help.contains(flag), "{flag} in {help}");
    }
}

/// Runs `turnwal bench` with `args` and a scratch store under a fresh
/// directory; returns its one JSON object, after checking the scratch is
/// gone.
fn bench_json(args: &[&str]) -> Value {
    let parent = tempfile::tempdir().unwrap();
    let out = crate::support::native(BIN)
        .env_remove("TURNWAL_STORE")
        .arg("bench")
        .args(args)
        .args(["--json", "--store"])
        .arg(parent.path())
        .output()
        .expect("run turnwal bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one JSON object on one line");
    let leftovers: Vec<_> = std::fs::read_dir(parent.path()).unwrap().collect();
    assert!(leftovers.is_empty(), "scratch left behind: {leftovers:?}");
    serde_json::from_str(&stdout).unwrap()
}

/// Events in the first `turns` turns of the realistic session `seed`.
fn realistic_events(seed: u64, turns: usize) -> u64 {
    let mut session = turnwal_testkit::workload::realistic::Realistic::new(seed);
    (0..turns).map(|_| session.next_turn().len() as u64).sum()
}

/// `--live-turns`: the session's exact event count, its bytes (log and
/// archive) at least its largest live file, and both seals' costs.
#[test]
fn bench_live_turns_json_reports_bytes_lag_and_seal_costs() {
    let report = bench_json(&["--live-turns", "30"]);
    let session = &report["sessions"][0];
    assert_eq!(session["turns"], 30);
    assert_eq!(session["events"], realistic_events(31, 30));
    let wal = session["wal_bytes"].as_u64().unwrap();
    let lag = session["largest_live_file_bytes"].as_u64().unwrap();
    assert!(lag > 0 && lag <= wal, "lag {lag}, session {wal}");
    for key in ["jsonl_zstd_bytes", "jsonl_raw_bytes", "process_ms"] {
        positive_finite(&session[key], key);
    }
    let ratio = session["wal_vs_zstd"].as_f64().unwrap();
    let zstd = session["jsonl_zstd_bytes"].as_f64().unwrap();
    assert!((ratio - wal as f64 / zstd).abs() < 1e-9);
    // The sessions measured for the seals have 100 turns (the least).
    for seal in ["seal_idle", "seal_compact"] {
        assert_eq!(report[seal]["turns"], 100, "{seal}");
        for key in ["sealed_bytes", "cpu_ms_per_mib", "wall_ms"] {
            positive_finite(&report[seal][key], &format!("{seal} {key}"));
        }
    }
    // Both seal the same closed turns of the same session.
    assert_eq!(
        report["seal_idle"]["sealed_bytes"],
        report["seal_compact"]["sealed_bytes"]
    );
}

/// `--concurrent`: every session's events counted, the three sides timed,
/// and each ratio the quotient of its two times.
#[test]
fn bench_concurrent_json_times_three_sides() {
    let report = bench_json(&["--concurrent", "3", "--concurrent-turns", "2", "--quick"]);
    assert_eq!(report["sessions"], 3);
    assert_eq!(report["turns_per_session"], 2);
    let events: u64 = (100..103).map(|seed| realistic_events(seed, 2)).sum();
    assert_eq!(report["events"], events);
    let ms = |key: &str| positive_finite(&report[key], key);
    let (wal, plain, sqlite) = (ms("wal_ms"), ms("plain_ms"), ms("sqlite_ms"));
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9 * b.max(1.0);
    assert!(close(report["wal_vs_plain"].as_f64().unwrap(), plain / wal));
    assert!(close(
        report["wal_vs_sqlite"].as_f64().unwrap(),
        sqlite / wal
    ));
    assert!(close(
        report["wal_turns_per_s"].as_f64().unwrap(),
        6.0 / (wal / 1e3)
    ));
}
