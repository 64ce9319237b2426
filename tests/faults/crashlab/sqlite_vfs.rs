//! A fault-injecting SQLite VFS for the crash lab's SQLite tests: a shim
//! over SQLite's own `unix` VFS, registered as the default VFS in a child
//! process, so every file operation the SQLite backend's connection makes
//! (on the database, its `-wal` and its rollback `-journal`) passes through
//! it. It counts those operations — creating a journal or WAL, a write, a
//! truncate, a sync, a delete — and at the chosen one it either
//!
//! - **crashes**: applies a crash mode to the files and SIGKILLs its own
//!   process before the operation runs; or
//! - **fails**: returns the error a full or failing disk gives
//!   (`SQLITE_FULL` or `SQLITE_IOERR_WRITE`, `SQLITE_IOERR_FSYNC`,
//!   `SQLITE_IOERR_TRUNCATE`, `SQLITE_IOERR_DELETE`, `SQLITE_CANTOPEN` for
//!   a journal that cannot be created, as in a read-only directory), once or
//!   for every later operation of that kind. SQLite honours these: the
//!   statement fails and the transaction rolls back.
//!
//! Crash modes:
//!
//! - [`CrashMode::Kill`]: the process dies; the files keep every write (the
//!   kernel's page cache survives a process).
//! - [`CrashMode::PowerLoss`]: only what was made durable survives. The shim
//!   keeps, per path, the durable state a power loss would leave: a file's
//!   data is durable up to its last successful sync, and a directory entry
//!   (a created journal or WAL, a deleted one) only after a directory sync —
//!   which the `unix` VFS does on the first sync of a journal or WAL opened
//!   with `SQLITE_OPEN_CREATE`, and when a delete asks for it (`syncDir`,
//!   which SQLite passes for a rollback journal only under
//!   `synchronous=EXTRA`). A failed sync drops the writes it should have
//!   made durable, as Linux does (the pages are marked clean: a later sync
//!   does not write them). The shim performs no real fsync at all: the model
//!   decides what survives.
//! - [`CrashMode::Torn`]: between the two: of the writes since the last sync
//!   each 512-byte sector survives or not at random, each unsynced truncate
//!   likewise, and an unsynced create or delete happened or not. Bytes a
//!   write did not cover never change (SQLite's powersafe-overwrite
//!   assumption).
//!
//! Files without a name (statement journals, temporary files) pass
//! through uncounted; so do the `-shm` index, which SQLite rebuilds after a
//! crash (the first connection to open the database truncates it).

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::ffi;
use turnwal::rng::Rng;

/// What survives a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// The process dies; every write stays.
    Kill,
    /// Only what was made durable stays.
    PowerLoss,
    /// Unsynced writes survive sector by sector, at random.
    Torn,
}

impl CrashMode {
    pub const ALL: [CrashMode; 3] = [CrashMode::Kill, CrashMode::PowerLoss, CrashMode::Torn];

    pub fn name(self) -> &'static str {
        match self {
            CrashMode::Kill => "kill",
            CrashMode::PowerLoss => "power",
            CrashMode::Torn => "torn",
        }
    }

    pub fn parse(s: &str) -> Option<CrashMode> {
        CrashMode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// A counted file operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKind {
    /// Opening a journal or WAL that does not exist yet (creating it).
    Create,
    Write,
    Truncate,
    Sync,
    Delete,
}

impl OpKind {
    pub const ALL: [OpKind; 5] = [
        OpKind::Create,
        OpKind::Write,
        OpKind::Truncate,
        OpKind::Sync,
        OpKind::Delete,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Create => "create",
            OpKind::Write => "write",
            OpKind::Truncate => "truncate",
            OpKind::Sync => "sync",
            OpKind::Delete => "delete",
        }
    }

    pub fn parse(s: &str) -> Option<OpKind> {
        OpKind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// Which file an operation touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Db,
    Wal,
    Journal,
}

