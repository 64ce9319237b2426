//! The native append-only WAL backend: one CRC-framed file per session,
//! scanned through a memory map. Every byte is specified in docs/FORMAT.md.

pub mod archive;
mod cursor;
pub mod format;
pub mod probe;
pub mod proof;
pub mod record;
pub mod scan;
pub mod seal;
mod stored;
mod view;
mod writer;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::storage::{decode_file_name, encode_file_name};
pub use stored::StoredWal;
pub use writer::{
    AUTO_SEAL_FILE_FRACTION, AUTO_SEAL_MIN_BYTES, IDLE_SEAL_MIN_BYTES, MAX_UNSYNCED_BYTES,
    WalWriter,
};

use self::format::TRAILER_LEN;
use self::record::check_at;
use self::scan::{Classified, read_file_header, scan_log_proven};
use super::{Backend, LogWriter, Stored};
use crate::contract::{Placement, Policy};
use crate::error::{Corruption, Error, Result};
use crate::event::Event;
use crate::header::SessionHeader;
use crate::scan::{LogState, SessionSummary};
use crate::storage::{self, FsStorage, OpenMode, Storage, StorageFile};

/// Decodes every kept record of a classified file (for tools and fuzzing):
/// a version-3 live file's own records only (the events before its archive
/// reference's count are its archive's).
pub fn decode_kept_events(
    bytes: &[u8],
    classified: &Classified,
    path: &Path,
) -> Result<Vec<Event>> {
    scan::decode_kept(bytes, classified, 0, path)
}

/// The extension of session files.
pub const LOG_EXTENSION: &str = ".twal";
/// The extension of lock files.
pub const LOCK_EXTENSION: &str = ".lock";

/// A native WAL store rooted at a directory.
#[derive(Debug, Clone)]
pub struct WalBackend {
    root: PathBuf,
    storage: Arc<dyn Storage>,
    /// The format version new sessions are created in.
    create_version: u16,
    /// When writers seal by themselves.
    auto_seal: AutoSeal,
}

/// When a writer seals a version-2 log without being asked
/// ([`WalBackend::sealing_by_itself`], [`WalBackend::sealing_after_batches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoSeal {
    /// At a clean close (the default).
    pub at_close: bool,
    /// After a batch that leaves at least 1 MiB of plain closed turns that
    /// are at least a quarter of the file (off by default: compressing in
    /// the append path costs more than the append, docs/FORMAT.md).
    pub after_batches: bool,
}

impl WalBackend {
    /// A store at `root` on the real file system. Nothing is created until
    /// the first session is materialized; a missing directory is an empty
    /// store.
    pub fn open(root: &Path) -> Result<WalBackend> {
        if root.exists() && !root.is_dir() {
            return Err(Error::io(
                "open store",
                root,
                io::Error::new(
                    io::ErrorKind::NotADirectory,
                    "a WAL store must be a directory",
                ),
            ));
        }
        WalBackend::with_storage(root, Arc::new(FsStorage))
    }

    /// A store at `root` over any storage (the crash tests pass a simulated
    /// disk).
    pub fn with_storage(root: &Path, storage: Arc<dyn Storage>) -> Result<WalBackend> {
        Ok(WalBackend {
            root: root.to_owned(),
            storage,
            create_version: format::FORMAT_VERSION,
            auto_seal: AutoSeal {
                at_close: true,
                after_batches: false,
            },
        })
    }

    /// This store, with writers that seal a version-2 log by themselves
    /// (`true`, the default: at a clean close, and after batches if
    /// [`WalBackend::sealing_after_batches`] asks for it) or only when
    /// compaction is asked for (`false`: the benches' fixtures, which
    /// measure plain records).
    pub fn sealing_by_itself(mut self, on: bool) -> WalBackend {
        self.auto_seal.at_close = on;
        if !on {
            self.auto_seal.after_batches = false;
        }
        self
    }

    /// This store, with writers that also seal after a batch that leaves at
    /// least 1 MiB of plain closed turns that are at least a quarter of the
    /// file (off by default). A writer kept open for a very long session
    /// bounds its plain bytes this way, at the price of compressing in the
    /// append path (docs/FORMAT.md, "Sealing and compaction").
    pub fn sealing_after_batches(mut self, on: bool) -> WalBackend {
        self.auto_seal.after_batches = on;
        if on {
            self.auto_seal.at_close = true;
        }
        self
    }

    /// This store, creating new sessions in format `version` (1, 2 or 3;
    /// default 3, [`format::FORMAT_VERSION`]). Versions 1 and 2 are what
    /// turnwal wrote before (no chunk-run records; sealed units inside the
    /// log): tests and tools use them to produce such logs. Appends always
    /// keep a log's own version.
    pub fn creating_version(mut self, version: u16) -> WalBackend {
        assert!(
            version == format::FORMAT_V1
                || version == format::FORMAT_V2
                || version == format::FORMAT_V3,
            "format version {version} is not one this build writes"
        );
        self.create_version = version;
        self
    }

