//! JavaScript-canonical JSON strings: the text `JSON.stringify` gives a
//! string, as upstream's writers produce it.

use std::fmt::Write as _;

// ---------------------------------------------------------------------------
// Canonical JSON strings
// ---------------------------------------------------------------------------

/// The text `JSON.stringify` gives the string a JSON string literal `raw`
/// (quotes included) denotes; `None` when `raw` is not a string literal.
/// Lone UTF-16 surrogates survive as `\udXXX` escapes, as JavaScript writes
/// them.
///
/// ```
/// use turnwal::backend::sqlite::codec::canonical_string;
/// assert_eq!(canonical_string(r#""a\u0041\/\u00e9\ud800""#).unwrap(), "\"aA/é\\ud800\"");
/// assert_eq!(canonical_string(r#""\ud83d\ude00\u001F""#).unwrap(), "\"😀\\u001f\"");
/// assert_eq!(canonical_string("1"), None);
/// ```
pub fn canonical_string(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    push_canonical_string(&mut out, raw)?;
    Some(out)
}

/// [`canonical_string`] appended to `out`; `None` (and `out` holding part
/// of it) when `raw` is not a string literal.
pub fn push_canonical_string(out: &mut String, raw: &str) -> Option<()> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    let bytes = inner.as_bytes();
    out.push('"');
    let mut high: Option<u16> = None;
    let mut i = 0;
    while i < bytes.len() {
        // A run of bytes that stay as they are (every byte but an escape,
        // a quote or a control character, which are ASCII: the run ends on
        // a character boundary), copied whole.
        let run = bytes[i..]
            .iter()
            .position(|&b| b == b'\\' || b == b'"' || b < 0x20)
            .map_or(bytes.len(), |n| i + n);
        if run > i {
            flush_high(out, &mut high);
            out.push_str(&inner[i..run]);
            i = run;
            continue;
        }
        match bytes[i] {
            b'\\' => {
                let escape = *bytes.get(i + 1)?;
                i += 2;
                let unit: u16 = match escape {
                    b'"' => 0x22,
                    b'\\' => 0x5c,
                    b'/' => 0x2f,
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => 0x0a,
                    b'r' => 0x0d,
                    b't' => 0x09,
                    b'u' => {
                        let hex = bytes.get(i..i + 4)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        i += 4;
                        u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?
                    }
                    _ => return None,
                };
                push_unit(out, &mut high, unit);
            }
            // A quote or a control character inside the literal.
            _ => return None,
        }
    }
    flush_high(out, &mut high);
    out.push('"');
    Some(())
}

fn push_unit(out: &mut String, high: &mut Option<u16>, unit: u16) {
    match unit {
        0xD800..=0xDBFF => {
            flush_high(out, high);
            *high = Some(unit);
        }
        0xDC00..=0xDFFF => match high.take() {
            Some(h) => {
                let code = 0x10000 + ((u32::from(h) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                push_char(out, char::from_u32(code).unwrap_or('\u{FFFD}'));
            }
            None => {
                let _ = write!(out, "\\u{unit:04x}");
            }
        },
        _ => {
            flush_high(out, high);
            push_char(out, char::from_u32(u32::from(unit)).unwrap_or('\u{FFFD}'));
        }
    }
}

fn flush_high(out: &mut String, high: &mut Option<u16>) {
    if let Some(h) = high.take() {
        let _ = write!(out, "\\u{h:04x}");
    }
}

fn push_char(out: &mut String, ch: char) {
    match ch {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => out.push(c),
    }
}
