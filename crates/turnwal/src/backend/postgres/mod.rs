//! The PostgreSQL store (docs/POSTGRES.md): sessions in a database every
//! harness host reaches, so a session outlives and moves between hosts.
//!
//! Built so far: the connection; the schema, created by turnwal in one
//! transaction and checked on every open (a newer or a foreign schema is
//! refused untouched); and the writer-epoch protocol ([`epoch`]) with
//! leases (`lease`) that keeps one writer per session across hosts. The backend behind
//! [`crate::Store`] follows the design in docs/POSTGRES.md.

pub mod epoch;
mod lease;
mod listen;
mod rows;
mod schema;
mod shared;
mod store;
mod writer;

pub use lease::{DEFAULT_LEASE, MAX_LEASE, MIN_LEASE, PgOptions};
#[doc(hidden)] // for the test kit's differential lab
pub use rows::row_in_at;
pub use schema::{SCHEMA_VERSION, ensure_schema};
#[doc(hidden)] // for `turnwal bench` and the test kit
pub use shared::encode;
pub use store::PgBackend;

use std::path::PathBuf;

use crate::error::{Error, Result};

/// A connection string without its password, for messages: what
/// [`Error`]s name as the store's location.
///
/// ```
/// use turnwal::backend::postgres::location_of;
/// assert_eq!(
///     location_of("postgres://app:secret@db.internal:5432/turnwal"),
///     "postgres://app@db.internal:5432/turnwal"
/// );
/// assert_eq!(location_of("host=/tmp/pg user=me password=x"), "host=/tmp/pg user=me");
/// assert_eq!(
///     location_of("postgres://app@db/turnwal?sslmode=disable&password=secret"),
///     "postgres://app@db/turnwal?sslmode=disable"
/// );
/// ```
pub fn location_of(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        // The password the libpq way too: a `password` query parameter.
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (auth, host) = rest.rsplit_once('@').unwrap_or(("", rest));
        let user = auth.split(':').next().unwrap_or("");
        let at = if user.is_empty() { "" } else { "@" };
        let kept: Vec<&str> = query
            .split('&')
            .filter(|kv| !kv.is_empty() && !kv.to_ascii_lowercase().starts_with("password="))
            .collect();
        let query = if kept.is_empty() {
            String::new()
        } else {
            format!("?{}", kept.join("&"))
        };
        return format!("{scheme}://{user}{at}{host}{query}");
    }
    url.split_whitespace()
        .filter(|kv| !kv.starts_with("password="))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A PostgreSQL error as a turnwal [`Error`], naming the store.
pub(crate) fn pg_error(op: &'static str, location: &str, e: postgres::Error) -> Error {
    Error::io(
        op,
        PathBuf::from(location),
        std::io::Error::other(e.to_string()),
    )
}

/// How long a connection of turnwal's may sit inside a transaction without
/// sending anything before the server ends it
/// (`idle_in_transaction_session_timeout`): a writer paused mid-batch (a
/// SIGSTOPped process, a host cut off) would otherwise hold the session's
/// row lock, and the writer taking over would wait on it for as long as
/// the pause lasts. A batch sends its statements back to back, so only a
/// paused writer ever reaches it; its transaction is rolled back, which
/// is what a stale writer's batch must come to anyway.
pub const IDLE_IN_TRANSACTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Connects to the database at `url` (`postgres://…`, `postgresql://…`, or
/// key=value pairs; a `host` that is a directory is a Unix socket there),
/// without TLS, and checks or creates turnwal's schema ([`ensure_schema`]).
pub fn connect(url: &str) -> Result<postgres::Client> {
    connect_with(url, IDLE_IN_TRANSACTION_TIMEOUT)
}

/// [`connect`], with the given [`IDLE_IN_TRANSACTION_TIMEOUT`] (at least
/// one millisecond).
pub fn connect_with(
    url: &str,
    idle_in_transaction: std::time::Duration,
) -> Result<postgres::Client> {
    let mut client = connect_only(url, idle_in_transaction)?;
    ensure_schema(&mut client, &location_of(url))?;
    Ok(client)
}

/// A connection with turnwal's session settings, its schema not checked
/// (a store's further connections: the schema was checked at its open).
pub(crate) fn connect_only(
    url: &str,
    idle_in_transaction: std::time::Duration,
) -> Result<postgres::Client> {
    connect_within(url, idle_in_transaction, None)
}

/// [`connect_only`], giving up after `timeout` when the URL sets no
/// `connect_timeout` of its own (a follower's reconnect must not hold its
/// cancel for the system's TCP timeout).
pub(crate) fn connect_within(
    url: &str,
    idle_in_transaction: std::time::Duration,
    timeout: Option<std::time::Duration>,
) -> Result<postgres::Client> {
    let location = location_of(url);
    let mut config: postgres::Config =
        url.parse().map_err(|e| pg_error("connect", &location, e))?;
    if let Some(timeout) = timeout
        && config.get_connect_timeout().is_none()
    {
        config.connect_timeout(timeout);
    }
    let mut client = config
        .connect(postgres::NoTls)
        .map_err(|e| pg_error("connect", &location, e))?;
    let ms = idle_in_transaction.as_millis().max(1);
    client
        .batch_execute(&format!("SET idle_in_transaction_session_timeout = {ms}"))
        .map_err(|e| pg_error("connect", &location, e))?;
    Ok(client)
}
