//! The upstream harness's own JSONL session logs, read and written byte for
//! byte (docs/JSONL.md): one directory per session under a project
//! directory, `session.jsonl` (raw) or `session.jsonl.zstd` (one checksummed
//! zstd frame per append batch), a header line, plain event lines and packed
//! chunk rows.
//!
//! The backend implements [`Backend`] and [`LogWriter`] with the same
//! semantics as the native backends; recovery follows upstream's rules
//! (a defect at or before the last `turn/end` is corruption, a torn tail is
//! cut, complete records of a torn zstd frame are kept), and a repair that
//! must rewrite stored events is published atomically (temp file, fsync,
//! rename), where upstream truncates and appends in two steps.
//!
//! ```
//! use std::sync::Arc;
//! use turnwal::backend::jsonl::{Compression, JsonlBackend};
//! use turnwal::{Event, SessionHeader, Store, StoreOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let backend = JsonlBackend::open(dir.path(), Compression::None)?;
//! let store = Store::with_backend(Arc::new(backend), StoreOptions::default());
//! store.create(SessionHeader::new("s1", 5).with_cwd("/work/app"))?;
//! store.append("s1", &[Event::new("turn/start", 0, 6, r#"{"turn":1}"#)?])?;
//! let file = dir.path().join("--work-app--/s1/session.jsonl");
//! assert_eq!(std::fs::read_to_string(file)?,
//!     "{\"type\":\"session\",\"version\":0,\"id\":\"s1\",\"createdAt\":5,\"cwd\":\"/work/app\",\"delegationDepth\":0}\n\
//!      {\"type\":\"turn/start\",\"seq\":0,\"time\":6,\"data\":{\"turn\":1}}\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod header;
pub mod layout;
pub use crate::upstream::normalize;
mod classify;
mod cursor;
mod proof;
pub mod records;
mod salvage;
mod scan;
mod source;
mod tail;
mod unsynced;
mod writer;
pub mod zstd;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use layout::Compression;

use self::scan::Plan;
use self::writer::JsonlWriter;
use super::{Backend, LogWriter, Stored};
use crate::contract::{Placement, Policy};
use crate::error::{Corruption, Error, Result};
use crate::event::{Event, EventError};
use crate::header::SessionHeader;
use crate::scan::SessionSummary;
use crate::storage::{EntryKind, FsStorage, OpenMode, Storage, StorageFile};

pub use proof::default_state_dir;

/// Files earlier turnwal versions kept in a session directory: the writer
/// lock, the policy and the durability proof. A root must hold only what
/// upstream's harness would, so none is written any more: the writer lock
/// is the hold on the transcript itself, the policy is the appending
/// store's, the proof lives in the state directory. They are never read,
/// and are removed when turnwal next opens a writer on the session
/// (docs/JSONL.md, "Layout").
pub const LEGACY_SIDECARS: [&str; 3] = [".turnwal-lock", ".turnwal-policy", ".turnwal-durable"];

/// The quarantine directory in a session directory, where repairs keep the
/// bytes they cut (docs/JSONL.md, "Quarantine"). Upstream reads only the
/// transcript's fixed name in a session directory and never enters a
/// directory below it; turnwal's listing does not either.
pub const QUARANTINE_DIR: &str = ".turnwal-quarantine";

/// A JSONL store: a root directory of project directories of session
/// directories, all in one encoding.
#[derive(Debug, Clone)]
pub struct JsonlBackend {
    /// Every file and directory operation goes through it, so the crash lab
    /// runs the backend on a simulated disk.
    storage: Arc<dyn Storage>,
    root: PathBuf,
    compression: Compression,
    pack_chunks: bool,
    /// The per-user state directory the durability proofs live in
    /// ([`default_state_dir`] unless injected); `None`: no proof is kept.
    state_dir: Option<PathBuf>,
    /// Transcripts whose fdatasync failed in this process
    /// ([`unsynced`]).
    unsynced: unsynced::Marks,
}

/// Whether a read needs the header's cwd to be absolute: `inspect`, `load`
/// and writers do (upstream's session store checks it); a read of the
/// stored suffix does not (upstream's `readFrom`).
#[derive(Debug, Clone, Copy)]
enum Cwd {
    Absolute,
    Any,
}

/// The scan a log's ends give (its last `turn/end` and the events after
/// it, as stored, in a file of `bytes` bytes that ends whole), when they
/// settle it: they follow in seq, and upstream's migrations leave them as
/// they are and refuse none of them (a migrated tail could depend on
/// messages before it).
fn scan_of_ends(
    header: SessionHeader,
    events: Vec<Event>,
    bytes: u64,
) -> Option<crate::scan::Scan> {
    use crate::event::EventKind;
    let base = events.first().map_or(0, Event::seq);
    let follows = events
        .iter()
        .enumerate()
        .all(|(i, e)| e.seq() == base + i as u64);
    let mut normalizer = crate::upstream::normalize::Normalizer::new(&header.id);
    let current = events.iter().all(|e| {
        let mut migrated = e.clone();
        !normalizer.note(e)
            && (!crate::upstream::normalize::Normalizer::touches(e.event_type())
                || (normalizer.migrate(&mut migrated).is_ok() && migrated == *e))
    });
    if !follows || !current {
        return None;
    }
    let (committed, committed_turn, committed_time, rest) = match events.first() {
        Some(end) if end.kind() == EventKind::TurnEnd => (
            end.seq() + 1,
            end.facts().ok()?.turn.get()?,
            Some(end.time()),
            events[1..].to_vec(),
        ),
        _ if base == 0 => (0, 0, None, events),
        _ => return None,
    };
    let policy = JsonlBackend::READ_POLICY;
    let verdict = crate::scan::judge_tail(
        policy,
        committed,
        committed_turn,
        &rest,
        crate::scan::TailRule::KeepAll,
    );
    let outcome = crate::scan::Outcome::of_cut(None, !verdict.closers.is_empty());
    let extent = crate::scan::Extent {
        bytes,
        committed,
        committed_turn,
        committed_time,
    };
    Some(crate::scan::Scan::new(
        header, policy, extent, rest, verdict, outcome, None,
    ))
}

/// The stored events `reader` lends from `from_seq` on.
fn collect_from(reader: &mut crate::view::LogReader, from_seq: u64) -> Result<Vec<Event>> {
    let n = reader.stored().saturating_sub(from_seq);
    let mut events = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(1 << 20));
    reader.for_each_stored(|event| -> Result<()> {
        if event.seq() >= from_seq {
            events.push(event.to_event());
        }
        Ok(())
    })?;
    Ok(events)
}

fn corrupt(path: &Path, reason: impl Into<String>) -> Error {
    Error::from(Corruption {
        path: path.to_owned(),
        offset: 0,
        unit: crate::error::Unit::Byte,
        seq: None,
        reason: reason.into(),
    })
}

