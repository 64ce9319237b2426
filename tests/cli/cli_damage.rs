//! Damage to acknowledged events, through the `turnwal` command as a user
//! meets it (issue 12's four observations): a flipped bit in a one-batch
//! session is corruption, not a torn tail; `recover` never disagrees with
//! `verify`; the intact events of a corrupt session come out with
//! `--salvage`; and what a repair cuts is kept in a quarantine file.

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};

use support::{T0, lines, on, turn};

fn log_path(store: &Path, id: &str) -> PathBuf {
    support::wal_log(store, id)
}

/// Where each record of a native log starts, and where the last one ends
/// (docs/FORMAT.md: a 24-byte file header, the header JSON, then records
/// whose length follows from their head's length fields).
fn record_starts(bytes: &[u8]) -> Vec<usize> {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let mut at = 24 + u32_at(16);
    let mut starts = Vec::new();
    while at < bytes.len() {
        starts.push(at);
        let type_len = u16::from_le_bytes(bytes[at + 6..at + 8].try_into().unwrap()) as usize;
        at += 56 + type_len + u32_at(at + 8) + u32_at(at + 12) + u32_at(at + 16);
    }
    starts.push(at);
    starts
}

/// Three complete turns (18 events).
fn three_turns() -> Vec<String> {
    let mut events = Vec::new();
    for n in 1..=3 {
        events.extend(turn(n, events.len() as u64, T0 + 100 * n as i64));
    }
    events
}

/// Appends `events`, one `append` per batch of `per` events.
fn write(store: &Path, events: &[String], per: usize) {
    for (i, batch) in events.chunks(per).enumerate() {
        let mut args = vec!["append", "s", "--sync", "turn"];
        if i == 0 {
            args.push("--create");
        }
        let out = on(store, &args, &lines(batch));
        assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    }
}

/// Flips one bit of the payload of the record holding `seq`; returns where
/// that record starts.
fn flip_payload(store: &Path, seq: usize) -> u64 {
    let path = log_path(store, "s");
    let mut bytes = fs::read(&path).unwrap();
    let start = record_starts(&bytes)[seq];
    bytes[start + 52] ^= 0x04;
    fs::write(&path, bytes).unwrap();
    start as u64
}

#[test]
fn a_flipped_bit_in_a_one_batch_session_is_corruption_never_a_tear() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    write(store, &three_turns(), 18);
    let path = log_path(store, "s");
    let len = fs::metadata(&path).unwrap().len();
    let at = flip_payload(store, 1);
    let damaged = fs::read(&path).unwrap();
    let refusal = format!(
        "{}: corrupt at byte {at} (seq 1): record checksum mismatch (invalid-record); the \
         durability proof shows the log was durable through byte {len}, so this record had \
         been acknowledged [rule: inside-proven-length]",
        path.display()
    );

    let out = on(store, &["verify"], "");
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!("s: corrupt: {refusal}\n1 session: 0 clean, 0 open-turn, 0 torn, 1 corrupt\n")
    );
    for args in [
        &["recover", "s"][..],
        &["recover", "s", "--dry-run"],
        &["cat", "s"],
    ] {
        let out = on(store, args, "");
        assert_eq!(
            (out.status, out.stdout.as_str(), out.stderr.as_str()),
            (2, "", format!("turnwal: {refusal}\n").as_str()),
            "{args:?}"
        );
    }
    assert_eq!(fs::read(&path).unwrap(), damaged, "nothing was cut");
    assert!(!store.join("quarantine").exists());

    // After a power loss the proof may be gone: the first batch, published
    // only complete and fsynced, still proves it.
    fs::remove_file(store.join("sessions/.s.durable")).unwrap();
    let out = on(store, &["recover", "s"], "");
    assert_eq!(out.status, 2);
    // Its records state the file's length, which was durable before the
    // file was published (docs/FORMAT.md, "Published files").
    assert!(
        out.stderr.contains(&format!(
            "corrupt at byte {at} (seq 1): record checksum mismatch (invalid-record); the record \
             at byte {} (seq 0) was published in a file durable through byte {}, so this record \
             had been acknowledged [rule: inside-published-copy]",
            record_starts(&damaged)[0],
            damaged.len()
        )),
        "{}",
        out.stderr
    );
    assert_eq!(fs::read(&path).unwrap(), damaged, "nothing was cut");
}

