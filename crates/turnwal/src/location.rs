//! Where a store lives, and the one function that turns a location into a
//! store: the CLI's `--store`, `TURNWAL_STORE` and the Node binding's `path`
//! all go through [`Location::parse`] and [`Location::open`], so `Store` and
//! the CLI name no concrete backend.
//!
//! ```
//! use turnwal::location::{IfMissing, Location, Opening};
//! use turnwal::StoreOptions;
//! let dir = tempfile::tempdir()?;
//! let location = Location::parse(dir.path().to_str().unwrap())?;
//! assert_eq!(location, Location::Wal(dir.path().to_owned()));
//! let store = location.open(&Opening::new(StoreOptions::default()).if_missing(IfMissing::Empty))?;
//! assert!(store.list()?.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
#[cfg(any(feature = "sqlite", feature = "jsonl"))]
use std::sync::Arc;

#[cfg(feature = "jsonl")]
use crate::backend::jsonl::{Compression, JsonlBackend};
#[cfg(feature = "sqlite")]
use crate::backend::memory::MemoryBackend;
#[cfg(feature = "sqlite")]
use crate::backend::sqlite::SqliteOptions;
use crate::error::Result;
use crate::store::{Store, StoreOptions};

/// Why a location names no store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    /// The text names nothing (empty, or a prefix without a path): a usage
    /// error.
    #[error("{0}")]
    Malformed(String),
    /// It names something that is not a store (a plain file), or a kind of
    /// store this build does not include.
    #[error("{0}")]
    NotAStore(String),
}

/// What this build can open.
const SUPPORTED: &str = "supported: a directory (native WAL store), a .sqlite or .db file \
                         (SQLite store), jsonl:ROOT (the upstream harness's JSONL root; \
                         jsonl+zstd:ROOT or jsonl+none:ROOT to name the encoding), \
                         postgres://… or postgresql://… (a PostgreSQL database)";

/// The first 16 bytes of every SQLite database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// A store location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A native WAL store: a directory, created on the first write.
    Wal(PathBuf),
    /// An SQLite store: one database file, created on the first write.
    #[cfg(feature = "sqlite")]
    Sqlite(PathBuf),
    /// The upstream harness's JSONL root, in the encoding named or (`None`)
    /// the one its transcripts use, zstd for a root without any.
    #[cfg(feature = "jsonl")]
    Jsonl(PathBuf, Option<Compression>),
    /// A PostgreSQL database (docs/POSTGRES.md): its connection string,
    /// and the same without its password, which messages show.
    #[cfg(feature = "postgres")]
    Postgres {
        /// `postgres://…` or `postgresql://…`.
        url: String,
        /// The URL without its password.
        shown: PathBuf,
    },
}

/// How [`Location::open`] opens a store: the same type in every build, its
/// backend fields present with their features.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Opening {
    /// The store's options (sync mode, policy).
    pub store: StoreOptions,
    /// What opening a store that does not exist yet does.
    pub missing: IfMissing,
    /// An SQLite store's options.
    #[cfg(feature = "sqlite")]
    pub sqlite: SqliteOptions,
    /// A PostgreSQL store's options; `None`: from the environment
    /// (`TURNWAL_LEASE`, [`crate::backend::postgres::PgOptions::from_env`]).
    #[cfg(feature = "postgres")]
    pub postgres: Option<crate::backend::postgres::PgOptions>,
}

impl Opening {
    /// An opening with `store`'s options that creates nothing
    /// ([`IfMissing::Empty`]) and the backends' defaults.
    pub fn new(store: StoreOptions) -> Opening {
        Opening {
            store,
            ..Opening::default()
        }
    }

    /// The same, with `missing`.
    pub fn if_missing(mut self, missing: IfMissing) -> Opening {
        self.missing = missing;
        self
    }

    /// The same, with an SQLite store's options.
    #[cfg(feature = "sqlite")]
    pub fn sqlite(mut self, sqlite: SqliteOptions) -> Opening {
        self.sqlite = sqlite;
        self
    }

    /// The same, with a PostgreSQL store's options.
    #[cfg(feature = "postgres")]
    pub fn postgres(mut self, pg: crate::backend::postgres::PgOptions) -> Opening {
        self.postgres = Some(pg);
        self
    }
}

/// What opening a store that does not exist yet does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IfMissing {
    /// Nothing is created: the store is empty (every command but those that
    /// create a session; a missing session is then reported as missing).
    #[default]
    Empty,
    /// An SQLite database is created, with its schema (`append --create`,
    /// `convert --to`). A WAL directory is always created lazily, with its
    /// first session.
    Create,
}

impl Location {
    /// The path the store lives at.
    pub fn path(&self) -> &Path {
        match self {
            Location::Wal(path) => path,
            #[cfg(feature = "sqlite")]
            Location::Sqlite(path) => path,
            #[cfg(feature = "jsonl")]
            Location::Jsonl(path, _) => path,
            #[cfg(feature = "postgres")]
            Location::Postgres { shown, .. } => shown,
        }
    }

    /// Whether this is a PostgreSQL store.
    pub fn is_postgres(&self) -> bool {
        #[cfg(feature = "postgres")]
        if let Location::Postgres { .. } = self {
            return true;
        }
        false
    }

    /// Whether this is an SQLite store.
    pub fn is_sqlite(&self) -> bool {
        #[cfg(feature = "sqlite")]
        if let Location::Sqlite(_) = self {
            return true;
        }
        false
    }

    /// Whether anything exists at the store's path (a database server is
    /// asked when the store is opened: always `true`).
    pub fn exists(&self) -> bool {
        self.is_postgres() || self.path().exists()
    }

