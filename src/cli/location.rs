//! Which store a `--store` value names, and opening it.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Failure;
use crate::backend::jsonl::{Compression, JsonlBackend};
use crate::backend::memory::MemoryBackend;
use crate::backend::sqlite::SqliteOptions;
use crate::store::{Store, StoreOptions};

/// The environment variable that names the store when `--store` is absent.
pub(crate) const STORE_ENV: &str = "TURNWAL_STORE";

/// The store used when neither `--store` nor `$TURNWAL_STORE` is given.
const DEFAULT_STORE: &str = "./.turnwal";

/// What this build can open.
const SUPPORTED: &str = "supported: a directory (native WAL store), a .sqlite or .db file \
                         (SQLite store), jsonl:ROOT (the upstream harness's JSONL root; \
                         jsonl+zstd:ROOT or jsonl+none:ROOT to name the encoding)";

/// The first 16 bytes of every SQLite database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// A store location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Location {
    /// A native WAL store: a directory, created on the first write.
    Wal(PathBuf),
    /// An SQLite store: one database file, created on the first write.
    Sqlite(PathBuf),
    /// The upstream harness's JSONL root, in the encoding named or (`None`)
    /// the one its transcripts use, zstd for a root without any.
    Jsonl(PathBuf, Option<Compression>),
}

/// What opening a store that does not exist yet does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IfMissing {
    /// Nothing is created: the store is empty (every command but those that
    /// create a session; a missing session is then reported as missing).
    Empty,
    /// An SQLite database is created, with its schema (`append --create`,
    /// `convert --to`). A WAL directory is always created lazily, with its
    /// first session.
    Create,
}

impl Location {
    /// The path the store lives at.
    pub(crate) fn path(&self) -> &Path {
        match self {
            Location::Wal(path) | Location::Sqlite(path) | Location::Jsonl(path, _) => path,
        }
    }

    /// Whether this is an SQLite store.
    pub(crate) fn is_sqlite(&self) -> bool {
        matches!(self, Location::Sqlite(_))
    }

    /// Whether anything exists at the store's path.
    pub(crate) fn exists(&self) -> bool {
        self.path().exists()
    }

