//! Replays the fuzz targets' checked-in inputs on the stable toolchain: every
//! file of `fuzz/corpus/<target>/` (the seed corpus) and of
//! `fuzz/regressions/<target>/` (minimized reproducers of crashes the fuzzer
//! found) runs through the same library function the cargo-fuzz target
//! calls. A case that panics fails the test, naming the file and the panic.
//! The fuzzing itself (nightly-only flags, run with `RUSTC_BOOTSTRAP=1`) is in
//! `.ci/run`; see docs/RELIABILITY.md, "Fuzzing".

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use turnwal_testkit::crashlab::{
    differential::fuzz_differential, fuzz_decode, fuzz_scan, ops::fuzz_ops,
};

/// The inputs of one target, sorted: seeds, then regressions.
fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut files = Vec::new();
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(dir).join(target)) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .map(|e| e.expect("a readable corpus entry").path())
            .filter(|p| {
                p.is_file()
                    && !p
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            })
            .collect();
        found.sort();
        files.extend(found);
    }
    files
}

fn message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a non-string panic".to_owned())
}

/// Runs every input of `target` through `f`; fails naming each input that
/// panicked.
fn replay(target: &str, f: fn(&[u8])) {
    let files = inputs(target);
    assert!(
        !files.is_empty(),
        "no inputs under fuzz/corpus/{target}/: the seed corpus is missing"
    );
    let mut failures = Vec::new();
    for path in &files {
        let bytes = std::fs::read(path).expect("a readable corpus file");
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| f(&bytes))) {
            failures.push(format!(
                "{} ({} bytes) panicked: {}",
                path.display(),
                bytes.len(),
                message(payload.as_ref())
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} {target} inputs failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn scan_corpus_replays_clean() {
    replay("scan", fuzz_scan);
}

#[test]
fn ops_corpus_replays_clean() {
    replay("ops", fuzz_ops);
}

#[test]
fn decode_corpus_replays_clean() {
    replay("decode", fuzz_decode);
}

#[test]
fn differential_corpus_replays_clean() {
    replay("differential", fuzz_differential);
}
