//! A simulated, fault-injecting disk behind the [`Storage`] trait,
//! deterministic from a seed. It keeps, per file, the durable image and the
//! operations not yet synced, and per directory the durable and the live
//! entries, so a crash can keep any state a real disk could after a power
//! loss: nothing unsynced, everything, a prefix of the unsynced operations, or
//! a random subset of sectors, some torn to zeros or garbage. It fails the
//! N-th operation of a kind with ENOSPC or EIO, returns short writes, and
//! models Linux fsync-failure semantics: a failed fsync drops the file's
//! unsynced writes and marks them clean, so a later fsync "succeeds" without
//! persisting them, while reads still see them.
//!
//! The crash tests and the fuzz targets drive the WAL over it:
//!
//! ```
//! use std::sync::Arc;
//! use turnwal_testkit::simdisk::{CrashMode, SimDisk};
//! use turnwal::backend::wal::WalBackend;
//! use turnwal::{Event, SessionHeader, Store, StoreOptions};
//!
//! let disk = SimDisk::new(7);
//! let store = Store::with_backend(
//!     Arc::new(WalBackend::with_storage("/sim".as_ref(), Arc::new(disk.clone())).unwrap()),
//!     StoreOptions::default(),
//! );
//! store.create(SessionHeader::new("s", 1)).unwrap();
//! store.append("s", &[Event::new("turn/start", 0, 1, r#"{"turn":1}"#).unwrap()]).unwrap();
//! store.append("s", &[Event::new("user/message", 1, 2, r#"{"id":"u"}"#).unwrap()]).unwrap();
//! drop(store);
//!
//! // Power loss: only what was fsynced survives (the first batch, written at
//! // materialization).
//! let after = disk.crash(CrashMode::LoseUnsynced);
//! let store = Store::with_backend(
//!     Arc::new(WalBackend::with_storage("/sim".as_ref(), Arc::new(after)).unwrap()),
//!     StoreOptions::default(),
//! );
//! assert_eq!(store.inspect("s").unwrap().stored, 1);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use turnwal::storage::{EntryKind, LockGuard, Mapped, OpenMode, Storage, StorageFile};

/// The kinds of operation that change the disk; faults and crash points
/// count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// Creating a file.
    Create,
    /// `write_at`.
    Write,
    /// `set_len`.
    SetLen,
    /// `sync_data` or `sync_all` of a file.
    Sync,
    /// `rename`.
    Rename,
    /// `remove_file`.
    Remove,
    /// Syncing a directory.
    SyncDir,
}

/// The error an injected fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultError {
    /// `ENOSPC`.
    NoSpace,
    /// `EIO`.
    Io,
}

impl FaultError {
    fn to_io(self) -> io::Error {
        match self {
            FaultError::NoSpace => io::Error::from_raw_os_error(28),
            FaultError::Io => io::Error::from_raw_os_error(5),
        }
    }
}

/// A fault to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// Which kind of operation fails.
    pub kind: OpKind,
    /// It fails at the `nth` operation of that kind (counting from 0) from
    /// when the fault is armed.
    pub nth: u64,
    /// With what.
    pub error: FaultError,
    /// Whether every later operation of that kind fails too (a persistent
    /// fault) or only that one (transient).
    pub persistent: bool,
}

/// What a crash keeps of the operations not yet synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrashMode {
    /// Nothing unsynced survives; unsynced directory entries are lost.
    LoseUnsynced,
    /// A process crash: the page cache lives, so every file reads as it did
    /// (even pages a failed fsync dropped from the write-back queue).
    KeepAll,
    /// The unsynced operations of each file persist up to a random point.
    Prefix,
    /// Each sector touched by unsynced writes independently keeps its old or
    /// its new content.
    Sectors {
        /// 512 or 4096.
        size: usize,
    },
    /// Like `Sectors`, and in some sectors the bytes written since the last
    /// sync are torn to zeros.
    SectorsZeroed {
        /// 512 or 4096.
        size: usize,
    },
    /// Like `Sectors`, and in some sectors the bytes written since the last
    /// sync are garbage. Bytes a sector held durably before are never
    /// garbled: the simulated disk overwrites powersafely (SQLite's
    /// `POWERSAFE_OVERWRITE` assumption).
    SectorsGarbage {
        /// 512 or 4096.
        size: usize,
    },
}

