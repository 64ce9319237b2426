//! Running a read or a mutation on every store and comparing the answers
//! (a divergence panics with all of them), and the full [`Differential::check`].

use super::generator::TAGS;
use super::keys::{err_key, events_key, header_key, key, same_events, summary_key, view_key};
use super::storage::{JsonlFile, packed_edges};
use super::{Differential, Kind, SameAs};
use turnwal::error::Result;
use turnwal::event::Event;
use turnwal::store::Store;

impl Differential {
    pub(super) fn fail(&self, what: &str, answers: &[(Kind, String)]) -> ! {
        let recent: Vec<&String> = self.log.iter().rev().take(40).collect();
        // Long answers: the lines that differ from the first answer's.
        let clip = |l: &str| -> String {
            if l.len() <= 400 {
                return l.to_owned();
            }
            let mut end = 400;
            while !l.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}… ({} bytes)", &l[..end], l.len())
        };
        let mut shown = String::new();
        let first: Vec<&str> = answers
            .first()
            .map_or("", |a| a.1.as_str())
            .lines()
            .collect();
        for (i, (kind, answer)) in answers.iter().enumerate() {
            let lines: Vec<&str> = answer.lines().collect();
            if i == 0 && answer.len() > 4_000 {
                shown.push_str(&format!(
                    "--- {} ({} lines; the first):\n{}\n",
                    kind.name(),
                    lines.len(),
                    clip(lines.first().copied().unwrap_or(""))
                ));
                continue;
            }
            if answer.len() <= 4_000 {
                let all: Vec<String> = lines.iter().take(60).map(|l| clip(l)).collect();
                shown.push_str(&format!("--- {}:\n{}\n", kind.name(), all.join("\n")));
                continue;
            }
            shown.push_str(&format!(
                "--- {} ({} lines; those that differ):\n",
                kind.name(),
                lines.len()
            ));
            let n = lines.len().max(first.len());
            for at in (0..n).filter(|&j| lines.get(j) != first.get(j)).take(6) {
                let (a, b) = (lines.get(at).copied(), first.get(at).copied());
                // From a little before where the two lines part.
                let (a, b) = (a.unwrap_or("(none)"), b.unwrap_or("(none)"));
                let mut from = a
                    .bytes()
                    .zip(b.bytes())
                    .position(|(x, y)| x != y)
                    .unwrap_or(a.len().min(b.len()))
                    .saturating_sub(80);
                while !a.is_char_boundary(from) || !b.is_char_boundary(from) {
                    from -= 1;
                }
                shown.push_str(&format!(
                    "  line {at} (from byte {from}): {}\n  first answer:  {}\n",
                    clip(&a[from..]),
                    clip(&b[from..]),
                ));
            }
        }
        panic!("backends diverge: {what}\n{shown}--- last operations (newest first):\n{recent:#?}");
    }

    /// Compares the answers `results` of every store (in store order) with
    /// the WAL's: `show(answer, fill)` must give the same text for each,
    /// where `fill` asks to show the WAL's answer as a JSONL store gives
    /// it (see [`Kind::reads_as_jsonl`]). Panics with every answer otherwise.
    fn compare<T>(&self, what: &str, results: &[Result<T>], show: impl Fn(&T, bool) -> String) {
        let shown: Vec<(Kind, String)> = self
            .stores
            .iter()
            .zip(results)
            .map(|((kind, _), r)| (*kind, key(r, |v| show(v, false))))
            .collect();
        for (i, (kind, answer)) in shown.iter().enumerate().skip(1) {
            let expected = if kind.reads_as_jsonl() {
                key(&results[0], |v| show(v, true))
            } else {
                shown[0].1.clone()
            };
            if *answer != expected {
                let mut answers = shown.clone();
                if expected != shown[0].1 {
                    answers.insert(1, (shown[0].0, format!("(as {}) {expected}", kind.name())));
                }
                self.fail(&format!("{what} ({} differs)", shown[i].0.name()), &answers);
            }
        }
    }

    /// Every session's revision in each store.
    fn revisions(&self) -> Vec<Vec<String>> {
        self.sessions
            .iter()
            .map(|s| {
                self.stores
                    .iter()
                    .map(|(_, store)| key(&store.revision(&s.id), |r| format!("{r:?}")))
                    .collect()
            })
            .collect()
    }

    /// Runs a read on every store, compares the answers, and checks that
    /// no revision moved.
    fn read<T>(
        &mut self,
        what: &str,
        op: impl Fn(&Store) -> Result<T>,
        show: impl Fn(&T, bool) -> String,
    ) -> Result<T> {
        self.read_with(what, op, None, show)
    }

    /// [`Differential::read`] for a list of events, compared as values
    /// (every field, the key order of `surfaceOp` included); the text form
    /// is built only to report a difference.
    pub(super) fn read_events(
        &mut self,
        what: &str,
        op: impl Fn(&Store) -> Result<Vec<Event>>,
    ) -> Result<Vec<Event>> {
        self.read_with(
            what,
            op,
            Some(
                &|a: &Result<Vec<Event>>, b: &Result<Vec<Event>>, jsonl: bool| match (a, b) {
                    (Ok(a), Ok(b)) => same_events(a, b, jsonl),
                    (Err(a), Err(b)) => err_key(a) == err_key(b),
                    _ => false,
                },
            ),
            |e, jsonl| events_key(e, jsonl),
        )
    }

    fn read_with<T>(
        &mut self,
        what: &str,
        op: impl Fn(&Store) -> Result<T>,
        equal: Option<&SameAs<T>>,
        show: impl Fn(&T, bool) -> String,
    ) -> Result<T> {
        // Inside a check the revisions are compared once around all its
        // reads.
        let before = (!self.in_check).then(|| self.revisions());
        let mut results: Vec<Result<T>> = self.stores.iter().map(|(_, s)| op(s)).collect();
        match equal {
            Some(equal)
                if self.stores[1..]
                    .iter()
                    .zip(&results[1..])
                    .all(|((kind, _), r)| equal(&results[0], r, kind.reads_as_jsonl())) => {}
            _ => self.compare(what, &results, &show),
        }
        if let Some(before) = before {
            let after = self.revisions();
            if after != before {
                self.fail(
                    &format!("{what}: a read changed a revision"),
                    &[(Kind::Wal, format!("{before:?} -> {after:?}"))],
                );
            }
        }
        results.swap_remove(0)
    }

    /// Runs a mutation of session `session` on every store, compares the
    /// answers, and checks that its revisions moved together (and moved,
    /// when `expect` says so) and that no other session's moved. Returns
    /// the WAL's answer and whether the revisions moved.
    pub(super) fn mutate<T>(
        &mut self,
        what: &str,
        session: usize,
        op: impl Fn(&Store) -> Result<T>,
        show: impl Fn(&T, bool) -> String,
        expect: impl Fn(&Result<T>) -> Option<bool>,
    ) -> (Result<T>, bool) {
        let before = self.revisions();
        let mut results: Vec<Result<T>> = self.stores.iter().map(|(_, s)| op(s)).collect();
        self.compare(what, &results, &show);
        let after = self.revisions();
        for (i, (x, y)) in before.iter().zip(&after).enumerate() {
            let moved: Vec<bool> = x.iter().zip(y).map(|(a, b)| a != b).collect();
            let expected = if i == session {
                expect(&results[0])
            } else {
                Some(false)
            };
            if moved.iter().any(|&m| m != moved[0]) || expected.is_some_and(|e| e != moved[0]) {
                let answers: Vec<(Kind, String)> = self
                    .stores
                    .iter()
                    .zip(x.iter().zip(y))
                    .map(|((kind, _), (a, b))| (*kind, format!("{a} -> {b}")))
                    .collect();
                self.fail(
                    &format!(
                        "{what}: revisions of {:?} moved {moved:?} (in store order), expected {expected:?}",
                        self.sessions[i].id
                    ),
                    &answers,
                );
            }
        }
        let moved = before[session][0] != after[session][0];
        (results.swap_remove(0), moved)
    }

    /// Compares everything a reader can see, for every session: `inspect`,
    /// `view`, `verify`, `read_from` at the [`Sweep`](super::Sweep)'s seqs
    /// (every seq from 0 to length+1 by default), the revision (reads never
    /// move it), and `list`.
    pub fn check(&mut self) {
        self.stats.checks += 1;
        let before = self.revisions();
        self.in_check = true;
        for i in 0..self.sessions.len() {
            let id = self.sessions[i].id.clone();
            self.check_session(&id);
        }
        let _ = self.read(
            "list",
            |s| s.list(),
            |list, fill| {
                let mut rows: Vec<String> = list.iter().map(|s| summary_key(s, fill)).collect();
                rows.sort();
                rows.join("\n")
            },
        );
        self.in_check = false;
        let after = self.revisions();
        if after != before {
            self.fail(
                "check: a read (inspect, view, read_from or list) changed a revision",
                &[(Kind::Wal, format!("{before:?} -> {after:?}"))],
            );
        }
        self.count_packed();
    }

    fn check_session(&mut self, id: &str) {
        let inspected = self.read(&format!("inspect {id:?}"), |s| s.inspect(id), view_key);
        // `view` reads in place; it must show what `inspect` shows.
        let views: Vec<Result<turnwal::view::LogView>> =
            self.stores.iter().map(|(_, s)| s.view(id)).collect();
        let show_view = |v: &turnwal::view::LogView, fill: bool| {
            let events: Vec<Event> = v.iter().map(|e| e.to_event()).collect();
            format!(
                "header={} stored={} state={}\n{}",
                header_key(v.header(), fill),
                v.stored(),
                v.state(),
                events_key(&events, fill)
            )
        };
        self.compare(&format!("view {id:?}"), &views, show_view);
        let wal_shown = key(&views[0], |v| show_view(v, false));
        if let Ok(v) = &inspected {
            let from_inspect = format!(
                "header={} stored={} state={}\n{}",
                v.header.to_json(),
                v.stored,
                v.state,
                events_key(&v.events, false)
            );
            if from_inspect != wal_shown {
                self.fail(
                    &format!("view {id:?} differs from inspect (every backend alike)"),
                    &[(Kind::Wal, wal_shown), (Kind::Wal, from_inspect)],
                );
            }
        }
        let _ = self.read(
            &format!("verify {id:?}"),
            |s| s.verify(id),
            |r, _| {
                format!(
                    "state={} events={} turns={} cut={:?} closers={} problem={:?}",
                    r.state,
                    r.events,
                    r.turns,
                    r.cut.as_ref().map(|c| (c.seq, c.reason)),
                    r.closers,
                    r.problem
                )
            },
        );
        let stored = inspected.as_ref().map_or(0, |v| v.stored);
        let mut seqs = self.sweep.seqs(stored);
        if seqs.len() as u64 != stored + 2 {
            seqs.extend(packed_edges(&self.sqlite_path(), id, stored));
            for c in self.jsonl_kinds() {
                if let Some(file) = JsonlFile::read_as_is(&self.jsonl_root(c), c, id, true) {
                    seqs.extend(file.packed_edges(stored));
                }
            }
            seqs.sort_unstable();
            seqs.dedup();
        }
        for seq in seqs {
            self.stats.reads += 1;
            let _ = self.read_events(&format!("read_from {id:?} {seq}"), |s| s.read_from(id, seq));
        }
    }

    fn count_packed(&mut self) {
        let Ok(conn) = rusqlite::Connection::open(self.sqlite_path()) else {
            return;
        };
        let mut packed = [0; 3];
        for (i, tag) in TAGS.iter().enumerate() {
            packed[i] = conn
                .query_row(
                    "SELECT count(*) FROM events WHERE ignorable = 0 AND type = ?1",
                    [tag],
                    |r| r.get::<_, i64>(0),
                )
                .unwrap_or(0) as u64;
        }
        // A packed row holds the seqs up to the next row's.
        // What the packed rows hold, as the codec decodes them.
        use turnwal::backend::rows::codec::{ROW_COLUMNS, RowIn, decode_row};
        let sizes: Vec<u64> = conn
            .prepare(&format!(
                "SELECT {ROW_COLUMNS} FROM events WHERE ignorable = 0"
            ))
            .and_then(|mut stmt| {
                stmt.query_map([], RowIn::from_row)?
                    .collect::<rusqlite::Result<Vec<RowIn>>>()
            })
            .unwrap_or_default()
            .iter()
            .map(|row| decode_row(row).map_or(0, |m| m.len() as u64))
            .collect();
        let members: u64 = sizes.iter().sum();
        let largest = sizes.iter().copied().max().unwrap_or(0);
        self.stats.largest_row = self.stats.largest_row.max(largest);
        for (most, now) in self.stats.packed_rows.iter_mut().zip(packed) {
            *most = (*most).max(now);
        }
        self.stats.packed_members = self.stats.packed_members.max(members);
        for c in self.jsonl_kinds() {
            let mut rows = [0; 3];
            let mut held = 0;
            for s in &self.sessions {
                let root = self.jsonl_root(c);
                let Some(file) = JsonlFile::read_as_is(&root, c, &s.id, true) else {
                    continue;
                };
                let (r, h, largest) = file.packed();
                self.stats.jsonl_largest_row = self.stats.jsonl_largest_row.max(largest);
                for (a, b) in rows.iter_mut().zip(r) {
                    *a += b;
                }
                held += h;
            }
            for (most, now) in self.stats.jsonl_packed_rows.iter_mut().zip(rows) {
                *most = (*most).max(now);
            }
            self.stats.jsonl_packed_members = self.stats.jsonl_packed_members.max(held);
        }
    }
}