    /// Whether both name the same existing file or directory, or the same
    /// database URL.
    pub fn same_place(&self, other: &Location) -> bool {
        #[cfg(feature = "postgres")]
        if let (Location::Postgres { url: a, .. }, Location::Postgres { url: b, .. }) =
            (self, other)
        {
            return a == b;
        }
        if self.is_postgres() || other.is_postgres() {
            return false;
        }
        match (self.path().canonicalize(), other.path().canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }

    /// Opens the store, as `how` says: the store's options, what to do when
    /// it does not exist yet, and the options of the backend it names (the
    /// SQLite ones apply to an SQLite store only, the PostgreSQL ones to a
    /// PostgreSQL store only). With [`IfMissing::Empty`], an SQLite
    /// database that does not exist is not created: the store is empty, as
    /// a WAL directory that does not exist yet is.
    pub fn open(&self, how: &Opening) -> Result<Store> {
        let options = how.store;
        match self {
            Location::Wal(dir) => Store::open_with_options(dir, options),
            #[cfg(feature = "sqlite")]
            Location::Sqlite(file) if how.missing == IfMissing::Empty && !file.exists() => {
                Ok(Store::with_backend(Arc::new(MemoryBackend::new()), options))
            }
            #[cfg(feature = "sqlite")]
            Location::Sqlite(file) => Store::open_sqlite(file, how.sqlite.clone(), options),
            #[cfg(feature = "jsonl")]
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
            #[cfg(feature = "postgres")]
            Location::Postgres { url, .. } => {
                let pg = match &how.postgres {
                    Some(pg) => *pg,
                    None => crate::backend::postgres::PgOptions::from_env()?,
                };
                Store::open_postgres_with(url, options, pg)
            }
        }
    }
}

/// Chooses the backend from the form of the path: a directory is a WAL
/// store; a path ending in `.sqlite` or `.db` (existing or not), or an
/// existing file that starts with SQLite's header, is an SQLite store; any
/// other missing path is a WAL store to be, since WAL stores are created
/// lazily. `jsonl:ROOT` names the upstream harness's JSONL root (its
/// encoding found from the transcripts it holds, zstd, upstream's default,
/// when it holds none); `jsonl+zstd:` and `jsonl+none:` name the encoding.
pub fn classify(spec: &str) -> Result<Location, LocationError> {
    Location::parse(spec)
}

impl Location {
    /// The location `spec` names (see [`classify`] for the forms).
    pub fn parse(spec: &str) -> Result<Location, LocationError> {
        if spec.is_empty() {
            return Err(LocationError::Malformed(format!(
                "--store is empty; {SUPPORTED}"
            )));
        }
        for (prefix, encoding) in [
            ("jsonl:", None),
            ("jsonl+zstd:", Some(true)),
            ("jsonl+none:", Some(false)),
        ] {
            if let Some(root) = spec.strip_prefix(prefix) {
                if root.is_empty() {
                    return Err(LocationError::Malformed(format!(
                        "--store {spec} names no root; {SUPPORTED}"
                    )));
                }
                #[cfg(feature = "jsonl")]
                {
                    let compression = encoding.map(|zstd| {
                        if zstd {
                            Compression::Zstd
                        } else {
                            Compression::None
                        }
                    });
                    return Ok(Location::Jsonl(PathBuf::from(root), compression));
                }
                #[cfg(not(feature = "jsonl"))]
                {
                    let _ = encoding;
                    return Err(LocationError::NotAStore(format!(
                        "--store {spec}: this build of turnwal has no JSONL support (feature `jsonl`)"
                    )));
                }
            }
        }
        if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
            #[cfg(feature = "postgres")]
            return Ok(Location::Postgres {
                url: spec.to_owned(),
                shown: PathBuf::from(crate::backend::postgres::location_of(spec)),
            });
            #[cfg(not(feature = "postgres"))]
            return Err(LocationError::NotAStore(format!(
                "--store {}: this build of turnwal has no PostgreSQL support (feature `postgres`)",
                spec.split('@').next_back().unwrap_or(spec)
            )));
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
            #[cfg(feature = "sqlite")]
            return Ok(Location::Sqlite(path.to_owned()));
            #[cfg(not(feature = "sqlite"))]
            return Err(LocationError::NotAStore(format!(
                "{spec}: an SQLite store, and this build of turnwal has no SQLite support (feature `sqlite`)"
            )));
        }
        // Checked once more: another writer may have created the store
        // directory since the first look.
        if path.exists() && !path.is_dir() {
            return Err(LocationError::NotAStore(format!(
                "{spec}: not a directory or an SQLite database, so not a store; {SUPPORTED}"
            )));
        }
        Ok(Location::Wal(path.to_owned()))
    }
}

/// Whether `path` is a regular file that starts with SQLite's header.
fn is_sqlite_file(path: &Path) -> bool {
    let mut magic = [0u8; 16];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == SQLITE_MAGIC)
}

#[cfg(all(test, feature = "sqlite", feature = "jsonl"))]
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

    #[cfg(feature = "postgres")]
    #[test]
    fn postgres_urls_are_recognised_and_shown_without_a_password() {
        for url in [
            "postgres://app:pw@db/turnwal",
            "postgresql://app:pw@db/turnwal",
        ] {
            let location = classify(url).unwrap();
            assert!(location.is_postgres() && location.exists());
            assert_eq!(location.path().to_str().unwrap(), url.replace(":pw", ""));
            assert!(location.same_place(&classify(url).unwrap()));
            assert!(!location.same_place(&classify("/tmp").unwrap()));
        }
    }
}