impl CrashMode {
    /// Every mode, with both sector sizes.
    pub const ALL: [CrashMode; 9] = [
        CrashMode::LoseUnsynced,
        CrashMode::KeepAll,
        CrashMode::Prefix,
        CrashMode::Sectors { size: 512 },
        CrashMode::Sectors { size: 4096 },
        CrashMode::SectorsZeroed { size: 512 },
        CrashMode::SectorsZeroed { size: 4096 },
        CrashMode::SectorsGarbage { size: 512 },
        CrashMode::SectorsGarbage { size: 4096 },
    ];
}

#[derive(Debug, Clone)]
enum FileOp {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Clone, Default)]
struct SimFile {
    /// What reads see (the page cache).
    live: Vec<u8>,
    /// What is on the medium.
    durable: Vec<u8>,
    /// Operations since the last sync, in order.
    pending: Vec<FileOp>,
    /// Bumped by every change, for revisions.
    version: u64,
    /// The boot of the simulated machine in which it was last written.
    written_boot: u64,
}

impl SimFile {
    fn apply(image: &mut Vec<u8>, op: &FileOp) {
        match op {
            FileOp::Write { offset, data } => {
                let end = *offset as usize + data.len();
                if image.len() < end {
                    image.resize(end, 0);
                }
                image[*offset as usize..end].copy_from_slice(data);
            }
            FileOp::SetLen(len) => image.resize(*len as usize, 0),
        }
    }
}

#[derive(Debug, Clone, Default)]
struct SimDir {
    live: BTreeMap<String, u64>,
    durable: BTreeMap<String, u64>,
}

#[derive(Debug, Clone)]
struct State {
    rng: turnwal::rng::Rng,
    next_inode: u64,
    files: BTreeMap<u64, SimFile>,
    dirs: BTreeMap<PathBuf, SimDir>,
    locks: BTreeSet<PathBuf>,
    /// Writer holds ([`StorageFile::hold_writer`]): inode → the handle
    /// holding it, released when that handle is dropped, as the kernel
    /// releases an OFD lock when its open file description is closed.
    holds: BTreeMap<u64, u64>,
    next_handle: u64,
    ops: u64,
    counts: BTreeMap<OpKind, u64>,
    faults: Vec<Fault>,
    injected: u64,
    short_writes: bool,
    /// The operation number at which the power fails; from then on every
    /// operation fails, as if the machine had stopped.
    power_cut_at: Option<u64>,
    dead: bool,
    /// Salts and temp names come from their own sequence, so they do not
    /// depend on how many random crash choices were made before.
    salt_seed: u64,
    salts: u64,
    /// Which boot of the simulated machine this is: every crash but a
    /// process crash (`KeepAll`) restarts it.
    boot: u64,
}