impl Role {
    fn of(path: &Path) -> Role {
        let name = path.to_string_lossy();
        if name.ends_with("-wal") {
            Role::Wal
        } else if name.ends_with("-journal") {
            Role::Journal
        } else {
            Role::Db
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Db => "db",
            Role::Wal => "wal",
            Role::Journal => "journal",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        [Role::Db, Role::Wal, Role::Journal]
            .into_iter()
            .find(|r| r.name() == s)
    }
}

/// What the shim does.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Crash before this operation (0-based).
    pub crash_at: Option<u64>,
    pub crash_mode: Option<CrashMode>,
    /// Fail this operation.
    pub fault_at: Option<u64>,
    /// A failed write reports a full disk (`SQLITE_FULL`) rather than
    /// `SQLITE_IOERR_WRITE`.
    pub full: bool,
    /// Every later operation of the failed one's kind fails too.
    pub persistent: bool,
    /// Seeds the torn mode's choices.
    pub seed: u64,
}

/// The durable and live state of one path.
#[derive(Debug, Default)]
struct Tracked {
    /// Whether this process has opened it.
    seen: bool,
    /// What a power loss leaves at this path: a file with these bytes, or
    /// nothing.
    entry: Option<Vec<u8>>,
    /// The file at this path now (none after a delete).
    live: Option<Live>,
}

#[derive(Debug, Default)]
struct Live {
    /// Its data as of its last successful sync.
    synced: Vec<u8>,
    /// Writes and truncates since.
    pending: Vec<Change>,
    /// Whether its directory entry is durable (it is `entry`'s file).
    entry_durable: bool,
}

#[derive(Debug, Clone)]
enum Change {
    Write(u64, Vec<u8>),
    Truncate(u64),
}

fn apply(data: &mut Vec<u8>, change: &Change) {
    match change {
        Change::Write(offset, bytes) => {
            let (start, end) = (*offset as usize, *offset as usize + bytes.len());
            if data.len() < end {
                data.resize(end, 0);
            }
            data[start..end].copy_from_slice(bytes);
        }
        Change::Truncate(len) => data.resize(*len as usize, 0),
    }
}

struct Shim {
    config: Config,
    ops: u64,
    trace: Vec<(OpKind, Role)>,
    faults: u64,
    /// The kind that keeps failing (a persistent fault).
    failing: Option<OpKind>,
    files: BTreeMap<PathBuf, Tracked>,
}

static STATE: Mutex<Option<Shim>> = Mutex::new(None);

fn state() -> std::sync::MutexGuard<'static, Option<Shim>> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

unsafe extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

impl Shim {
    /// Counts an operation and decides its fate: `Err(rc)` to fail it with
    /// `rc`; a crash never returns.
    fn begin(&mut self, kind: OpKind, path: &Path) -> Result<(), c_int> {
        let index = self.ops;
        self.ops += 1;
        self.trace.push((kind, Role::of(path)));
        if self.config.crash_at == Some(index) {
            self.crash(self.config.crash_mode.unwrap_or(CrashMode::Kill));
        }
        if self.config.fault_at == Some(index) || self.failing == Some(kind) {
            self.faults += 1;
            if self.config.persistent {
                self.failing = Some(kind);
            }
            return Err(match kind {
                OpKind::Create => ffi::SQLITE_CANTOPEN,
                OpKind::Write if self.config.full => ffi::SQLITE_FULL,
                OpKind::Write => ffi::SQLITE_IOERR_WRITE,
                OpKind::Truncate => ffi::SQLITE_IOERR_TRUNCATE,
                OpKind::Sync => ffi::SQLITE_IOERR_FSYNC,
                OpKind::Delete => ffi::SQLITE_IOERR_DELETE,
            });
        }
        Ok(())
    }

    fn tracked(&mut self, path: &Path) -> &mut Tracked {
        self.files.entry(path.to_owned()).or_default()
    }

    /// Every tracked path in `dir` takes its current state as durable.
    fn sync_dir(&mut self, dir: &Path) {
        for (path, t) in self.files.iter_mut() {
            if path.parent() != Some(dir) {
                continue;
            }
            match &mut t.live {
                Some(live) => {
                    live.entry_durable = true;
                    t.entry = Some(live.synced.clone());
                }
                None => t.entry = None,
            }
        }
    }

