//! Whole-store upkeep: `turnwal du` (what the sessions take) and `turnwal
//! prune` (remove the old ones).

use std::io::Write;

use serde::Serialize;

use super::args::{DuArgs, PruneArgs};
use super::listing::natural_cmp;
use super::output::{Table, count, display_id, human_bytes, id_json, json_line, local_time};
use super::{Failure, Outcome, exit, when};
use turnwal::backend::Deletion;
use turnwal::scan::SessionSummary;
use turnwal::store::Store;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DuJson<'a> {
    #[serde(serialize_with = "id_json")]
    id: &'a str,
    bytes: u64,
    events: u64,
}

/// `turnwal du`: bytes per session, largest first, and the total.
pub(crate) fn du(store: &Store, args: &DuArgs, out: &mut dyn Write) -> Outcome {
    super::listing::report_foreign(store)?;
    let mut sessions = store.list()?;
    sessions.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| natural_cmp(&a.id, &b.id))
    });
    let total: u64 = sessions.iter().map(|s| s.bytes).sum();
    if args.json {
        for s in &sessions {
            json_line(
                out,
                &DuJson {
                    id: &s.id,
                    bytes: s.bytes,
                    events: s.events,
                },
            )?;
        }
        json_line(
            out,
            &serde_json::json!({ "total": { "sessions": sessions.len(), "bytes": total } }),
        )?;
        return Ok(exit::SUCCESS);
    }
    let mut table = Table::headless(&[true, true, false]);
    for s in &sessions {
        table.row(vec![
            human_bytes(s.bytes),
            s.bytes.to_string(),
            display_id(&s.id).into_owned(),
        ]);
    }
    table.row(vec![
        human_bytes(total),
        total.to_string(),
        format!("total ({})", count(sessions.len() as u64, "session")),
    ]);
    table.write(out)?;
    Ok(exit::SUCCESS)
}

/// When a session was last active: its last event, or its creation when
/// it has none.
fn active(s: &SessionSummary) -> Option<i64> {
    s.last_activity.or_else(|| {
        s.header
            .as_ref()
            .and_then(|h| i64::try_from(h.created_at).ok())
    })
}

/// The sessions `prune` removes: those last active before the cutoff, or
/// all but the `keep` most recently active (a session with no event counts
/// as its creation time).
fn doomed(
    mut sessions: Vec<SessionSummary>,
    args: &PruneArgs,
    now: i64,
) -> Result<Vec<SessionSummary>, Failure> {
    match (&args.older_than, args.keep) {
        (Some(age), None) => {
            let age = when::parse_duration(age).map_err(Failure::Usage)?;
            // Older than the epoch: nothing is that old.
            let cutoff = when::ago(now, age);
            sessions.retain(|s| cutoff.is_some_and(|c| active(s).is_some_and(|t| t < c)));
        }
        (None, Some(keep)) => {
            sessions.sort_by(|a, b| {
                active(b)
                    .cmp(&active(a))
                    .then_with(|| natural_cmp(&a.id, &b.id))
            });
            sessions.drain(..keep.min(sessions.len()));
        }
        _ => {
            return Err(Failure::Usage(
                "prune needs --older-than DURATION or --keep N".into(),
            ));
        }
    }
    sessions.sort_by(|a, b| natural_cmp(&a.id, &b.id));
    Ok(sessions)
}

/// `turnwal prune`: removes old sessions, or with `--dry-run` names them.
/// Sessions are chosen from a listing, and each is then deleted under its
/// writer lock only if it is as the listing found it (the same events and
/// last activity, so the same age and rank): one written since, or held by
/// a writer, is kept and named. Nothing acknowledged after the listing is
/// ever deleted.
pub(crate) fn prune(store: &Store, args: &PruneArgs, out: &mut dyn Write) -> Outcome {
    super::listing::report_foreign(store)?;
    let doomed = doomed(store.list()?, args, when::now_ms())?;
    let (mut removed, mut bytes, mut skipped, mut worst) = (0u64, 0u64, 0u64, exit::SUCCESS);
    let line = |s: &SessionSummary| {
        let when = s
            .last_activity
            .map_or_else(|| "never".to_owned(), local_time);
        format!(
            "{} ({}, last active {when})",
            display_id(&s.id),
            human_bytes(s.bytes)
        )
    };
    for s in &doomed {
        if args.dry_run {
            writeln!(out, "would remove {}", line(s))?;
            removed += 1;
            bytes += s.bytes;
            continue;
        }
        let unchanged = |now: &SessionSummary| {
            now.events == s.events && active(now) == active(s) && now.problem == s.problem
        };
        match store.delete_if(&s.id, unchanged) {
            Ok(Deletion::Deleted(gone)) => {
                writeln!(out, "removed {}", line(&gone))?;
                removed += 1;
                bytes += gone.bytes;
            }
            Ok(Deletion::Kept(now)) => {
                writeln!(out, "skipped {}: written since prune listed it", line(&now))?;
                skipped += 1;
            }
            Ok(Deletion::NotFound) => {
                writeln!(
                    out,
                    "skipped {}: removed by someone else",
                    display_id(&s.id)
                )?;
            }
            Err(e @ (turnwal::Error::Locked { .. } | turnwal::Error::Leased { .. })) => {
                writeln!(out, "skipped {}: {e}", display_id(&s.id))?;
                skipped += 1;
            }
            Err(e) => {
                let f = Failure::from(e);
                super::terminal::warn(&f);
                worst = worst.max(f.exit_status());
            }
        }
    }
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    write!(
        out,
        "{verb} {}, {}",
        count(removed, "session"),
        human_bytes(bytes)
    )?;
    if skipped > 0 {
        write!(
            out,
            "; skipped {} in use or written since",
            count(skipped, "session")
        )?;
    }
    writeln!(out)?;
    Ok(worst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnwal::header::SessionHeader;

    fn summary(id: &str, last: Option<i64>, created: u64) -> SessionSummary {
        SessionSummary::from_tail(SessionHeader::new(id, created), 10, 1, 1, last, false)
    }

    fn ids(v: &[SessionSummary]) -> Vec<&str> {
        v.iter().map(|s| s.id.as_str()).collect()
    }

    #[test]
    fn prune_picks_by_age_or_by_rank() {
        let now = 10 * 86_400_000;
        let all = || {
            vec![
                summary("a", Some(now - 3 * 86_400_000), 0),
                summary("b", Some(now - 86_400_000 / 2), 0),
                summary("c", None, (now - 9 * 86_400_000) as u64),
                summary("d", Some(now - 5 * 86_400_000), 0),
            ]
        };
        let args = |older: Option<&str>, keep: Option<usize>| PruneArgs {
            older_than: older.map(str::to_owned),
            keep,
            dry_run: true,
        };
        assert_eq!(
            ids(&doomed(all(), &args(Some("2d"), None), now).unwrap()),
            ["a", "c", "d"]
        );
        assert_eq!(
            ids(&doomed(all(), &args(Some("4d"), None), now).unwrap()),
            ["c", "d"]
        );
        assert_eq!(
            ids(&doomed(all(), &args(None, Some(2)), now).unwrap()),
            ["c", "d"]
        );
        assert_eq!(
            ids(&doomed(all(), &args(None, Some(9)), now).unwrap()),
            Vec::<&str>::new()
        );
        assert_eq!(
            ids(&doomed(all(), &args(None, Some(0)), now).unwrap()),
            ["a", "b", "c", "d"]
        );
        assert!(doomed(all(), &args(None, None), now).is_err());
        assert!(doomed(all(), &args(Some("soon"), None), now).is_err());
    }
}
