//! Times and durations on the command line: `--since 2026-12-01`,
//! `--since 2h`, `--older-than 30d`. UTC throughout; no date crate.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub(crate) use turnwal::duration::parse as parse_duration;

/// The moment `back` before `now` (unix ms), or `None` when that is
/// before the epoch: a duration longer than the time since 1970 reaches
/// back past every time a session can have been written, so the callers
/// read it as "nothing is that old" (`prune`) or "since the beginning"
/// (`--since`). Checked, never wrapped: `9999999999999999s` is 3.2e8
/// years, not a time a second ago.
pub(crate) fn ago(now: i64, back: Duration) -> Option<i64> {
    let back = i64::try_from(back.as_millis()).ok()?;
    (back <= now).then(|| now - back)
}

/// Now, in unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A point in time as unix milliseconds: a duration back from `now` (`2h`,
/// `7d`), or a UTC date or date-time (`2026-12-01`, `2026-12-01T08:30`,
/// `2026-12-01T08:30:00Z`, `2026-12-01T08:30:00.250Z`).
pub(crate) fn parse_time(text: &str, now: i64) -> Result<i64, String> {
    if let Ok(back) = parse_duration(text) {
        return Ok(ago(now, back).unwrap_or(i64::MIN));
    }
    let bad = || {
        format!(
            "{text:?} is neither a duration (2h, 7d) nor a UTC date or time \
             (2026-12-01, 2026-12-01T08:30:00Z)"
        )
    };
    let text = text.strip_suffix('Z').unwrap_or(text);
    let (date, time) = text.split_once('T').unwrap_or((text, ""));
    let mut d = date.split('-');
    let field = |it: &mut std::str::Split<'_, char>, digits: usize| -> Result<i64, String> {
        let part = it.next().ok_or_else(bad)?;
        if part.len() != digits || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        part.parse().map_err(|_| bad())
    };
    let (y, m, day) = (field(&mut d, 4)?, field(&mut d, 2)?, field(&mut d, 2)?);
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return Err(bad());
    }
    let (mut hh, mut mm, mut ss, mut ms) = (0, 0, 0, 0);
    if !time.is_empty() {
        let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
        let mut t = hms.split(':');
        hh = field(&mut t, 2)?;
        mm = field(&mut t, 2)?;
        if let Some(s) = t.next() {
            if s.len() != 2 || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            ss = s.parse().map_err(|_| bad())?;
        }
        if t.next().is_some() || hh > 23 || mm > 59 || ss > 60 {
            return Err(bad());
        }
        if !frac.is_empty() {
            if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            ms = format!("{frac:0<3}").parse().map_err(|_| bad())?;
        }
    }
    let days = days_from_civil(y, m, day);
    Ok((((days * 24 + hh) * 60 + mm) * 60 + ss) * 1000 + ms)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`, the inverse of the formatter's `civil_from_days`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::output::iso_utc;

    #[test]
    fn durations_and_times() {
        let now = 1_700_000_000_000;
        assert_eq!(parse_time("1h", now), Ok(now - 3_600_000));
        assert_eq!(parse_time("2023-11-14", now), Ok(1_699_920_000_000));
        assert_eq!(
            parse_time("2023-11-14T22:13:20.123Z", now),
            Ok(1_700_000_000_123)
        );
        assert_eq!(parse_time("2023-11-14T22:13", now), Ok(1_699_999_980_000));
        assert_eq!(
            parse_time("2023-11-14T22:13:20.5", now),
            Ok(1_700_000_000_500)
        );
        for bad in [
            "2023-13-01",
            "2023-1-01",
            "yesterday",
            "2023-11-14T25:00",
            "2023-11-14T22:13:20.1234",
        ] {
            assert!(parse_time(bad, now).is_err(), "{bad}");
        }
        // Longer than the time since the epoch: since the beginning, never
        // a wrap into the future.
        assert_eq!(parse_time("9999999999999999s", now), Ok(i64::MIN));
        assert_eq!(parse_time("19674d", now), Ok(now - 19674 * 86_400_000));
        assert_eq!(parse_time("19676d", now), Ok(i64::MIN));
        assert_eq!(ago(now, Duration::from_secs(u64::MAX)), None);
        assert_eq!(ago(now, Duration::from_millis(now as u64)), Some(0));
        assert_eq!(ago(now, Duration::from_millis(now as u64 + 1)), None);
        for ms in [0, 951_782_400_000, 1_700_000_000_123, -86_400_000] {
            assert_eq!(parse_time(&iso_utc(ms), now), Ok(ms), "{}", iso_utc(ms));
        }
    }
}