impl State {
    fn random(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// Counts an operation and decides whether it fails.
    fn begin(&mut self, kind: OpKind) -> io::Result<()> {
        if self.dead {
            return Err(io::Error::other("simulated power loss: the machine is off"));
        }
        if self.power_cut_at == Some(self.ops) {
            self.dead = true;
            return Err(io::Error::other("simulated power loss"));
        }
        self.ops += 1;
        let n = self.counts.entry(kind).or_insert(0);
        let nth = *n;
        *n += 1;
        for fault in &self.faults {
            if fault.kind == kind && (nth == fault.nth || (fault.persistent && nth > fault.nth)) {
                self.injected += 1;
                return Err(fault.error.to_io());
            }
        }
        Ok(())
    }

    fn split(path: &Path) -> io::Result<(PathBuf, String)> {
        let parent = path.parent().map(normalize).unwrap_or_default();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
        Ok((parent, name.to_owned()))
    }

    fn lookup(&self, path: &Path) -> Option<u64> {
        let (dir, name) = State::split(path).ok()?;
        self.dirs.get(&dir)?.live.get(&name).copied()
    }

    fn dir_mut(&mut self, dir: &Path) -> io::Result<&mut SimDir> {
        self.dirs
            .get_mut(dir)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// A simulated disk; clones share it.
#[derive(Clone)]
pub struct SimDisk {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        write!(f, "SimDisk({} files, {} ops)", s.files.len(), s.ops)
    }
}

impl SimDisk {
    /// An empty disk whose random choices follow `seed`.
    pub fn new(seed: u64) -> SimDisk {
        let state = State {
            rng: turnwal::rng::Rng::from_state(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            next_inode: 1,
            files: BTreeMap::new(),
            dirs: BTreeMap::from([(PathBuf::from("/"), SimDir::default())]),
            locks: BTreeSet::new(),
            holds: BTreeMap::new(),
            next_handle: 0,
            ops: 0,
            counts: BTreeMap::new(),
            faults: Vec::new(),
            injected: 0,
            short_writes: false,
            power_cut_at: None,
            dead: false,
            salt_seed: seed,
            salts: 0,
            boot: 1,
        };
        SimDisk {
            state: Arc::new(Mutex::new(state)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Operations counted so far (every kind of [`OpKind`]).
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// How many faults have been injected so far.
    pub fn faults_injected(&self) -> u64 {
        self.lock().injected
    }

    /// Arms a fault, counting operations of its kind from now.
    pub fn inject(&self, mut fault: Fault) {
        let mut s = self.lock();
        fault.nth += s.counts.get(&fault.kind).copied().unwrap_or(0);
        s.faults.push(fault);
    }

    /// Removes every armed fault.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// Makes every write write only part of its buffer (at least one byte).
    pub fn short_writes(&self, on: bool) {
        self.lock().short_writes = on;
    }

    /// Cuts the power at the operation numbered `op` (see [`SimDisk::ops`]):
    /// that operation and every later one fail. Then call
    /// [`SimDisk::crash`] to see what survived.
    pub fn cut_power_at(&self, op: u64) {
        self.lock().power_cut_at = Some(op);
    }

    /// Whether the power has been cut.
    pub fn is_dead(&self) -> bool {
        self.lock().dead
    }

    /// The disk after a crash: what survives of the unsynced operations is
    /// chosen by `mode` and the disk's seed. Locks are released (their
    /// holders died), faults and the power cut are cleared, and every file's
    /// content is durable again. This disk is unchanged.
    pub fn crash(&self, mode: CrashMode) -> SimDisk {
        let mut s = self.lock().clone();
        for dir in s.dirs.values_mut() {
            if mode != CrashMode::KeepAll {
                dir.live = dir.durable.clone();
            }
            dir.durable = dir.live.clone();
        }
        let reachable: BTreeSet<u64> = s
            .dirs
            .values()
            .flat_map(|d| d.live.values().copied())
            .collect();
        s.files.retain(|inode, _| reachable.contains(inode));
        let inodes: Vec<u64> = s.files.keys().copied().collect();
        for inode in inodes {
            let mut file = s.files.remove(&inode).expect("listed");
            let image = crash_image(&mut s, &file, mode);
            file.live = image.clone();
            file.durable = image;
            file.pending.clear();
            file.version += 1;
            s.files.insert(inode, file);
        }
        s.locks.clear();
        s.holds.clear();
        s.faults.clear();
        if mode != CrashMode::KeepAll {
            s.boot += 1;
        }
        s.power_cut_at = None;
        s.dead = false;
        SimDisk {
            state: Arc::new(Mutex::new(s)),
        }
    }

    /// A copy of the disk as it is, sharing nothing with this one.
    pub fn snapshot(&self) -> SimDisk {
        SimDisk {
            state: Arc::new(Mutex::new(self.lock().clone())),
        }
    }

    /// Makes this disk (and every clone of it) a copy of `other`.
    pub fn replace_with(&self, other: &SimDisk) {
        let copy = other.lock().clone();
        *self.lock() = copy;
    }

    /// A file's content as reads see it.
    pub fn read(&self, path: &Path) -> Option<Vec<u8>> {
        let s = self.lock();
        let inode = s.lookup(&normalize(path))?;
        Some(s.files[&inode].live.clone())
    }

    /// Replaces a file's content, durably (to stage damaged images).
    pub fn write_durable(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut s = self.lock();
        let inode = s
            .lookup(&normalize(path))
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let file = s.files.get_mut(&inode).expect("linked");
        file.live = bytes.to_vec();
        file.durable = bytes.to_vec();
        file.pending.clear();
        file.version += 1;
        Ok(())
    }
}

/// The image of one file after a crash.
fn crash_image(s: &mut State, file: &SimFile, mode: CrashMode) -> Vec<u8> {
    let mut all = file.durable.clone();
    for op in &file.pending {
        SimFile::apply(&mut all, op);
    }
    let (size, fill) = match mode {
        CrashMode::LoseUnsynced => return file.durable.clone(),
        // A process crash: the page cache survives, including pages a
        // failed fsync marked clean.
        CrashMode::KeepAll => return file.live.clone(),
        CrashMode::Prefix => {
            let keep = (s.random() % (file.pending.len() as u64 + 1)) as usize;
            let mut image = file.durable.clone();
            for op in &file.pending[..keep] {
                SimFile::apply(&mut image, op);
            }
            return image;
        }
        CrashMode::Sectors { size } => (size, 0),
        CrashMode::SectorsZeroed { size } => (size, 1),
        CrashMode::SectorsGarbage { size } => (size, 2),
    };
    // The length persists as either the old or the new one; a grown file
    // whose data did not persist reads zeros there (size before data).
    let len = if s.random().is_multiple_of(2) {
        all.len()
    } else {
        file.durable.len()
    };
    // The bytes written since the last sync. A torn sector garbles only
    // these: the disk overwrites powersafely, as SQLite assumes by default
    // (a sector's bytes that were not rewritten keep their durable value).
    let extent = file
        .pending
        .iter()
        .fold(all.len().max(file.durable.len()), |n, op| match op {
            FileOp::Write { offset, data } => n.max(*offset as usize + data.len()),
            FileOp::SetLen(_) => n,
        });
    let mut dirty = vec![false; extent];
    for op in &file.pending {
        match op {
            FileOp::Write { offset, data } => {
                dirty[*offset as usize..*offset as usize + data.len()].fill(true);
            }
            FileOp::SetLen(len) => {
                let from = (*len as usize).min(dirty.len());
                dirty[from..].fill(true);
            }
        }
    }
    let mut image = vec![0; len];
    let old_len = file.durable.len().min(len);
    image[..old_len].copy_from_slice(&file.durable[..old_len]);
    let mut at = 0;
    while at < len {
        let end = (at + size).min(len);
        if dirty[at..end].contains(&true) {
            match s.random() % (2 + fill as u64) {
                0 => {} // the old content (or zeros past the old length)
                1 => {
                    let new_end = end.min(all.len());
                    if at < new_end {
                        image[at..new_end].copy_from_slice(&all[at..new_end]);
                    }
                }
                _ => {
                    for i in (at..end).filter(|&i| dirty[i]) {
                        image[i] = if fill == 1 { 0 } else { s.random() as u8 };
                    }
                }
            }
        }
        at = end;
    }
    image
}

#[derive(Debug)]
struct SimHandle {
    disk: SimDisk,
    inode: u64,
    writable: bool,
    /// This open's identity, for writer holds.
    id: u64,
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        let mut s = self.disk.lock();
        if s.holds.get(&self.inode) == Some(&self.id) {
            s.holds.remove(&self.inode);
        }
    }
}

#[derive(Debug)]
struct SimLock {
    disk: SimDisk,
    path: PathBuf,
}

impl LockGuard for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.disk.lock().locks.remove(&self.path);
    }
}

impl Storage for SimDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageFile>> {
        let path = normalize(path);
        let mut s = self.lock();
        let inode = match (s.lookup(&path), mode) {
            (Some(_), OpenMode::CreateNew) => return Err(io::ErrorKind::AlreadyExists.into()),
            (Some(inode), _) => inode,
            (None, OpenMode::CreateNew) => {
                s.begin(OpKind::Create)?;
                let (dir, name) = State::split(&path)?;
                let inode = s.next_inode;
                s.next_inode += 1;
                s.dir_mut(&dir)?.live.insert(name, inode);
                s.files.insert(inode, SimFile::default());
                inode
            }
            (None, _) => return Err(io::ErrorKind::NotFound.into()),
        };
        if s.dead {
            return Err(io::Error::other("simulated power loss: the machine is off"));
        }
        let id = s.next_handle;
        s.next_handle += 1;
        Ok(Box::new(SimHandle {
            disk: self.clone(),
            inode,
            writable: mode != OpenMode::Read,
            id,
        }))
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let path = normalize(path);
        let s = self.lock();
        Ok(s.lookup(&path).is_some() || s.dirs.contains_key(&path))
    }

    fn revision(&self, path: &Path) -> io::Result<String> {
        let s = self.lock();
        let inode = s
            .lookup(&normalize(path))
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let file = &s.files[&inode];
        Ok(format!("sim:{inode}:{}:{}", file.live.len(), file.version))
    }

    /// Files and subdirectories, as a real directory lists them.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let dir = normalize(dir);
        let s = self.lock();
        let mut names: Vec<String> = s
            .dirs
            .get(&dir)
            .map(|d| d.live.keys().cloned().collect())
            .unwrap_or_default();
        names.extend(s.dirs.keys().filter_map(|d| {
            (d.parent() == Some(&dir))
                .then(|| d.file_name()?.to_str().map(str::to_owned))
                .flatten()
        }));
        names.sort_unstable();
        Ok(names)
    }

    fn entry_kind(&self, path: &Path) -> io::Result<Option<EntryKind>> {
        let path = normalize(path);
        let s = self.lock();
        Ok(if s.lookup(&path).is_some() {
            Some(EntryKind::File)
        } else if s.dirs.contains_key(&path) {
            Some(EntryKind::Dir)
        } else {
            None
        })
    }

    /// Counted (and faulted) as a create: it makes a directory entry, which
    /// survives a crash only once its directory is synced.
    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (normalize(from), normalize(to));
        let mut s = self.lock();
        s.begin(OpKind::Create)?;
        let inode = s
            .lookup(&from)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        if s.lookup(&to).is_some() || s.dirs.contains_key(&to) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        let (dir, name) = State::split(&to)?;
        s.dir_mut(&dir)?.live.insert(name, inode);
        Ok(())
    }

