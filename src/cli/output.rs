//! How results are printed: JSON lines (key order fixed by the structs
//! below, since scripts read them), aligned text tables, times and cuts.

use std::borrow::Cow;
use std::io::{self, Write};

use serde::Serialize;

use turnwal::event::Event;
use turnwal::scan::{Cut, SessionSummary};
use turnwal::upstream::jsstr;
use turnwal::verify::VerifyReport;

/// Writes events as JSONL, one envelope per line, exactly as stored.
pub(crate) fn write_events<'a>(
    out: &mut dyn Write,
    events: impl IntoIterator<Item = &'a Event>,
) -> io::Result<()> {
    let mut line = Vec::new();
    for event in events {
        line.clear();
        event.write_json(&mut line);
        line.push(b'\n');
        out.write_all(&line)?;
    }
    Ok(())
}

/// Writes one value as a line of JSON.
pub(crate) fn json_line<T: Serialize>(out: &mut dyn Write, value: &T) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

/// A [`Cut`] in JSON: `{offset, seq, len, reason, detail}`.
#[derive(Serialize)]
pub(crate) struct CutJson<'a> {
    offset: u64,
    seq: u64,
    len: u64,
    reason: &'static str,
    detail: &'a str,
}

impl<'a> From<&'a Cut> for CutJson<'a> {
    fn from(cut: &'a Cut) -> CutJson<'a> {
        CutJson {
            offset: cut.offset,
            seq: cut.seq,
            len: cut.len,
            reason: cut.reason.code(),
            detail: &cut.detail,
        }
    }
}

/// A `verify` line in JSON.
#[derive(Serialize)]
pub(crate) struct VerifyJson<'a> {
    #[serde(serialize_with = "id_json")]
    id: &'a str,
    state: &'static str,
    events: u64,
    turns: u64,
    bytes: u64,
    cut: Option<CutJson<'a>>,
    closers: usize,
    problem: Option<&'a str>,
}

impl<'a> From<&'a VerifyReport> for VerifyJson<'a> {
    fn from(r: &'a VerifyReport) -> VerifyJson<'a> {
        VerifyJson {
            id: &r.id,
            state: r.state.code(),
            events: r.events,
            turns: r.turns,
            bytes: r.bytes,
            cut: r.cut.as_ref().map(CutJson::from),
            closers: r.closers,
            problem: r.problem.as_deref(),
        }
    }
}

/// A `verify` line in text.
pub(crate) fn verify_text(r: &VerifyReport) -> String {
    let id = display_id(&r.id);
    if let Some(problem) = &r.problem {
        return format!("{id}: {}: {problem}", r.state);
    }
    let mut line = format!(
        "{id}: {}, {}, {}, {}",
        r.state,
        count(r.events, "event"),
        count(r.turns, "turn"),
        count(r.bytes, "byte")
    );
    if let Some(cut) = &r.cut {
        line.push_str(&format!("; recovery cuts {}", cut_text(cut)));
    }
    if r.closers > 0 {
        let closers = count(r.closers as u64, "closer");
        line.push_str(&format!("; recovery adds {closers}"));
    }
    line
}

/// `1 turn`, `2 turns`.
pub(crate) fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `13 bytes at byte 1234 (seq 7): incomplete-record: <detail>`.
pub(crate) fn cut_text(cut: &Cut) -> String {
    let mut text = format!(
        "{} at byte {} (seq {}): {}",
        count(cut.len, "byte"),
        cut.offset,
        cut.seq,
        cut.reason
    );
    if !cut.detail.is_empty() {
        text.push_str(": ");
        text.push_str(&cut.detail);
    }
    text
}

/// One gap of a salvage read, for people.
pub(crate) fn gap_text(gap: &turnwal::scan::Gap) -> String {
    let lost = match gap.next_seq {
        Some(next) if next > gap.first_seq + 1 => {
            format!("seqs {} to {} lost", gap.first_seq, next - 1)
        }
        Some(_) => format!("seq {} lost", gap.first_seq),
        None => format!("everything from seq {} on lost", gap.first_seq),
    };
    format!(
        "gap at bytes {}..{} ({}): {lost}: {}",
        gap.offset,
        gap.offset + gap.len,
        if gap.damaged { "damaged" } else { "torn" },
        gap.reason
    )
}