    /// Leaves the files as `mode` would, then dies with SIGKILL.
    fn crash(&mut self, mode: CrashMode) -> ! {
        let mut rng =
            Rng::from_state(self.config.seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ self.ops | 1);
        for (path, t) in &self.files {
            let survivor = match mode {
                CrashMode::Kill => continue,
                CrashMode::PowerLoss => t.entry.clone(),
                CrashMode::Torn => {
                    // The directory entry: as durable, or as it is now.
                    let durable_entry = t.live.as_ref().is_some_and(|l| l.entry_durable);
                    let live_wins = if durable_entry || t.live.is_none() && t.entry.is_none() {
                        true
                    } else {
                        rng.coin()
                    };
                    match (&t.live, live_wins) {
                        (Some(live), true) => {
                            let mut data = live.synced.clone();
                            for change in &live.pending {
                                match change {
                                    Change::Write(offset, bytes) => {
                                        for (i, sector) in bytes.chunks(512).enumerate() {
                                            if rng.coin() {
                                                let at = *offset + (i * 512) as u64;
                                                apply(
                                                    &mut data,
                                                    &Change::Write(at, sector.to_vec()),
                                                );
                                            }
                                        }
                                    }
                                    truncate => {
                                        if rng.coin() {
                                            apply(&mut data, truncate);
                                        }
                                    }
                                }
                            }
                            Some(data)
                        }
                        (None, true) => None,
                        (_, false) => t.entry.clone(),
                    }
                }
            };
            match survivor {
                Some(data) => std::fs::write(path, data).unwrap(),
                None => match std::fs::remove_file(path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => panic!("{}: {e}", path.display()),
                },
            }
        }
        // SAFETY: kill(2) on our own pid; it does not return.
        unsafe {
            kill(std::process::id() as i32, 9);
        }
        unreachable!("SIGKILL")
    }
}

/// Installs the shim as SQLite's default VFS (once per process) with
/// `config`.
pub fn install(config: Config) {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    *state() = Some(Shim {
        config,
        ops: 0,
        trace: Vec::new(),
        faults: 0,
        failing: None,
        files: BTreeMap::new(),
    });
    REGISTERED.call_once(|| unsafe {
        // SAFETY: sqlite3_vfs_find returns SQLite's static unix VFS; the
        // shim is a leaked copy of it that lives as long as the process.
        let real = ffi::sqlite3_vfs_find(std::ptr::null());
        assert!(!real.is_null(), "no default VFS");
        REAL.store(real, std::sync::atomic::Ordering::SeqCst);
        let mut shim: ffi::sqlite3_vfs = std::ptr::read(real);
        shim.szOsFile = std::mem::size_of::<ShimFile>() as c_int;
        shim.pNext = std::ptr::null_mut();
        shim.zName = c"turnwal-crashlab".as_ptr();
        shim.xOpen = Some(shim_open);
        shim.xDelete = Some(shim_delete);
        let shim = Box::leak(Box::new(shim));
        assert_eq!(ffi::sqlite3_vfs_register(shim, 1), ffi::SQLITE_OK);
    });
}

/// Operations counted so far.
pub fn ops() -> u64 {
    state().as_ref().map_or(0, |s| s.ops)
}

/// Each counted operation's kind and file.
pub fn trace() -> Vec<(OpKind, Role)> {
    state().as_ref().map_or_else(Vec::new, |s| s.trace.clone())
}

/// Operations failed so far.
pub fn faults() -> u64 {
    state().as_ref().map_or(0, |s| s.faults)
}

/// Crashes now, in `mode`.
pub fn crash_now(mode: CrashMode) -> ! {
    let mut guard = state();
    let shim = guard.as_mut().expect("installed");
    shim.crash(mode)
}

static REAL: std::sync::atomic::AtomicPtr<ffi::sqlite3_vfs> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

fn real_vfs() -> *mut ffi::sqlite3_vfs {
    REAL.load(std::sync::atomic::Ordering::SeqCst)
}

/// The shim's file object: SQLite allocates `szOsFile` bytes for it.
#[repr(C)]
struct ShimFile {
    base: ffi::sqlite3_file,
    /// The `unix` VFS's file object (its own allocation).
    real: *mut ffi::sqlite3_file,
    real_words: usize,
    /// The path, for a counted file.
    path: Option<PathBuf>,
    /// The `unix` VFS syncs the directory on this file's first sync.
    dirsync: bool,
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    // Version 2: shared memory for WAL mode, no memory-mapped I/O (so
    // every write goes through xWrite).
    iVersion: 2,
    xClose: Some(shim_close),
    xRead: Some(shim_read),
    xWrite: Some(shim_write),
    xTruncate: Some(shim_truncate),
    xSync: Some(shim_sync),
    xFileSize: Some(shim_file_size),
    xLock: Some(shim_lock),
    xUnlock: Some(shim_unlock),
    xCheckReservedLock: Some(shim_check_reserved_lock),
    xFileControl: Some(shim_file_control),
    xSectorSize: Some(shim_sector_size),
    xDeviceCharacteristics: Some(shim_device_characteristics),
    xShmMap: Some(shim_shm_map),
    xShmLock: Some(shim_shm_lock),
    xShmBarrier: Some(shim_shm_barrier),
    xShmUnmap: Some(shim_shm_unmap),
    xFetch: None,
    xUnfetch: None,
};

