//! Which store `--store` (or `$TURNWAL_STORE`) names: the library's
//! [`turnwal::location`] with the CLI's defaults and exit codes.

use turnwal::location::LocationError;
pub(crate) use turnwal::location::{IfMissing, Location, Opening};

use super::Failure;

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
