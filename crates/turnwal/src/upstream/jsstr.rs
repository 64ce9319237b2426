//! JavaScript strings held in Rust strings.
//!
//! Session ids, cwds and the other header strings come from JavaScript
//! harnesses, where a string is any sequence of UTF-16 code units — a lone
//! surrogate (`"\ud800"`) included. Upstream keeps such a string exact: its
//! JSONL header stores the `\ud800` escape and its path encoding the unit
//! (`~D800`). A Rust `String` cannot hold a lone surrogate, so turnwal spells
//! one as two characters: the noncharacter U+10FFFF (Unicode reserves
//! noncharacters for exactly this kind of internal use) followed by
//! U+100000 + (unit − 0xD800), a Plane-16 private-use character. Every
//! string without U+10FFFF spells itself, so ordinary ids are untouched.
//!
//! The mapping is injective both ways. The two strings it cannot pair are
//! refused with a clear error, never altered: a Rust string whose U+10FFFF
//! is not followed by the private-use half ([`check`]), and a JavaScript
//! string that holds U+10FFFF itself ([`from_utf16`]).
//!
//! ```
//! use turnwal::jsstr;
//! let id = jsstr::from_utf16(&[0x61, 0xD800]).unwrap();
//! assert_eq!(id, "a\u{10FFFF}\u{100000}");
//! assert_eq!(jsstr::to_utf16(&id), [0x61, 0xD800]);
//! assert_eq!(jsstr::to_json(&id), r#""a\ud800""#);
//! assert_eq!(jsstr::from_json(r#""a\ud800""#).unwrap(), id);
//! assert_eq!(jsstr::display(&id), r"a\ud800");
//! ```

use std::borrow::Cow;

/// The character that starts a lone surrogate's spelling.
pub const MARK: char = '\u{10FFFF}';
const UNIT_BASE: u32 = 0x10_0000;

/// Whether `s` spells at least one lone surrogate.
pub fn has_lone_surrogate(s: &str) -> bool {
    s.contains(MARK)
}

/// Checks that `s` is a spelling: every U+10FFFF starts a lone surrogate's
/// spelling, and no spelled high surrogate is followed by a spelled low one
/// (in JavaScript the two units are one character, spelled as itself).
pub fn check(s: &str) -> Result<(), String> {
    let mut chars = s.chars();
    let mut after_high = false;
    while let Some(c) = chars.next() {
        if c != MARK {
            after_high = false;
            continue;
        }
        let Some(unit) = chars.next().and_then(surrogate_of) else {
            return Err(
                "U+10FFFF (a noncharacter) may appear only in turnwal's spelling of a lone \
                 UTF-16 surrogate: U+10FFFF followed by U+100000 + (unit - 0xD800)"
                    .into(),
            );
        };
        if after_high && unit >= 0xDC00 {
            return Err(
                "a spelled high surrogate followed by a spelled low one is a surrogate pair: \
                 write the character itself"
                    .into(),
            );
        }
        after_high = unit < 0xDC00;
    }
    Ok(())
}

fn surrogate_of(c: char) -> Option<u16> {
    let offset = (c as u32).checked_sub(UNIT_BASE)?;
    (offset < 0x800).then(|| 0xD800 + offset as u16)
}

fn spelling_of(unit: u16) -> [char; 2] {
    let second = char::from_u32(UNIT_BASE + u32::from(unit - 0xD800))
        .expect("U+100000..U+1007FF are characters");
    [MARK, second]
}

/// The pieces of a spelled string: runs of ordinary text and lone units.
enum Piece<'a> {
    Text(&'a str),
    Lone(u16),
}

fn pieces(s: &str) -> impl Iterator<Item = Piece<'_>> {
    let mut rest = s;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        match rest.find(MARK) {
            Some(0) => {
                let mut chars = rest[MARK.len_utf8()..].chars();
                match chars.next().and_then(surrogate_of) {
                    Some(unit) => {
                        rest = chars.as_str();
                        Some(Piece::Lone(unit))
                    }
                    // Not a spelling ([`check`] refuses it): the mark is text.
                    None => {
                        let (text, tail) = rest.split_at(MARK.len_utf8());
                        rest = tail;
                        Some(Piece::Text(text))
                    }
                }
            }
            Some(at) => {
                let (text, tail) = rest.split_at(at);
                rest = tail;
                Some(Piece::Text(text))
            }
            None => Some(Piece::Text(std::mem::take(&mut rest))),
        }
    })
}

/// The UTF-16 code units of the JavaScript string `s` spells.
pub fn to_utf16(s: &str) -> Vec<u16> {
    let mut out = Vec::with_capacity(s.len());
    for piece in pieces(s) {
        match piece {
            Piece::Text(text) => out.extend(text.encode_utf16()),
            Piece::Lone(unit) => out.push(unit),
        }
    }
    out
}