fn not_found(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

impl JsonlBackend {
    /// A store at `root` (made absolute, as upstream resolves it) in the
    /// given encoding. Nothing is created until the first session is
    /// materialized. A root that is not a directory, or that holds a
    /// transcript of the other encoding, is refused.
    pub fn open(root: impl AsRef<Path>, compression: Compression) -> Result<JsonlBackend> {
        JsonlBackend::with_storage(root, compression, Arc::new(FsStorage))
    }

    /// [`JsonlBackend::open`] over any [`Storage`] (the crash lab's
    /// simulated disk).
    pub fn with_storage(
        root: impl AsRef<Path>,
        compression: Compression,
        storage: Arc<dyn Storage>,
    ) -> Result<JsonlBackend> {
        let root = root.as_ref();
        let root = std::path::absolute(root).map_err(|e| Error::io("resolve", root, e))?;
        JsonlBackend::check_root(storage.as_ref(), &root)?;
        let state_dir = default_state_dir().map_err(Error::InvalidArgument)?;
        let backend = JsonlBackend {
            storage,
            root,
            compression,
            pack_chunks: true,
            state_dir,
            unsynced: unsynced::Marks::default(),
        };
        backend.check_root_encoding()?;
        Ok(backend)
    }

    /// A symbolic link to the root directory is followed (as any path the
    /// user gives); below the root none is.
    fn check_root(storage: &dyn Storage, root: &Path) -> Result<()> {
        match storage.entry_kind(root) {
            Ok(Some(EntryKind::File | EntryKind::Other(_))) => Err(Error::io(
                "open store",
                root,
                io::Error::new(
                    io::ErrorKind::NotADirectory,
                    "a JSONL root must be a directory",
                ),
            )),
            Ok(_) => Ok(()),
            Err(e) if not_found(&e) => Ok(()),
            Err(e) => Err(Error::io("open store", root, e)),
        }
    }

    /// A store at `root` in the encoding its transcripts already use, or
    /// zstd (upstream's default) when it holds none. A root with both is
    /// refused.
    pub fn open_detect(root: impl AsRef<Path>) -> Result<JsonlBackend> {
        let root = root.as_ref();
        let compression = JsonlBackend::detect(root)?.unwrap_or_default();
        JsonlBackend::open(root, compression)
    }

    /// The encoding of the transcripts under `root`; `None` when it holds
    /// none (or does not exist).
    pub fn detect(root: impl AsRef<Path>) -> Result<Option<Compression>> {
        let probe = JsonlBackend {
            storage: Arc::new(FsStorage),
            root: std::path::absolute(root.as_ref())
                .map_err(|e| Error::io("resolve", root.as_ref(), e))?,
            compression: Compression::Zstd,
            pack_chunks: true,
            state_dir: None,
            unsynced: unsynced::Marks::default(),
        };
        let mut found = None;
        for project in probe.project_dirs()? {
            for dir in probe.session_dirs(&project)? {
                for c in [Compression::Zstd, Compression::None] {
                    let path = dir.join(c.log_name());
                    if probe.entry_exists(&path)? {
                        match found {
                            Some(other) if other != c => {
                                return Err(JsonlBackend {
                                    compression: other,
                                    ..probe.clone()
                                }
                                .encoding_mismatch(&path));
                            }
                            _ => found = Some(c),
                        }
                    }
                }
            }
        }
        Ok(found)
    }

    /// Writes every event on its own line instead of packing delta runs
    /// (upstream's `packChunks: false`). Reading is layout-blind either way.
    pub fn without_packing(mut self) -> JsonlBackend {
        self.pack_chunks = false;
        self
    }

    /// Keeps the durability proofs in `dir` (made absolute) instead of the
    /// default state directory ([`default_state_dir`]): tests, and a store
    /// whose user has no home. It is created `0700` when the first proof is
    /// written, and must be a real directory of this user's that group and
    /// others cannot write.
    pub fn with_state_dir(mut self, dir: impl AsRef<Path>) -> Result<JsonlBackend> {
        let dir = dir.as_ref();
        self.state_dir = Some(std::path::absolute(dir).map_err(|e| Error::io("resolve", dir, e))?);
        Ok(self)
    }

    /// The state directory the durability proofs live in; `None` when no
    /// proof is kept (no `$TURNWAL_STATE_DIR`, `$XDG_STATE_HOME` or `$HOME`).
    pub fn state_dir(&self) -> Option<&Path> {
        self.state_dir.as_deref()
    }

    /// The root directory (absolute).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The encoding.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// `logPath(root, cwd, id)`: where a session with this header lives.
    pub fn log_path(&self, header: &SessionHeader) -> Result<PathBuf> {
        layout::log_path(
            &self.root,
            header.cwd.as_deref(),
            &header.id,
            self.compression,
        )
        .map_err(|e| Error::InvalidArgument(format!("session id {:?}: {e}", header.id)))
    }

    /// The transcript of a stored session, found across project directories.
    pub fn find_log(&self, id: &str) -> Result<Option<PathBuf>> {
        let segment = layout::encode_segment(id)
            .map_err(|e| Error::InvalidArgument(format!("session id {id:?}: {e}")))?;
        let mut found = Vec::new();
        for project in self.project_dirs()? {
            for c in [Compression::Zstd, Compression::None] {
                let flat = project.join(format!("{segment}{}", c.suffix()));
                if self.entry_exists(&flat)? {
                    return Err(self.legacy_layout(&flat));
                }
            }
            let dir = project.join(&segment);
            let opposite = dir.join(self.compression.opposite().log_name());
            if self.entry_exists(&opposite)? {
                return Err(self.encoding_mismatch(&opposite));
            }
            let path = dir.join(self.compression.log_name());
            if self.entry_exists(&path)? {
                found.push(path);
            }
        }
        if found.len() > 1 {
            return Err(corrupt(
                &found[1],
                format!(
                    "duplicate JSONL session id \"{id}\" appears in multiple project directories"
                ),
            ));
        }
        Ok(found.pop())
    }

    /// The durability proof of the transcript at `log`:
    /// `<state dir>/jsonl-proof/<hash of log's canonical path>`, or `None`
    /// when no proof is kept. The canonical path (links resolved) gives one
    /// proof per file however the root was named.
    pub fn proof_path(&self, log: &Path) -> Option<PathBuf> {
        self.proof_at(log).map(|p| p.file)
    }

    pub(crate) fn proof_at(&self, log: &Path) -> Option<proof::ProofPath> {
        let state = self.state_dir.as_ref()?;
        // The directory is canonicalized, not the file: the name is the
        // same before the transcript exists and after it is gone.
        let canonical = match (log.parent(), log.file_name()) {
            (Some(dir), Some(name)) => self
                .storage
                .canonicalize(dir)
                .map(|d| d.join(name))
                .unwrap_or_else(|_| log.to_owned()),
            _ => log.to_owned(),
        };
        Some(proof::ProofPath {
            file: proof::proof_file(state, &canonical),
            state: state.clone(),
        })
    }

    /// What the durability proof of `bytes` (the transcript at `log`)
    /// proves: `None` without a proof, or when the proof does not describe
    /// these bytes (longer than the file, or its tag is not the CRC of that
    /// prefix: another incarnation's proof, a file another writer rewrote,
    /// or damage inside the prefix — then upstream's own rule decides).
    fn proven(&self, log: &Path, bytes: &[u8]) -> Option<proof::Proven> {
        self.proven_in(log, &source::InMemory(bytes))
    }

    /// [`JsonlBackend::proven`] of the bytes a read sees.
    fn proven_in(&self, log: &Path, src: &dyn source::Source) -> Option<proof::Proven> {
        let untouched = self.storage().written_this_boot(log) == Some(false);
        proof::proven(self.storage(), &self.proof_at(log)?, src, untouched)
    }

    /// Where repairs of the session whose transcript is `log` quarantine
    /// what they cut: `.turnwal-quarantine/` in its session directory.
    pub fn quarantine_dir(log: &Path) -> PathBuf {
        log.parent().unwrap_or(log).join(QUARANTINE_DIR)
    }

    /// Refuses a directory below the root that is reached through a
    /// symbolic link (or is not a directory): writes never leave the root
    /// that way, and listing (which does not follow links below the root)
    /// would never find what they wrote.
    fn check_inside(&self, dir: &Path) -> Result<()> {
        let Ok(below) = dir.strip_prefix(&self.root) else {
            return Ok(());
        };
        let refuse = |at: &Path, kind, why: &str| {
            Err(Error::io(
                "write under",
                at,
                io::Error::new(kind, why.to_owned()),
            ))
        };
        let mut at = self.root.clone();
        for part in below.components() {
            at.push(part);
            match self.storage.entry_kind(&at) {
                Ok(Some(EntryKind::Symlink)) => {
                    return refuse(
                        &at,
                        io::ErrorKind::InvalidInput,
                        "a symbolic link inside the JSONL root: turnwal never writes through one \
                         (writes would leave the root, and listing would not find them); replace \
                         it with a real directory",
                    );
                }
                Ok(Some(EntryKind::File | EntryKind::Other(_))) => {
                    return refuse(
                        &at,
                        io::ErrorKind::NotADirectory,
                        "not a directory inside the JSONL root",
                    );
                }
                Ok(Some(EntryKind::Dir)) => {}
                Ok(None) => break,
                Err(e) => return Err(Error::io("stat", &at, e)),
            }
        }
        Ok(())
    }

    /// The file a writer of stored session `id` holds its lock on: the
    /// transcript itself (an OFD lock, [`crate::storage::hold_writer`]), the
    /// path an [`Error::Locked`] names.
    pub fn lock_path(&self, id: &str) -> Result<Option<PathBuf>> {
        self.find_log(id)
    }

    fn project_dirs(&self) -> Result<Vec<PathBuf>> {
        let names = self
            .storage
            .list_dir(&self.root)
            .map_err(|e| Error::io("list", &self.root, e))?;
        let mut dirs = Vec::new();
        for name in names {
            let path = self.root.join(name);
            if matches!(self.storage.entry_kind(&path), Ok(Some(EntryKind::Dir))) {
                dirs.push(path);
            }
        }
        dirs.sort();
        Ok(dirs)
    }

    /// The session directories of a project directory; a flat transcript
    /// beside them is the retired layout and is refused.
    fn session_dirs(&self, project: &Path) -> Result<Vec<PathBuf>> {
        let names = self
            .storage
            .list_dir(project)
            .map_err(|e| Error::io("list", project, e))?;
        let mut dirs = Vec::new();
        for name in names {
            let path = project.join(&name);
            let kind = self
                .storage
                .entry_kind(&path)
                .map_err(|e| Error::io("stat", &path, e))?;
            if kind == Some(EntryKind::File)
                && (name.ends_with(".jsonl") || name.ends_with(".jsonl.zstd"))
            {
                return Err(self.legacy_layout(&path));
            }
            if kind == Some(EntryKind::Dir) {
                dirs.push(path);
            }
        }
        dirs.sort();
        Ok(dirs)
    }

    fn check_root_encoding(&self) -> Result<()> {
        for project in self.project_dirs()? {
            for dir in self.session_dirs(&project)? {
                let opposite = dir.join(self.compression.opposite().log_name());
                if self.entry_exists(&opposite)? {
                    return Err(self.encoding_mismatch(&opposite));
                }
            }
        }
        Ok(())
    }

    fn encoding_mismatch(&self, path: &Path) -> Error {
        Error::Unsupported {
            path: path.to_owned(),
            detail: format!(
                "session artifact {:?} uses {}, but this backend is configured for compression \"{}\"; use a separate root or select the matching compression mode",
                path.display().to_string(),
                self.compression.opposite().suffix(),
                self.compression
            ),
        }
    }

    fn legacy_layout(&self, path: &Path) -> Error {
        Error::Unsupported {
            path: path.to_owned(),
            detail: format!(
                "session artifact {:?} uses the unsupported flat-file layout; use a separate root or move it into a project/session directory before loading",
                path.display().to_string()
            ),
        }
    }

    /// Reads a file until two stats around the read agree (a writer
    /// appending meanwhile would give a torn read).
    fn read_stable(&self, path: &Path) -> Result<Option<Vec<u8>>> {
        loop {
            let before = match self.storage.revision(path) {
                Ok(revision) => revision,
                Err(e) if not_found(&e) => return Ok(None),
                Err(e) => return Err(Error::io("stat", path, e)),
            };
            let Some(bytes) = self
                .read_file(path)
                .map_err(|e| Error::io("read", path, e))?
            else {
                return Ok(None);
            };
            let after = self
                .storage
                .revision(path)
                .map_err(|e| Error::io("stat", path, e))?;
            if after == before {
                return Ok(Some(bytes));
            }
        }
    }

    /// A whole file; `None` when it does not exist.
    fn read_file(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        self.storage.as_ref().read_all(path)
    }

    /// The policy a JSONL log is read under: upstream's reader keeps every
    /// event after the commit point whatever the contract says (KeepAll),
    /// so a policy decides only which appends are refused, and that is the
    /// appending store's ([`Backend::keeps_policy`]). Reads, `verify` and
    /// `convert` from JSONL take upstream's own rules: `Permissive`, which
    /// follows turns as `interruptedTurnClosers` does and applies upstream's
    /// read-time migrations and refusals.
    const READ_POLICY: Policy = Policy::Permissive;

    /// `assertStoredIdentity`: the header read from `path` must name the
    /// requested id, and its cwd and id must map to `path`.
    fn check_identity(&self, path: &Path, header: &SessionHeader, id: Option<&str>) -> Result<()> {
        if let Some(id) = id
            && header.id != id
        {
            return Err(corrupt(
                path,
                format!(
                    "corrupt session log {:?}: requested id \"{id}\" does not match header id \"{}\"",
                    path.display().to_string(),
                    header.id
                ),
            ));
        }
        let expected = self.log_path(header).map_err(|_| {
            corrupt(
                path,
                format!(
                    "corrupt session log {:?}: header id cannot name a storage path",
                    path.display().to_string()
                ),
            )
        })?;
        let same = expected == path
            || matches!(
                (self.storage.canonicalize(path), self.storage.canonicalize(&expected)),
                (Ok(a), Ok(b)) if a == b
            );
        if !same {
            return Err(corrupt(
                path,
                format!(
                    "corrupt session log {:?}: header id \"{}\" and cwd identify {:?}",
                    path.display().to_string(),
                    header.id,
                    expected.display().to_string()
                ),
            ));
        }
        Ok(())
    }

    /// The log at `path` classified, for every read that needs a valid
    /// session: its cwd must be absolute, as upstream's session store
    /// requires of `inspect` and `load`. With `salvage`, the salvage read
    /// (`recover --salvage`): damage in the committed region is a
    /// [`crate::scan::CutReason::Damaged`] cut instead of a refusal.
    fn plan_bytes(
        &self,
        path: &Path,
        bytes: &[u8],
        id: Option<&str>,
        salvage: bool,
    ) -> Result<Plan> {
        let plan = self.plan_any_cwd(path, bytes, id, salvage)?;
        plan.scan
            .header
            .validate_cwd()
            .map_err(|e| corrupt(path, format!("invalid session header: {}", e.0)))?;
        Ok(plan)
    }

    /// [`JsonlBackend::plan_bytes`] without the cwd check: upstream's
    /// `readFrom` reads the stored suffix of a log whose cwd is relative.
    fn plan_any_cwd(
        &self,
        path: &Path,
        bytes: &[u8],
        id: Option<&str>,
        salvage: bool,
    ) -> Result<Plan> {
        let proven = self.proven(path, bytes);
        let parsed = scan::parse_for(
            &source::InMemory(bytes),
            self.compression,
            path,
            salvage,
            proven,
            |_| scan::All::default(),
        )?;
        self.check_identity(path, &parsed.header, id)?;
        scan::plan(parsed, JsonlBackend::READ_POLICY, path)
    }

    /// The log at `path` classified without being held
    /// ([`classify`]), with the open file a cursor reads it from again:
    /// what every whole-session read starts from. `migrate` applies
    /// upstream's read rules (none: the events as stored, refused for
    /// nothing those rules refuse); `cwd` as for [`JsonlBackend::plan`].
    /// `None` when the file does not exist.
    ///
    /// A writer appending meanwhile writes past the length the read
    /// covers; a read that raced a change to the bytes it covers (seen by
    /// the file's revision) is done again, as `read_stable` does.
    fn classify_at(
        &self,
        path: &Path,
        id: Option<&str>,
        cwd: Cwd,
        migrate: bool,
    ) -> Result<Option<(classify::Classification, source::FileSource)>> {
        loop {
            let before = match self.storage.revision(path) {
                Ok(revision) => revision,
                Err(e) if not_found(&e) => return Ok(None),
                Err(e) => return Err(Error::io("stat", path, e)),
            };
            let file = match self.storage.open(path, OpenMode::Read) {
                Ok(file) => file,
                Err(e) if not_found(&e) => return Ok(None),
                Err(e) => return Err(Error::io("open", path, e)),
            };
            let src =
                source::FileSource::new(file, path).map_err(|e| Error::io("stat", path, e))?;
            let classified = self.classify_source(path, &src, id, cwd, migrate);
            let after = self
                .storage
                .revision(path)
                .map_err(|e| Error::io("stat", path, e))?;
            if after == before {
                return classified.map(|c| Some((c, src)));
            }
        }
    }

    fn classify_source(
        &self,
        path: &Path,
        src: &source::FileSource,
        id: Option<&str>,
        cwd: Cwd,
        migrate: bool,
    ) -> Result<classify::Classification> {
        let proven = self.proven_in(path, src);
        let hold_last = self.compression == Compression::Zstd;
        let parsed = scan::parse_for(src, self.compression, path, false, proven, |header| {
            classify::Classifier::new(&header.id, migrate, hold_last)
        })?;
        self.check_identity(path, &parsed.header, id)?;
        let classified = classify::classify(parsed, JsonlBackend::READ_POLICY, path)?;
        if let Cwd::Absolute = cwd {
            classified
                .scan
                .header
                .validate_cwd()
                .map_err(|e| corrupt(path, format!("invalid session header: {}", e.0)))?;
        }
        Ok(classified)
    }

    /// The log at `path` (held by its writer) classified as a read needs
    /// a valid session, with the open file a cursor reads it from again.
    pub(crate) fn classify_file(
        &self,
        path: &Path,
        id: &str,
    ) -> Result<(classify::Classification, source::FileSource)> {
        let file = self
            .storage
            .open(path, OpenMode::Read)
            .map_err(|e| Error::io("open", path, e))?;
        let src = source::FileSource::new(file, path).map_err(|e| Error::io("stat", path, e))?;
        let c = self.classify_source(path, &src, Some(id), Cwd::Absolute, true)?;
        Ok((c, src))
    }

    /// The stored events of a classified log from `from_seq` on, migrated,
    /// read again from `src`.
    pub(crate) fn events_from(
        &self,
        src: source::FileSource,
        path: &Path,
        c: &classify::Classification,
        from_seq: u64,
    ) -> Result<Vec<Event>> {
        let id = &c.scan.header.id;
        let cursor = cursor::JsonlCursor::new(
            src,
            path.to_owned(),
            self.compression,
            c.records_start,
            c.keep_bytes,
            c.rewrite.clone(),
            Some(crate::upstream::normalize::Normalizer::new(id)),
        );
        let mut reader = crate::view::LogReader::new(
            c.scan.header.clone(),
            c.scan.state(),
            c.scan.stored_len(),
            Box::new(cursor),
            Vec::new(),
        );
        collect_from(&mut reader, from_seq)
    }

    /// A reader of the log of `id`: classified, then lent by a cursor
    /// that reads the file again.
    fn reader(&self, id: &str, cwd: Cwd, migrate: bool) -> Result<Option<crate::view::LogReader>> {
        let Some(path) = self.find_log(id)? else {
            return Ok(None);
        };
        if migrate && let Some(reader) = self.reader_from_ends(&path, id, cwd)? {
            return Ok(Some(reader));
        }
        let Some((c, src)) = self.classify_at(&path, Some(id), cwd, migrate)? else {
            return Ok(None);
        };
        let scan = c.scan;
        let normalizer = migrate.then(|| crate::upstream::normalize::Normalizer::new(id));
        let cursor = cursor::JsonlCursor::new(
            src,
            path,
            self.compression,
            c.records_start,
            c.keep_bytes,
            c.rewrite,
            normalizer,
        );
        Ok(Some(crate::view::LogReader::of_scan(
            scan,
            Box::new(cursor),
        )))
    }

    /// The single-pass read: when the log's ends settle it — the last
    /// `turn/end` and what follows it decode, follow in seq and are in the
    /// current shape, the file ends whole, and no proof from before a
    /// restart could make a defect a tear — the reader announces the scan
    /// they give and its cursor checks every line before them as it lends
    /// it (seqs, decoding, upstream's refusals, the turns started), so the
    /// log is read once. Whatever the lines hold that the ends did not show
    /// ends the read with the classifying scan's own refusal. `None` when
    /// the ends do not settle it: the caller classifies first.
    fn reader_from_ends(
        &self,
        path: &Path,
        id: &str,
        cwd: Cwd,
    ) -> Result<Option<crate::view::LogReader>> {
        let file = match self.storage.open(path, OpenMode::Read) {
            Ok(file) => file,
            Err(_) => return Ok(None),
        };
        use source::Source as _;
        let Ok(src) = source::FileSource::new(file, path) else {
            return Ok(None);
        };
        let Some(tail) = tail::ends(&src, path, self.compression) else {
            return Ok(None);
        };
        let identified = self.check_identity(path, &tail.header, Some(id)).is_ok()
            && (matches!(cwd, Cwd::Any) || tail.header.validate_cwd().is_ok());
        let tear_licensed = self
            .proven_in(path, &src)
            .is_some_and(|p| p.rebooted && p.len < src.len());
        if !identified || tear_licensed {
            return Ok(None);
        }
        let Some(scan) = scan_of_ends(tail.header, tail.events, src.len()) else {
            return Ok(None);
        };
        let backend = self.clone();
        let at = path.to_owned();
        let owner = id.to_owned();
        let expect = cursor::Expect {
            committed: scan.committed,
            turn_starts: 0,
            stored: scan.stored_len(),
            refusal: Box::new(move |src| {
                backend
                    .classify_source(&at, src, Some(&owner), cwd, true)
                    .err()
            }),
        };
        let cursor = cursor::JsonlCursor::new(
            src,
            path.to_owned(),
            self.compression,
            tail.records_start,
            scan.bytes,
            Vec::new(),
            Some(crate::upstream::normalize::Normalizer::new(id)),
        )
        .expecting(expect);
        Ok(Some(crate::view::LogReader::of_scan(
            scan,
            Box::new(cursor),
        )))
    }

    /// The stored events of `id` from `from_seq` on, through a reader.
    fn read_events(
        &self,
        id: &str,
        from_seq: u64,
        cwd: Cwd,
        migrate: bool,
    ) -> Result<Option<Vec<Event>>> {
        match self.reader(id, cwd, migrate)? {
            Some(mut reader) => collect_from(&mut reader, from_seq).map(Some),
            None => Ok(None),
        }
    }

    /// `list`'s line for the log at `path`: from its two ends when they
    /// settle it (`quick`), else from a full scan.
    fn summarize(&self, path: &Path) -> Result<Option<SessionSummary>> {
        if let Some(summary) = tail::summary(
            self.storage(),
            path,
            self.compression,
            JsonlBackend::READ_POLICY,
        ) && summary
            .header
            .as_ref()
            .is_some_and(|h| h.validate_cwd().is_ok() && self.check_identity(path, h, None).is_ok())
        {
            return Ok(Some(summary));
        }
        self.full_summary(path)
    }

    /// `list`'s line for the log at `path`, from every byte of it.
    fn full_summary(&self, path: &Path) -> Result<Option<SessionSummary>> {
        let dir_name = path
            .parent()
            .and_then(|d| d.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let size = |path: &Path| {
            self.storage
                .open(path, OpenMode::Read)
                .and_then(|f| f.len())
        };
        Ok(Some(
            match self.classify_at(path, None, Cwd::Absolute, true) {
                Ok(None) => return Ok(None),
                Ok(Some((c, _))) => {
                    let scan = c.scan;
                    SessionSummary::scanned(
                        scan.header.id.clone(),
                        &scan,
                        scan.stored_len(),
                        scan.bytes,
                        scan.cut.as_ref().map(|c| c.problem("byte")),
                    )
                }
                Err(e @ (Error::Corrupt(_) | Error::Unsupported { .. })) => {
                    SessionSummary::corrupt(
                        layout::decode_segment(&dir_name).unwrap_or(dir_name),
                        size(path).unwrap_or(0),
                        e.to_string(),
                    )
                }
                Err(e) => return Err(e),
            },
        ))
    }

    /// The header of the transcript at `path`, reading only as much of the
    /// file as holds the first line (raw) or the first frame (zstd).
    fn read_header(&self, path: &Path) -> Result<SessionHeader> {
        let file = self
            .storage
            .open(path, OpenMode::Read)
            .map_err(|e| Error::io("open", path, e))?;
        let mut head = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            let n = file
                .read_at(&mut chunk, head.len() as u64)
                .map_err(|e| Error::io("read", path, e))?;
            head.extend_from_slice(&chunk[..n]);
            let complete = n == 0
                || match self.compression {
                    Compression::None => chunk[..n].contains(&b'\n'),
                    Compression::Zstd => match zstd::scan_frames(&head, 1) {
                        Ok(scan) => !scan.frames.is_empty(),
                        Err(_) => true,
                    },
                };
            if complete {
                break;
            }
        }
        match self.compression {
            Compression::None => scan::raw_header(&head, path).map(|(header, _)| header),
            Compression::Zstd => scan::zstd_header(&head, path),
        }
    }

    /// The stored events from `from_seq` on exactly as the log holds them:
    /// before read-time normalization (what `cat --raw` prints).
    ///
    /// These are the valid prefix the scanner keeps (recovered records of a
    /// torn zstd frame included), before normalization, the turn contract and
    /// its closers: a log normalization refuses is still shown.
    pub fn read_stored_events(&self, id: &str, from_seq: u64) -> Result<Option<Vec<Event>>> {
        self.read_events(id, from_seq, Cwd::Any, false)
    }

    /// The bytes of a first batch: the header line and the batch, in one
    /// text (raw) or two frames (zstd).
    fn materialization(&self, header: &SessionHeader, batch: &[Event]) -> Vec<u8> {
        match self.compression {
            Compression::None => session_text(header, batch, self.pack_chunks),
            Compression::Zstd => {
                let mut head = header::header_line(header).into_bytes();
                head.push(b'\n');
                let body = records::encode_batch(batch, self.pack_chunks);
                let mut out = zstd::compress_frame(&head);
                out.extend_from_slice(&zstd::compress_frame(&body));
                out
            }
        }
    }

    /// Refuses a zstd batch whose lines would make a frame over
    /// [`crate::limits::MAX_FRAME_LEN`] bytes: a reader would report that
    /// frame corrupt. A cheap estimate (twice the text's length, room for
    /// any escaping) settles nearly every batch; a larger one is encoded and
    /// measured.
    fn admit_frame(&self, batch: &[Event]) -> Result<()> {
        use crate::limits::MAX_FRAME_LEN;
        let extra = |r: Option<&crate::event::RawJson>| r.map_or(0, |r| r.get().len());
        let estimate: usize = batch
            .iter()
            .map(|e| {
                e.data().get().len()
                    + extra(e.source_event_seqs())
                    + extra(e.surface_op())
                    + 6 * e.event_type().len()
                    + 128
            })
            .sum();
        if estimate.saturating_mul(2) <= MAX_FRAME_LEN {
            return Ok(());
        }
        let len = records::encode_batch(batch, self.pack_chunks).len();
        if len <= MAX_FRAME_LEN {
            return Ok(());
        }
        let last = batch.last().expect("an empty batch encodes to nothing");
        Err(Error::Event(
            EventError::new(format!(
                "this batch's lines are {len} bytes, over the {MAX_FRAME_LEN}-byte bound of one \
                 zstd frame (one append batch); append it in smaller batches"
            ))
            .at_seq(last.seq())
            .of_type(last.event_type()),
        ))
    }

    /// One append batch in the store's encoding.
    pub(crate) fn encode_batch(&self, batch: &[Event]) -> Vec<u8> {
        let body = records::encode_batch(batch, self.pack_chunks);
        match self.compression {
            Compression::None => body,
            Compression::Zstd => zstd::compress_frame(&body),
        }
    }

    /// Removes a session's transcript (its writer holds it), its proof,
    /// an older turnwal's sidecars, temp files, and the directories left
    /// empty.
    /// Removes the transcript at `path`, which `held` holds, then what
    /// belongs to it. The hold is let go once the name is gone (Windows
    /// keeps a file removed while a handle is open in its directory until
    /// the handle closes, and the directory could not go).
    fn remove_session(&self, path: &Path, held: Box<dyn StorageFile>) -> Result<()> {
        let dir = path.parent().unwrap_or(path);
        // Named by the canonical path, found while the transcript exists.
        let proof = self.proof_path(path);
        match self.storage.remove_file(path) {
            Ok(()) => {}
            Err(e) if not_found(&e) => {}
            Err(e) => return Err(Error::io("remove", path, e)),
        }
        drop(held);
        self.sync_dir(dir)?;
        if let Some(proof) = proof {
            let _ = self.storage.remove_file(&proof);
        }
        self.clear_unsynced_mark(path);
        self.remove_legacy(dir);
        self.remove_temps(path);
        if self.storage.remove_dir(dir).is_ok()
            && let Some(project) = dir.parent()
        {
            let _ = self.storage.remove_dir(project);
        }
        Ok(())
    }

    /// Whether an entry exists; a missing parent is absence, a parent that
    /// is not a directory is an error, as upstream's `exists`.
    fn entry_exists(&self, path: &Path) -> Result<bool> {
        match self.storage.entry_kind(path) {
            Ok(kind) => Ok(kind.is_some()),
            Err(e) if not_found(&e) => Ok(false),
            Err(e) => Err(Error::io("open", path, e)),
        }
    }

    /// fsync of a directory, so an entry created, renamed or removed in it
    /// survives a crash.
    pub(crate) fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.storage
            .sync_dir(dir)
            .map_err(|e| Error::io("fsync directory", dir, e))
    }

    /// `mkdir` with mode 0700 of each missing directory down to `dir`,
    /// fsyncing each parent, as upstream's materialization does.
    fn create_dirs(&self, dir: &Path) -> Result<()> {
        self.storage
            .create_dir_all(dir)
            .map_err(|e| Error::io("create directory", dir, e))
    }

    /// A fresh temp name beside the transcript: `<final>.<12 hex>.tmp`.
    fn temp_path(&self, path: &Path) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(
            ".{:012x}.tmp",
            self.storage.random() & 0xffff_ffff_ffff
        ));
        PathBuf::from(name)
    }

    /// Opens the transcript for writing and takes the writer's hold on it
    /// (`storage::hold_writer`), the one writer lock of a JSONL session:
    /// refused, as locked, when another writer (another process, or
    /// another store in this one) holds it. An OFD lock does not say who
    /// holds it, so the holder is unknown. `None` when the transcript is
    /// gone.
    pub(crate) fn open_held(&self, id: &str, path: &Path) -> Result<Option<Box<dyn StorageFile>>> {
        let file = match self.storage.open(path, OpenMode::ReadWrite) {
            Ok(file) => file,
            Err(e) if not_found(&e) => return Ok(None),
            Err(e) => return Err(Error::io("open", path, e)),
        };
        if file.hold_writer().map_err(|e| Error::io("lock", path, e))? {
            return Ok(Some(file));
        }
        Err(Error::Locked {
            id: id.to_owned(),
            path: path.to_owned(),
            holder: None,
        })
    }

    /// Removes an older turnwal's sidecars from a session directory
    /// ([`LEGACY_SIDECARS`]) when a writer that holds the session first
    /// writes it (a read, even through a writer, changes nothing in the
    /// root). Best effort: nothing reads them, so one that stays does no
    /// harm.
    pub(crate) fn remove_legacy(&self, dir: &Path) {
        for name in LEGACY_SIDECARS {
            let path = dir.join(name);
            if matches!(self.storage.entry_kind(&path), Ok(Some(_))) {
                let _ = self.storage.remove_file(&path);
            }
        }
    }

    /// Removes temp files an interrupted materialization or repair left.
    /// A temp file whose writer is still at work is held
    /// ([`JsonlBackend::write_temp`]) and stays: with no lock file, two
    /// creators of one session meet only at `link`, and the loser must not
    /// take the winner's temp file away from it first.
    pub(crate) fn remove_temps(&self, path: &Path) {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return;
        };
        let prefix = format!("{}.", name.to_string_lossy());
        for n in self.storage.list_dir(dir).unwrap_or_default() {
            if n.starts_with(&prefix) && n.ends_with(".tmp") {
                let tmp = dir.join(n);
                let stale = self
                    .storage
                    .open(&tmp, OpenMode::ReadWrite)
                    .is_ok_and(|f| f.hold_writer().unwrap_or(false));
                if stale {
                    let _ = self.storage.remove_file(&tmp);
                }
            }
        }
    }

    /// Writes `bytes` to a new temp file beside `path` (mode 0600), holding
    /// it as a writer holds a transcript, and fsyncs it. The held handle is
    /// returned: published by `link` or `rename`, the transcript is then
    /// held from the moment it has its name, and no other writer can open
    /// it in between. `None` when the temp file was taken before this could
    /// hold it: a concurrent creator's [`JsonlBackend::remove_temps`] met it
    /// in the instant between its creation and the hold.
    pub(crate) fn write_temp(
        &self,
        path: &Path,
        bytes: &[u8],
    ) -> Result<Option<(PathBuf, Box<dyn StorageFile>)>> {
        let tmp = self.temp_path(path);
        let mut file = self
            .storage
            .open(&tmp, OpenMode::CreateNew)
            .map_err(|e| Error::io("create", &tmp, e))?;
        match file.hold_writer() {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(e) => {
                drop(file);
                let _ = self.storage.remove_file(&tmp);
                return Err(Error::io("lock", &tmp, e));
            }
        }
        let written = file.write_all_at(bytes, 0).and_then(|()| file.sync_all());
        if let Err(e) = written {
            drop(file);
            let _ = self.storage.remove_file(&tmp);
            return Err(Error::io("write", &tmp, e));
        }
        Ok(Some((tmp, file)))
    }

    /// Renames `from` over `to` (both in `to`'s directory).
    pub(crate) fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.storage.rename(from, to).map_err(|e| {
            let _ = self.storage.remove_file(from);
            Error::io("rename", to, e)
        })
    }

    pub(crate) fn storage(&self) -> &dyn Storage {
        self.storage.as_ref()
    }
}