    /// Directories are removed at once, as they are created.
    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        let dir = normalize(dir);
        let mut s = self.lock();
        s.begin(OpKind::Remove)?;
        let Some(d) = s.dirs.get(&dir) else {
            return Err(io::ErrorKind::NotFound.into());
        };
        if !d.live.is_empty() || s.dirs.keys().any(|k| k.parent() == Some(&dir)) {
            return Err(io::ErrorKind::DirectoryNotEmpty.into());
        }
        s.dirs.remove(&dir);
        Ok(())
    }

    /// Directories are created durably at once: the simulation models the
    /// loss of file entries, not of directories.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        let mut path = PathBuf::new();
        for c in normalize(dir).components() {
            path.push(c);
            s.dirs.entry(path.clone()).or_default();
        }
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (normalize(from), normalize(to));
        let mut s = self.lock();
        s.begin(OpKind::Rename)?;
        let (from_dir, from_name) = State::split(&from)?;
        let (to_dir, to_name) = State::split(&to)?;
        let inode = s
            .dir_mut(&from_dir)?
            .live
            .remove(&from_name)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        s.dir_mut(&to_dir)?.live.insert(to_name, inode);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut s = self.lock();
        s.begin(OpKind::Remove)?;
        let (dir, name) = State::split(&path)?;
        s.dir_mut(&dir)?
            .live
            .remove(&name)
            .map(|_| ())
            .ok_or_else(|| io::ErrorKind::NotFound.into())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.begin(OpKind::SyncDir)?;
        let dir = s.dir_mut(&normalize(dir))?;
        dir.durable = dir.live.clone();
        Ok(())
    }

    fn try_lock(&self, path: &Path) -> io::Result<Result<Box<dyn LockGuard>, Option<u32>>> {
        let path = normalize(path);
        let mut s = self.lock();
        if s.dead {
            return Err(io::Error::other("simulated power loss: the machine is off"));
        }
        if !s.locks.insert(path.clone()) {
            return Ok(Err(Some(std::process::id())));
        }
        // The lock file itself is created (durably enough: its content does
        // not matter to recovery).
        if s.lookup(&path).is_none() {
            let (dir, name) = State::split(&path)?;
            let inode = s.next_inode;
            s.next_inode += 1;
            s.dir_mut(&dir)?.live.insert(name, inode);
            s.files.insert(inode, SimFile::default());
        }
        Ok(Ok(Box::new(SimLock {
            disk: self.clone(),
            path,
        })))
    }

    fn boot_id(&self) -> Option<u64> {
        Some(self.lock().boot)
    }

    fn written_this_boot(&self, path: &Path) -> Option<bool> {
        let s = self.lock();
        let inode = s.lookup(&normalize(path))?;
        Some(s.files[&inode].written_boot == s.boot)
    }

    fn random(&self) -> u64 {
        let mut s = self.lock();
        s.salts += 1;
        // splitmix64 of (seed, counter)
        let mut z = s
            .salt_seed
            .wrapping_add(s.salts.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl SimHandle {
    fn with<T>(
        &self,
        kind: Option<OpKind>,
        f: impl FnOnce(&mut State, &mut SimFile) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut s = self.disk.lock();
        if let Some(kind) = kind {
            if !self.writable {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "opened read-only",
                ));
            }
            s.begin(kind)?;
        }
        let mut file = s
            .files
            .remove(&self.inode)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let result = f(&mut s, &mut file);
        s.files.insert(self.inode, file);
        result
    }
}