/// Spells a JavaScript string; refuses one holding U+10FFFF, which would
/// read back as the start of a spelling.
pub fn from_utf16(units: &[u16]) -> Result<String, String> {
    let mut out = String::with_capacity(units.len());
    for decoded in char::decode_utf16(units.iter().copied()) {
        match decoded {
            Ok(MARK) => {
                return Err(
                    "the string holds U+10FFFF, the noncharacter turnwal reserves to spell lone \
                     UTF-16 surrogates"
                        .into(),
                );
            }
            Ok(c) => out.push(c),
            Err(lone) => out.extend(spelling_of(lone.unpaired_surrogate())),
        }
    }
    Ok(out)
}

/// The WTF-8 bytes of the string: UTF-8, with a lone surrogate as its
/// three-byte generalized UTF-8 form (`ED A0 80` for U+D800).
pub fn to_wtf8(s: &str) -> Cow<'_, [u8]> {
    if !has_lone_surrogate(s) {
        return Cow::Borrowed(s.as_bytes());
    }
    let mut out = Vec::with_capacity(s.len());
    for piece in pieces(s) {
        match piece {
            Piece::Text(text) => out.extend_from_slice(text.as_bytes()),
            Piece::Lone(unit) => out.extend_from_slice(&[
                0xE0 | (unit >> 12) as u8,
                0x80 | ((unit >> 6) & 0x3F) as u8,
                0x80 | (unit & 0x3F) as u8,
            ]),
        }
    }
    Cow::Owned(out)
}

/// Inverts [`to_wtf8`]; `None` for bytes that are not WTF-8.
pub fn from_wtf8(bytes: &[u8]) -> Option<String> {
    let mut units = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        let (valid, tail) = match std::str::from_utf8(rest) {
            Ok(text) => (text, &[][..]),
            Err(e) => {
                let (valid, tail) = rest.split_at(e.valid_up_to());
                (std::str::from_utf8(valid).ok()?, tail)
            }
        };
        units.extend(valid.encode_utf16());
        rest = match tail {
            [] => tail,
            [0xED, b1 @ 0xA0..=0xBF, b2 @ 0x80..=0xBF, more @ ..] => {
                units.push(0xD000 | (u16::from(b1 & 0x3F) << 6) | u16::from(b2 & 0x3F));
                more
            }
            _ => return None,
        };
    }
    from_utf16(&units).ok()
}

/// Appends `JSON.stringify(s)` of the JavaScript string `s` spells: a lone
/// surrogate as a lowercase `\udXXX` escape, everything else as
/// `JSON.stringify` and serde_json both write it.
pub fn write_json(out: &mut Vec<u8>, s: &str) {
    if !has_lone_surrogate(s) {
        serde_json::to_writer(out, s).expect("writing to a Vec cannot fail");
        return;
    }
    out.push(b'"');
    for piece in pieces(s) {
        match piece {
            Piece::Text(text) => {
                let start = out.len();
                serde_json::to_writer(&mut *out, text).expect("writing to a Vec cannot fail");
                // Drop the quotes serde_json put around the run.
                out.remove(start);
                out.pop();
            }
            Piece::Lone(unit) => out.extend_from_slice(format!("\\u{unit:04x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// [`write_json`] into a new string.
pub fn to_json(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len() + 2);
    write_json(&mut out, s);
    String::from_utf8(out).expect("JSON output is UTF-8")
}

/// Decodes a JSON string literal (quotes included) to the JavaScript string
/// it denotes, spelled; `Err` says why it is not one.
pub fn from_json(raw: &str) -> Result<String, String> {
    if let Ok(s) = serde_json::from_str::<String>(raw) {
        if s.contains(MARK) {
            return from_utf16(&s.encode_utf16().collect::<Vec<_>>());
        }
        return Ok(s);
    }
    // serde_json refuses lone surrogate escapes; decode to units ourselves.
    let inner = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .ok_or("not a JSON string")?;
    let mut units = Vec::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let unit = match chars.next().ok_or("a string ends inside an escape")? {
                    '"' => 0x22,
                    '\\' => 0x5C,
                    '/' => 0x2F,
                    'b' => 0x08,
                    'f' => 0x0C,
                    'n' => 0x0A,
                    'r' => 0x0D,
                    't' => 0x09,
                    'u' => {
                        let hex: String = chars.by_ref().take(4).collect();
                        if hex.len() != 4 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                            return Err("a \\u escape needs four hex digits".into());
                        }
                        u16::from_str_radix(&hex, 16).map_err(|e| e.to_string())?
                    }
                    other => return Err(format!("invalid escape \\{other}")),
                };
                units.push(unit);
            }
            '"' => return Err("an unescaped quote inside a string".into()),
            c if (c as u32) < 0x20 => return Err("a control character inside a string".into()),
            c => {
                let mut buf = [0u16; 2];
                units.extend_from_slice(c.encode_utf16(&mut buf));
            }
        }
    }
    from_utf16(&units)
}

