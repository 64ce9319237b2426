//! The `turnwal` command: argument parsing, dispatch and exit statuses.
//!
//! The CLI is thin: it parses arguments, calls [`turnwal::Store`] and prints.
//! Only `demo` and `bench` touch the file system themselves (to pick fresh
//! directories), and [`location`] looks at a path to choose its backend.
//! The rules behind every command: docs/CLI.md.
//!
//! Exit statuses are a contract scripts rely on (see [`exit`]):
//!
//! | status | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | `verify` found only a recoverable tail (torn bytes, open turn, debris) |
//! | 2 | corrupt data (`verify`, `convert`, or any command that meets [`turnwal::Error::Corrupt`]) |
//! | 3 | `append` rejected an input line |
//! | 4 | any other error (not found, already exists, locked, busy, I/O, unsupported store) |
//! | 64 | usage error |
//!
//! Errors go to stderr as `turnwal: <message>`. A broken pipe on stdout
//! exits 0 quietly.

mod append;
pub mod args;
mod bench;
mod check;
mod convert;
mod demo;
mod digest;
mod grep;
mod lines;
mod listing;
mod location;
mod output;
mod progress;
mod read;
mod sessions;
mod show;
mod stats;
mod sync;
mod terminal;
mod transfer;
mod upkeep;
mod when;

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command, SqliteArgs};
use location::{IfMissing, Location, Opening};
use turnwal::backend::SyncMode;
use turnwal::error::Error;
use turnwal::store::{Store, StoreOptions};

/// The exit statuses of `turnwal`.
pub mod exit {
    /// Success.
    pub const SUCCESS: u8 = 0;
    /// `verify` found only a recoverable tail (torn bytes, open turn, debris).
    pub const RECOVERABLE: u8 = 1;
    /// Corrupt data.
    pub const CORRUPT: u8 = 2;
    /// `append` rejected an input line.
    pub const REJECTED: u8 = 3;
    /// Any other error: not found, locked, I/O, unsupported store.
    pub const ERROR: u8 = 4;
    /// A bad command line (BSD `EX_USAGE`).
    pub const USAGE: u8 = 64;
}

/// Why a command failed; each maps to one exit status.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The library refused or failed.
    Store(Error),
    /// Stored data fails validation (a report, not an [`Error::Corrupt`]).
    Corrupt(String),
    /// `append` rejected input line `line` (1-based).
    Rejected { line: u64, reason: String },
    /// The command line is wrong in a way clap cannot see.
    Usage(String),
    /// Writing stdout failed (a broken pipe is not reported).
    Output(io::Error),
    /// Anything else, already worded for the user.
    Other(String),
}

impl Failure {
    pub(crate) fn exit_status(&self) -> u8 {
        match self {
            Failure::Store(Error::Corrupt(_)) | Failure::Corrupt(_) => exit::CORRUPT,
            Failure::Rejected { .. } => exit::REJECTED,
            Failure::Usage(_) => exit::USAGE,
            Failure::Store(_) | Failure::Output(_) | Failure::Other(_) => exit::ERROR,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Store(e) => write!(f, "{e}"),
            Failure::Rejected { line, reason } => write!(f, "line {line}: {reason}"),
            Failure::Corrupt(msg) | Failure::Usage(msg) | Failure::Other(msg) => f.write_str(msg),
            Failure::Output(e) => write!(f, "writing to stdout: {e}"),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Store(e)
    }
}

/// Plain `?` on a write to stdout lands here; stdin and file errors are
/// mapped explicitly where they occur.
impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::Output(e)
    }
}

/// What a command returns: its exit status, or why it failed.
pub(crate) type Outcome = Result<u8, Failure>;

/// Runs the command line and returns the process exit status.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // Help and version go to stdout and succeed; everything else is a
            // usage error, reported as 64 rather than clap's default 2, which
            // `verify` uses for "corrupt".
            return ExitCode::from(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::SUCCESS
            });
        }
    };
    let mut out = BufWriter::new(io::stdout().lock());
    let result = run(cli, &mut out).and_then(|status| {
        out.flush()?;
        Ok(status)
    });
    match result {
        Ok(status) => ExitCode::from(status),
        Err(Failure::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(failure) => {
            // What was printed before the failure (acks, listed sessions)
            // still goes out, ahead of the error.
            let _ = out.flush();
            terminal::warn(&failure);
            ExitCode::from(failure.exit_status())
        }
    }
}