impl JsonlBackend {
    /// [`Backend::create`]: the session's directories, then the transcript
    /// published with the first batch, and its writer.
    fn create_transcript(
        &self,
        header: &SessionHeader,
        batch: &[Event],
    ) -> Result<Box<dyn LogWriter>> {
        let path = self.log_path(header)?;
        let dir = path
            .parent()
            .expect("a transcript has a directory")
            .to_owned();
        let taken = || Error::AlreadyExists {
            id: header.id.clone(),
            on_disk: true,
        };
        self.check_root_encoding()?;
        let opposite = dir.join(self.compression.opposite().log_name());
        if self.entry_exists(&opposite)? {
            return Err(self.encoding_mismatch(&opposite));
        }
        if self.find_log(&header.id)?.is_some() {
            return Err(taken());
        }
        self.check_inside(&dir)?;
        self.create_dirs(&dir)?;
        if self.entry_exists(&path)? {
            return Err(taken());
        }
        let bytes = self.materialization(header, batch);
        // Another creator's cleanup can take a temp file in the instant
        // before it is held (then its link finds no file): start over, and
        // the session that creator published is found as taken.
        // A failed creation of another session removes the directories it
        // made if they are empty (`remove_empty_dirs`), which can be ours
        // before our temp file is in them: make them again, and retry.
        let mut attempts = 0;
        let file = loop {
            attempts += 1;
            if attempts > 1 {
                if self.entry_exists(&path)? {
                    return Err(taken());
                }
                self.create_dirs(&dir)?;
            }
            self.remove_temps(&path);
            let written = match self.write_temp(&path, &bytes) {
                Err(Error::Io { source, .. }) if not_found(&source) && attempts < 8 => continue,
                other => other?,
            };
            let Some((tmp, file)) = written else {
                if attempts < 8 {
                    continue;
                }
                return Err(Error::io("link", &path, io::ErrorKind::NotFound.into()));
            };
            let linked = self.storage.link(&tmp, &path);
            let _ = self.storage.remove_file(&tmp);
            match linked {
                Ok(()) => break file,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(taken()),
                Err(e) if not_found(&e) && attempts < 8 => {}
                Err(e) => return Err(Error::io("link", &path, e)),
            }
        };
        // This writer holds the new transcript; from here a failure takes
        // it back so a retry starts over.
        // A proof an earlier transcript at this path left is not removed:
        // a slot counts only where its tag is the CRC of the file's prefix
        // of its length (bytes identical to what it proved), and the
        // writer's first proofs overwrite both slots. Removing it here
        // could race with a creator that won meanwhile and proves into it.
        let published = self.sync_dir(&dir);
        self.remove_legacy(&dir);
        let mut writer = JsonlWriter::new(
            self.clone(),
            header.clone(),
            path.clone(),
            file,
            bytes.len() as u64,
            batch.len() as u64,
        );
        writer.swept();
        // Published whole and fsynced (the directory too): all of it is
        // durable.
        if let Err(e) = published.and_then(|()| writer.prove(bytes.len() as u64)) {
            drop(writer);
            let _ = self.storage.remove_file(&path);
            return Err(e);
        }
        Ok(Box::new(writer))
    }