/// The string for people: a lone surrogate shown as `\udXXX`.
pub fn display(s: &str) -> Cow<'_, str> {
    if !has_lone_surrogate(s) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    for piece in pieces(s) {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Lone(unit) => out.push_str(&format!("\\u{unit:04x}")),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lone_surrogate_round_trips() {
        for unit in 0xD800..=0xDFFFu16 {
            let units = [0x78, unit, 0x79];
            let spelled = from_utf16(&units).unwrap();
            check(&spelled).unwrap();
            assert!(has_lone_surrogate(&spelled));
            assert_eq!(to_utf16(&spelled), units);
            let json = to_json(&spelled);
            assert_eq!(json, format!("\"x\\u{unit:04x}y\""));
            assert_eq!(from_json(&json).unwrap(), spelled);
            assert_eq!(from_json(&format!("\"x\\u{unit:04X}y\"")).unwrap(), spelled);
            let wtf8 = to_wtf8(&spelled);
            assert_eq!(wtf8.len(), 5);
            assert_eq!(wtf8[1], 0xED);
            assert_eq!(from_wtf8(&wtf8).unwrap(), spelled);
        }
    }

    #[test]
    fn pairs_and_ordinary_strings_spell_themselves() {
        for s in [
            "",
            "abc",
            "é",
            "😀",
            "\u{10FFFE}",
            "a\"b\\c\n\u{1}",
            "\u{100000}",
        ] {
            let units: Vec<u16> = s.encode_utf16().collect();
            assert_eq!(from_utf16(&units).unwrap(), s);
            assert_eq!(to_utf16(s), units);
            assert_eq!(to_json(s), serde_json::to_string(s).unwrap());
            assert_eq!(from_json(&to_json(s)).unwrap(), s);
            assert_eq!(&*to_wtf8(s), s.as_bytes());
            assert_eq!(from_wtf8(s.as_bytes()).unwrap(), s);
            assert_eq!(display(s), s);
            check(s).unwrap();
        }
        // A surrogate pair written as two escapes is one character.
        assert_eq!(from_json(r#""\ud83d\ude00""#).unwrap(), "😀");
        // A high surrogate followed by another high one: both lone.
        assert_eq!(
            to_utf16(&from_json(r#""\ud800\ud800""#).unwrap()),
            [0xD800, 0xD800]
        );
        // A low surrogate before a high one: both lone.
        assert_eq!(
            to_json(&from_utf16(&[0xDC00, 0xD800]).unwrap()),
            r#""\udc00\ud800""#
        );
    }

    #[test]
    fn the_unpairable_strings_are_refused() {
        // U+10FFFF in JavaScript is the pair DBFF DFFF.
        let err = from_utf16(&[0x61, 0xDBFF, 0xDFFF]).unwrap_err();
        assert!(err.contains("U+10FFFF"), "{err}");
        assert!(from_json("\"\u{10FFFF}\"").is_err());
        assert!(from_json(r#""\udbff\udfff""#).is_err());
        for bad in ["\u{10FFFF}", "a\u{10FFFF}b", "\u{10FFFF}\u{100800}"] {
            assert!(check(bad).unwrap_err().contains("noncharacter"), "{bad:?}");
        }
        let pair = "\u{10FFFF}\u{100000}\u{10FFFF}\u{100400}";
        assert!(check(pair).unwrap_err().contains("surrogate pair"));
        check("\u{10FFFF}\u{100400}\u{10FFFF}\u{100000}").unwrap();
        check("\u{10FFFF}\u{100000}x\u{10FFFF}\u{100400}").unwrap();
    }

    #[test]
    fn bytes_that_are_not_wtf8_are_refused() {
        for bad in [&b"\xff"[..], b"a\xed\x9f\xbf\x80", b"\xed\xa0", b"\xc0\x80"] {
            assert_eq!(from_wtf8(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn malformed_json_strings_are_refused() {
        for bad in [
            r#"abc"#,
            r#""\x""#,
            r#""\u12""#,
            r#""\u12g4""#,
            "\"a\nb\"",
            r#""a"b""#,
        ] {
            assert!(from_json(bad).is_err(), "{bad}");
        }
    }
}
