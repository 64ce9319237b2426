//! `turnwal ls`, `turnwal stats`, `turnwal fork` and `turnwal rm`: whole
//! sessions.

use std::io::Write;

use super::output::{SessionJson, Table, display_id, iso_utc, json_line};
use super::{Outcome, exit};
use crate::store::Store;

/// Sorts session ids as a person counts: runs of digits by their value, so
/// `sess-2` comes before `sess-10`.
pub(crate) fn sort_natural(ids: &mut [String]) {
    ids.sort_by(|a, b| natural_cmp(a, b));
}

/// Natural order: digit runs compare by value (then by length, so `01`
/// after `1`), everything else byte by byte; ties fall back to byte order,
/// so distinct ids never compare equal.
pub(crate) fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (x, y) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < x.len() && j < y.len() {
        if x[i].is_ascii_digit() && y[j].is_ascii_digit() {
            let run = |s: &[u8], k: usize| s[k..].iter().take_while(|c| c.is_ascii_digit()).count();
            let (m, n) = (run(x, i), run(y, j));
            let (p, q) = (&x[i..i + m], &y[j..j + n]);
            let trim = |d: &[u8]| {
                let z = d.iter().take_while(|&&c| c == b'0').count();
                d[z..].to_vec()
            };
            let (tp, tq) = (trim(p), trim(q));
            let by_value = tp.len().cmp(&tq.len()).then_with(|| tp.cmp(&tq));
            if by_value != Ordering::Equal {
                return by_value;
            }
            let by_len = m.cmp(&n);
            if by_len != Ordering::Equal {
                return by_len;
            }
            i += m;
            j += n;
        } else {
            if x[i] != y[j] {
                return x[i].cmp(&y[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (x.len() - i).cmp(&(y.len() - j)).then_with(|| x.cmp(y))
}

/// Lists the sessions, sorted by id: an aligned table with a header row, or
/// one JSON object per line.
pub(crate) fn ls(store: &Store, json: bool, out: &mut dyn Write) -> Outcome {
    let mut sessions = store.list()?;
    sessions.sort_by(|a, b| natural_cmp(&a.id, &b.id));
    super::check::report_foreign(store)?;
    if json {
        for s in &sessions {
            json_line(out, &SessionJson::from(s))?;
        }
        return Ok(exit::SUCCESS);
    }
    let mut table = Table::new(
        &[
            "ID",
            "EVENTS",
            "TURNS",
            "BYTES",
            "LAST ACTIVITY",
            "STATE",
            "CHECKED",
        ],
        &[false, true, true, true, false, false, false],
    );
    for s in &sessions {
        table.row(vec![
            display_id(&s.id).into_owned(),
            s.events.to_string(),
            s.turns.to_string(),
            s.bytes.to_string(),
            s.last_activity.map_or_else(|| "-".to_owned(), iso_utc),
            s.state.code().to_owned(),
            s.checked.code().to_owned(),
        ]);
    }
    table.write(out)?;
    Ok(exit::SUCCESS)
}

/// Forks `id` into `child` (events `0..=at`, by default all) and prints the
/// child's header.
pub(crate) fn fork(
    store: &Store,
    id: &str,
    child: &str,
    at: Option<u64>,
    out: &mut dyn Write,
) -> Outcome {
    let header = store.fork(id, at, child)?;
    writeln!(out, "{}", header.to_json())?;
    Ok(exit::SUCCESS)
}

/// Deletes session `id` (under its writer lock) and says so.
/// `turnwal compact`: seals each session's closed turns, one line each.
pub(crate) fn compact(
    store: &Store,
    args: &super::args::CompactArgs,
    out: &mut dyn Write,
) -> Outcome {
    let ids: Vec<String> = if args.all {
        store.list()?.into_iter().map(|s| s.id).collect()
    } else {
        args.sessions.clone()
    };
    for id in ids {
        let done = store.compact(&id)?;
        store.close(&id)?;
        match done {
            Some(c) => writeln!(out, "{} {} -> {} bytes", display_id(&id), c.before, c.after)?,
            None => writeln!(
                out,
                "{} unchanged (nothing to compact in this store)",
                display_id(&id)
            )?,
        }
    }
    Ok(exit::SUCCESS)
}

pub(crate) fn rm(store: &Store, id: &str, out: &mut dyn Write) -> Outcome {
    store.delete(id)?;
    writeln!(out, "deleted {}", display_id(id))?;
    Ok(exit::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_counts_digit_runs_and_never_ties_distinct_ids() {
        let mut ids: Vec<String> = [
            "sess-10",
            "sess-2",
            "sess-1",
            "sess-01",
            "s",
            "sess-2a",
            "sess-2-3",
            "b9",
            "b10",
            "99999999999999999999999",
            "100000000000000000000000",
            "",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        sort_natural(&mut ids);
        assert_eq!(
            ids,
            [
                "",
                "99999999999999999999999",
                "100000000000000000000000",
                "b9",
                "b10",
                "s",
                "sess-1",
                "sess-01",
                "sess-2",
                "sess-2-3",
                "sess-2a",
                "sess-10",
            ]
        );
        for a in &ids {
            for b in &ids {
                assert_eq!(
                    natural_cmp(a, b) == std::cmp::Ordering::Equal,
                    a == b,
                    "{a} {b}"
                );
                assert_eq!(natural_cmp(a, b), natural_cmp(b, a).reverse(), "{a} {b}");
            }
        }
    }
}
