//! The JSONL durability proof: how much of the transcript an fdatasync has
//! made durable, and in which boot of the machine, so recovery can tell a
//! tear from damage where upstream's format alone cannot (docs/JSONL.md,
//! "The durability proof").
//!
//! It lives outside the JSONL root, in a per-user state directory
//! ([`default_state_dir`]): `<state>/jsonl-proof/<hash of the transcript's
//! canonical path>`, so a root holds exactly the files upstream's harness
//! would. The name only finds the proof; what makes it count is its tag,
//! the CRC of the proven prefix, so a proof that belongs to another file (a
//! hash collision, a transcript replaced or recreated at the same path) is
//! ignored as if there were none.
//!
//! A power loss can leave a hole anywhere in the bytes written since the
//! last fdatasync, followed by intact lines, a `turn/end` among them:
//! upstream's rule (a defect before a later `turn/end` is corruption)
//! then refuses a log whose acknowledged events are all intact. Only a
//! restart of the machine can do that: while it runs, the page cache holds
//! exactly what was written. So a defect past the proven length is a tear
//! only when the proof was written in an earlier boot and nothing has
//! written the transcript since the machine started (a power loss tears
//! only what was written before it; another program that appended since,
//! the upstream harness among them, keeps no proof of its own); otherwise
//! (a process crash, or bytes appended in this boot) upstream's rule
//! stands. A defect inside the proven length is always corruption.
//!
//! The file holds two slots of 28 bytes, at offsets 0 and 4096 (different
//! sectors of either size):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `TWJP` |
//! | 4 | 4 | tag: CRC-32 of the proven prefix of the transcript |
//! | 8 | 8 | proven length, bytes |
//! | 16 | 8 | boot: the machine's boot id when written (0: unknown) |
//! | 24 | 4 | CRC-32 of bytes 0–23 |
//!
//! A writer writes into the slot that does not hold the last proof it
//! fsynced, and fsyncs now and then ([`super::writer`] says when): a power
//! loss, which may garble whatever was written since the last fsync,
//! leaves the fsynced slot intact. A reader takes the longest proven
//! length among the slots that decode and whose tag is the CRC of the
//! transcript's prefix of that length; every slot states only what was
//! durable when it was written, so any of them is sound.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use super::source::Source;
use crate::storage::{OpenMode, Storage, StorageFile};

/// A slot's magic.
const MAGIC: [u8; 4] = *b"TWJP";
/// A slot's size.
const LEN: usize = 28;
/// Where the second slot starts.
const SLOT: u64 = 4096;

/// The directory of JSONL proofs inside the state directory.
pub(crate) const PROOF_DIR: &str = "jsonl-proof";

/// The per-user state directory turnwal keeps its JSONL durability proofs
/// in: `$TURNWAL_STATE_DIR` if set, else `$XDG_STATE_HOME/turnwal`, else
/// (on Windows) `%LOCALAPPDATA%\turnwal`, else
/// `$HOME/.local/state/turnwal`; `None` when none of them is set (then no
/// proof is kept and upstream's rule decides every recovery). A relative
/// `$TURNWAL_STATE_DIR` is refused: it would name another directory from
/// every working directory, and a proof kept where the next reader does not
/// look is a proof lost.
pub fn default_state_dir() -> Result<Option<PathBuf>, String> {
    state_dir_from(|key| std::env::var_os(key))
}

/// [`default_state_dir`] over any environment. Empty values count as unset;
/// a relative `$XDG_STATE_HOME` is ignored, as the XDG base directory
/// specification says; a relative `$TURNWAL_STATE_DIR` is refused.
pub(crate) fn state_dir_from(
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<Option<PathBuf>, String> {
    let get = |key: &str| env(key).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = get("TURNWAL_STATE_DIR") {
        if !dir.is_absolute() {
            return Err(format!(
                "TURNWAL_STATE_DIR must be an absolute path, not {}: it names where turnwal \
                 keeps JSONL durability proofs, which must be the same directory whatever the \
                 working directory",
                dir.display()
            ));
        }
        return Ok(Some(dir));
    }
    if let Some(dir) = get("XDG_STATE_HOME").filter(|d| d.is_absolute()) {
        return Ok(Some(dir.join("turnwal")));
    }
    // Windows keeps per-user, per-machine state under %LOCALAPPDATA%.
    if cfg!(windows)
        && let Some(dir) = get("LOCALAPPDATA").filter(|d| d.is_absolute())
    {
        return Ok(Some(dir.join("turnwal")));
    }
    Ok(get("HOME").map(|home| home.join(".local/state/turnwal")))
}

/// The proof file of the transcript whose canonical path is `canonical`:
/// `<state>/jsonl-proof/<32 hex>` (FNV-1a, 128 bits, of the path's bytes).
pub(crate) fn proof_file(state: &Path, canonical: &Path) -> PathBuf {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let hash = crate::storage::path_bytes(canonical)
        .iter()
        .fold(OFFSET, |h, &b| (h ^ u128::from(b)).wrapping_mul(PRIME));
    state.join(PROOF_DIR).join(format!("{hash:032x}"))
}

/// Where a proof lives: the file, and the state directory it sits in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProofPath {
    pub state: PathBuf,
    pub file: PathBuf,
}

