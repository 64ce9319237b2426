//! Which store `--store` (or `$TURNWAL_STORE`) names: the library's
//! [`turnwal::location`] with the CLI's defaults and exit codes.

use std::collections::HashSet;

use turnwal::backend::SyncMode;
use turnwal::location::LocationError;
pub(crate) use turnwal::location::{IfMissing, Location, Opening};
use turnwal::store::{Store, StoreOptions};

use super::args::SqliteArgs;
use super::{Failure, check_sqlite_args};

/// The environment variable that names the store when `--store` is absent.
pub(crate) const STORE_ENV: &str = "TURNWAL_STORE";

/// The store used when neither `--store` nor `$TURNWAL_STORE` is given.
const DEFAULT_STORE: &str = "./.turnwal";

/// The store named by `--store`, else `$TURNWAL_STORE`, else `./.turnwal`.
pub(crate) fn resolve(arg: Option<&str>) -> Result<Location, Failure> {
    let env = std::env::var(STORE_ENV).ok().filter(|v| !v.is_empty());
    let spec = arg.map(str::to_owned).or(env);
    classify(spec.as_deref().unwrap_or(DEFAULT_STORE))
}

/// The location `spec` names; a malformed one is a usage error.
pub(crate) fn classify(spec: &str) -> Result<Location, Failure> {
    Location::parse(spec).map_err(|e| match e {
        LocationError::Malformed(message) => Failure::Usage(message),
        LocationError::NotAStore(message) => Failure::Other(message),
    })
}

/// How a copying command (`convert`, `sync`) names its two stores.
pub(crate) struct Pair<'a> {
    /// The command, for the refusal of `--store`.
    pub command: &'a str,
    /// How the command line names each store (`--from`, `SRC`) and the
    /// store it names.
    pub src: (&'a str, &'a str),
    pub dst: (&'a str, &'a str),
    /// How the command names both, for the refusal of `--store`.
    pub how: &'a str,
}

/// Opens a copying command's stores: the source as it is (it must exist),
/// the destination created if missing, appending with every batch fsynced
/// (what it acknowledges is durable, and a kill leaves whole batches).
/// `store` is the global `--store`, which such a command does not use.
pub(crate) fn open_pair(
    store: Option<&str>,
    sqlite: &SqliteArgs,
    pair: &Pair<'_>,
) -> Result<(Store, Store), Failure> {
    if store.is_some() {
        return Err(Failure::Usage(format!(
            "{} names its stores {}; --store is not used",
            pair.command, pair.how
        )));
    }
    let ((src_name, src), (dst_name, dst)) = (pair.src, pair.dst);
    let from = classify(src)?;
    let to = classify(dst)?;
    check_sqlite_args(sqlite, &[&from, &to])?;
    if !from.exists() {
        return Err(Failure::Other(format!(
            "{src_name} {}: no such store",
            from.path().display()
        )));
    }
    if from.same_place(&to) {
        return Err(Failure::Usage(format!(
            "{src_name} {} and {dst_name} {} name the same store",
            from.path().display(),
            to.path().display()
        )));
    }
    let sqlite = sqlite.options();
    let src = from.open(&Opening::new(StoreOptions::default()).sqlite(sqlite.clone()))?;
    let dst = to.open(
        &Opening::new(StoreOptions {
            sync: SyncMode::Batch,
            ..StoreOptions::default()
        })
        .if_missing(IfMissing::Create)
        .sqlite(sqlite),
    )?;
    Ok((src, dst))
}

/// The sessions a copying command works on: the named ones (each once, in
/// the order given), or, when none is named, every session of `src`
/// sorted by id.
pub(crate) fn session_ids(src: &Store, named: &[String]) -> turnwal::Result<Vec<String>> {
    if named.is_empty() {
        let mut ids: Vec<String> = src.list()?.into_iter().map(|s| s.id).collect();
        ids.sort();
        return Ok(ids);
    }
    let mut seen = HashSet::new();
    Ok(named
        .iter()
        .filter(|id| seen.insert(id.as_str()))
        .cloned()
        .collect())
}