/// What `ls` says of a session's state: `clean` only when the whole log
/// was checked; a log judged from its end alone (the WAL's and JSONL's
/// quick listing) whose end is clean is `clean-end`, since damage further
/// back is found only by `verify`, which reads all of it. Every other
/// state is what the check found.
pub(crate) fn state_word(s: &SessionSummary) -> &'static str {
    match (s.state, s.checked) {
        (turnwal::scan::LogState::Clean, turnwal::scan::Checked::Tail) => "clean-end",
        (state, _) => state.code(),
    }
}

/// An `ls` line in JSON: the listing's figures and every header field.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionJson<'a> {
    #[serde(serialize_with = "id_json")]
    id: &'a str,
    events: u64,
    turns: u64,
    bytes: u64,
    last_activity: Option<i64>,
    state: &'static str,
    /// How much of the log `state` was judged from: `tail` or `full`.
    checked: &'static str,
    problem: Option<&'a str>,
    created_at: Option<u64>,
    cwd: Option<&'a str>,
    parent_session: Option<&'a str>,
    seed_length: Option<u64>,
    origin: Option<&'a str>,
    delegation_depth: Option<u64>,
    agent_preset: Option<&'a str>,
    /// The first user message, cut (set by `ls`).
    pub title: Option<String>,
    /// What the stored log says when `state` is `live` (a writer holds
    /// the session, so its open turn is live, not crashed).
    #[serde(skip_serializing_if = "Option::is_none")]
    stored_state: Option<&'static str>,
    /// The writer holding the session (set by `ls`).
    #[serde(skip_serializing_if = "Option::is_none")]
    holder: Option<HolderJson>,
}

/// A live session's writer in `ls --json`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HolderJson {
    who: String,
    pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    epoch: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_expires_in_ms: Option<u64>,
}

impl SessionJson<'_> {
    /// Marks the session as held by `holder`: `state` becomes `live`, the
    /// stored log's own word moves to `storedState`.
    pub(crate) fn held_by(&mut self, holder: &turnwal::backend::Holder) {
        self.stored_state = Some(self.state);
        self.state = "live";
        self.holder = Some(HolderJson {
            who: holder.who.clone(),
            pid: holder.pid,
            epoch: holder.epoch,
            lease_expires_in_ms: holder.lease_expires_in.map(|d| d.as_millis() as u64),
        });
    }
}

/// A live session's state as `ls` shows it: `live (pid 123)`, `live (host
/// pid 1 writer 9f3a, lease 28 s)`.
pub(crate) fn live_word(holder: &turnwal::backend::Holder) -> String {
    match holder.lease_expires_in {
        Some(left) => format!("live ({}, lease {} s)", holder.who, left.as_secs()),
        None => format!("live ({})", holder.who),
    }
}

impl<'a> From<&'a SessionSummary> for SessionJson<'a> {
    fn from(s: &'a SessionSummary) -> SessionJson<'a> {
        let h = s.header.as_ref();
        SessionJson {
            id: &s.id,
            events: s.events,
            turns: s.turns,
            bytes: s.bytes,
            last_activity: s.last_activity,
            state: state_word(s),
            checked: s.checked.code(),
            problem: s.problem.as_deref(),
            created_at: h.map(|h| h.created_at),
            cwd: h.and_then(|h| h.cwd.as_deref()),
            parent_session: h.and_then(|h| h.parent_session.as_deref()),
            seed_length: h.and_then(|h| h.seed_length),
            origin: h.and_then(|h| h.origin.as_deref()),
            delegation_depth: h.and_then(|h| h.delegation_depth),
            agent_preset: h.and_then(|h| h.agent_preset.as_deref()),
            stored_state: None,
            holder: None,
            title: None,
        }
    }
}

/// A span of event time (milliseconds) as people read it: `850 ms`,
/// `12.5 s`, `3 min 20 s`, `2 h 05 min`, `3 d 4 h`.
pub(crate) fn human_ms(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} min {:02} s", ms / 60_000, ms / 1000 % 60),
        3_600_000..86_400_000 => format!("{} h {:02} min", ms / 3_600_000, ms / 60_000 % 60),
        _ => format!("{} d {} h", ms / 86_400_000, ms / 3_600_000 % 24),
    }
}

