//! Which store a `--store` value names, and opening it.

use std::path::{Path, PathBuf};

use super::Failure;
use crate::store::{Store, StoreOptions};

/// The environment variable that names the store when `--store` is absent.
pub(crate) const STORE_ENV: &str = "TURNWAL_STORE";

/// The store used when neither `--store` nor `$TURNWAL_STORE` is given.
const DEFAULT_STORE: &str = "./.turnwal";

/// What this build can open.
const SUPPORTED: &str = "supported: a directory (native WAL store)";

/// A store location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Location {
    /// A native WAL store: a directory, created on the first write.
    Wal(PathBuf),
}

impl Location {
    /// The path the store lives at.
    pub(crate) fn path(&self) -> &Path {
        match self {
            Location::Wal(dir) => dir,
        }
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

    /// Opens the store.
    pub(crate) fn open(&self, options: StoreOptions) -> Result<Store, Failure> {
        match self {
            Location::Wal(dir) => Ok(Store::open_with_options(dir, options)?),
        }
    }
}

/// The store named by `--store`, else `$TURNWAL_STORE`, else `./.turnwal`.
pub(crate) fn resolve(arg: Option<&str>) -> Result<Location, Failure> {
    let env = std::env::var(STORE_ENV).ok().filter(|v| !v.is_empty());
    let spec = arg.map(str::to_owned).or(env);
    classify(spec.as_deref().unwrap_or(DEFAULT_STORE))
}

/// Chooses the backend from the form of the path. A missing path is a WAL
/// store to be, since WAL stores are created lazily; `.sqlite`/`.db` files
/// and `jsonl:` roots are recognised so the error can say what is missing.
pub(crate) fn classify(spec: &str) -> Result<Location, Failure> {
    if spec.is_empty() {
        return Err(Failure::Usage(format!("--store is empty; {SUPPORTED}")));
    }
    if let Some(root) = spec.strip_prefix("jsonl:") {
        return Err(Failure::Other(format!(
            "{root}: JSONL stores (jsonl:PATH) are not supported by this build; {SUPPORTED}"
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
    if matches!(ext.as_deref(), Some("sqlite" | "db")) {
        return Err(Failure::Other(format!(
            "{spec}: SQLite stores are not supported by this build; {SUPPORTED}"
        )));
    }
    // Checked once more: another writer may have created the store
    // directory since the first look.
    if path.exists() && !path.is_dir() {
        return Err(Failure::Other(format!(
            "{spec}: not a directory, so not a store; {SUPPORTED}"
        )));
    }
    Ok(Location::Wal(path.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_recognised() {
        let dir = std::env::temp_dir();
        assert_eq!(
            classify(dir.to_str().unwrap()).unwrap(),
            Location::Wal(dir.clone())
        );
        assert_eq!(
            classify("/nonexistent/turnwal-store").unwrap(),
            Location::Wal("/nonexistent/turnwal-store".into())
        );
        let err = classify("/nonexistent/x.sqlite").unwrap_err().to_string();
        assert!(err.contains("SQLite stores are not supported"), "{err}");
        let err = classify("jsonl:/tmp/logs").unwrap_err().to_string();
        assert!(err.contains("JSONL stores"), "{err}");
        assert!(err.contains(SUPPORTED), "{err}");
    }
}