    /// Replaces the log at `path` with a durable copy of what `file` reads
    /// (the page cache), published the way materialization publishes a new
    /// log: a temp file written and fsynced, renamed over the log, the
    /// directory fsynced.
    ///
    /// This is how a log with an [`unsynced_mark`] becomes durable again.
    /// Linux drops the dirty pages of a failed writeback and marks them
    /// clean, so no later fdatasync of that file writes them, yet it returns
    /// success: a writer that trusted it would give later records a
    /// watermark claiming bytes that a power loss turns into a hole
    /// (reported as corruption of acknowledged data). Rewriting them in
    /// place would expose the acknowledged bytes among them to a torn write;
    /// the copy never writes to the old file, so a crash at any point leaves
    /// either its durable bytes or the complete copy.
    fn republish(&self, id: &str, path: &Path, file: &dyn StorageFile, len: u64) -> Result<()> {
        let dir = self.sessions_dir();
        let name = encode_file_name(id);
        self.remove_stale_temps(&name);
        let tmp = dir.join(format!(".{name}.{:016x}.tmp", self.storage.random()));
        let mut copy = self
            .storage
            .open(&tmp, OpenMode::CreateNew)
            .map_err(|e| Error::io("create", &tmp, e))?;
        let copied = (|| {
            let mut buf = vec![0; (len as usize).min(1 << 20)];
            let mut at = 0;
            while at < len {
                let n = buf.len().min((len - at) as usize);
                file.read_exact_at(&mut buf[..n], at)?;
                copy.write_all_at(&buf[..n], at)?;
                at += n as u64;
            }
            copy.sync_all()
        })();
        drop(copy);
        let published = copied
            .map_err(|e| Error::io("copy", &tmp, e))
            .and_then(|()| {
                self.storage
                    .rename(&tmp, path)
                    .map_err(|e| Error::io("rename", path, e))
            });
        if let Err(e) = published {
            let _ = self.storage.remove_file(&tmp);
            return Err(e);
        }
        self.storage
            .sync_dir(&dir)
            .map_err(|e| Error::io("fsync directory", &dir, e))
    }

    /// The store directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// The log file of session `id`.
    pub fn log_path(&self, id: &str) -> PathBuf {
        self.sessions_dir()
            .join(format!("{}{LOG_EXTENSION}", encode_file_name(id)))
    }

    /// The archive file of session `id` (a version-3 session's sealed
    /// turns; absent until its first seal, and for older versions).
    pub fn archive_path(&self, id: &str) -> PathBuf {
        archive::path_of(&self.log_path(id))
    }

    /// The bytes session `id` occupies on a real file system: its log
    /// file and its archive, if any (a seal that did not finish counts
    /// too: it is on the disk). A missing log is an error.
    pub fn session_bytes(&self, id: &str) -> Result<u64> {
        let (log, archive) = (self.log_path(id), self.archive_path(id));
        let log_len = std::fs::metadata(&log).map_err(|e| Error::io("stat", &log, e))?;
        let archive_len = match std::fs::metadata(&archive) {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(Error::io("stat", &archive, e)),
        };
        Ok(log_len.len() + archive_len)
    }

    fn lock_path(&self, id: &str) -> PathBuf {
        self.sessions_dir()
            .join(format!("{}{LOCK_EXTENSION}", encode_file_name(id)))
    }

