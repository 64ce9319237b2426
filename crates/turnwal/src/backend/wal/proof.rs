//! The durability proof: `.<name>.durable`, a 20-byte file beside each log
//! that names how much of the log an fdatasync has made durable.
//!
//! Every record carries the durable length known when it was written (its
//! watermark), so a batch is proven durable by the batch after it. The last
//! batch has no batch after it: without more, damage to it reads like a torn
//! write and recovery would cut it, acknowledged or not. So after every
//! fdatasync that returns, before any event it covers is acknowledged, the
//! writer overwrites this file with the durable length. It is never fsynced
//! itself — that would double the cost of a durable turn — so:
//!
//! - after a process crash the page cache still holds it, and every
//!   acknowledged byte lies below it: damage there is corruption, never a
//!   tear;
//! - after a power loss it may be older than the log (it reaches the disk
//!   with the next fdatasync of the log, or when the kernel writes it back):
//!   the last batch acknowledged before the power loss may be unproven. That
//!   batch is the one window left, and docs/RECOVERY.md states it.
//!
//! It can never claim more than is durable: it is written only after the
//! fdatasync it reports has returned. It names the log's salt, so a proof
//! left by another file of the same name (deleted and created again, or
//! copied in) proves nothing.
//!
//! Invariants:
//!
//! - the stated length never exceeds what an fdatasync of the log has
//!   returned for (the writer keeps `proven_len <= synced_len`), and covers
//!   every event before it is acknowledged in `batch` or `turn` mode;
//! - for one log (one salt) it only grows, except that an explicit salvage
//!   lowers it, durably ([`Prover::prove_durably`]), before cutting below it;
//! - reading never fails on content: a short, foreign (other salt) or
//!   damaged proof states 0, which proves nothing and so never refuses a log.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `TWDP` |
//! | 4 | 4 | the log's salt |
//! | 8 | 8 | durable length of the log, bytes |
//! | 16 | 4 | CRC-32 of bytes 0–15 |

use std::io;
use std::path::{Path, PathBuf};

use crate::storage::{OpenMode, Storage, StorageFile};

/// The proof's magic.
pub const MAGIC: [u8; 4] = *b"TWDP";
/// The proof's size.
pub const LEN: usize = 20;

/// `.<name>.durable` beside the log at `log`.
pub fn path_of(log: &Path) -> PathBuf {
    super::sidecar(log, "durable")
}

/// The bytes of a proof that `durable` bytes of the log salted `salt` are
/// durable.
pub fn encode(salt: u32, durable: u64) -> [u8; LEN] {
    let mut out = [0; LEN];
    out[..4].copy_from_slice(&MAGIC);
    out[4..8].copy_from_slice(&salt.to_le_bytes());
    out[8..16].copy_from_slice(&durable.to_le_bytes());
    let crc = crc32fast::hash(&out[..16]);
    out[16..].copy_from_slice(&crc.to_le_bytes());
    out
}

/// The durable length a proof's bytes state for the log salted `salt`; 0
/// (nothing proven) when they are not a proof, fail their checksum, or name
/// another salt.
pub fn decode(bytes: &[u8], salt: u32) -> u64 {
    if bytes.len() < LEN
        || bytes[..4] != MAGIC
        || crc32fast::hash(&bytes[..16]) != u32::from_le_bytes(bytes[16..20].try_into().unwrap())
        || u32::from_le_bytes(bytes[4..8].try_into().unwrap()) != salt
    {
        return 0;
    }
    u64::from_le_bytes(bytes[8..16].try_into().unwrap())
}

/// The durable length the proof beside `log` states (0 when there is none
/// or it proves nothing).
pub fn read(storage: &dyn Storage, log: &Path, salt: u32) -> io::Result<u64> {
    let file = match storage.open(&path_of(log), OpenMode::Read) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut bytes = [0; LEN];
    let n = file.read_at(&mut bytes, 0)?;
    Ok(decode(&bytes[..n], salt))
}

/// The writer's handle on the proof of one log.
#[derive(Debug)]
pub struct Prover {
    path: PathBuf,
    salt: u32,
    file: Option<Box<dyn StorageFile>>,
}

impl Prover {
    /// A prover for the log at `log` (salted `salt`); the file is opened (or
    /// created) at the first [`Prover::prove`].
    pub fn new(log: &Path, salt: u32) -> Prover {
        Prover {
            path: path_of(log),
            salt,
            file: None,
        }
    }

    /// States that `durable` bytes of the log are durable: one write, no
    /// fsync. Call it only after an fdatasync covering them has returned.
    pub fn prove(&mut self, storage: &dyn Storage, durable: u64) -> io::Result<()> {
        if self.file.is_none() {
            let file = match storage.open(&self.path, OpenMode::ReadWrite) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    storage.open(&self.path, OpenMode::CreateNew)?
                }
                other => other?,
            };
            self.file = Some(file);
        }
        let file = self.file.as_mut().expect("opened above");
        file.write_all_at(&encode(self.salt, durable), 0)
    }

    /// Durably states that exactly `durable` bytes are proven (write and
    /// fsync): before an explicit salvage cuts below the old proof.
    pub fn prove_durably(&mut self, storage: &dyn Storage, durable: u64) -> io::Result<()> {
        self.prove(storage, durable)?;
        self.file.as_mut().expect("opened by prove").sync_all()
    }
}
