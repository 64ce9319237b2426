//! `turnwal bench`: the library's bench suite ([`crate::bench::suite`]) on
//! this machine's disk, printed as a table or one JSON object.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use super::args::BenchArgs;
use super::{Failure, Outcome, exit};
use crate::bench::ScratchDir;
use crate::bench::suite::{self, Config};

/// Runs the suite in a scratch directory inside `store` (or the system temp
/// dir), removed afterwards, and prints the report.
pub(crate) fn run(store: Option<&str>, args: &BenchArgs, out: &mut dyn Write) -> Outcome {
    let parent = store.map_or_else(std::env::temp_dir, PathBuf::from);
    let scratch = ScratchDir::new_in(&parent).map_err(|e| {
        Failure::Other(format!(
            "cannot create a scratch directory in {}: {e}",
            parent.display()
        ))
    })?;
    let config = if args.quick {
        Config::QUICK
    } else {
        Config::FULL
    };
    // Progress only on a terminal: piped stderr (CI, tests) stays clean.
    let terminal = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut progress = |step: &str| {
        if terminal {
            eprintln!(
                "turnwal bench: [{:5.1}s] {step}…",
                started.elapsed().as_secs_f64()
            );
        }
    };
    let reps = if args.quick { 1 } else { 3 };
    if args.feed {
        let report = crate::bench::feed::run(
            scratch.path(),
            args.postgres.as_deref(),
            args.quick,
            &mut progress,
        )
        .map_err(failed)?;
        drop(scratch);
        return print(out, args.json, || report.to_json(), || report.table());
    }
    if let Some(url) = &args.postgres {
        let report = crate::bench::postgres::run(url, args.quick, scratch.path(), &mut progress)
            .map_err(failed)?;
        drop(scratch);
        return print(out, args.json, || report.to_json(), || report.table());
    }
    let exe = std::env::current_exe().ok();
    let exe = || {
        exe.clone()
            .ok_or_else(|| Failure::Other("cannot find this executable".into()))
    };
    if let Some(turns) = &args.live_turns {
        let report = crate::bench::live::run(scratch.path(), &exe()?, turns, &mut progress)
            .map_err(failed)?;
        drop(scratch);
        return print(out, args.json, || report.to_json(), || report.table());
    }
    if let Some(sessions) = args.concurrent {
        let turns = args.concurrent_turns;
        let figure = crate::bench::concurrent::run(
            scratch.path(),
            &exe()?,
            sessions,
            turns,
            reps,
            &mut progress,
        )
        .map_err(failed)?;
        drop(scratch);
        return print(
            out,
            args.json,
            || crate::bench::concurrent::to_json(&figure),
            || crate::bench::concurrent::table(&figure),
        );
    }
    if let Some(mb) = args.realistic_mb {
        let report =
            crate::bench::reads::run(scratch.path(), mb * 1_000_000, reps, &exe()?, &mut progress)
                .map_err(failed)?;
        drop(scratch);
        return print(out, args.json, || report.to_json(), || report.table());
    }
    let report =
        suite::run(scratch.path(), config, exe().ok().as_deref(), &mut progress).map_err(failed)?;
    drop(scratch);
    print(out, args.json, || report.to_json(), || report.table())
}

/// A bench that could not run, as the command says it.
fn failed(e: impl std::fmt::Display) -> Failure {
    Failure::Other(format!("bench failed: {e}"))
}

/// Prints a report as one line of JSON (`--json`) or as its table.
fn print(
    out: &mut dyn Write,
    json: bool,
    to_json: impl FnOnce() -> serde_json::Value,
    table: impl FnOnce() -> String,
) -> Outcome {
    if json {
        serde_json::to_writer(&mut *out, &to_json()).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(table().as_bytes())?;
    }
    Ok(exit::SUCCESS)
}
