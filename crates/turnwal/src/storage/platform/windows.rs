//! Windows: `LockFileEx` writer holds, `FlushFileBuffers`, write-through
//! renames, reparse points never followed, the volume and file index as a
//! file's identity. docs/PLATFORMS.md says what differs from Unix and why.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::{MetadataExt, OpenOptionsExt};
use std::os::windows::io::AsRawHandle;
use std::path::Path;

use windows_sys::Win32::Foundation::{ERROR_ACCESS_DENIED, ERROR_LOCK_VIOLATION, ERROR_SUCCESS};
use windows_sys::Win32::Storage::FileSystem::{
    BY_HANDLE_FILE_INFORMATION, FILE_ATTRIBUTE_REPARSE_POINT, FILE_FLAG_BACKUP_SEMANTICS,
    FILE_FLAG_OPEN_REPARSE_POINT, GetFileInformationByHandle, LOCKFILE_EXCLUSIVE_LOCK,
    LOCKFILE_FAIL_IMMEDIATELY, LockFileEx, MOVEFILE_REPLACE_EXISTING, MOVEFILE_WRITE_THROUGH,
    MoveFileExW, UnlockFileEx,
};
use windows_sys::Win32::System::IO::OVERLAPPED;

use super::super::{not_regular, refused};

/// No mapped reads: Windows refuses to shrink a file while any view of it
/// is mapped, and its byte-range locks are mandatory (a shared lock over
/// the data would stop the writer's own writes). Readers read the file
/// into memory.
pub(in crate::storage) const MAPS: bool = false;

/// What a file type is, for messages; `None` for a regular file.
pub fn kind_of(file_type: std::fs::FileType) -> Option<&'static str> {
    Some(if file_type.is_file() {
        return None;
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_symlink() {
        "a symbolic link (a reparse point)"
    } else {
        "not a regular file"
    })
}

/// `volume:index:size:lastWrite100ns`: upstream's `dev:ino:size:mtimeNs`
/// from the file's handle (the volume serial number and file index are
/// NTFS's device and inode). No change time: it moves without a write where
/// the file system keeps attributes beside the file (wine's extended
/// attributes), and a revision that changes under a reader that changed
/// nothing would be worse than one part fewer.
pub(in crate::storage) fn revision(path: &Path) -> io::Result<String> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(path)?;
    let handle = file.as_raw_handle();
    // SAFETY: a zeroed BY_HANDLE_FILE_INFORMATION is a valid value.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: an open handle and a pointer to a struct we own.
    if unsafe { GetFileInformationByHandle(handle, &mut info) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
    let size = (u64::from(info.nFileSizeHigh) << 32) | u64::from(info.nFileSizeLow);
    let written = (u64::from(info.ftLastWriteTime.dwHighDateTime) << 32)
        | u64::from(info.ftLastWriteTime.dwLowDateTime);
    Ok(format!(
        "{}:{}:{}:{}",
        info.dwVolumeSerialNumber, index, size, written
    ))
}

/// The volume serial number and file index of an open file.
pub(super) fn identity_of(file: &File) -> io::Result<(u64, u64)> {
    // SAFETY: a zeroed BY_HANDLE_FILE_INFORMATION is a valid value.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: an open handle and a pointer to a struct we own.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
    Ok((u64::from(info.dwVolumeSerialNumber), index))
}

/// A real directory, not a reparse point (a symbolic link or junction, which
/// turnwal never follows below a store's root). Ownership and modes are ACL
/// questions on Windows: a directory in the user's profile is private by
/// its inherited ACL, and turnwal does not inspect ACLs (docs/PLATFORMS.md,
/// "Windows").
pub fn check_private_dir(dir: &Path) -> io::Result<()> {
    let dir = super::dir_or_dot(dir);
    let meta = std::fs::symlink_metadata(dir)?;
    if meta.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0 || !meta.is_dir() {
        return Err(refused(format!(
            "its directory {} is not a real directory ({}); turnwal does not follow reparse \
             points there: use the directory itself",
            dir.display(),
            kind_of(meta.file_type()).unwrap_or("a regular file")
        )));
    }
    Ok(())
}

/// New files take their directory's inherited ACL (no POSIX mode):
/// `options` unchanged.
pub fn private_file(options: &mut OpenOptions) -> &mut OpenOptions {
    options
}

/// Creates one directory; its ACL is inherited from its parent.
pub(in crate::storage) fn create_private_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir(dir)
}

/// Opens `path` without following a reparse point (the link itself is
/// opened, and refused), sharing read, write and delete with other opens
/// (the standard library's default: a compaction can replace a log that a
/// reader has open), then checks that it is a regular file.
pub(in crate::storage) fn open_regular(
    path: &Path,
    options: &mut OpenOptions,
    _write: bool,
) -> io::Result<File> {
    options.custom_flags(FILE_FLAG_OPEN_REPARSE_POINT);
    let file = match options.open(path) {
        Ok(file) => file,
        Err(e) => return Err(super::open_error(path, e)),
    };
    let meta = file.metadata()?;
    if meta.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
        return Err(refused(
            "is a symbolic link or junction (a reparse point), which turnwal never follows for \
             a store's files; remove it"
                .into(),
        ));
    }
    if let Some(kind) = kind_of(meta.file_type()) {
        return Err(not_regular(kind));
    }
    Ok(file)
}

/// `FlushFileBuffers` on the directory, opened with backup semantics (the
/// one way to open a directory): it flushes the directory's metadata on
/// NTFS. Renames are also asked to be write-through ([`rename`]).
pub(in crate::storage) fn sync_dir(dir: &Path) -> io::Result<()> {
    let dir = OpenOptions::new()
        .write(true)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(dir)?;
    dir.sync_all()
}

