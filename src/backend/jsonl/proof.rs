//! The JSONL durability proof, `.turnwal-durable` in a session directory:
//! how much of the transcript an fdatasync has made durable, so recovery
//! can tell a tear (past it: cut) from damage (inside it: refused) where
//! upstream's format alone cannot (docs/JSONL.md, "The durability proof").
//!
//! It holds two slots of the WAL's 20-byte proof record
//! ([`crate::backend::wal::proof`]), at offsets 0 and 4096 (different
//! sectors of either size), each tagged with the CRC-32 of the prefix it
//! proves. A writer writes into the slot that does not hold the last proof
//! it fsynced, and fsyncs now and then ([`super::writer`] says when): a
//! power loss, which may garble whatever was written since the last fsync,
//! leaves the fsynced slot intact. A reader takes the longest proven
//! length among the slots that decode and whose tag is the CRC of the
//! transcript's prefix of that length; every slot states only what was
//! durable when it was written, so any of them is sound.

use std::io;
use std::path::{Path, PathBuf};

use crate::backend::wal::proof::{LEN, decode_tagged, encode};
use crate::backend::wal::storage::{OpenMode, Storage, StorageFile};

/// Where the second slot starts.
const SLOT: u64 = 4096;

/// The slots' `(tag, durable length)` that decode, by slot.
fn slots(file: &dyn StorageFile) -> io::Result<[Option<(u32, u64)>; 2]> {
    let mut out = [None; 2];
    for (i, slot) in out.iter_mut().enumerate() {
        let mut bytes = [0; LEN];
        let n = file.read_at(&mut bytes, i as u64 * SLOT)?;
        *slot = decode_tagged(&bytes[..n]);
    }
    Ok(out)
}

/// The length of `transcript` the proof at `proof` proves durable; `None`
/// without a proof that describes these bytes.
pub(crate) fn proven(storage: &dyn Storage, proof: &Path, transcript: &[u8]) -> Option<u64> {
    let file = storage.open(proof, OpenMode::Read).ok()?;
    slots(file.as_ref())
        .ok()?
        .into_iter()
        .flatten()
        .filter(|&(tag, len)| {
            usize::try_from(len)
                .ok()
                .and_then(|len| transcript.get(..len))
                .is_some_and(|prefix| crc32fast::hash(prefix) == tag)
        })
        .map(|(_, len)| len)
        .max()
}

/// A writer's handle on one session's proof.
#[derive(Debug)]
pub(crate) struct Prover {
    path: PathBuf,
    file: Option<Box<dyn StorageFile>>,
    /// The slot holding the last proof fsynced (by this writer, or found
    /// holding the longest one when it opened the file).
    kept: usize,
}

impl Prover {
    pub(crate) fn new(path: PathBuf) -> Prover {
        Prover {
            path,
            file: None,
            kept: 1,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// States that the transcript's first `len` bytes, whose CRC-32 is
    /// `tag`, are durable; with `durably`, fsyncs the proof. Returns whether
    /// the file was created.
    pub(crate) fn prove(
        &mut self,
        storage: &dyn Storage,
        tag: u32,
        len: u64,
        durably: bool,
    ) -> io::Result<bool> {
        let mut created = false;
        if self.file.is_none() {
            let file = match storage.open(&self.path, OpenMode::ReadWrite) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    created = true;
                    storage.open(&self.path, OpenMode::CreateNew)?
                }
                other => other?,
            };
            let [a, b] = slots(file.as_ref())?;
            self.kept = match (a, b) {
                (Some((_, a)), Some((_, b))) if b > a => 1,
                (None, Some(_)) => 1,
                _ => 0,
            };
            self.file = Some(file);
        }
        let file = self.file.as_mut().expect("opened above");
        let target = 1 - self.kept;
        file.write_all_at(&encode(tag, len), target as u64 * SLOT)?;
        if durably {
            file.sync_all()?;
            self.kept = target;
        }
        Ok(created)
    }
}