impl StorageFile for SimHandle {
    fn len(&self) -> io::Result<u64> {
        self.with(None, |_, f| Ok(f.live.len() as u64))
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.with(None, |_, f| {
            let start = (offset as usize).min(f.live.len());
            let n = buf.len().min(f.live.len() - start);
            buf[..n].copy_from_slice(&f.live[start..start + n]);
            Ok(n)
        })
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.with(Some(OpKind::Write), |s, f| {
            let n = if s.short_writes && buf.len() > 1 {
                1 + (s.random() as usize % (buf.len() - 1))
            } else {
                buf.len()
            };
            let op = FileOp::Write {
                offset,
                data: buf[..n].to_vec(),
            };
            SimFile::apply(&mut f.live, &op);
            f.pending.push(op);
            f.version += 1;
            f.written_boot = s.boot;
            Ok(n)
        })
    }

    fn sync_data(&mut self) -> io::Result<()> {
        let result = self.with(Some(OpKind::Sync), |_, f| {
            for op in std::mem::take(&mut f.pending) {
                SimFile::apply(&mut f.durable, &op);
            }
            Ok(())
        });
        let mut s = self.disk.lock();
        if result.is_err() && !s.dead {
            // Linux: the failed writeback's pages are dropped and marked
            // clean; a later fsync will not write them. (A power cut is
            // different: what it keeps is the crash's choice.)
            if let Some(f) = s.files.get_mut(&self.inode) {
                f.pending.clear();
            }
        }
        result
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.sync_data()
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.with(Some(OpKind::SetLen), |s, f| {
            let op = FileOp::SetLen(len);
            SimFile::apply(&mut f.live, &op);
            f.pending.push(op);
            f.version += 1;
            f.written_boot = s.boot;
            Ok(())
        })
    }