/// A byte count as people read it: `316 B`, `1.4 KiB`, `12.3 MiB`.
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Unix milliseconds as this machine's local time, to the minute
/// (`2026-12-05 09:03`), from the C library's time zone rules (`TZ`).
pub(crate) fn local_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    // SAFETY: an all-zero `tm` is a valid value for localtime_r to fill;
    // both pointers are valid for the call.
    let offset = utc_offset(secs);
    let local = iso_utc((secs + offset) * 1000);
    format!("{} {}", &local[..10], &local[11..16])
}

/// This machine's offset from UTC at Unix time `secs`, in seconds, from the
/// C library's time zone rules (`TZ`); 0 when unknown.
#[cfg(unix)]
fn utc_offset(secs: i64) -> i64 {
    // SAFETY: an all-zero `tm` is a valid value for localtime_r to fill;
    // both pointers are valid for the call.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        let t: libc::time_t = secs as libc::time_t;
        if libc::localtime_r(&t, &mut tm).is_null() {
            0
        } else {
            tm.tm_gmtoff as i64
        }
    }
}

/// This machine's offset from UTC at Unix time `secs`, in seconds, from
/// Windows's time zone settings; 0 when unknown.
#[cfg(windows)]
fn utc_offset(secs: i64) -> i64 {
    use windows_sys::Win32::Foundation::{FILETIME, SYSTEMTIME};
    use windows_sys::Win32::System::Time::{
        FileTimeToSystemTime, SystemTimeToFileTime, SystemTimeToTzSpecificLocalTime,
    };
    // 100 ns ticks since 1601-01-01.
    let ticks = (secs + 11_644_473_600) as u64 * 10_000_000;
    let utc = FILETIME {
        dwLowDateTime: ticks as u32,
        dwHighDateTime: (ticks >> 32) as u32,
    };
    // SAFETY: zeroed SYSTEMTIMEs and FILETIMEs are valid values; every
    // pointer is to a value we own, valid for the call.
    unsafe {
        let (mut st, mut local_st): (SYSTEMTIME, SYSTEMTIME) =
            (std::mem::zeroed(), std::mem::zeroed());
        let mut local: FILETIME = std::mem::zeroed();
        if FileTimeToSystemTime(&utc, &mut st) == 0
            || SystemTimeToTzSpecificLocalTime(std::ptr::null(), &st, &mut local_st) == 0
            || SystemTimeToFileTime(&local_st, &mut local) == 0
        {
            return 0;
        }
        let local = (u64::from(local.dwHighDateTime) << 32) | u64::from(local.dwLowDateTime);
        (local as i64 - ticks as i64) / 10_000_000
    }
}

/// An aligned text table: a header row, then rows; numeric columns are
/// right-aligned.
pub(crate) struct Table {
    rows: Vec<Vec<String>>,
    right: Vec<bool>,
}

impl Table {
    /// A table with these column headers; `right[i]` right-aligns column i.
    pub(crate) fn new(headers: &[&str], right: &[bool]) -> Table {
        Table {
            rows: vec![headers.iter().map(|h| (*h).to_owned()).collect()],
            right: right.to_vec(),
        }
    }

    /// A table without a header row.
    pub(crate) fn headless(right: &[bool]) -> Table {
        Table {
            rows: Vec::new(),
            right: right.to_vec(),
        }
    }

    /// Adds a row. Each cell is one line for a terminal
    /// ([`visible_line`](super::terminal::visible_line)): a cwd or a title
    /// from a log can neither break the layout nor reach the terminal as a
    /// control sequence.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(
            cells
                .into_iter()
                .map(|c| match super::terminal::visible_line(&c) {
                    std::borrow::Cow::Borrowed(_) => c,
                    std::borrow::Cow::Owned(shown) => shown,
                })
                .collect(),
        );
    }

    /// Writes the table, columns separated by two spaces.
    pub(crate) fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let columns = self.right.len();
        let mut widths = vec![0; columns];
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for row in &self.rows {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = " ".repeat(widths[i] - cell.chars().count());
                if self.right[i] {
                    line.push_str(&pad);
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    line.push_str(&pad);
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// A session id for text output: as is, unless it is empty, starts with a
/// quote, holds whitespace or control characters (which would break the
/// layout, or act on a terminal) or a lone UTF-16 surrogate (which has no
/// UTF-8); then as the JSON string `JSON.stringify` writes, which every id
/// argument also accepts, with DEL and the C1 controls (which JSON leaves
/// raw) spelled `\u007f`, `\u009b`, … as JSON allows.
pub(crate) fn display_id(id: &str) -> Cow<'_, str> {
    if id.is_empty()
        || id.starts_with('"')
        || jsstr::has_lone_surrogate(id)
        || id.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        let json = jsstr::to_json(id);
        let mut out = String::with_capacity(json.len());
        for c in json.chars() {
            if matches!(c, '\x7f' | '\u{80}'..='\u{9f}') {
                out.push_str(&format!("\\u{:04x}", c as u32));
            } else {
                out.push(c);
            }
        }
        Cow::Owned(out)
    } else {
        Cow::Borrowed(id)
    }
}

