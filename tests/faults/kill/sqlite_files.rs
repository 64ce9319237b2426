//! What a killed process left in an SQLite database's side files, read
//! before anything opens the database again: the evidence that kills landed
//! inside a transaction or inside a checkpoint, for the soak's figures.
//!
//! - `<db>-wal` (journal mode `wal`): the frames SQLite's own WAL recovery
//!   would find — a frame is valid when its salts match the header's and its
//!   cumulative checksum matches; the valid frames up to the last commit
//!   frame are committed, valid frames after it are a transaction cut while
//!   its frames were being written.
//! - `<db>-shm`: the checkpoint record (`WalCkptInfo`, after the two 48-byte
//!   copies of the index header). A checkpoint sets `nBackfillAttempted`
//!   before it copies frames into the database and `nBackfill` only after the
//!   copy and the database fsync, so `nBackfillAttempted > nBackfill` means a
//!   checkpoint was cut in the middle.
//! - `<db>-journal` (rollback modes): a *hot* journal — one whose header
//!   carries the journal magic, which SQLite writes only once the journal is
//!   synced and clears (`delete`: unlinks, `truncate`: truncates, `persist`:
//!   zeroes) at commit — means the process died inside a write transaction;
//!   the next open rolls it back.

use std::path::{Path, PathBuf};

/// The side file of `db` with this suffix (`-wal`, `-shm`, `-journal`).
pub fn side_file(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// What the side files of one database show.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Leftovers {
    /// Valid WAL frames up to the last commit frame.
    pub committed_frames: u64,
    /// Valid WAL frames after the last commit frame: a transaction cut while
    /// its frames were being written.
    pub uncommitted_frames: u64,
    /// The WAL-index records a checkpoint that started copying frames into
    /// the database and did not finish.
    pub checkpoint_cut: bool,
    /// A hot rollback journal: a write transaction was cut.
    pub hot_journal: bool,
}

/// Reads the side files of `db`.
pub fn leftovers(db: &Path) -> Leftovers {
    let mut found = Leftovers::default();
    if let Ok(wal) = std::fs::read(side_file(db, "-wal")) {
        let (committed, valid) = wal_frames(&wal);
        found.committed_frames = committed;
        found.uncommitted_frames = valid - committed;
    }
    if let Ok(shm) = std::fs::read(side_file(db, "-shm")) {
        found.checkpoint_cut = checkpoint_cut(&shm);
    }
    if let Ok(journal) = std::fs::read(side_file(db, "-journal")) {
        found.hot_journal = journal.starts_with(&JOURNAL_MAGIC);
    }
    found
}

const JOURNAL_MAGIC: [u8; 8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7];
const WAL_HEADER: usize = 32;
const FRAME_HEADER: usize = 24;

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// SQLite's WAL checksum over `data` (a multiple of 8 bytes), continuing
/// from `s`; `big_endian` words when the magic's low bit is set.
fn checksum(big_endian: bool, data: &[u8], s: (u32, u32)) -> (u32, u32) {
    let (mut s0, mut s1) = s;
    for pair in data.chunks_exact(8) {
        let word = |b: &[u8]| {
            let b: [u8; 4] = b.try_into().unwrap();
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        s0 = s0.wrapping_add(word(&pair[..4])).wrapping_add(s1);
        s1 = s1.wrapping_add(word(&pair[4..])).wrapping_add(s0);
    }
    (s0, s1)
}

/// (frames up to the last commit frame, valid frames), as SQLite's WAL
/// recovery reads them.
pub fn wal_frames(wal: &[u8]) -> (u64, u64) {
    if wal.len() < WAL_HEADER {
        return (0, 0);
    }
    let magic = be32(wal, 0);
    if magic & !1 != 0x377f_0682 {
        return (0, 0);
    }
    let big_endian = magic & 1 == 1;
    let page = be32(wal, 8) as usize;
    if !(512..=65536).contains(&page) || !page.is_power_of_two() {
        return (0, 0);
    }
    let salt = (be32(wal, 16), be32(wal, 20));
    let mut s = checksum(big_endian, &wal[..24], (0, 0));
    if s != (be32(wal, 24), be32(wal, 28)) {
        return (0, 0);
    }
    let (mut committed, mut valid) = (0, 0);
    let mut at = WAL_HEADER;
    while at + FRAME_HEADER + page <= wal.len() {
        let frame = &wal[at..at + FRAME_HEADER + page];
        if be32(frame, 0) == 0 || (be32(frame, 8), be32(frame, 12)) != salt {
            break;
        }
        s = checksum(big_endian, &frame[..8], s);
        s = checksum(big_endian, &frame[FRAME_HEADER..], s);
        if s != (be32(frame, 16), be32(frame, 20)) {
            break;
        }
        valid += 1;
        if be32(frame, 4) != 0 {
            committed = valid;
        }
        at += FRAME_HEADER + page;
    }
    (committed, valid)
}

/// Whether the WAL-index shows a checkpoint that began copying frames and
/// did not finish (native byte order, as SQLite maps it).
pub fn checkpoint_cut(shm: &[u8]) -> bool {
    const CKPT: usize = 96;
    if shm.len() < CKPT + 40 {
        return false;
    }
    let native = |at: usize| u32::from_ne_bytes(shm[at..at + 4].try_into().unwrap());
    let backfilled = native(CKPT);
    let attempted = native(CKPT + 32);
    attempted > backfilled
}

/// The readers above against files SQLite itself wrote.
#[test]
fn side_files_read_as_sqlite_wrote_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = wal; PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(x);",
    )
    .unwrap();
    let wal_path = side_file(&db, "-wal");
    // Two commits, then a third spanning several pages.
    conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
    let two = std::fs::read(&wal_path).unwrap();
    conn.execute("INSERT INTO t VALUES (zeroblob(20000))", [])
        .unwrap();
    let three = std::fs::read(&wal_path).unwrap();
    let (committed, valid) = wal_frames(&two);
    assert!(committed >= 2 && committed == valid, "{committed} {valid}");
    let (all, valid3) = wal_frames(&three);
    assert_eq!(all, valid3);
    assert!(all >= committed + 5, "{all} frames after a 20 KB row");
    // The third transaction without its commit frame: valid, uncommitted.
    let page = be32(&three, 8) as usize;
    let cut = &three[..three.len() - (FRAME_HEADER + page)];
    assert_eq!(wal_frames(cut), (committed, all - 1));
    // A flipped byte in a frame ends the valid frames there.
    let mut flipped = three.clone();
    let at = WAL_HEADER + (committed as usize + 1) * (FRAME_HEADER + page) + 100;
    flipped[at] ^= 1;
    assert_eq!(wal_frames(&flipped), (committed, committed + 1));
    // A completed checkpoint is not a cut one.
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
        .unwrap();
    let found = leftovers(&db);
    assert!(!found.checkpoint_cut && !found.hot_journal, "{found:?}");
    let shm = std::fs::read(side_file(&db, "-shm")).unwrap();
    let mut cut_shm = shm.clone();
    cut_shm[128..132].copy_from_slice(&(all as u32 + 1).to_ne_bytes());
    assert!(checkpoint_cut(&cut_shm) && !checkpoint_cut(&shm));
}
