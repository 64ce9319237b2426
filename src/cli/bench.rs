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
    if let Some(url) = &args.postgres {
        let report = crate::bench::postgres::run(url, args.quick, scratch.path(), &mut progress)
            .map_err(|e| Failure::Other(format!("bench failed: {e}")))?;
        drop(scratch);
        if args.json {
            serde_json::to_writer(&mut *out, &report.to_json()).map_err(std::io::Error::from)?;
            out.write_all(b"\n")?;
        } else {
            out.write_all(report.table().as_bytes())?;
        }
        return Ok(exit::SUCCESS);
    }
    let exe = std::env::current_exe().ok();
    if let Some(turns) = &args.live_turns {
        let exe = exe.ok_or_else(|| Failure::Other("cannot find this executable".into()))?;
        let failed = |e| Failure::Other(format!("bench failed: {e}"));
        let figures =
            crate::bench::live::run(scratch.path(), &exe, turns, &mut progress).map_err(failed)?;
        let longest = turns.iter().copied().max().unwrap_or(0).max(100);
        progress(&format!("seal cost: {longest} turns sealed at once"));
        let idle =
            crate::bench::live::seal_cost(scratch.path(), longest, 3, true).map_err(failed)?;
        let compact =
            crate::bench::live::seal_cost(scratch.path(), longest, 3, false).map_err(failed)?;
        drop(scratch);
        if args.json {
            let mut json = crate::bench::live::to_json(&figures);
            json["seal_idle"] = crate::bench::live::seal_json(longest, &idle);
            json["seal_compact"] = crate::bench::live::seal_json(longest, &compact);
            serde_json::to_writer(&mut *out, &json).map_err(std::io::Error::from)?;
            out.write_all(b"\n")?;
        } else {
            out.write_all(crate::bench::live::table(&figures).as_bytes())?;
            for (seal, how) in [
                (&idle, "idle, zstd level 3"),
                (&compact, "compact, level 9"),
            ] {
                out.write_all(crate::bench::live::seal_line(longest, seal, how).as_bytes())?;
            }
        }
        return Ok(exit::SUCCESS);
    }
    if let Some(sessions) = args.concurrent {
        let exe = exe.ok_or_else(|| Failure::Other("cannot find this executable".into()))?;
        let reps = if args.quick { 1 } else { 3 };
        let figure = crate::bench::concurrent::run(
            scratch.path(),
            &exe,
            sessions,
            args.concurrent_turns,
            reps,
            &mut progress,
        )
        .map_err(|e| Failure::Other(format!("bench failed: {e}")))?;
        drop(scratch);
        if args.json {
            serde_json::to_writer(&mut *out, &crate::bench::concurrent::to_json(&figure))
                .map_err(std::io::Error::from)?;
            out.write_all(b"\n")?;
        } else {
            out.write_all(crate::bench::concurrent::table(&figure).as_bytes())?;
        }
        return Ok(exit::SUCCESS);
    }
    if let Some(mb) = args.realistic_mb {
        let exe = exe.ok_or_else(|| Failure::Other("cannot find this executable".into()))?;
        let reps = if args.quick { 1 } else { 3 };
        let report =
            crate::bench::reads::run(scratch.path(), mb * 1_000_000, reps, &exe, &mut progress)
                .map_err(|e| Failure::Other(format!("bench failed: {e}")))?;
        drop(scratch);
        if args.json {
            serde_json::to_writer(&mut *out, &report.to_json()).map_err(std::io::Error::from)?;
            out.write_all(b"\n")?;
        } else {
            out.write_all(report.table().as_bytes())?;
        }
        return Ok(exit::SUCCESS);
    }
    let report = suite::run(scratch.path(), config, exe.as_deref(), &mut progress)
        .map_err(|e| Failure::Other(format!("bench failed: {e}")))?;
    drop(scratch);
    if args.json {
        serde_json::to_writer(&mut *out, &report.to_json()).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(report.table().as_bytes())?;
    }
    Ok(exit::SUCCESS)
}