/// Serializes a session id as the JSON string of the JavaScript string it
/// spells (a lone surrogate as `\udXXX`), for `#[serde(serialize_with)]`.
pub(crate) fn id_json<S: serde::Serializer>(id: &&str, ser: S) -> Result<S::Ok, S::Error> {
    let raw = serde_json::value::RawValue::from_string(jsstr::to_json(id))
        .expect("JSON.stringify output is JSON");
    raw.serialize(ser)
}

/// Parses a session id argument: as given, or, when it is a JSON string
/// literal (`'"a\ud800"'`, as `display_id` prints ids that need it), the
/// string it denotes.
pub(crate) fn parse_id(arg: &str) -> Result<String, String> {
    let id = if arg.len() >= 2 && arg.starts_with('"') && arg.ends_with('"') {
        jsstr::from_json(arg).map_err(|why| format!("{arg} is not a JSON string: {why}"))?
    } else {
        arg.to_owned()
    };
    jsstr::check(&id)?;
    Ok(id)
}

/// Unix milliseconds as ISO-8601 UTC with milliseconds,
/// e.g. `2023-11-14T22:13:20.000Z`.
pub(crate) fn iso_utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// `civil_from_days`), so the CLI needs no date crate.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_shown_round_trip_and_carry_no_control_character() {
        for id in [
            "plain",
            "with space",
            "esc\u{1b}]0;x\u{7}",
            "del\u{7f}c1\u{9b}",
            "\"quoted",
            "",
        ] {
            let shown = display_id(id);
            assert!(
                !shown
                    .chars()
                    .any(|c| matches!(c, '\0'..='\x1f' | '\x7f' | '\u{80}'..='\u{9f}')),
                "{shown:?}"
            );
            let back = if shown.starts_with('"') {
                parse_id(&shown).unwrap()
            } else {
                shown.into_owned()
            };
            assert_eq!(back, id);
        }
        assert_eq!(display_id("del\u{7f}c1\u{9b}"), r#""del\u007fc1\u009b""#);
    }

    #[test]
    fn iso_times() {
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_utc(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(iso_utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso_utc(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn human_spans() {
        assert_eq!(human_ms(-5), "0 ms");
        assert_eq!(human_ms(999), "999 ms");
        assert_eq!(human_ms(1_500), "1.5 s");
        assert_eq!(human_ms(200_000), "3 min 20 s");
        assert_eq!(human_ms(7_500_000), "2 h 05 min");
        assert_eq!(human_ms(273_600_000), "3 d 4 h");
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.0 KiB");
        assert_eq!(human_bytes(1_500_000), "1.4 MiB");
        assert_eq!(human_bytes(5 << 40), "5.0 TiB");
        assert_eq!(human_bytes(u64::MAX), "16384.0 PiB");
    }

    #[test]
    fn table_aligns() {
        let mut t = Table::new(&["ID", "N", "STATE"], &[false, true, false]);
        t.row(vec!["a".into(), "100".into(), "clean".into()]);
        t.row(vec!["long-id".into(), "7".into(), "torn".into()]);
        let mut out = Vec::new();
        t.write(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "ID         N  STATE\na        100  clean\nlong-id    7  torn\n"
        );
    }

    #[test]
    fn odd_ids_are_quoted() {
        assert_eq!(display_id("s1"), "s1");
        assert_eq!(display_id("a b"), "\"a b\"");
        assert_eq!(display_id(""), "\"\"");
    }
}
