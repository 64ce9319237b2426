//! turnwal's tables in a PostgreSQL database (docs/POSTGRES.md, "Schema"):
//! created in one transaction when the database holds none of them,
//! checked column by column on every open, refused untouched when they are
//! newer or foreign.

use std::path::PathBuf;

use super::pg_error;
use crate::error::{Error, Result};

/// The schema version this turnwal creates and reads. Version 2 added
/// `turnwal_sessions.writer_lease_until` (leases); a version-1 database is
/// upgraded in place at its first open by this turnwal (and from then on
/// refused by a turnwal that reads version 1 only, whose writers would not
/// honour leases).
pub const SCHEMA_VERSION: i32 = 2;

/// The tables, as created.
const CREATE: &str = "
CREATE TABLE turnwal_schema (
  singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version    integer NOT NULL,
  store_id   text    NOT NULL
);
CREATE TABLE turnwal_sessions (
  session_id       text    PRIMARY KEY,
  header           text    NOT NULL,
  policy           text    NOT NULL,
  incarnation      text    NOT NULL,
  next_seq         bigint  NOT NULL,
  revision         bigint  NOT NULL,
  data_bytes       bigint  NOT NULL,
  writer_epoch     bigint  NOT NULL,
  writer_holder    text,
  writer_heartbeat timestamptz,
  writer_lease_until timestamptz
);
CREATE TABLE turnwal_events (
  session_id        text    NOT NULL,
  seq               bigint  NOT NULL,
  members           integer NOT NULL,
  type              text    NOT NULL,
  time              bigint  NOT NULL,
  data              text    NOT NULL,
  source_event_seqs bytea,
  surface_op        text,
  ignorable         boolean,
  PRIMARY KEY (session_id, seq)
);
CREATE TABLE turnwal_quarantine (
  session_id text        NOT NULL,
  revision   bigint      NOT NULL,
  seq        bigint      NOT NULL,
  cut_at     timestamptz NOT NULL,
  detail     text        NOT NULL,
  rows       text        NOT NULL,
  PRIMARY KEY (session_id, revision)
);
";

/// The index the commit point is found by (see [`ensure_schema`]).
const TURN_ENDS_INDEX: &str = "CREATE INDEX IF NOT EXISTS turnwal_events_turn_ends \
     ON turnwal_events (session_id, seq) WHERE type = 'turn/end'";

/// Every column of turnwal's tables, as `information_schema.columns` names
/// them: `(table, column, data_type, is_nullable)`, in table and column
/// order.
const COLUMNS: &[(&str, &str, &str, &str)] = &[
    ("turnwal_events", "session_id", "text", "NO"),
    ("turnwal_events", "seq", "bigint", "NO"),
    ("turnwal_events", "members", "integer", "NO"),
    ("turnwal_events", "type", "text", "NO"),
    ("turnwal_events", "time", "bigint", "NO"),
    ("turnwal_events", "data", "text", "NO"),
    ("turnwal_events", "source_event_seqs", "bytea", "YES"),
    ("turnwal_events", "surface_op", "text", "YES"),
    ("turnwal_events", "ignorable", "boolean", "YES"),
    ("turnwal_quarantine", "session_id", "text", "NO"),
    ("turnwal_quarantine", "revision", "bigint", "NO"),
    ("turnwal_quarantine", "seq", "bigint", "NO"),
    (
        "turnwal_quarantine",
        "cut_at",
        "timestamp with time zone",
        "NO",
    ),
    ("turnwal_quarantine", "detail", "text", "NO"),
    ("turnwal_quarantine", "rows", "text", "NO"),
    ("turnwal_schema", "singleton", "boolean", "NO"),
    ("turnwal_schema", "version", "integer", "NO"),
    ("turnwal_schema", "store_id", "text", "NO"),
    ("turnwal_sessions", "session_id", "text", "NO"),
    ("turnwal_sessions", "header", "text", "NO"),
    ("turnwal_sessions", "policy", "text", "NO"),
    ("turnwal_sessions", "incarnation", "text", "NO"),
    ("turnwal_sessions", "next_seq", "bigint", "NO"),
    ("turnwal_sessions", "revision", "bigint", "NO"),
    ("turnwal_sessions", "data_bytes", "bigint", "NO"),
    ("turnwal_sessions", "writer_epoch", "bigint", "NO"),
    ("turnwal_sessions", "writer_holder", "text", "YES"),
    (
        "turnwal_sessions",
        "writer_heartbeat",
        "timestamp with time zone",
        "YES",
    ),
    (
        "turnwal_sessions",
        "writer_lease_until",
        "timestamp with time zone",
        "YES",
    ),
];