    /// Removes the session directory `dir` and then its project directory,
    /// each only if empty (a failed creation's; another session's files, or
    /// a creator that raced it, keep them). Best effort.
    fn remove_empty_dirs(&self, dir: &Path) {
        if self.storage.remove_dir(dir).is_ok()
            && let Some(project) = dir.parent().filter(|p| *p != self.root)
        {
            let _ = self.storage.remove_dir(project);
        }
    }
}

impl Backend for JsonlBackend {
    fn location(&self) -> String {
        self.root.display().to_string()
    }

    /// The session's own directory (its transcript, a republished copy's
    /// rename); a poll for a session not found, and for the whole root
    /// (transcripts live a directory or two down, where one watch does
    /// not reach).
    fn watch(&self, id: Option<&str>) -> Result<Box<dyn crate::storage::watch::Watch>> {
        match id.map(|id| self.find_log(id)).transpose()?.flatten() {
            Some(path) => Ok(crate::storage::watch::of_file(&path)),
            None => Ok(Box::new(crate::storage::watch::Poll)),
        }
    }

    /// The transcript file: a republished or repaired copy is another.
    fn incarnation(&self, revision: &str) -> Option<String> {
        Some(crate::storage::file_of_revision(revision))
    }

    fn pin(&self, id: &str) -> Option<Box<dyn Send>> {
        let path = self.find_log(id).ok()??;
        let file = self.storage.open(&path, OpenMode::Read).ok()?;
        Some(Box::new(file))
    }