    fn open_file(&self, path: &Path, mode: OpenMode) -> Result<Option<Box<dyn StorageFile>>> {
        match self.storage.open(path, mode) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("open", path, e)),
        }
    }

    /// Maps the log of `id`, read-only; `None` when it does not exist.
    fn map(&self, id: &str) -> Result<Option<(storage::Mapped, PathBuf)>> {
        let path = self.log_path(id);
        let Some(file) = self.open_file(&path, OpenMode::Read)? else {
            return Ok(None);
        };
        let map = file.into_map().map_err(|e| Error::io("map", &path, e))?;
        Ok(Some((map, path)))
    }

    /// Maps the log of `id` and reads its file header, which must name `id`.
    fn map_with_header(
        &self,
        id: &str,
    ) -> Result<Option<(storage::Mapped, format::FileHeader, PathBuf)>> {
        let Some((map, path)) = self.map(id)? else {
            return Ok(None);
        };
        let meta = read_file_header(&map, &path)?;
        check_id(&meta.header, id, &path)?;
        Ok(Some((map, meta, path)))
    }

    /// Maps and classifies the log of `id`, read-only.
    fn classify(&self, id: &str) -> Result<Option<(storage::Mapped, Classified, PathBuf)>> {
        self.classify_with(id, scan_log_proven)
    }

    /// [`WalBackend::classify`] with the scan `scan`.
    fn classify_with(
        &self,
        id: &str,
        scan: fn(&[u8], &Path, u64) -> Result<Classified>,
    ) -> Result<Option<(storage::Mapped, Classified, PathBuf)>> {
        let proof = self.proof_bytes(&self.log_path(id))?;
        let Some((map, path)) = self.map(id)? else {
            return Ok(None);
        };
        let classified = scan(&map, &path, Self::proven(&proof, &map, &path))?;
        check_id(&classified.scan.header, id, &path)?;
        Ok(Some((map, classified, path)))
    }

    /// The archive the live file at `path` (whose header is `meta`) stands
    /// on: `None` unless it is a version-3 file with an archive reference.
    fn archive(&self, path: &Path, meta: &format::FileHeader) -> Result<Option<archive::Archive>> {
        archive::Archive::open(self.storage.as_ref(), path, meta)
    }

    /// Every intact record of the first `len` bytes of the archive beside
    /// the live file at `path` (what the live file stands on; a seal that
    /// did not finish left the rest), read past damage as a salvage reads
    /// a log.
    fn salvage_archive(
        &self,
        path: &Path,
        len: u64,
    ) -> Result<(Vec<Event>, Vec<crate::scan::Gap>)> {
        let archive = archive::path_of(path);
        let Some(file) = self.open_file(&archive, OpenMode::Read)? else {
            return Ok((Vec::new(), Vec::new()));
        };
        let map = file.into_map().map_err(|e| Error::io("map", &archive, e))?;
        let len = (len as usize).min(map.len());
        scan::salvage_records(&map[..len], &archive)
    }

    /// The archived events with seq >= `from_seq` of the live file at
    /// `path` (none unless `from_seq` is below its archive's count), and
    /// the seq the live file's read starts at.
    fn archived_from(
        &self,
        path: &Path,
        meta: &format::FileHeader,
        from_seq: u64,
    ) -> Result<(Vec<Event>, u64)> {
        match meta.archive {
            Some(reference) if from_seq < reference.count => {
                let archive = self
                    .archive(path, meta)?
                    .expect("a file with a reference has an archive");
                Ok((archive.events_from(from_seq)?, reference.count))
            }
            _ => Ok((Vec::new(), from_seq)),
        }
    }

    /// The bytes of the durability proof beside the log at `path`, read
    /// **before** the log is mapped: a proof only grows with the log, so
    /// one read first never states more than the mapped log holds, even
    /// while a writer appends (read after, it could).
    fn proof_bytes(&self, path: &Path) -> Result<Vec<u8>> {
        let proof = proof::path_of(path);
        let file = match self.storage.open(&proof, OpenMode::Read) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("open", proof, e)),
        };
        let mut bytes = vec![0; proof::LEN];
        let n = file
            .read_at(&mut bytes, 0)
            .map_err(|e| Error::io("read", &proof, e))?;
        bytes.truncate(n);
        Ok(bytes)
    }

    /// What proof bytes read before mapping `map` state durable; 0 when the
    /// file header cannot say whose proof it would be (the scan refuses
    /// that header anyway).
    fn proven(proof_bytes: &[u8], map: &[u8], path: &Path) -> u64 {
        read_file_header(map, path).map_or(0, |fh| proof::decode(proof_bytes, fh.salt))
    }

    /// Takes the writer's hold on the open log `file` ([`storage::hold_writer`]):
    /// refused, as locked, when another writer holds the log although this
    /// one got the lock file (someone deleted or replaced it).
    fn hold(&self, id: &str, path: &Path, file: &dyn StorageFile) -> Result<()> {
        if file.hold_writer().map_err(|e| Error::io("lock", path, e))? {
            return Ok(());
        }
        Err(Error::Locked {
            id: id.to_owned(),
            path: self.lock_path(id),
            holder: None,
        })
    }

    fn lock(&self, id: &str) -> Result<Box<dyn storage::LockGuard>> {
        let path = self.lock_path(id);
        match self.storage.try_lock(&path) {
            Ok(Ok(guard)) => Ok(guard),
            Ok(Err(holder)) => Err(Error::Locked {
                id: id.to_owned(),
                path,
                holder,
            }),
            Err(e) => Err(Error::io("lock", path, e)),
        }
    }

    /// Whether the entry `name` of the sessions directory is anything but a
    /// regular file (a FIFO, a directory, a symlink…): not a log, never
    /// opened by a listing (see [`Backend::foreign_entries`]). An entry that
    /// cannot be examined is left to the listing, which reports why.
    fn is_foreign(&self, name: &str) -> bool {
        matches!(
            self.storage.foreign_kind(&self.sessions_dir().join(name)),
            Ok(Some(_))
        )
    }

    /// Header and state of one log from its file header and last record,
    /// falling back to a full scan when the last record is not valid. A log
    /// whose header holds another session than its file name encodes (a
    /// copied or renamed log) is corrupt, listed under its file name's id
    /// with a problem naming both.
    fn summarize(&self, name: &str) -> SessionSummary {
        let mut summary = self.summarize_log(name);
        let stem = name.trim_end_matches(LOG_EXTENSION);
        if summary.header.is_some() && encode_file_name(&summary.id) != stem {
            let held = std::mem::replace(
                &mut summary.id,
                decode_file_name(stem).unwrap_or_else(|| stem.to_owned()),
            );
            summary.state = LogState::Corrupt;
            summary.problem = Some(collision_text(name, &held, &summary.id));
        }
        summary
    }

    fn summarize_log(&self, name: &str) -> SessionSummary {
        let path = self.sessions_dir().join(name);
        let id_guess = decode_file_name(name.trim_end_matches(LOG_EXTENSION)).unwrap_or_default();
        let corrupt = |e: Error| self.corrupt_summary(&path, id_guess.clone(), e);
        match self.quick_summary(&path) {
            Ok(Some(summary)) => summary,
            Ok(None) => self.full_summary(&path).unwrap_or_else(corrupt),
            Err(e) => corrupt(e),
        }
    }

    /// The listing of a log that cannot be read: corrupt, with its size and,
    /// when the file header still reads, its header (a damaged record or
    /// unit leaves the session's id, cwd and creation time to show).
    fn corrupt_summary(&self, path: &Path, id: String, e: Error) -> SessionSummary {
        let problem = e.to_string();
        let Ok(Some(file)) = self.open_file(path, OpenMode::Read) else {
            return SessionSummary::corrupt(id, 0, problem);
        };
        let len = file.len().unwrap_or(0);
        let summary = SessionSummary::corrupt(id, len, problem);
        match read_header_of(file.as_ref(), len, path) {
            Ok(fh) if fh.header.id == summary.id => summary.with_header(fh.header),
            _ => summary,
        }
    }

    /// The summary from two reads: the first 4 KiB (the file header) and
    /// the last 4 KiB (the last record, usually). `None` when the last record
    /// is not valid, which only a full scan can explain.
    fn quick_summary(&self, path: &Path) -> Result<Option<SessionSummary>> {
        const CHUNK: u64 = 4096;
        let file = self
            .open_file(path, OpenMode::Read)?
            .ok_or_else(|| Error::io("open", path, io::ErrorKind::NotFound.into()))?;
        let io_err = |op, e| Error::io(op, path, e);
        let read = |at: u64, len: u64| {
            let mut buf = vec![0; len as usize];
            file.read_exact_at(&mut buf, at)
                .map(|()| buf)
                .map_err(|e| io_err("read", e))
        };
        let len = file.len().map_err(|e| io_err("stat", e))?;
        let mut head = read(0, len.min(CHUNK))?;
        // The header, and a version-3 file's archive reference after it.
        if let Some(header_len) = format::file_header_len(&head)
            .map(|n| (n + format::ARCHIVE_REF_LEN as u64).min(len))
            .filter(|&n| n > CHUNK)
        {
            head = read(0, header_len)?;
        }
        let fh = read_file_header(&head, path)?;
        // A version-3 session's bytes are its archive's too.
        let bytes = len + fh.archive.map_or(0, |a| a.len);
        let records = len - fh.records_start;
        if records == 0 {
            let (events, turns, last) = fh
                .archive
                .map_or((0, 0, None), |a| (a.count, u64::from(a.turn), Some(a.time)));
            return Ok(Some(SessionSummary::from_tail(
                fh.header, bytes, events, turns, last, false,
            )));
        }
        if records < format::MIN_RECORD_LEN as u64 {
            return Ok(None);
        }
        let mut tail = read(len - records.min(CHUNK), records.min(CHUNK))?;
        let trailer = &tail[tail.len() - TRAILER_LEN..];
        let record_len = u64::from(u32::from_le_bytes(trailer.try_into().expect("4 bytes")));
        if record_len < format::MIN_RECORD_LEN as u64 || record_len > records {
            return Ok(None);
        }
        if record_len > tail.len() as u64 {
            tail = read(len - record_len, record_len)?;
        }
        let record = &tail[tail.len() - record_len as usize..];
        let Ok(head) = check_at(record, 0, None, fh.salt) else {
            return Ok(None);
        };
        if head.is_v2() && fh.version == format::FORMAT_V1 {
            return Ok(None); // the full scan names it
        }
        // A chunk run's head holds its first member's time: the last
        // event's is the last member's.
        let last_time = if head.is_run() {
            match record::decode_records(record, &head) {
                Ok(members) => members.last().map(Event::time),
                Err(_) => return Ok(None),
            }
        } else {
            Some(head.time)
        };
        Ok(Some(SessionSummary::from_tail(
            fh.header,
            bytes,
            head.next_seq(),
            u64::from(head.turn),
            last_time,
            head.in_turn(),
        )))
    }

    fn full_summary(&self, path: &Path) -> Result<SessionSummary> {
        let proof = self.proof_bytes(path)?;
        let file = self
            .open_file(path, OpenMode::Read)?
            .ok_or_else(|| Error::io("open", path, io::ErrorKind::NotFound.into()))?;
        let map = file.map().map_err(|e| Error::io("map", path, e))?;
        let c = scan_log_proven(&map, path, Self::proven(&proof, &map, path))?;
        // The archive is checked as a listing's full read would meet it.
        let archived = self.archive(path, &c.frames.file)?.map_or(0, |a| a.len());
        Ok(SessionSummary::scanned(
            c.scan.header.id.clone(),
            &c.scan,
            c.frames.records,
            c.frames.len + archived,
            c.scan.cut.as_ref().map(|cut| cut.problem("byte")),
        ))
    }

    /// Removes leftovers of interrupted materializations of this name.
    fn remove_stale_temps(&self, name: &str) {
        let prefix = format!(".{name}.");
        if let Ok(names) = self.storage.list_dir(&self.sessions_dir()) {
            for n in names
                .iter()
                .filter(|n| n.starts_with(&prefix) && n.ends_with(".tmp"))
            {
                let _ = self.storage.remove_file(&self.sessions_dir().join(n));
            }
        }
    }
}