unsafe fn shim_file<'a>(file: *mut ffi::sqlite3_file) -> &'a mut ShimFile {
    // SAFETY: SQLite passes back the object xOpen initialized.
    unsafe { &mut *(file as *mut ShimFile) }
}

unsafe fn real_methods(real: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
    // SAFETY: the unix VFS set pMethods when its xOpen succeeded.
    unsafe { &*(*real).pMethods }
}

unsafe fn c_path(name: *const c_char) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if name.is_null() {
        return None;
    }
    // SAFETY: SQLite passes NUL-terminated names.
    let bytes = unsafe { CStr::from_ptr(name) }.to_bytes();
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
}

unsafe extern "C" fn shim_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let real_vfs = real_vfs();
    let journal = flags
        & (ffi::SQLITE_OPEN_MAIN_JOURNAL | ffi::SQLITE_OPEN_WAL | ffi::SQLITE_OPEN_SUPER_JOURNAL)
        != 0;
    let create = flags & ffi::SQLITE_OPEN_CREATE != 0;
    // SAFETY: `name` is SQLite's.
    let path = unsafe { c_path(name) }.filter(|_| journal || flags & ffi::SQLITE_OPEN_MAIN_DB != 0);
    // What was there before this open: durable, if this process never
    // touched it.
    let before = path.as_ref().and_then(|p| std::fs::read(p).ok());
    if let Some(path) = &path
        && before.is_none()
        && create
        && let Some(shim) = state().as_mut()
        && let Err(rc) = shim.begin(OpKind::Create, path)
    {
        // SAFETY: SQLite does not call xClose when pMethods is null.
        unsafe { (*file).pMethods = std::ptr::null() };
        return rc;
    }
    // SAFETY: SQLite hands us `szOsFile` bytes at `file`; the real object
    // gets the unix VFS's `szOsFile` bytes of its own.
    unsafe {
        let words = ((*real_vfs).szOsFile as usize).div_ceil(8);
        let real = Box::into_raw(vec![0u64; words].into_boxed_slice()) as *mut ffi::sqlite3_file;
        let rc = ((*real_vfs).xOpen.unwrap())(real_vfs, name, real, flags, out_flags);
        if rc != ffi::SQLITE_OK {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                real as *mut u64,
                words,
            )));
            (*file).pMethods = std::ptr::null();
            return rc;
        }
        if let Some(path) = &path
            && let Some(shim) = state().as_mut()
        {
            let t = shim.tracked(path);
            let first_sight = !t.seen;
            t.seen = true;
            if first_sight {
                t.entry = before.clone();
            }
            if t.live.is_none() {
                t.live = Some(match before {
                    Some(content) if first_sight => Live {
                        synced: content,
                        pending: Vec::new(),
                        entry_durable: true,
                    },
                    _ => Live::default(),
                });
            }
        }
        std::ptr::write(
            file as *mut ShimFile,
            ShimFile {
                base: ffi::sqlite3_file { pMethods: &METHODS },
                real,
                real_words: words,
                path,
                dirsync: journal && create,
            },
        );
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn shim_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: `file` is ours; its real object is closed and freed once.
    unsafe {
        let f = shim_file(file);
        let rc = (real_methods(f.real).xClose.unwrap())(f.real);
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            f.real as *mut u64,
            f.real_words,
        )));
        std::ptr::drop_in_place(file as *mut ShimFile);
        rc
    }
}

unsafe extern "C" fn shim_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        (real_methods(f.real).xRead.unwrap())(f.real, buf, amount, offset)
    }
}

unsafe extern "C" fn shim_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: `buf` holds `amount` bytes, as SQLite promises.
    unsafe {
        let f = shim_file(file);
        if let Some(path) = &f.path
            && let Some(shim) = state().as_mut()
        {
            if let Err(rc) = shim.begin(OpKind::Write, path) {
                return rc;
            }
            let bytes = std::slice::from_raw_parts(buf as *const u8, amount as usize).to_vec();
            if let Some(live) = &mut shim.tracked(path).live {
                live.pending.push(Change::Write(offset as u64, bytes));
            }
        }
        (real_methods(f.real).xWrite.unwrap())(f.real, buf, amount, offset)
    }
}