    /// The header line always holds `delegationDepth` (0 for a top-level
    /// session, as upstream's writer stores it), so a live session shows the
    /// 0 a reader of the file will find.
    fn admit_header(&self, mut header: SessionHeader) -> Result<SessionHeader> {
        header.delegation_depth.get_or_insert(0);
        Ok(header)
    }

    /// An event whose type is a packed-row tag would read back as a
    /// malformed packed row (upstream's format cannot tell them apart), so it
    /// is refused before anything is written; the WAL and SQLite hold it.
    ///
    /// Every event must fit the shared limits ([`crate::limits`]), and in
    /// zstd mode the batch's lines (its frame) at most
    /// [`crate::limits::MAX_FRAME_LEN`] bytes, the bound a reader inflates a
    /// frame to.
    fn admit_batch(&self, batch: &[Event]) -> Result<()> {
        crate::limits::check_batch(batch).map_err(Error::Event)?;
        if self.compression == Compression::Zstd {
            self.admit_frame(batch)?;
        }
        match records::row_tag_refusal(batch) {
            None => Ok(()),
            Some(refusal) => Err(Error::Event(refusal)),
        }
    }

    fn list(&self) -> Result<Vec<SessionSummary>> {
        let mut out: Vec<SessionSummary> = Vec::new();
        for project in self.project_dirs()? {
            for dir in self.session_dirs(&project)? {
                let opposite = dir.join(self.compression.opposite().log_name());
                if self.entry_exists(&opposite)? {
                    return Err(self.encoding_mismatch(&opposite));
                }
                let path = dir.join(self.compression.log_name());
                if !self.entry_exists(&path)? {
                    continue;
                }
                if let Some(summary) = self.summarize(&path)? {
                    if summary.header.is_some() && out.iter().any(|s| s.id == summary.id) {
                        return Err(corrupt(
                            &path,
                            format!(
                                "duplicate JSONL session id \"{}\" appears in multiple project directories",
                                summary.id
                            ),
                        ));
                    }
                    out.push(summary);
                }
            }
        }
        Ok(out)
    }