impl ProofPath {
    /// Both directories a proof is read from or written in must be private
    /// (the checks every directory turnwal writes in gets): anyone else
    /// who could write there could plant a proof that turns a tear into
    /// corruption or the other way round.
    fn check(&self, storage: &dyn Storage) -> io::Result<()> {
        storage.check_private_dir(&self.state)?;
        storage.check_private_dir(self.file.parent().expect("a proof has a directory"))
    }
}

/// What a slot states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    tag: u32,
    len: u64,
    boot: u64,
}

fn encode(slot: Slot) -> [u8; LEN] {
    let mut out = [0; LEN];
    out[..4].copy_from_slice(&MAGIC);
    out[4..8].copy_from_slice(&slot.tag.to_le_bytes());
    out[8..16].copy_from_slice(&slot.len.to_le_bytes());
    out[16..24].copy_from_slice(&slot.boot.to_le_bytes());
    let crc = crc32fast::hash(&out[..24]);
    out[24..].copy_from_slice(&crc.to_le_bytes());
    out
}

fn decode(bytes: &[u8]) -> Option<Slot> {
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let long = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    (bytes.len() >= LEN && bytes[..4] == MAGIC && crc32fast::hash(&bytes[..24]) == word(24)).then(
        || Slot {
            tag: word(4),
            len: long(8),
            boot: long(16),
        },
    )
}

/// The slots that decode, by slot.
fn slots(file: &dyn StorageFile) -> io::Result<[Option<Slot>; 2]> {
    let mut out = [None; 2];
    for (i, slot) in out.iter_mut().enumerate() {
        let mut bytes = [0; LEN];
        let n = file.read_at(&mut bytes, i as u64 * SLOT)?;
        *slot = decode(&bytes[..n]);
    }
    Ok(out)
}

/// What the proof proves about a transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Proven {
    /// The length of the transcript proven durable.
    pub len: u64,
    /// Whether the machine restarted since the proof was written and
    /// nothing has written the transcript since it started: only then can
    /// a defect past `len` be a tear followed by intact lines.
    pub rebooted: bool,
}

/// The CRC of the first `len` bytes of `src`, read a window at a time;
/// `None` when they cannot be read.
fn crc_of(src: &dyn Source, len: u64) -> Option<u32> {
    let mut crc = crc32fast::Hasher::new();
    src.each_window(0, len, &mut |_, window| {
        crc.update(window);
        Ok(())
    })
    .ok()?;
    Some(crc.finalize())
}

/// What the proof at `proof` proves about `transcript`; `None` without a
/// proof that describes these bytes (or in a directory that is not
/// private).
///
/// `untouched` says whether the transcript has certainly not been written
/// since the machine started. A power loss tears only what was written
/// before it: bytes another writer (the upstream harness keeps no turnwal
/// proof) appended after the restart were never torn by it, so a proof
/// from an earlier boot licenses no cut in a transcript written since.
pub(crate) fn proven(
    storage: &dyn Storage,
    proof: &ProofPath,
    transcript: &dyn Source,
    untouched: bool,
) -> Option<Proven> {
    proof.check(storage).ok()?;
    let file = storage.open(&proof.file, OpenMode::Read).ok()?;
    let boot = storage.boot_id();
    slots(file.as_ref())
        .ok()?
        .into_iter()
        .flatten()
        .filter(|slot| {
            slot.len <= transcript.len() && crc_of(transcript, slot.len) == Some(slot.tag)
        })
        .max_by_key(|slot| slot.len)
        .map(|slot| Proven {
            len: slot.len,
            // An unknown boot (either one) is never taken for a restart.
            rebooted: untouched && slot.boot != 0 && boot.is_some_and(|b| b != slot.boot),
        })
}

/// A writer's handle on one session's proof.
#[derive(Debug)]
pub(crate) struct Prover {
    path: ProofPath,
    file: Option<Box<dyn StorageFile>>,
    /// The slot holding the last proof fsynced (by this writer, or found
    /// holding the longest one when it opened the file).
    kept: usize,
}