fn run(cli: Cli, out: &mut dyn Write) -> Outcome {
    let Cli {
        store,
        sqlite,
        command,
    } = cli;
    let sqlite_options = sqlite.options();
    let open = |sync: SyncMode, missing: IfMissing| -> Result<Store, Failure> {
        let location = location::resolve(store.as_deref())?;
        check_sqlite_args(&sqlite, &[&location])?;
        let options = StoreOptions {
            sync,
            ..StoreOptions::default()
        };
        Ok(location.open(
            &Opening::new(options)
                .if_missing(missing)
                .sqlite(sqlite_options.clone()),
        )?)
    };
    // A command that only reads or tidies needs a store that exists: a typo
    // in --store must not look like an empty store. Only a command that
    // creates a session creates a missing one.
    let existing = || {
        let location = location::resolve(store.as_deref())?;
        check_sqlite_args(&sqlite, &[&location])?;
        if !location.exists() {
            return Err(Failure::Other(format!(
                "no store at {}: the path does not exist (the store is named by --store, \
                 else $TURNWAL_STORE, else ./.turnwal)",
                location.path().display()
            )));
        }
        open(SyncMode::default(), IfMissing::Empty)
    };
    // Text for people goes through `Visible`: no control character from a
    // log reaches a terminal. JSON stays exact; `show` escapes the data it
    // shows itself (it colours its own text on a terminal).
    let exact = match &command {
        Command::Cat(_) | Command::Tail(_) | Command::Export(_) | Command::Show(_) => true,
        Command::Completions(_) | Command::Man => true,
        Command::Ls(a) => a.json,
        Command::Head(a) => a.json,
        Command::Du(a) => a.json,
        Command::Stats(a) => a.json,
        Command::Grep(a) => a.json,
        Command::Verify(a) => a.json,
        Command::Convert(a) => a.json,
        Command::Sync(a) => a.json,
        Command::Bench(a) => a.json,
        _ => false,
    };
    let mut visible;
    let out: &mut dyn Write = if exact {
        out
    } else {
        visible = terminal::Visible::new(out);
        &mut visible
    };
    match command {
        Command::Demo => {
            check_sqlite_args(&sqlite, &[])?;
            demo::run(store.as_deref(), out)
        }
        Command::Bench(a) => {
            check_sqlite_args(&sqlite, &[])?;
            bench::run(store.as_deref(), &a, out)
        }
        Command::Convert(a) => convert::run(store.as_deref(), &sqlite, &a, out),
        Command::Sync(a) => sync::run(store.as_deref(), &sqlite, &a, out),
        Command::Completions(a) => {
            check_sqlite_args(&sqlite, &[])?;
            let mut cli = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(a.shell, &mut cli, "turnwal", out);
            Ok(exit::SUCCESS)
        }
        Command::Man => {
            check_sqlite_args(&sqlite, &[])?;
            let cli = <Cli as clap::CommandFactory>::command();
            clap_mangen::Man::new(cli).render(out)?;
            Ok(exit::SUCCESS)
        }
        Command::Append(a) => {
            let missing = if a.create {
                IfMissing::Create
            } else {
                IfMissing::Empty
            };
            let store = open(a.sync.into(), missing)?;
            if a.steal {
                store.steal_lease(&a.session);
            }
            append::run(&store, &a, io::stdin(), out)
        }
        Command::Cat(a) if a.salvage => read::salvage(&existing()?, &a.session, a.from, out),
        Command::Cat(a) => read::cat(&existing()?, &a.session, a.from, a.raw, out),
        Command::Tail(a) => read::tail(&existing()?, &a, out),
        Command::Show(a) => show::show(&existing()?, &a, out),
        Command::Grep(a) => grep::grep(&existing()?, &a, out),
        Command::Verify(a) => check::verify(&existing()?, &a, out),
        Command::Recover(a) => match &a.session {
            Some(id) => {
                let store = existing()?;
                if a.steal {
                    store.steal_lease(id);
                }
                check::recover(&store, id, a.dry_run, a.salvage, a.steal, out)
            }
            None => check::recover_all(&existing()?, a.dry_run, a.salvage, out),
        },
        Command::Ls(a) => sessions::ls(&existing()?, &a, out),
        Command::Head(a) => sessions::head(&existing()?, &a, out),
        Command::Du(a) => upkeep::du(&existing()?, &a, out),
        Command::Prune(a) => upkeep::prune(&existing()?, &a, out),
        Command::Export(a) => transfer::export(&existing()?, &a, out),
        Command::Import(a) => {
            transfer::import(&open(SyncMode::default(), IfMissing::Create)?, &a, out)
        }
        Command::Stats(a) => stats::stats(&existing()?, a.session.as_deref(), a.json, out),
        Command::Rm(a) => sessions::rm(&existing()?, &a.session, out),
        Command::Compact(a) => sessions::compact(&existing()?, &a, out),
        Command::Fork(a) => sessions::fork(&existing()?, &a.session, &a.child, a.at, out),
    }
}

/// Refuses the SQLite options (`--journal-mode`, …) when none of the
/// stores a command opens is an SQLite store: they would be ignored.
pub(crate) fn check_sqlite_args(args: &SqliteArgs, stores: &[&Location]) -> Result<(), Failure> {
    match args.given() {
        Some(flag) if !stores.iter().any(|l| l.is_sqlite()) => Err(Failure::Usage(format!(
            "{flag} applies to SQLite stores (.sqlite or .db files) only, and this command \
             opens none"
        ))),
        _ => Ok(()),
    }
}
