//! Forged sealed units (issue 26, items 3–5): a unit head whose count,
//! plain length or frame lies, its record checksum recomputed so only the
//! numbers can give it away; and a compacted log with one flipped bit and
//! the proof a power loss left from before the compaction. Every command
//! answers with a typed refusal at the unit's offset — no abort, no
//! allocation sized by a forged count, no command of the store stopped by
//! one bad session — and every entry point agrees (`verify`, `recover`,
//! `recover --dry-run`, `recover --salvage`, `append`).

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};

use support::{on, turn};

/// The format versions whose units these tests forge: version 2 keeps its
/// units in the log, version 3 (the default) in the session's archive.
const VERSIONS: [u16; 2] = [2, 3];

/// Writes `batch` as the first turn of a new session `id` in format
/// `version`: through the CLI (`append --create`) in the default version;
/// through the library in version 2, as an earlier build left such logs.
fn write_first(store: &Path, id: &str, version: u16, batch: &[String]) {
    use turnwal::backend::wal::{WalBackend, format::FORMAT_VERSION};
    if version == FORMAT_VERSION {
        let out = on(
            store,
            &["append", id, "--create", "-q"],
            &support::lines(batch),
        );
        assert_eq!((out.status, out.stderr.as_str()), (0, ""));
        return;
    }
    let backend = WalBackend::open(store).unwrap().creating_version(version);
    let created = turnwal::Store::with_backend(std::sync::Arc::new(backend), Default::default());
    created.create(turnwal::SessionHeader::new(id, 1)).unwrap();
    let events: Vec<turnwal::Event> = batch
        .iter()
        .map(|line| turnwal::Event::from_json(line.as_bytes()).unwrap())
        .collect();
    created.append(id, &events).unwrap();
    // Dropped, not closed: a close would seal the turn.
    drop(created);
}