unsafe extern "C" fn shim_truncate(
    file: *mut ffi::sqlite3_file,
    size: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        if let Some(path) = &f.path
            && let Some(shim) = state().as_mut()
        {
            if let Err(rc) = shim.begin(OpKind::Truncate, path) {
                return rc;
            }
            if let Some(live) = &mut shim.tracked(path).live {
                live.pending.push(Change::Truncate(size as u64));
            }
        }
        (real_methods(f.real).xTruncate.unwrap())(f.real, size)
    }
}

unsafe extern "C" fn shim_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        let Some(path) = f.path.clone() else {
            return (real_methods(f.real).xSync.unwrap())(f.real, flags);
        };
        let mut guard = state();
        let Some(shim) = guard.as_mut() else {
            return (real_methods(f.real).xSync.unwrap())(f.real, flags);
        };
        if let Err(rc) = shim.begin(OpKind::Sync, &path) {
            // Linux: the pages a failed fsync should have written are
            // marked clean; no later sync writes them.
            if let Some(live) = &mut shim.tracked(&path).live {
                live.pending.clear();
            }
            return rc;
        }
        let t = shim.tracked(&path);
        if let Some(live) = &mut t.live {
            for change in std::mem::take(&mut live.pending) {
                apply(&mut live.synced, &change);
            }
            if live.entry_durable {
                t.entry = Some(live.synced.clone());
            }
        }
        if f.dirsync {
            f.dirsync = false;
            if let Some(dir) = path.parent() {
                shim.sync_dir(dir);
            }
        }
        // No real fsync: durability is the model's.
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn shim_delete(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    let real_vfs = real_vfs();
    // SAFETY: forwarded as given.
    unsafe {
        let path = c_path(name);
        let mut guard = state();
        if let (Some(path), Some(shim)) = (&path, guard.as_mut()) {
            if let Err(rc) = shim.begin(OpKind::Delete, path) {
                return rc;
            }
            let rc = ((*real_vfs).xDelete.unwrap())(real_vfs, name, 0);
            if rc == ffi::SQLITE_OK {
                shim.tracked(path).live = None;
                if sync_dir != 0
                    && let Some(dir) = path.parent()
                {
                    shim.sync_dir(dir);
                }
            }
            return rc;
        }
        drop(guard);
        ((*real_vfs).xDelete.unwrap())(real_vfs, name, sync_dir)
    }
}

unsafe extern "C" fn shim_file_size(
    file: *mut ffi::sqlite3_file,
    size: *mut ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        (real_methods(f.real).xFileSize.unwrap())(f.real, size)
    }
}

unsafe extern "C" fn shim_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        (real_methods(f.real).xLock.unwrap())(f.real, level)
    }
}

unsafe extern "C" fn shim_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        (real_methods(f.real).xUnlock.unwrap())(f.real, level)
    }
}

unsafe extern "C" fn shim_check_reserved_lock(
    file: *mut ffi::sqlite3_file,
    out: *mut c_int,
) -> c_int {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        (real_methods(f.real).xCheckReservedLock.unwrap())(f.real, out)
    }
}

unsafe extern "C" fn shim_file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        (real_methods(f.real).xFileControl.unwrap())(f.real, op, arg)
    }
}

unsafe extern "C" fn shim_sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        (real_methods(f.real).xSectorSize.unwrap())(f.real)
    }
}

unsafe extern "C" fn shim_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        (real_methods(f.real).xDeviceCharacteristics.unwrap())(f.real)
    }
}

unsafe extern "C" fn shim_shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        (real_methods(f.real).xShmMap.unwrap())(f.real, region, size, extend, out)
    }
}

unsafe extern "C" fn shim_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        (real_methods(f.real).xShmLock.unwrap())(f.real, offset, n, flags)
    }
}

unsafe extern "C" fn shim_shm_barrier(file: *mut ffi::sqlite3_file) {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        (real_methods(f.real).xShmBarrier.unwrap())(f.real)
    }
}

unsafe extern "C" fn shim_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    // SAFETY: forwarded as given.
    unsafe {
        let f = shim_file(file);
        (real_methods(f.real).xShmUnmap.unwrap())(f.real, delete)
    }
}