impl Prover {
    pub(crate) fn new(path: ProofPath) -> Prover {
        Prover {
            path,
            file: None,
            kept: 1,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path.file
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
            // Created 0700 (with each new parent made durable), then checked,
            // whoever created it.
            let dir = self.path.file.parent().expect("a proof has a directory");
            storage.create_dir_all(dir).map_err(|e| {
                let why = if e.kind() == io::ErrorKind::AlreadyExists {
                    " (something that is not a directory is in the way)"
                } else {
                    ""
                };
                io::Error::new(
                    e.kind(),
                    format!("create directory {}: {e}{why}", dir.display()),
                )
            })?;
            self.path.check(storage)?;
            let file = match storage.open(&self.path.file, OpenMode::ReadWrite) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    created = true;
                    storage.open(&self.path.file, OpenMode::CreateNew)?
                }
                other => other?,
            };
            self.kept = match slots(file.as_ref())? {
                [Some(a), Some(b)] if b.len > a.len => 1,
                [None, Some(_)] => 1,
                _ => 0,
            };
            self.file = Some(file);
        }
        let boot = storage.boot_id().unwrap_or(0);
        let file = self.file.as_mut().expect("opened above");
        let target = 1 - self.kept;
        file.write_all_at(&encode(Slot { tag, len, boot }), target as u64 * SLOT)?;
        if durably {
            file.sync_all()?;
            self.kept = target;
        }
        Ok(created)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_dir_follows_the_environment() {
        // An absolute path on this platform.
        let abs = |name: &str| {
            if cfg!(windows) {
                format!(r"C:\{name}")
            } else {
                format!("/{name}")
            }
        };
        let env = |vars: Vec<(&'static str, String)>| {
            move |key: &str| {
                vars.iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let (t, x, h) = (abs("t"), abs("x"), abs("h"));
        let all = vec![
            ("TURNWAL_STATE_DIR", t.clone()),
            ("XDG_STATE_HOME", x.clone()),
            ("LOCALAPPDATA", abs("l")),
            ("HOME", h.clone()),
        ];
        assert_eq!(state_dir_from(env(all)), Ok(Some(PathBuf::from(&t))));
        assert_eq!(
            state_dir_from(env(vec![
                ("TURNWAL_STATE_DIR", String::new()),
                ("XDG_STATE_HOME", x.clone())
            ])),
            Ok(Some(PathBuf::from(&x).join("turnwal")))
        );
        let home = PathBuf::from(&h).join(".local/state/turnwal");
        assert_eq!(
            state_dir_from(env(vec![
                ("XDG_STATE_HOME", "rel".into()),
                ("HOME", h.clone())
            ])),
            Ok(Some(home.clone()))
        );
        // Windows: the local application data directory before HOME.
        let local = vec![("LOCALAPPDATA", abs("l")), ("HOME", h.clone())];
        let want = if cfg!(windows) {
            PathBuf::from(abs("l")).join("turnwal")
        } else {
            home
        };
        assert_eq!(state_dir_from(env(local)), Ok(Some(want)));
        assert_eq!(state_dir_from(env(vec![("HOME", String::new())])), Ok(None));
        let err = state_dir_from(env(vec![
            ("TURNWAL_STATE_DIR", "rel/state".into()),
            ("HOME", h.clone()),
        ]))
        .unwrap_err();
        assert!(err.starts_with("TURNWAL_STATE_DIR must be an absolute path, not rel/state"));
    }

    #[test]
    fn a_proof_is_named_by_its_transcript_path() {
        let a = proof_file(Path::new("/s"), Path::new("/r/p/a/session.jsonl"));
        let b = proof_file(Path::new("/s"), Path::new("/r/p/b/session.jsonl"));
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(Path::new("/s/jsonl-proof")));
        assert_eq!(a.file_name().unwrap().len(), 32);
        assert_eq!(
            a,
            proof_file(Path::new("/s"), Path::new("/r/p/a/session.jsonl"))
        );
    }

    #[test]
    fn a_slot_round_trips_and_any_changed_byte_is_refused() {
        let slot = Slot {
            tag: 0xdead_beef,
            len: 4242,
            boot: 7,
        };
        let bytes = encode(slot);
        assert_eq!(&bytes[..4], b"TWJP");
        assert_eq!(decode(&bytes), Some(slot));
        for i in 0..LEN {
            let mut bad = bytes;
            bad[i] ^= 1;
            assert_eq!(decode(&bad), None, "byte {i}");
        }
        assert_eq!(decode(&bytes[..LEN - 1]), None);
    }
}