/// A store with `victim` compacted into one sealed unit and `other` plain,
/// both created in format `version`.
fn store_with_a_unit(dir: &Path, version: u16) -> PathBuf {
    let store = dir.join("store");
    for id in ["victim", "other"] {
        write_first(&store, id, version, &turn(1, 0, support::T0));
    }
    let out = on(&store, &["compact", "victim"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    store
}

fn log(store: &Path, id: &str) -> PathBuf {
    store.join("sessions").join(format!("{id}.twal"))
}

/// The file that holds `id`'s sealed units: its log in version 2, its
/// archive in version 3.
fn units_file(store: &Path, id: &str, version: u16) -> PathBuf {
    match version {
        2 => log(store, id),
        _ => store.join("sessions").join(format!("{id}.twarc")),
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// Where the log's first record (the unit) starts.
fn unit_at(bytes: &[u8]) -> usize {
    let at = 24 + u32_at(bytes, 16) as usize;
    assert_eq!(bytes[at + 4], 18, "the first record is a sealed unit");
    at
}

/// Recomputes the checksum of the record at `at` with the file's salt.
fn reseal(bytes: &mut [u8], at: usize) {
    let len = u32_at(bytes, at + 8) as usize + 56;
    let salt = u32_at(bytes, 12);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&salt.to_le_bytes());
    crc.update(&bytes[at + 4..at + len]);
    bytes[at..at + 4].copy_from_slice(&crc.finalize().to_le_bytes());
}

/// The unit's head field at `field` (12: plain length, 16: count) set to
/// `value`, its checksum recomputed.
fn forge_field(path: &Path, field: usize, value: u32) -> Vec<u8> {
    let mut bytes = fs::read(path).unwrap();
    let at = unit_at(&bytes);
    bytes[at + field..at + field + 4].copy_from_slice(&value.to_le_bytes());
    reseal(&mut bytes, at);
    fs::write(path, &bytes).unwrap();
    bytes
}

/// The unit's frame replaced by `frame`, its lengths and checksum redone.
fn forge_frame(path: &Path, frame: &[u8]) -> Vec<u8> {
    let bytes = fs::read(path).unwrap();
    let at = unit_at(&bytes);
    let old = u32_at(&bytes, at + 8) as usize;
    let mut out = bytes[..at + 52].to_vec();
    out[at + 8..at + 12].copy_from_slice(&(frame.len() as u32).to_le_bytes());
    out.extend_from_slice(frame);
    out.extend_from_slice(&(56 + frame.len() as u32).to_le_bytes());
    out.extend_from_slice(&bytes[at + 56 + old..]);
    reseal(&mut out, at);
    fs::write(path, &out).unwrap();
    out
}

/// What a store-wide command and every one-session command answer about
/// a store whose `victim` is corrupt at `offset` for `why`. `ls` judges a
/// log from its end: a forged count its head cannot give away reads as a
/// clean end (`clean-end`, which never claims the rest was checked).
fn every_command_refuses_the_victim_alone(store: &Path, at: &str, listed: &str) {
    let at = at.to_owned();
    // The listing goes on: the other session listed, the victim corrupt.
    let out = on(store, &["ls", "--json"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let rows: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0]["id"].as_str(), rows[0]["state"].as_str()),
        (Some("other"), Some("clean-end"))
    );
    assert_eq!(
        (rows[1]["id"].as_str(), rows[1]["state"].as_str()),
        (Some("victim"), Some(listed))
    );
    if listed == "corrupt" {
        assert!(
            rows[1]["problem"].as_str().unwrap().contains(&at),
            "{}",
            rows[1]
        );
    }
    // Store-wide reads answer for the other session and name the victim.
    let out = on(store, &["verify"], "");
    assert_eq!(out.status, 2);
    assert!(
        out.stdout.starts_with("other: clean, 6 events"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(&at), "{}", out.stdout);
    for args in [&["grep", "hi"][..], &["stats"]] {
        let out = on(store, args, "");
        assert_eq!(out.status, 2, "{args:?}");
        assert!(out.stdout.contains("other"), "{args:?}: {}", out.stdout);
        assert!(out.stderr.contains(&at), "{args:?}: {}", out.stderr);
    }
    // One-session reads and writes refuse it, typed, never an abort.
    for args in [
        &["cat", "victim"][..],
        &["show", "victim"],
        &["tail", "victim"],
        &["export", "victim"],
        &["recover", "victim"],
        &["recover", "victim", "--dry-run"],
        &["append", "victim"],
    ] {
        let input = support::lines(&turn(2, 6, support::T0 + 100));
        let out = on(store, args, &input);
        // A streamed export has written its opening line when the read
        // meets the unit; never its closing line, which proves a file
        // whole (an import refuses it). Nothing else prints a byte.
        let stdout = if args[0] == "export" {
            assert!(!out.stdout.contains("turnwalExportEnd"), "{}", out.stdout);
            out.stdout.lines().skip(1).collect::<String>()
        } else {
            out.stdout.clone()
        };
        assert_eq!(
            (out.status, stdout.as_str()),
            (2, ""),
            "{args:?}: {}",
            out.stderr
        );
        assert!(out.stderr.contains(&at), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn a_unit_stating_more_events_than_its_bytes_hold_is_refused_by_every_command() {
    for (version, count) in VERSIONS
        .into_iter()
        .flat_map(|v| [(v, u32::MAX), (v, 1 << 20)])
    {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_a_unit(dir.path(), version);
        let path = units_file(&store, "victim", version);
        let plain = u32_at(
            &fs::read(&path).unwrap(),
            unit_at(&fs::read(&path).unwrap()) + 12,
        );
        let forged = forge_field(&path, 16, count);
        let at = unit_at(&forged);
        // A version-3 listing reads the live file alone, whose reference
        // carries the count: it cannot see the archive's unit.
        let listed = if version == 2 { "corrupt" } else { "clean-end" };
        every_command_refuses_the_victim_alone(
            &store,
            &format!(
                "corrupt at byte {at} (seq 0): sealed unit states {count} events, more than its \
                 {plain} plain bytes can hold"
            ),
            listed,
        );
        assert_eq!(fs::read(&path).unwrap(), forged, "nothing written");
    }
}

#[test]
fn a_unit_whose_count_or_length_is_off_by_one_is_refused_from_its_inside() {
    // Plausible numbers: only decompressing and walking the unit (which
    // every scan now does) can tell.
    for case in [
        (16, 1, "sealed unit holds 6 events, its head states 7"),
        (16, -1, "sealed unit holds 6 events, its head states 5"),
        (12, 1, "sealed-unit-length: the frame decompresses to"),
        (12, -1, "sealed-unit-length: the frame inflates past"),
    ]
    .into_iter()
    .flat_map(|case| VERSIONS.map(|v| (v, case)))
    {
        let (version, (field, delta, why)) = case;
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_a_unit(dir.path(), version);
        let path = units_file(&store, "victim", version);
        let bytes = fs::read(&path).unwrap();
        let at = unit_at(&bytes);
        let value = (i64::from(u32_at(&bytes, at + field)) + delta) as u32;
        forge_field(&path, field, value);
        // A version-3 archive's unit counts are summed against its
        // reference before any unit is decoded: a count off by one is an
        // archive mismatch at the end of what the reference stands on.
        let refusal = if version == 3 && field == 16 {
            format!(
                "corrupt at byte {}: archive-mismatch: its units hold {value} events through \
                 turn 1, the reference states 6 through turn 1",
                bytes.len()
            )
        } else {
            format!("corrupt at byte {at} (seq 0): {why}")
        };
        every_command_refuses_the_victim_alone(&store, &refusal, "clean-end");
    }
}

/// `g5`: a frame that inflates to 100 MiB behind a unit of 245 plain
/// bytes: `verify`, `recover --dry-run`, `recover` and `append` refuse it
/// alike (they used to disagree); `recover --salvage` quarantines the unit
/// with what follows it and keeps what precedes it (nothing: the unit is
/// the first record), and the session then reads as what was kept. In
/// version 2 (the frame grows the log, which a version-3 archive's
/// reference would give away by its length first).
#[test]
fn a_unit_that_inflates_past_its_length_is_corrupt_for_every_entry_point_and_salvaged() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_a_unit(dir.path(), 2);
    let path = log(&store, "victim");
    let bomb = zstd::bulk::compress(&vec![0u8; 100 << 20], 19).unwrap();
    assert!(bomb.len() < 64 << 10);
    let forged = forge_frame(&path, &bomb);
    let at = unit_at(&forged);
    fs::remove_file(store.join("sessions/.victim.durable")).unwrap();
    let why = "sealed-unit-length: the frame inflates past the";
    for args in [
        &["verify", "victim"][..],
        &["recover", "victim", "--dry-run"],
        &["recover", "victim"],
        &["append", "victim"],
    ] {
        let out = on(
            &store,
            args,
            &support::lines(&turn(2, 6, support::T0 + 100)),
        );
        assert_eq!(out.status, 2, "{args:?}: {} {}", out.stdout, out.stderr);
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(
            said.contains(&format!("corrupt at byte {at} (seq 0): {why}")),
            "{args:?}: {said}"
        );
        assert!(said.contains("[rule: first-record]"), "{args:?}: {said}");
    }
    assert_eq!(fs::read(&path).unwrap(), forged, "nothing written");
    let out = on(&store, &["recover", "victim", "--salvage"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "cut: {} bytes at byte {at} (seq 0): damaged",
            forged.len() - at
        )),
        "{}",
        out.stdout
    );
    let quarantined: Vec<_> = fs::read_dir(store.join("quarantine"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(quarantined.len(), 1);
    assert_eq!(fs::read(&quarantined[0]).unwrap(), forged[at..]);
    // What was kept (the header, no event) verifies, and appends go on
    // from seq 0.
    let out = on(&store, &["verify", "victim"], "");
    assert_eq!(out.status, 0, "{}", out.stdout);
    let out = on(
        &store,
        &["append", "victim"],
        &support::lines(&turn(1, 0, support::T0)),
    );
    assert_eq!((out.status, out.stdout), (0, support::acks(0..6)));
}

/// `g3`: a compacted log, the proof a power loss left from before the
/// compaction (another salt: it states nothing), and one flipped bit in
/// the unit: refused as corruption by every command, never read as a torn
/// tail and cut (it was, and the next append started again at seq 0).
#[test]
fn a_compacted_log_with_a_stale_proof_and_a_flipped_bit_is_corrupt_never_torn() {
    for version in VERSIONS {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let mut events = Vec::new();
        for n in 1..=5 {
            let batch = turn(n, (n - 1) * 6, support::T0 + n as i64);
            if n == 1 {
                write_first(&store, "s", version, &batch);
            } else {
                let out = on(&store, &["append", "s", "-q"], &support::lines(&batch));
                assert_eq!(out.status, 0, "{}", out.stderr);
            }
            events.extend(batch);
        }
        let proof = store.join("sessions/.s.durable");
        let before = fs::read(&proof).unwrap();
        assert_eq!(on(&store, &["compact", "s"], "").status, 0);
        fs::write(&proof, &before).unwrap();
        let path = units_file(&store, "s", version);
        let mut bytes = fs::read(&path).unwrap();
        let at = unit_at(&bytes);
        let middle = bytes.len() / 2;
        assert!(middle > at + 56);
        bytes[middle] ^= 1;
        fs::write(&path, &bytes).unwrap();
        for args in [
            &["verify", "s"][..],
            &["cat", "s"],
            &["recover", "s"],
            &["recover", "s", "--dry-run"],
            &["append", "s"],
        ] {
            let out = on(&store, args, &support::lines(&turn(6, 30, support::T0 + 9)));
            assert_eq!(
                out.status, 2,
                "v{version} {args:?}: {} {}",
                out.stdout, out.stderr
            );
            let said = format!("{}{}", out.stdout, out.stderr);
            assert!(
                said.contains(&format!("corrupt at byte {at} (seq 0)")),
                "v{version} {args:?}: {said}"
            );
            assert!(
                said.contains(&path.display().to_string()),
                "v{version} {args:?}: {said}"
            );
        }
        assert_eq!(fs::read(&path).unwrap(), bytes, "nothing cut");
        assert!(!store.join("quarantine").exists());
        // Salvage reads every event the damage spared: none inside the
        // unit, which held them all.
        let out = on(&store, &["cat", "s", "--salvage"], "");
        assert_eq!(out.status, 2);
        assert_eq!(out.stdout, "");
    }
}

/// A record whose seqs pass 2^53 − 1 (checksum recomputed) is invalid at
/// its head, so no append ever acknowledges a seq past what a harness can
/// hold.
#[test]
fn a_unit_whose_seqs_pass_the_largest_safe_integer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_a_unit(dir.path(), 2);
    let path = log(&store, "victim");
    let mut bytes = fs::read(&path).unwrap();
    let at = unit_at(&bytes);
    let seq = (1u64 << 53) - 3; // 6 events: the last would be 2^53 + 2
    bytes[at + 24..at + 32].copy_from_slice(&seq.to_le_bytes());
    reseal(&mut bytes, at);
    fs::write(&path, &bytes).unwrap();
    let out = on(
        &store,
        &["append", "victim"],
        &support::lines(&turn(2, 6, support::T0)),
    );
    assert_eq!((out.status, out.stdout.as_str()), (2, ""), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "record seqs {seq}..{} pass the largest safe integer",
            seq + 6
        )),
        "{}",
        out.stderr
    );
}
