//! Durations as people write them (`90m`, `30d`, `3s`): one checked parser
//! for the command line (`--older-than`, `--since`) and the environment
//! (`TURNWAL_LEASE`).

use std::time::Duration;

/// A duration as `N` followed by `ms`, `s`, `m`, `h`, `d` or `w` (`90m`,
/// `30d`, `500ms`). More digits than a `u64` holds saturate: a spelling of
/// "longer than anything" is not refused while another is accepted.
///
/// ```
/// use std::time::Duration;
/// use turnwal::duration::parse;
/// assert_eq!(parse("90m"), Ok(Duration::from_secs(5400)));
/// assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
/// assert!(parse("12").unwrap_err().contains("needs a unit"));
/// ```
pub fn parse(text: &str) -> Result<Duration, String> {
    let unit_at = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} needs a unit: ms, s, m, h, d or w (as in 30d)"))?;
    let (digits, unit) = text.split_at(unit_at);
    if digits.is_empty() {
        return Err(format!("{text:?} is not a duration (as in 90m, 12h, 30d)"));
    }
    let n: u64 = digits.parse().unwrap_or(u64::MAX);
    let millis = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 604_800_000,
        _ => return Err(format!("{text:?}: the unit is ms, s, m, h, d or w")),
    };
    Ok(Duration::from_millis(n.saturating_mul(millis)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_saturation_and_refusals() {
        assert_eq!(parse("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("2w"), Ok(Duration::from_secs(1_209_600)));
        assert_eq!(parse("3s"), Ok(Duration::from_secs(3)));
        assert_eq!(parse("0ms"), Ok(Duration::ZERO));
        assert!(parse("12").unwrap_err().contains("needs a unit"));
        assert!(parse("3y").is_err());
        assert!(parse("3 s").is_err());
        assert_eq!(
            parse("99999999999999999999d"),
            Ok(Duration::from_millis(u64::MAX))
        );
        assert!(parse("d").is_err());
        assert!(parse("").is_err());
    }
}