/// What version 2 added to version 1: the columns of version 1 are
/// [`COLUMNS`] without it.
const LEASE_COLUMN: &str = "writer_lease_until";

/// Upgrades a version-1 schema to version 2 in one transaction (hosts
/// opening it at once: one upgrades, the others wait on the advisory lock
/// and find it done).
fn upgrade_from_1(client: &mut postgres::Client, location: &str) -> Result<()> {
    let err = |op| move |e| pg_error(op, location, e);
    let mut tx = client.transaction().map_err(err("upgrade the schema"))?;
    tx.batch_execute("SELECT pg_advisory_xact_lock(7465262616931246445)")
        .map_err(err("upgrade the schema"))?;
    let version: i32 = tx
        .query_one("SELECT version FROM turnwal_schema", &[])
        .map_err(err("read the schema version"))?
        .get(0);
    if version == 1 {
        tx.batch_execute(
            "ALTER TABLE turnwal_sessions ADD COLUMN writer_lease_until timestamptz; \
             UPDATE turnwal_schema SET version = 2;",
        )
        .map_err(err("upgrade the schema"))?;
    }
    tx.commit().map_err(err("upgrade the schema"))
}

fn unsupported(location: &str, detail: String) -> Error {
    Error::Unsupported {
        path: PathBuf::from(location),
        detail,
    }
}

/// Checks turnwal's schema in the connected database, creating it (in one
/// transaction, with a random store id) when the database holds no table
/// of turnwal's. Refused, with nothing changed: a database that is not
/// UTF-8 (`data` must hold any JSON text), a schema version newer than
/// [`SCHEMA_VERSION`], and tables named `turnwal_*` that are not exactly
/// turnwal's (a foreign or damaged schema).
/// Returns the store id.
pub fn ensure_schema(client: &mut postgres::Client, location: &str) -> Result<String> {
    let err = |op| move |e| pg_error(op, location, e);
    check_encoding(client, location)?;
    let found: Vec<Column> = client
        .query(
            "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text \
             FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name LIKE 'turnwal\\_%' \
             ORDER BY table_name, ordinal_position",
            &[],
        )
        .map_err(err("read the schema"))?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    if found.is_empty() {
        return match create_schema(client, location)? {
            Some(store_id) => Ok(store_id),
            // Another host created it meanwhile: check it like any other.
            None => ensure_schema(client, location),
        };
    }
    // The version first: a newer turnwal may have changed the tables.
    if found
        .iter()
        .any(|(t, c, _, _)| t == "turnwal_schema" && c == "version")
        && check_version(client, location, &found)? == Upgraded::Yes
    {
        return ensure_schema(client, location);
    }
    check_columns(location, &found)?;
    ensure_turn_ends_index(client, location)?;
    let row = client
        .query_one("SELECT version, store_id FROM turnwal_schema", &[])
        .map_err(err("read the schema version"))?;
    let version: i32 = row.get(0);
    if version != SCHEMA_VERSION {
        return Err(unsupported(
            location,
            format!("turnwal schema version {version}; this turnwal reads {SCHEMA_VERSION}"),
        ));
    }
    Ok(row.get(1))
}

/// A column as `information_schema.columns` describes it: table, column,
/// data type, nullable.
type Column = (String, String, String, String);

/// Whether [`check_version`] upgraded the schema.
#[derive(Debug, PartialEq, Eq)]
enum Upgraded {
    Yes,
    No,
}

/// Refuses a database whose encoding is not UTF-8.
fn check_encoding(client: &mut postgres::Client, location: &str) -> Result<()> {
    let encoding: String = client
        .query_one("SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname = current_database()", &[])
        .map_err(|e| pg_error("read the database encoding", location, e))?
        .get(0);
    if encoding != "UTF8" {
        return Err(unsupported(
            location,
            format!(
                "the database's encoding is {encoding}; turnwal needs UTF8 (CREATE DATABASE … ENCODING 'UTF8')"
            ),
        ));
    }
    Ok(())
}