    /// Whether both name the same existing file or directory.
    pub(crate) fn same_place(&self, other: &Location) -> bool {
        match (self.path().canonicalize(), other.path().canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }

    /// Opens the store. `sqlite` applies to an SQLite store only. With
    /// [`IfMissing::Empty`], an SQLite database that does not exist is not
    /// created: the store is empty, as a WAL directory that does not exist
    /// yet is.
    pub(crate) fn open(
        &self,
        options: StoreOptions,
        sqlite: &SqliteOptions,
        missing: IfMissing,
    ) -> Result<Store, Failure> {
        match self {
            Location::Wal(dir) => Ok(Store::open_with_options(dir, options)?),
            Location::Sqlite(file) if missing == IfMissing::Empty && !file.exists() => {
                Ok(Store::with_backend(Arc::new(MemoryBackend::new()), options))
            }
            Location::Sqlite(file) => Ok(Store::open_sqlite(file, sqlite.clone(), options)?),
            Location::Jsonl(root, compression) => {
                let backend = match compression {
                    Some(c) => JsonlBackend::open(root, *c)?,
                    None => JsonlBackend::open_detect(root)?,
                };
                // Upstream's reader refuses unknown event types that are not
                // marked ignorable: so does a JSONL store, at read and append.
                let options = StoreOptions {
                    require_known_types: true,
                    ..options
                };
                Ok(Store::with_backend(Arc::new(backend), options))
            }
        }
    }
}

/// The store named by `--store`, else `$TURNWAL_STORE`, else `./.turnwal`.
pub(crate) fn resolve(arg: Option<&str>) -> Result<Location, Failure> {
    let env = std::env::var(STORE_ENV).ok().filter(|v| !v.is_empty());
    let spec = arg.map(str::to_owned).or(env);
    classify(spec.as_deref().unwrap_or(DEFAULT_STORE))
}

/// Chooses the backend from the form of the path: a directory is a WAL
/// store; a path ending in `.sqlite` or `.db` (existing or not), or an
/// existing file that starts with SQLite's header, is an SQLite store; any
/// other missing path is a WAL store to be, since WAL stores are created
/// lazily. `jsonl:ROOT` names the upstream harness's JSONL root (its
/// encoding found from the transcripts it holds, zstd, upstream's default,
/// when it holds none); `jsonl+zstd:` and `jsonl+none:` name the encoding.
pub(crate) fn classify(spec: &str) -> Result<Location, Failure> {
    if spec.is_empty() {
        return Err(Failure::Usage(format!("--store is empty; {SUPPORTED}")));
    }
    for (prefix, compression) in [
        ("jsonl:", None),
        ("jsonl+zstd:", Some(Compression::Zstd)),
        ("jsonl+none:", Some(Compression::None)),
    ] {
        if let Some(root) = spec.strip_prefix(prefix) {
            if root.is_empty() {
                return Err(Failure::Usage(format!(
                    "--store {spec} names no root; {SUPPORTED}"
                )));
            }
            return Ok(Location::Jsonl(PathBuf::from(root), compression));
        }
    }
    let path = Path::new(spec);
    if path.is_dir() {
        return Ok(Location::Wal(path.to_owned()));
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if matches!(ext.as_deref(), Some("sqlite" | "db")) || is_sqlite_file(path) {
        return Ok(Location::Sqlite(path.to_owned()));
    }
    // Checked once more: another writer may have created the store
    // directory since the first look.
    if path.exists() && !path.is_dir() {
        return Err(Failure::Other(format!(
            "{spec}: not a directory or an SQLite database, so not a store; {SUPPORTED}"
        )));
    }
    Ok(Location::Wal(path.to_owned()))
}

/// Whether `path` is a regular file that starts with SQLite's header.
fn is_sqlite_file(path: &Path) -> bool {
    let mut magic = [0u8; 16];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == SQLITE_MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_recognised() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_owned();
        assert_eq!(
            classify(path.to_str().unwrap()).unwrap(),
            Location::Wal(path.clone())
        );
        assert_eq!(
            classify("/nonexistent/turnwal-store").unwrap(),
            Location::Wal("/nonexistent/turnwal-store".into())
        );
        for spec in ["/nonexistent/x.sqlite", "/nonexistent/x.DB"] {
            assert_eq!(classify(spec).unwrap(), Location::Sqlite(spec.into()));
        }
        // A directory named like a database is a WAL store.
        let named = path.join("store.db");
        std::fs::create_dir(&named).unwrap();
        assert_eq!(
            classify(named.to_str().unwrap()).unwrap(),
            Location::Wal(named)
        );
        // An SQLite database under another name is recognised by its header.
        let other = path.join("sessions.sqlite3");
        let mut bytes = SQLITE_MAGIC.to_vec();
        bytes.extend_from_slice(&[0; 84]);
        std::fs::write(&other, &bytes).unwrap();
        assert_eq!(
            classify(other.to_str().unwrap()).unwrap(),
            Location::Sqlite(other)
        );
        let plain = path.join("notes.txt");
        std::fs::write(&plain, b"hello").unwrap();
        let err = classify(plain.to_str().unwrap()).unwrap_err().to_string();
        assert!(
            err.contains("not a directory or an SQLite database"),
            "{err}"
        );
        assert_eq!(
            classify("jsonl:/tmp/logs").unwrap(),
            Location::Jsonl("/tmp/logs".into(), None)
        );
        assert_eq!(
            classify("jsonl+none:rel/root").unwrap(),
            Location::Jsonl("rel/root".into(), Some(Compression::None))
        );
        assert_eq!(
            classify("jsonl+zstd:/r").unwrap(),
            Location::Jsonl("/r".into(), Some(Compression::Zstd))
        );
        let err = classify("jsonl:").unwrap_err().to_string();
        assert!(err.contains("names no root"), "{err}");
    }
}