    fn exists(&self, id: &str) -> Result<bool> {
        Ok(self.find_log(id)?.is_some())
    }

    fn revision(&self, id: &str) -> Result<Option<String>> {
        let Some(path) = self.find_log(id)? else {
            return Ok(None);
        };
        match self.storage.revision(&path) {
            Ok(revision) => Ok(Some(revision)),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(Error::io("stat", path, e)),
        }
    }

    fn scan(&self, id: &str) -> Result<Option<crate::scan::Scan>> {
        let Some(path) = self.find_log(id)? else {
            return Ok(None);
        };
        Ok(self
            .classify_at(&path, Some(id), Cwd::Absolute, true)?
            .map(|(c, _)| c.scan))
    }

    fn load(&self, id: &str) -> Result<Option<Stored>> {
        let Some(mut reader) = self.reader(id, Cwd::Absolute, true)? else {
            return Ok(None);
        };
        let events = collect_from(&mut reader, 0)?;
        let scan = reader
            .scan()
            .expect("the JSONL reader carries its scan")
            .clone();
        Ok(Some(Stored { scan, events }))
    }

    fn read(&self, id: &str) -> Result<Option<crate::view::LogReader>> {
        self.reader(id, Cwd::Absolute, true)
    }

    fn read_from(&self, id: &str, from_seq: u64) -> Result<Option<Vec<Event>>> {
        self.read_events(id, from_seq, Cwd::Any, true)
    }