/// The mark a failed fdatasync of the log at `path` leaves next to it:
/// `.<name>.unsynced`, an empty file. While it exists, no fdatasync of the
/// log is trusted to make what reads see durable (see
/// [`WalBackend::republish`]). It is never fsynced: it matters exactly as
/// long as the page cache holding the dropped pages lives, and a power loss
/// that takes it takes those pages too, leaving a hole no record claims (a
/// torn tail). A mark that survives anyway only costs one extra copy.
pub(super) fn unsynced_mark(path: &Path) -> PathBuf {
    sidecar(path, "unsynced")
}

/// `.<name>.<kind>` beside the log `<name>.twal` at `log`: the hidden files
/// that belong to one log (its unsynced mark, its durability proof).
pub(super) fn sidecar(log: &Path, kind: &str) -> PathBuf {
    log.with_file_name(format!(".{}.{kind}", log_name(log)))
}

/// `<name>` of the log `<name>.twal` at `log`.
pub(super) fn log_name(log: &Path) -> &str {
    log.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(LOG_EXTENSION))
        .expect("a session log path")
}

/// Leaves the [`unsynced_mark`] of the log at `path` (if it is not there).
pub(super) fn leave_unsynced_mark(storage: &dyn Storage, path: &Path) -> io::Result<()> {
    match storage.open(&unsynced_mark(path), OpenMode::CreateNew) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Reads and decodes the file header of a file `len` bytes long, reading
/// only the header's bytes (listing never reads whole logs).
fn read_header_of(file: &dyn StorageFile, len: u64, path: &Path) -> Result<format::FileHeader> {
    let read = |buf: &mut [u8]| {
        file.read_exact_at(buf, 0)
            .map_err(|e| Error::io("read", path, e))
    };
    let mut prefix = vec![0; format::FILE_HEADER_LEN.min(len as usize)];
    read(&mut prefix)?;
    // An implausible length is left to the decoder, which names the problem.
    // With a version-3 file's archive reference, if there is room for one.
    let header_len = format::file_header_len(&prefix).map_or(prefix.len() as u64, |n| {
        (n + format::ARCHIVE_REF_LEN as u64).min(len)
    });
    let mut head_bytes = vec![0; header_len as usize];
    read(&mut head_bytes)?;
    read_file_header(&head_bytes, path)
}

fn check_id(header: &SessionHeader, id: &str, path: &Path) -> Result<()> {
    if header.id != id {
        return Err(Error::from(Corruption {
            path: path.to_owned(),
            offset: 0,
            unit: crate::error::Unit::Byte,
            seq: None,
            reason: format!(
                "file holds session {:?}, not {id:?} (a file name collision)",
                header.id
            ),
        }));
    }
    Ok(())
}

/// The problem a listing names for the log `name` whose header holds session
/// `held` while its name encodes `named`.
fn collision_text(name: &str, held: &str, named: &str) -> String {
    format!(
        "file {name} holds session {held:?}, not {named:?} (a file name collision: a copied \
         or renamed log; move it back to its own name or remove it)"
    )
}

impl Backend for WalBackend {
    fn location(&self) -> String {
        self.root.display().to_string()
    }

    /// The sessions directory's entries named after the session (its log,
    /// a rewrite's temp, its archive), or all of them.
    fn watch(&self, id: Option<&str>) -> Result<Box<dyn crate::storage::watch::Watch>> {
        let prefix = id.map(|id| format!("{}.", encode_file_name(id)));
        Ok(crate::storage::watch::of_names(
            &self.sessions_dir(),
            prefix.as_deref().unwrap_or("").as_bytes(),
        ))
    }

    /// The log file: a compaction's or a seal's rewrite is another.
    fn incarnation(&self, revision: &str) -> Option<String> {
        Some(crate::storage::file_of_revision(revision))
    }

    fn pin(&self, id: &str) -> Option<Box<dyn Send>> {
        let file = self.storage.open(&self.log_path(id), OpenMode::Read).ok()?;
        Some(Box::new(file))
    }

    fn list(&self) -> Result<Vec<SessionSummary>> {
        let dir = self.sessions_dir();
        let names = self
            .storage
            .list_dir(&dir)
            .map_err(|e| Error::io("list", &dir, e))?;
        let names: Vec<&String> = names
            .iter()
            .filter(|n| n.ends_with(LOG_EXTENSION) && !n.starts_with('.'))
            .filter(|n| !self.is_foreign(n))
            .collect();
        // Each summary is a few small reads: with thousands of sessions,
        // spread them over the cores.
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(4);
        if names.len() < 256 || workers < 2 {
            return Ok(names.iter().map(|n| self.summarize(n)).collect());
        }
        let per = names.len().div_ceil(workers);
        Ok(std::thread::scope(|scope| {
            let handles: Vec<_> = names
                .chunks(per)
                .map(|chunk| {
                    scope.spawn(move || chunk.iter().map(|n| self.summarize(n)).collect::<Vec<_>>())
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a summary never panics"))
                .collect()
        }))
    }

    fn summary(&self, id: &str) -> Result<Option<SessionSummary>> {
        if !self.exists(id)? {
            return Ok(None);
        }
        let name = format!("{}{LOG_EXTENSION}", encode_file_name(id));
        Ok(Some(self.summarize(&name)))
    }

    fn read_first(&self, id: &str, n: usize) -> Result<Option<Vec<Event>>> {
        let Some((map, meta, path)) = self.map_with_header(id)? else {
            return Ok(None);
        };
        // Records from the start, each checked (frame, checksum, the next
        // seq) before it is decoded, and its events against the turn
        // contract: the first that fails ends the read, so what a scan
        // would cut (torn bytes, debris) is never served.
        let mut events: Vec<Event> = Vec::new();
        let mut tracker = crate::contract::Tracker::new(meta.policy);
        // A version-3 session's first events are its archive's, checked
        // whole when it is opened: unit by unit until `n`.
        if let Some(archive) = self.archive(&path, &meta)? {
            for (at, head) in archive.units() {
                if events.len() >= n {
                    break;
                }
                for event in record::decode_at(archive.map(), at, &head, archive.path())? {
                    tracker.accept(&event).map_err(|v| {
                        scan::corrupt(archive.path(), at, Some(v.seq), v.to_string())
                    })?;
                    events.push(event);
                }
            }
            if events.len() >= n {
                events.truncate(n);
                return Ok(Some(events));
            }
        }
        let mut at = meta.records_start;
        'records: while events.len() < n && at < map.len() as u64 {
            let next = events.last().map_or(0, |e| e.seq() + 1);
            let Ok(head) = record::check_at(&map, at, Some(next), meta.salt) else {
                break;
            };
            for event in record::decode_at(&map, at, &head, &path)? {
                if tracker.accept(&event).is_err() {
                    break 'records;
                }
                events.push(event);
            }
            at += head.record_len();
        }
        events.truncate(n);
        Ok(Some(events))
    }

    fn end_hint(&self, id: &str) -> Result<Option<u64>> {
        // The header and the last record: two small reads.
        Ok(self.summary(id)?.map(|s| s.events))
    }

    fn exists(&self, id: &str) -> Result<bool> {
        let path = self.log_path(id);
        self.storage
            .exists(&path)
            .map_err(|e| Error::io("stat", path, e))
    }

    fn revision(&self, id: &str) -> Result<Option<String>> {
        let path = self.log_path(id);
        match self.storage.revision(&path) {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("stat", path, e)),
        }
    }

    fn scan(&self, id: &str) -> Result<Option<crate::scan::Scan>> {
        let Some((_, classified, path)) = self.classify(id)? else {
            return Ok(None);
        };
        // A version-3 log stands on its archive: damage there is this
        // log's corruption, as every read of it finds.
        archive::check_whole(self.storage.as_ref(), &path, &classified.frames.file)?;
        Ok(Some(classified.scan))
    }

    fn load(&self, id: &str) -> Result<Option<Stored>> {
        let Some((map, classified, path)) = self.classify(id)? else {
            return Ok(None);
        };
        let mut events = match self.archive(&path, &classified.frames.file)? {
            Some(archive) => archive.events_from(0)?,
            None => Vec::new(),
        };
        events.extend(scan::decode_kept(&map, &classified, 0, &path)?);
        Ok(Some(Stored {
            scan: classified.scan,
            events,
        }))
    }

    fn read(&self, id: &str) -> Result<Option<crate::view::LogReader>> {
        // Units are checked as the cursor decompresses them: each once.
        let Some((map, classified, path)) = self.classify_with(id, scan::scan_log_for_read)? else {
            return Ok(None);
        };
        let start = classified.frames.file.records_start;
        let archive = self.archive(&path, &classified.frames.file)?;
        let scan = classified.scan;
        let proven = classified.proven;
        let live = cursor::WalCursor::new(map, path, proven, start, classified.kept_end);
        let cursor: Box<dyn crate::view::Cursor> = match archive {
            Some(archive) => Box::new(archive::Chain::new(archive.cursor(), live)),
            None => Box::new(live),
        };
        Ok(Some(crate::view::LogReader::of_scan(scan, cursor)))
    }

    fn view(&self, id: &str) -> Result<Option<crate::view::LogView>> {
        let Some((map, classified, path)) = self.classify(id)? else {
            return Ok(None);
        };
        let start = classified.frames.file.records_start;
        // Sized by the file, not by counts read from it: a unit's count
        // is checked when it is decompressed, and many events pack into few
        // bytes only inside units, whose events are held as they are read.
        let mut entries = view::Entries::with_capacity(
            usize::try_from(classified.scan.stored_len())
                .unwrap_or(0)
                .min(map.len() / format::MIN_RECORD_LEN),
        );
        // A version-3 session's archived events come first, decompressed.
        if let Some(archive) = self.archive(&path, &classified.frames.file)? {
            entries.hold(archive.events_from(0)?);
        }
        for (at, head) in record::heads(&map, start, classified.kept_end) {
            if head.is_v2() {
                // A run's members and a unit's events are rebuilt (or
                // decompressed) text: held, not borrowed.
                entries.hold(record::decode_at(&map, at, &head, &path)?);
            } else {
                entries.at(at);
            }
        }
        let scan = classified.scan;
        let state = scan.state();
        view::MappedRecords::new(map, entries)
            .map(|records| {
                Some(crate::view::LogView::in_place(
                    scan.header.clone(),
                    state,
                    Box::new(records),
                    scan.closers.clone(),
                ))
            })
            .map_err(|(at, reason)| {
                Error::from(Corruption {
                    path: path.clone(),
                    offset: at,
                    unit: crate::error::Unit::Byte,
                    seq: None,
                    reason,
                })
            })
    }

    fn header(&self, id: &str) -> Result<Option<SessionHeader>> {
        Ok(self.map_with_header(id)?.map(|(_, meta, _)| meta.header))
    }

    fn policy(&self, id: &str) -> Result<Option<crate::contract::Policy>> {
        Ok(self.map_with_header(id)?.map(|(_, meta, _)| meta.policy))
    }

    fn salvage(&self, id: &str) -> Result<Option<crate::scan::Salvage>> {
        // Past any hole, corrupt or torn: intact records after a hole the
        // power-loss window lets recovery cut are returned too. Its gaps are
        // damage only when recovery refuses the log.
        let damaged = match self.scan(id) {
            Ok(None) => return Ok(None),
            Ok(Some(_)) => false,
            Err(Error::Corrupt(_)) => true,
            Err(e) => return Err(e),
        };
        let Some((map, meta, path)) = self.map_with_header(id)? else {
            return Ok(None);
        };
        let (mut events, mut gaps) = match meta.archive {
            // The archive's intact units (past damage), then the live
            // file's records: the gaps of either are named in its bytes.
            Some(reference) => self.salvage_archive(&path, reference.len)?,
            None => (Vec::new(), Vec::new()),
        };
        let (live, live_gaps) = scan::salvage_records(&map, &path)?;
        events.extend(live);
        gaps.extend(live_gaps);
        for gap in &mut gaps {
            gap.damaged |= damaged;
        }
        Ok(Some(crate::scan::Salvage {
            header: meta.header,
            events,
            gaps,
        }))
    }

    fn foreign_entries(&self) -> Result<Vec<(PathBuf, &'static str)>> {
        let dir = self.sessions_dir();
        let names = self
            .storage
            .list_dir(&dir)
            .map_err(|e| Error::io("list", &dir, e))?;
        let mut foreign = Vec::new();
        for name in names
            .iter()
            .filter(|n| n.ends_with(LOG_EXTENSION) && !n.starts_with('.'))
        {
            let path = dir.join(name);
            if let Some(kind) = self
                .storage
                .foreign_kind(&path)
                .map_err(|e| Error::io("stat", &path, e))?
            {
                foreign.push((path, kind));
            }
        }
        Ok(foreign)
    }

    fn quarantined(&self) -> Result<Vec<PathBuf>> {
        let dir = self.root.join(crate::quarantine::WAL_DIR);
        crate::quarantine::list(self.storage.as_ref(), &dir).map_err(|e| Error::io("list", &dir, e))
    }

    fn read_from(&self, id: &str, from_seq: u64) -> Result<Option<Vec<Event>>> {
        let proof = self.proof_bytes(&self.log_path(id))?;
        let Some((map, meta, path)) = self.map_with_header(id)? else {
            return Ok(None);
        };
        let proven = Self::proven(&proof, &map, &path);
        let (mut events, from_seq) = self.archived_from(&path, &meta, from_seq)?;
        events.extend(writer::read_from(&map, &meta, from_seq, &path, proven)?);
        Ok(Some(events))
    }

    fn inspect_from(&self, id: &str, from_seq: u64) -> Result<Option<(Vec<Event>, Vec<Event>)>> {
        let proof = self.proof_bytes(&self.log_path(id))?;
        let Some((map, meta, path)) = self.map_with_header(id)? else {
            return Ok(None);
        };
        let proven = Self::proven(&proof, &map, &path);
        let (mut events, from_seq) = self.archived_from(&path, &meta, from_seq)?;
        let (live, closers) = writer::read_from_scanned(&map, &meta, from_seq, &path, proven)?;
        events.extend(live);
        Ok(Some((events, closers)))
    }

    fn read_suffix(&self, id: &str, from_seq: u64) -> Result<Option<(Option<Policy>, Vec<Event>)>> {
        let proof = self.proof_bytes(&self.log_path(id))?;
        let Some((map, meta, path)) = self.map_with_header(id)? else {
            return Ok(None);
        };
        let proven = Self::proven(&proof, &map, &path);
        let (mut events, from_seq) = self.archived_from(&path, &meta, from_seq)?;
        events.extend(writer::read_from(&map, &meta, from_seq, &path, proven)?);
        Ok(Some((Some(meta.policy), events)))
    }

    fn create(
        &self,
        header: &SessionHeader,
        policy: Policy,
        batch: &[Event],
        placements: &[Placement],
    ) -> Result<Box<dyn LogWriter>> {
        let dir = self.sessions_dir();
        self.storage
            .create_dir_all(&dir)
            .map_err(|e| Error::io("create directory", &dir, e))?;
        let path = self.log_path(&header.id);
        let exists = || {
            self.storage
                .exists(&path)
                .map_err(|e| Error::io("stat", &path, e))
        };
        // Checked before the lock too: a collision with a session another
        // writer holds open is still a collision, not a lock conflict.
        if exists()? {
            return Err(Error::AlreadyExists {
                id: header.id.clone(),
                on_disk: true,
            });
        }
        let lock = self.lock(&header.id)?;
        if exists()? {
            return Err(Error::AlreadyExists {
                id: header.id.clone(),
                on_disk: true,
            });
        }
        let name = encode_file_name(&header.id);
        self.remove_stale_temps(&name);
        let salt = self.storage.random() as u32;
        let mut bytes = Vec::new();
        let version = self.create_version;
        format::encode_file_header_version(&mut bytes, header, policy, salt, version);
        crate::limits::check_batch(batch)?;
        let pack = version == format::FORMAT_V2;
        let records_start = bytes.len();
        format::encode_batch(&mut bytes, batch, placements, 0, salt, pack);
        // Published whole: every record states the file's length.
        format::stamp_published(&mut bytes, records_start, salt);
        let tmp = dir.join(format!(".{name}.{:016x}.tmp", self.storage.random()));
        let io = |op, e| Error::io(op, &tmp, e);
        let mut file = self
            .storage
            .open(&tmp, OpenMode::CreateNew)
            .map_err(|e| io("create", e))?;
        let written = file.write_all_at(&bytes, 0).and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = self.storage.remove_file(&tmp);
            return Err(io("write", e));
        }
        drop(file);
        // The durability proof of the whole first batch, before the log is
        // published (so nothing is acknowledged without it). It names this
        // file's salt: a proof whose log never got published proves nothing,
        // and a stale proof of an earlier log of this name is overwritten.
        if let Err(e) =
            proof::Prover::new(&path, salt).prove(self.storage.as_ref(), bytes.len() as u64)
        {
            let _ = self.storage.remove_file(&tmp);
            return Err(Error::io("write", proof::path_of(&path), e));
        }
        if let Err(e) = self.storage.rename(&tmp, &path) {
            let _ = self.storage.remove_file(&tmp);
            return Err(Error::io("rename", &path, e));
        }
        if let Err(e) = self.storage.sync_dir(&dir) {
            // Not published durably, so not materialized: take the file back
            // so a retry starts over instead of finding a half-created session.
            let _ = self.storage.remove_file(&path);
            return Err(Error::io("fsync directory", &dir, e));
        }
        let file = self
            .storage
            .open(&path, OpenMode::ReadWrite)
            .map_err(|e| Error::io("open", &path, e))?;
        self.hold(&header.id, &path, file.as_ref())?;
        let mut writer = Box::new(WalWriter::new(
            header.id.clone(),
            path,
            self.storage.clone(),
            file,
            self.lock_path(&header.id),
            lock,
            format::FileHeader {
                version,
                policy,
                salt,
                header: header.clone(),
                records_start: format::file_header_len(&bytes).ok_or_else(|| {
                    Error::Header(crate::header::HeaderError(format!(
                        "session {:?}: its metadata does not fit a WAL file header",
                        crate::error::excerpt(&header.id)
                    )))
                })?,
                archive: None,
            },
            bytes.len() as u64,
            batch.len() as u64,
        ));
        writer.set_proven(bytes.len() as u64);
        writer.set_auto_seal(self.auto_seal);
        Ok(writer)
    }

    /// A header whose JSON the file header cannot hold
    /// ([`format::MAX_HEADER_JSON`]) is refused before anything is
    /// written: a log published with it could never be read back.
    fn admit_header(&self, header: SessionHeader) -> Result<SessionHeader> {
        let len = header.to_json().len();
        if len > format::MAX_HEADER_JSON as usize {
            return Err(Error::Header(crate::header::HeaderError(format!(
                "session {:?}: its metadata is {len} bytes of JSON, over the {} bytes a WAL \
                 log's file header holds (rule max-header-json); nothing was written",
                crate::error::excerpt(&header.id),
                format::MAX_HEADER_JSON
            ))));
        }
        Ok(header)
    }

    /// The log's writer hold, asked (never taken) through a read-only
    /// open; the holder's pid from the lock file it wrote.
    fn holder(&self, id: &str) -> Result<Option<crate::backend::Holder>> {
        let path = self.log_path(id);
        let Some(file) = self.open_file(&path, OpenMode::Read)? else {
            return Ok(None);
        };
        if !file
            .writer_held()
            .map_err(|e| Error::io("lock", &path, e))?
        {
            return Ok(None);
        }
        let pid = self
            .open_file(&self.lock_path(id), OpenMode::Read)
            .ok()
            .flatten()
            .and_then(|lock| {
                let mut text = [0u8; 16];
                let n = lock.read_at(&mut text, 0).ok()?;
                std::str::from_utf8(&text[..n]).ok()?.trim().parse().ok()
            });
        Ok(Some(crate::backend::Holder::of_pid(pid)))
    }

    fn open(&self, id: &str) -> Result<Option<Box<dyn LogWriter>>> {
        let path = self.log_path(id);
        if !self
            .storage
            .exists(&path)
            .map_err(|e| Error::io("stat", &path, e))?
        {
            return Ok(None);
        }
        let lock = self.lock(id)?;
        // A crash inside a compaction leaves its temp file: ours to remove,
        // holding the lock.
        self.remove_stale_temps(&encode_file_name(id));
        let Some(mut file) = self.open_file(&path, OpenMode::ReadWrite)? else {
            return Ok(None);
        };
        self.hold(id, &path, file.as_ref())?;
        let len = file.len().map_err(|e| Error::io("stat", &path, e))?;
        let fh = read_header_of(file.as_ref(), len, &path)?;
        check_id(&fh.header, id, &path)?;
        // Whatever a crashed writer left in the page cache becomes durable
        // now, so later records' watermarks cover all of it. After a failed
        // fdatasync of this log (marked), no fdatasync can be trusted to:
        // publish a durable copy instead.
        let mark = unsynced_mark(&path);
        if self
            .storage
            .exists(&mark)
            .map_err(|e| Error::io("stat", &mark, e))?
        {
            self.republish(id, &path, file.as_ref(), len)?;
            file = self
                .open_file(&path, OpenMode::ReadWrite)?
                .ok_or_else(|| Error::io("open", &path, io::ErrorKind::NotFound.into()))?;
            self.hold(id, &path, file.as_ref())?;
            let _ = self.storage.remove_file(&mark);
        } else if let Err(e) = file.sync_data() {
            // Best effort, as in the writer: the open fails either way.
            let _ = leave_unsynced_mark(self.storage.as_ref(), &path);
            return Err(Error::io("fdatasync", &path, e));
        }
        let lock_path = self.lock_path(id);
        // The event count is learned by the first scan.
        let mut writer = Box::new(WalWriter::new(
            id.to_owned(),
            path,
            self.storage.clone(),
            file,
            lock_path,
            lock,
            fh,
            len,
            0,
        ));
        writer.set_auto_seal(self.auto_seal);
        Ok(Some(writer))
    }

    fn compact(&self, id: &str) -> Result<Option<super::Compaction>> {
        let Some(mut writer) = self.open(id)? else {
            return Ok(None);
        };
        // Sealing only: an open turn stays open (the copy keeps the tail
        // record for record), and a log that needs a cut is refused by the
        // writer's compaction before anything is written.
        writer.compact()
    }

    fn delete_if(
        &self,
        id: &str,
        check: &mut dyn FnMut(&SessionSummary) -> bool,
    ) -> Result<super::Deletion> {
        use super::Deletion;
        let path = self.log_path(id);
        if !self
            .storage
            .exists(&path)
            .map_err(|e| Error::io("stat", &path, e))?
        {
            return Ok(Deletion::NotFound);
        }
        let _lock = self.lock(id)?;
        // Read after the lock: no append can land between this and the
        // removal.
        let Some(summary) = self.summary(id)? else {
            return Ok(Deletion::NotFound);
        };
        if !check(&summary) {
            return Ok(Deletion::Kept(summary));
        }
        match self.storage.remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Deletion::NotFound),
            Err(e) => return Err(Error::io("remove", &path, e)),
        }
        let dir = self.sessions_dir();
        self.storage
            .sync_dir(&dir)
            .map_err(|e| Error::io("fsync directory", &dir, e))?;
        let _ = self.storage.remove_file(&archive::path_of(&path));
        let _ = self.storage.remove_file(&unsynced_mark(&path));
        let _ = self.storage.remove_file(&proof::path_of(&path));
        let _ = self.storage.remove_file(&self.lock_path(id));
        Ok(Deletion::Deleted(summary))
    }

    fn stored_records(
        &self,
        id: &str,
    ) -> Option<Result<Option<Box<dyn crate::backend::StoredLog>>>> {
        Some(
            WalBackend::stored_records(self, id)
                .map(|s| s.map(|s| Box::new(s) as Box<dyn crate::backend::StoredLog>)),
        )
    }
}