/// `MoveFileExW(MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)`: the
/// rename replaces the target and returns once it is on disk. Where the
/// target is open (a reader, or the writer that holds it) and the classic
/// rename refuses with access denied, the rename is made with POSIX
/// semantics (the standard library's `rename`, Windows 10 1607 and later:
/// every turnwal open shares delete, so the old file lives on for its
/// handles), and the caller's directory flush makes it durable.
pub(in crate::storage) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    let wide = |p: &Path| -> Vec<u16> { p.as_os_str().encode_wide().chain([0]).collect() };
    let (wfrom, wto) = (wide(from), wide(to));
    // SAFETY: two NUL-terminated wide strings that outlive the call.
    if unsafe {
        MoveFileExW(
            wfrom.as_ptr(),
            wto.as_ptr(),
            MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH,
        )
    } != 0
    {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) {
        return std::fs::rename(from, to);
    }
    Err(e)
}

/// A path's UTF-16 units as little-endian bytes, for hashing into a name.
pub fn path_bytes(path: &Path) -> std::borrow::Cow<'_, [u8]> {
    std::borrow::Cow::Owned(
        path.as_os_str()
            .encode_wide()
            .flat_map(u16::to_le_bytes)
            .collect(),
    )
}

fn overlapped_at(at: u64) -> OVERLAPPED {
    // SAFETY: a zeroed OVERLAPPED is a valid value.
    let mut o: OVERLAPPED = unsafe { std::mem::zeroed() };
    o.Anonymous.Anonymous.Offset = at as u32;
    o.Anonymous.Anonymous.OffsetHigh = (at >> 32) as u32;
    o
}

/// `LockFileEx` of one byte at `at`, exclusive, without waiting: `true`
/// when taken. Held by this handle until it is unlocked or closed (the
/// system releases it when the process ends); another handle, in this
/// process or another, is refused.
pub fn lock_byte(file: &File, at: u64) -> io::Result<bool> {
    let mut o = overlapped_at(at);
    // SAFETY: an open handle and an OVERLAPPED that outlives the call (a
    // synchronous handle: the call completes before returning).
    let ok = unsafe {
        LockFileEx(
            file.as_raw_handle(),
            LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY,
            0,
            1,
            0,
            &mut o,
        )
    };
    if ok != 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(ERROR_LOCK_VIOLATION as i32) {
        return Ok(false);
    }
    Err(e)
}

/// Releases a byte taken with [`lock_byte`].
pub fn unlock_byte(file: &File, at: u64) -> io::Result<()> {
    let mut o = overlapped_at(at);
    // SAFETY: as in `lock_byte`.
    if unsafe { UnlockFileEx(file.as_raw_handle(), 0, 1, 0, &mut o) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether another handle holds byte `at`: taken and released at once
/// (Windows cannot ask without taking). A writer opening in that instant is
/// refused for it and tries again (`retry_held`).
pub fn byte_held(file: &File, at: u64) -> io::Result<bool> {
    if lock_byte(file, at)? {
        unlock_byte(file, at)?;
        Ok(false)
    } else {
        Ok(true)
    }
}

/// The writer's hold: [`lock_byte`] at `at`, far past the data (Windows
/// locks are mandatory: no read or write ever touches that byte).
pub(in crate::storage) fn hold_writer(file: &File, at: u64) -> io::Result<bool> {
    lock_byte(file, at)
}

/// Whether another handle holds the writer's hold ([`byte_held`]).
pub(in crate::storage) fn writer_held(file: &File, at: u64) -> io::Result<bool> {
    byte_held(file, at)
}

/// `FlushFileBuffers`: writes the file's data and metadata through the
/// drive's cache.
pub(in crate::storage) fn sync_data(file: &File) -> io::Result<()> {
    file.sync_data()
}

/// `FlushFileBuffers`, as [`sync_data`].
pub(in crate::storage) fn sync_all(file: &File) -> io::Result<()> {
    file.sync_all()
}

/// The boot counter Windows keeps in the registry
/// (`HKLM\SYSTEM\CurrentControlSet\Control\Session Manager\Memory
/// Management\PrefetchParameters`, value `BootId`), incremented at every
/// boot; `None` where it is missing (then no proof counts as from an
/// earlier boot, and upstream's rule decides every recovery).
pub(in crate::storage) fn boot_id() -> Option<u64> {
    use windows_sys::Win32::System::Registry::{
        HKEY_LOCAL_MACHINE, RRF_RT_REG_DWORD, RegGetValueW,
    };
    let wide = |s: &str| -> Vec<u16> { s.encode_utf16().chain([0]).collect() };
    let key = wide(
        r"SYSTEM\CurrentControlSet\Control\Session Manager\Memory Management\PrefetchParameters",
    );
    let value = wide("BootId");
    let mut data: u32 = 0;
    let mut len = std::mem::size_of::<u32>() as u32;
    // SAFETY: NUL-terminated wide strings and a DWORD buffer of the size
    // given, all outliving the call.
    let rc = unsafe {
        RegGetValueW(
            HKEY_LOCAL_MACHINE,
            key.as_ptr(),
            value.as_ptr(),
            RRF_RT_REG_DWORD,
            std::ptr::null_mut(),
            (&mut data as *mut u32).cast(),
            &mut len,
        )
    };
    (rc == ERROR_SUCCESS).then(|| super::hash_id(&data.to_le_bytes()))
}

/// How long the machine has been up (`GetTickCount64`).
pub(in crate::storage) fn uptime() -> Option<std::time::Duration> {
    // SAFETY: no preconditions.
    let ms = unsafe { windows_sys::Win32::System::SystemInformation::GetTickCount64() };
    Some(std::time::Duration::from_millis(ms))
}