    /// The first `n` events as stored, from the front of the file: lines
    /// (or frames) decoded in order until `n` are read, the file ends, or
    /// one does not decode or follow (nothing past a defect is served).
    fn read_first(&self, id: &str, n: usize) -> Result<Option<Vec<Event>>> {
        use crate::view::Cursor as _;
        let Some(path) = self.find_log(id)? else {
            return Ok(None);
        };
        let file = match self.storage.open(&path, OpenMode::Read) {
            Ok(file) => file,
            Err(e) if not_found(&e) => return Ok(None),
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        let src = source::FileSource::new(file, &path).map_err(|e| Error::io("stat", &path, e))?;
        let (header, start) = scan::head_of(&src, self.compression, &path)?;
        self.check_identity(&path, &header, Some(id))?;
        let end = source::Source::len(&src);
        let mut cursor =
            cursor::JsonlCursor::new(src, path, self.compression, start, end, Vec::new(), None);
        let mut events = Vec::new();
        while events.len() < n && matches!(cursor.advance(), Ok(true)) {
            events.extend(cursor.current().map(|e| e.to_event()));
        }
        Ok(Some(events))
    }

    fn normalizes_reads(&self) -> bool {
        true
    }

    fn read_raw(&self, id: &str, from_seq: u64) -> Result<Option<Vec<Event>>> {
        self.read_events(id, from_seq, Cwd::Any, false)
    }

    /// Every intact line (raw) or line of an intact frame (zstd), past any
    /// damage, normalized as `load` normalizes (as stored, when
    /// normalization refuses what a gap left); see `salvage.rs` for the
    /// gaps. Only a header that cannot be read refuses.
    fn salvage(&self, id: &str) -> Result<Option<crate::scan::Salvage>> {
        let Some(path) = self.find_log(id)? else {
            return Ok(None);
        };
        let Some(bytes) = self.read_stable(&path)? else {
            return Ok(None);
        };
        let (header, raw, gaps) = match self.compression {
            Compression::None => salvage::raw(&bytes, &path)?,
            Compression::Zstd => salvage::zstd(&bytes, &path)?,
        };
        self.check_identity(&path, &header, Some(id))?;
        let events = normalize::normalize(&raw, &header.id).unwrap_or(raw);
        Ok(Some(crate::scan::Salvage {
            header,
            events,
            gaps,
        }))
    }

    /// A JSONL root records no policy: appends follow the store's.
    fn keeps_policy(&self) -> bool {
        false
    }

    /// The files in the `.turnwal-quarantine/` of every session directory
    /// (of a deleted session's too: deleting a session keeps them).
    fn quarantined(&self) -> Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        for project in self.project_dirs()? {
            for dir in self.session_dirs(&project)? {
                let dir = dir.join(QUARANTINE_DIR);
                files.extend(
                    crate::quarantine::list(self.storage(), &dir)
                        .map_err(|e| Error::io("list", &dir, e))?,
                );
            }
        }
        files.sort();
        Ok(files)
    }