/// Creates the schema in a database that holds none of turnwal's tables,
/// in one transaction, with a random store id (returned); `None` when
/// another host created it first.
fn create_schema(client: &mut postgres::Client, location: &str) -> Result<Option<String>> {
    let err = |op| move |e| pg_error(op, location, e);
    let mut tx = client.transaction().map_err(err("begin"))?;
    // Hosts starting at once on an empty database: one creates the
    // tables, the others wait for its commit (a lock of this transaction
    // only, which a pooler in transaction mode keeps), then find them and
    // check them like any later open.
    tx.batch_execute("SELECT pg_advisory_xact_lock(7465262616931246445)")
        .map_err(err("create the schema"))?;
    let created = tx
        .query_opt(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() \
             AND table_name = 'turnwal_schema'",
            &[],
        )
        .map_err(err("read the schema"))?
        .is_some();
    if created {
        return Ok(None);
    }
    tx.batch_execute(CREATE).map_err(err("create the schema"))?;
    tx.batch_execute(TURN_ENDS_INDEX)
        .map_err(err("create the schema"))?;
    let store_id = format!("{:016x}{:016x}", random_u64(), random_u64());
    tx.execute(
        "INSERT INTO turnwal_schema (version, store_id) VALUES ($1, $2)",
        &[&SCHEMA_VERSION, &store_id],
    )
    .map_err(err("create the schema"))?;
    tx.commit().map_err(err("commit the schema"))?;
    Ok(Some(store_id))
}

/// Upgrades a version-1 schema whose columns are exactly version 1's;
/// refuses a version newer than [`SCHEMA_VERSION`].
fn check_version(
    client: &mut postgres::Client,
    location: &str,
    found: &[Column],
) -> Result<Upgraded> {
    let versions: Vec<i32> = client
        .query("SELECT version FROM turnwal_schema", &[])
        .map_err(|e| pg_error("read the schema version", location, e))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if versions == [1] {
        let v1: Vec<Column> = COLUMNS
            .iter()
            .filter(|(t, c, _, _)| !(*t == "turnwal_sessions" && *c == LEASE_COLUMN))
            .map(|(t, c, d, n)| ((*t).into(), (*c).into(), (*d).into(), (*n).into()))
            .collect();
        if found == v1 {
            upgrade_from_1(client, location)?;
            return Ok(Upgraded::Yes);
        }
    }
    if let [version] = versions[..]
        && version > SCHEMA_VERSION
    {
        return Err(unsupported(
            location,
            format!(
                "the database holds turnwal schema version {version}, newer than the \
                 {SCHEMA_VERSION} this turnwal reads: upgrade turnwal"
            ),
        ));
    }
    Ok(Upgraded::No)
}

/// Refuses tables named `turnwal_*` that are not exactly this version's.
fn check_columns(location: &str, found: &[Column]) -> Result<()> {
    let expected: Vec<Column> = COLUMNS
        .iter()
        .map(|(t, c, d, n)| ((*t).into(), (*c).into(), (*d).into(), (*n).into()))
        .collect();
    if found == expected {
        return Ok(());
    }
    let first = found
        .iter()
        .zip(&expected)
        .find(|(f, e)| f != e)
        .map(|(f, _)| format!("{}.{} ({}, nullable {})", f.0, f.1, f.2, f.3))
        .or_else(|| {
            found
                .get(expected.len())
                .map(|f| format!("{}.{}", f.0, f.1))
        })
        .unwrap_or_else(|| "a missing column".to_owned());
    Err(unsupported(
        location,
        format!(
            "tables named turnwal_* that are not turnwal's schema version {SCHEMA_VERSION} \
             (first difference: {first}); refusing a foreign schema, nothing was changed"
        ),
    ))
}

/// Creates the commit point's index if an earlier build of this version
/// lacked it. Its rows are the few `turn/end` rows of a session, so the
/// last one is found by a short backward scan whatever the session's
/// length (a planner estimating per-session counts from the table's
/// average would otherwise scan a long session whole).
fn ensure_turn_ends_index(client: &mut postgres::Client, location: &str) -> Result<()> {
    let has_index = client
        .query_opt(
            "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() \
             AND indexname = 'turnwal_events_turn_ends'",
            &[],
        )
        .map_err(|e| pg_error("read the schema", location, e))?
        .is_some();
    if !has_index {
        client
            .batch_execute(TURN_ENDS_INDEX)
            .map_err(|e| pg_error("create the commit-point index", location, e))?;
    }
    Ok(())
}

/// A random 64-bit value (store ids, lease tokens): the one every store
/// uses, seeded by the standard library from the OS on every platform.
pub(crate) use crate::storage::random_u64;
