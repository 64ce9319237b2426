//! One store of each kind, for the tests that must hold on every store
//! (follow, sync): a native WAL directory, an SQLite database, a JSONL
//! root, and a fresh database of the shared PostgreSQL cluster.

use std::path::Path;

use turnwal::location::{IfMissing, Location, Opening};
use turnwal::{Store, StoreOptions};

/// A kind of store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Wal,
    Sqlite,
    Jsonl,
    Postgres,
}

pub const ALL: [Kind; 4] = [Kind::Wal, Kind::Sqlite, Kind::Jsonl, Kind::Postgres];

impl Kind {
    /// A new, empty store of this kind under `dir` (named `name`), as
    /// `--store` names it.
    pub fn place(self, dir: &Path, name: &str) -> String {
        let path = dir.join(name);
        match self {
            Kind::Wal => path.display().to_string(),
            Kind::Sqlite => format!("{}.db", path.display()),
            Kind::Jsonl => format!("jsonl+none:{}", path.display()),
            Kind::Postgres => super::pg::shared().fresh_store_url(),
        }
    }
}

/// Opens the store `spec` names (creating an SQLite database).
pub fn open(spec: &str) -> Store {
    open_with(spec, StoreOptions::default())
}

/// [`open`] with options.
pub fn open_with(spec: &str, options: StoreOptions) -> Store {
    Location::parse(spec)
        .unwrap()
        .open(&Opening::new(options).if_missing(IfMissing::Create))
        .unwrap()
}
