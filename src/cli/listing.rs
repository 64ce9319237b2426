//! What every command that lists sessions shares: the order sessions are
//! shown in, and the report of entries that look like logs and are not.

use turnwal::store::Store;

use super::Failure;

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

/// Reports on stderr each entry named like a session log that is not a
/// regular file (a FIFO, a directory, a symlink): listings skip it without
/// opening it, and go on with the sessions.
pub(crate) fn report_foreign(store: &Store) -> Result<(), Failure> {
    for (path, kind) in store.foreign_entries()? {
        super::terminal::warn(format_args!(
            "skipped {}: {kind}, not a session log; remove or rename it",
            path.display()
        ));
    }
    Ok(())
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