#[test]
fn recover_and_verify_agree_on_damage_inside_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    write(store, &three_turns(), 6);
    let path = log_path(store, "s");
    let mut bytes = fs::read(&path).unwrap();
    let starts = record_starts(&bytes);
    let at = starts[7];
    bytes[at + 60..at + 64].copy_from_slice(b"XXXX");
    fs::write(&path, &bytes).unwrap();

    for args in [
        &["verify", "s"][..],
        &["recover", "s", "--dry-run"],
        &["recover", "s"],
    ] {
        let out = on(store, args, "");
        assert_eq!(out.status, 2, "{args:?}: {}{}", out.stdout, out.stderr);
        let text = format!("{}{}", out.stdout, out.stderr);
        assert!(
            text.contains(&format!(
                "corrupt at byte {at} (seq 7): record checksum mismatch"
            )),
            "{args:?}: {text}"
        );
    }
    assert_eq!(fs::read(&path).unwrap(), bytes, "nothing was cut");
    // The listing reads the end alone, and says so: it does not call the
    // log clean on the strength of the whole (`clean-end`, `tail`).
    let out = on(store, &["ls", "--json"], "");
    let line: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(
        (line["state"].as_str(), line["checked"].as_str()),
        (Some("clean-end"), Some("tail"))
    );
}

#[test]
fn salvage_reads_every_intact_event_and_repairs_with_a_quarantine() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    let events = three_turns();
    write(store, &events, 6);
    let path = log_path(store, "s");
    let at = flip_payload(store, 7);
    let damaged = fs::read(&path).unwrap();
    let starts = record_starts(&damaged);

    // Every intact event on stdout, the gap on stderr, exit 2.
    let out = on(store, &["cat", "s", "--salvage"], "");
    let mut intact = events.clone();
    intact.remove(7);
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (
            2,
            lines(&intact).as_str(),
            format!(
                "turnwal: gap at bytes {at}..{} (damaged): seq 7 lost: invalid-record: record \
                 checksum mismatch\n",
                starts[8]
            )
            .as_str()
        )
    );
    assert_eq!(
        fs::read(&path).unwrap(),
        damaged,
        "a salvage read writes nothing"
    );

    // The explicit salvage: keeps seqs 0-6, closes turn 2, quarantines the
    // rest.
    let dry = on(store, &["recover", "s", "--salvage", "--dry-run"], "");
    assert_eq!(dry.status, 0, "{}", dry.stderr);
    assert_eq!(
        fs::read(&path).unwrap(),
        damaged,
        "a dry run writes nothing"
    );
    let out = on(store, &["recover", "s", "--salvage"], "");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let quarantine: Vec<PathBuf> = fs::read_dir(store.join("quarantine"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(quarantine.len(), 1);
    assert_eq!(fs::read(&quarantine[0]).unwrap(), &damaged[at as usize..]);
    // Seq 6 opened turn 2; seq 7 was its user/message.
    let closer = r#"{"type":"turn/end","seq":7,"time":1700000000200,"data":{"turn":2,"reason":{"kind":"interrupted"}}}"#;
    let report = |written: &str| {
        format!(
            "session s: corrupt before recovery\nkept: 7 stored events\ncut: {} bytes at byte \
             {at} (seq 7): damaged: record checksum mismatch (invalid-record); the durability \
             proof shows the log was durable through byte {}, so this record had been \
             acknowledged [rule: inside-proven-length]\nclosers: 1\n{closer}\nwritten: \
             {written}\n",
            damaged.len() as u64 - at,
            damaged.len(),
        )
    };
    assert_eq!(dry.stdout, report("no (dry run)"));
    assert_eq!(
        out.stdout,
        format!("{}quarantine: {}\n", report("yes"), quarantine[0].display())
    );

    let verify = on(store, &["verify"], "");
    assert_eq!(
        (verify.status, verify.stdout),
        (
            0,
            format!(
                "s: clean, 8 events, 2 turns, {} bytes\nquarantined: {}\n\
                 1 session: 1 clean, 0 open-turn, 0 torn, 0 corrupt\n",
                fs::metadata(&path).unwrap().len(),
                quarantine[0].display()
            )
        )
    );
    let verify = on(store, &["verify", "--json"], "");
    let lines_of: Vec<serde_json::Value> = verify
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        (verify.status, lines_of.len(), &lines_of[1], &lines_of[2]),
        (
            0,
            3,
            &serde_json::json!({ "quarantined": quarantine[0].to_str().unwrap() }),
            &serde_json::json!({ "summary": { "sessions": 1, "clean": 1, "openTurn": 0,
                                              "torn": 0, "corrupt": 0, "unreadable": 0 } })
        )
    );
    let mut kept: Vec<String> = events[..7].to_vec();
    kept.push(closer.to_owned());
    let out = on(store, &["cat", "s"], "");
    assert_eq!((out.status, out.stdout), (0, lines(&kept)));
}