    /// Materializes a session as upstream does (temp file, `link`), with
    /// no lock file: two creators race to `link`, which lets exactly one
    /// win (the other gets `AlreadyExists`); the winner's temp file is
    /// already held, so the transcript is held from the moment it exists
    /// (a writer opening it meanwhile gets `Locked`). The policy is not
    /// recorded: a JSONL session is appended to under the appending
    /// store's policy.
    fn create(
        &self,
        header: &SessionHeader,
        _policy: Policy,
        batch: &[Event],
        _placements: &[Placement],
    ) -> Result<Box<dyn LogWriter>> {
        let created = self.create_transcript(header, batch);
        if created.is_err() {
            // A creation that failed leaves no empty directory behind: the
            // root holds what it held before.
            if let Ok(path) = self.log_path(header)
                && let Some(dir) = path.parent()
            {
                self.remove_empty_dirs(dir);
            }
        }
        created
    }

    /// The transcript's writer hold, asked (never taken) through a
    /// read-only open. An OFD lock does not say who holds it.
    fn holder(&self, id: &str) -> Result<Option<crate::backend::Holder>> {
        let Some(path) = self.find_log(id)? else {
            return Ok(None);
        };
        let file = match self.storage.open(&path, OpenMode::Read) {
            Ok(file) => file,
            Err(e) if not_found(&e) => return Ok(None),
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        let held = file
            .writer_held()
            .map_err(|e| Error::io("lock", &path, e))?;
        Ok(held.then(|| crate::backend::Holder::of_pid(None)))
    }

    fn open(&self, id: &str) -> Result<Option<Box<dyn LogWriter>>> {
        let Some(path) = self.find_log(id)? else {
            return Ok(None);
        };
        let Some(mut file) = self.open_held(id, &path)? else {
            return Ok(None);
        };
        // What a crashed writer left in the page cache becomes durable now,
        // and so does the transcript's name: a repair whose directory fsync
        // failed after its rename left a name a power loss could take back.
        // After a failed fdatasync of this transcript (marked), no
        // fdatasync can be trusted to: publish a durable copy instead.
        if self.unsynced_marked(&path)? {
            file = self.republish(&path)?;
            self.clear_unsynced_mark(&path);
        } else if let Err(e) = file.sync_data() {
            self.leave_unsynced_mark(&path);
            return Err(Error::io("fdatasync", &path, e));
        }
        self.sync_dir(path.parent().expect("a transcript has a directory"))?;
        let len = file.len().map_err(|e| Error::io("stat", &path, e))?;
        let header = self.read_header(&path)?;
        self.check_identity(&path, &header, Some(id))?;
        Ok(Some(Box::new(JsonlWriter::new(
            self.clone(),
            header,
            path,
            file,
            len,
            0,
        ))))
    }

    fn delete_if(
        &self,
        id: &str,
        check: &mut dyn FnMut(&SessionSummary) -> bool,
    ) -> Result<super::Deletion> {
        use super::Deletion;
        let Some(path) = self.find_log(id)? else {
            return Ok(Deletion::NotFound);
        };
        // Held while it is read and while it goes: no writer appends in
        // between, and none is cut off mid-append.
        let Some(held) = self.open_held(id, &path)? else {
            return Ok(Deletion::NotFound);
        };
        let Some(summary) = self.summary(id)? else {
            return Ok(Deletion::NotFound);
        };
        if !check(&summary) {
            return Ok(Deletion::Kept(summary));
        }
        self.remove_session(&path, held)?;
        Ok(Deletion::Deleted(summary))
    }
}

/// A session as the upstream JSONL backend's log holds it when `events`
/// are appended in one batch: the header line, then the events' storage
/// records (runs of chunk deltas packed when `pack`, as upstream packs by
/// default), a line each. This is the text upstream's `readRaw` returns for
/// such a log, and what `turnwal convert` writes into a plain JSONL root.
///
/// ```
/// use turnwal::{Event, SessionHeader};
/// use turnwal::backend::jsonl::session_text;
/// let header = SessionHeader::new("s1", 5).with_cwd("/w");
/// let start = Event::new("turn/start", 0, 9, r#"{"turn":1}"#).unwrap();
/// assert_eq!(String::from_utf8(session_text(&header, &[start], true)).unwrap(), concat!(
///     r#"{"type":"session","version":0,"id":"s1","createdAt":5,"cwd":"/w","delegationDepth":0}"#, "\n",
///     r#"{"type":"turn/start","seq":0,"time":9,"data":{"turn":1}}"#, "\n"));
/// ```
pub fn session_text(header: &SessionHeader, events: &[Event], pack: bool) -> Vec<u8> {
    let mut out = header::header_line(header).into_bytes();
    out.reserve(events.iter().map(|e| e.data().get().len() + 64).sum());
    out.push(b'\n');
    // Encoded in place after the header (not encode_batch's own buffer
    // copied in): a session's text is built once.
    let refs = events.iter().map(crate::view::EventRef::from);
    if records::encode_records(refs, pack, b'\n', &mut out) > 0 {
        out.push(b'\n');
    }
    out
}