    fn map(&self) -> io::Result<Mapped> {
        self.with(None, |_, f| Ok(Mapped::owned(f.live.clone())))
    }

    /// An OFD lock: one holder per file (inode), whichever name it was
    /// opened by, until the holding handle is dropped or the machine
    /// crashes.
    fn hold_writer(&self) -> io::Result<bool> {
        let mut s = self.disk.lock();
        if s.dead {
            return Err(io::Error::other("simulated power loss: the machine is off"));
        }
        match s.holds.get(&self.inode) {
            Some(&holder) => Ok(holder == self.id),
            None => {
                s.holds.insert(self.inode, self.id);
                Ok(true)
            }
        }
    }

    fn writer_held(&self) -> io::Result<bool> {
        let s = self.disk.lock();
        Ok(s.holds.get(&self.inode).is_some_and(|&h| h != self.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(disk: &SimDisk, path: &str) -> Box<dyn StorageFile> {
        disk.create_dir_all(Path::new("/d")).unwrap();
        disk.open(Path::new(path), OpenMode::CreateNew).unwrap()
    }

    #[test]
    fn unsynced_writes_and_entries_are_lost() {
        let disk = SimDisk::new(1);
        let mut f = file(&disk, "/d/a");
        f.write_at(b"hello", 0).unwrap();
        disk.sync_dir(Path::new("/d")).unwrap();
        f.sync_data().unwrap();
        f.write_at(b" world", 5).unwrap();
        let mut g = disk.open(Path::new("/d/b"), OpenMode::CreateNew).unwrap();
        g.write_at(b"x", 0).unwrap();
        g.sync_data().unwrap();
        let after = disk.crash(CrashMode::LoseUnsynced);
        assert_eq!(after.read(Path::new("/d/a")).unwrap(), b"hello");
        assert_eq!(
            after.read(Path::new("/d/b")),
            None,
            "its entry was never synced"
        );
        let after = disk.crash(CrashMode::KeepAll);
        assert_eq!(after.read(Path::new("/d/a")).unwrap(), b"hello world");
    }

    #[test]
    fn a_failed_fsync_drops_the_pages_and_marks_them_clean() {
        let disk = SimDisk::new(2);
        let mut f = file(&disk, "/d/a");
        disk.sync_dir(Path::new("/d")).unwrap();
        f.write_at(b"data", 0).unwrap();
        disk.inject(Fault {
            kind: OpKind::Sync,
            nth: 0,
            error: FaultError::Io,
            persistent: false,
        });
        assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(5));
        f.sync_data().unwrap(); // "succeeds" without writing anything
        let mut buf = [0; 4];
        f.read_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"data", "reads still see the page cache");
        let power_loss = disk.crash(CrashMode::Prefix);
        assert_eq!(
            power_loss.read(Path::new("/d/a")).unwrap(),
            b"",
            "never written back"
        );
        let process_crash = disk.crash(CrashMode::KeepAll);
        assert_eq!(
            process_crash.read(Path::new("/d/a")).unwrap(),
            b"data",
            "the page cache survives"
        );
    }

    #[test]
    fn power_cut_stops_everything_and_faults_count_per_kind() {
        let disk = SimDisk::new(3);
        let mut f = file(&disk, "/d/a");
        disk.inject(Fault {
            kind: OpKind::Write,
            nth: 1,
            error: FaultError::NoSpace,
            persistent: false,
        });
        f.write_at(b"a", 0).unwrap();
        assert_eq!(f.write_at(b"b", 1).unwrap_err().raw_os_error(), Some(28));
        f.write_at(b"c", 1).unwrap();
        disk.cut_power_at(disk.ops());
        assert!(f.sync_data().is_err());
        assert!(f.write_at(b"d", 2).is_err());
        assert!(disk.is_dead());
        assert_eq!(disk.faults_injected(), 1);
    }

    #[test]
    fn sector_crashes_keep_old_or_new_content_per_sector() {
        for seed in 0..20 {
            let disk = SimDisk::new(seed);
            let mut f = file(&disk, "/d/a");
            disk.sync_dir(Path::new("/d")).unwrap();
            f.write_at(&[1; 2048], 0).unwrap();
            f.sync_data().unwrap();
            f.write_at(&[2; 2048], 0).unwrap();
            let image = disk
                .crash(CrashMode::Sectors { size: 512 })
                .read(Path::new("/d/a"))
                .unwrap();
            assert_eq!(image.len(), 2048);
            for sector in image.chunks(512) {
                assert!(sector == [1; 512] || sector == [2; 512], "seed {seed}");
            }
        }
    }
}
