//! A validating JSON scanner that builds nothing: one pass checks that a
//! text is exactly one JSON value (RFC 8259) and, for an event's `data`,
//! picks out the few fields the turn contract reads ([`Facts`]). It replaces
//! a validation pass plus a second parse, so ingest reads each payload once.
//!
//! Input must already be valid UTF-8 (`&str`): strings are only checked for
//! control characters and escape syntax. `\uXXXX` escapes are accepted
//! whatever they encode, lone UTF-16 surrogates included, as JavaScript
//! writes them. A value nests as deep as its size allows; only the
//! objects a caller walks member by member ([`Scanner::object`], the few
//! levels the contract reads) are limited to [`MAX_DEPTH`].

use std::fmt;

/// Deepest nesting of the objects a caller walks member by member
/// ([`Scanner::object`]); values inside them nest without limit.
pub const MAX_DEPTH: usize = 512;

/// Where and why a text is not JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// Byte offset of the problem.
    pub offset: usize,
    /// What is wrong.
    pub message: &'static str,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.message, self.offset)
    }
}

impl std::error::Error for JsonError {}

/// A number field as the contract sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Num {
    /// The key is absent.
    #[default]
    Absent,
    /// A non-negative integer without fraction or exponent.
    Int(u64),
    /// Present but not a non-negative integer (or too large for u64).
    Invalid,
}

impl Num {
    /// The value, when it is a non-negative integer.
    pub fn get(self) -> Option<u64> {
        match self {
            Num::Int(n) => Some(n),
            _ => None,
        }
    }
}

/// A span of the scanned text: the raw contents of a string (between its
/// quotes, escapes as written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Span {
    start: u32,
    len: u32,
    present: bool,
}

impl Span {
    /// The span's bytes within `text`.
    pub fn bytes_of<'a>(&self, text: &'a [u8]) -> Option<&'a [u8]> {
        let (start, len) = (self.start as usize, self.len as usize);
        if self.present {
            text.get(start..start + len)
        } else {
            None
        }
    }

    fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            len: (end - start) as u32,
            present: true,
        }
    }

    /// The span's text within `text` (the text it was scanned from).
    pub fn of<'a>(&self, text: &'a str) -> Option<&'a str> {
        self.present
            .then(|| &text[self.start as usize..(self.start + self.len) as usize])
    }
}

/// The fields of an event's `data` the turn contract reads, found while
/// validating it. Call ids are kept as their raw JSON text (spans into
/// `data`), so matching a result to its call compares exact spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Facts {
    /// `data` is an object.
    pub object: bool,
    /// `data.turn`.
    pub turn: Num,
    /// `data.step`.
    pub step: Num,
    /// `data.callId` when it is a string.
    pub call_id: Span,
    /// `data.callId` is present but not a string.
    pub call_id_invalid: bool,
    /// `data.message.source.callId` when it is a string.
    pub source_call_id: Span,
    /// `data.error.code` when it is a string, as spelled (escapes kept).
    pub error_code: Span,
    /// `data` has keys other than `turn` and `reason`.
    pub other_keys: bool,
    /// What `data.reason` is.
    pub reason: Reason,
}

impl Facts {
    /// The same facts with spans relative to a text starting `by` bytes
    /// later (the `data` value inside a whole event line).
    pub fn relative_to(mut self, by: usize) -> Facts {
        for span in [
            &mut self.call_id,
            &mut self.source_call_id,
            &mut self.error_code,
        ] {
            if span.present {
                span.start -= by as u32;
            }
        }
        self
    }
}

/// `data.reason`, as `turn/end` and `request/header` read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Reason {
    /// Absent.
    #[default]
    Absent,
    /// The string `"fallback"`.
    Fallback,
    /// An object with a string `kind`.
    Object {
        /// `kind` is `completed`, `blocked`, `max-tokens` or `interrupted`.
        plain: bool,
        /// The object has keys other than `kind`.
        other_keys: bool,
    },
    /// An object without a string `kind`.
    ObjectWithoutKind,
    /// Anything else.
    Other,
}

/// Checks that `text` is one JSON value, surrounded only by whitespace.
pub fn validate(text: &str) -> Result<(), JsonError> {
    let mut s = Scanner::new(text.as_bytes());
    s.ws();
    s.value(0)?;
    s.end()
}

/// Validates `data` and finds its [`Facts`] in the same pass. `data` must
/// hold exactly one value, without surrounding whitespace.
pub fn data_facts(data: &str) -> Result<Facts, JsonError> {
    let mut s = Scanner::new(data.as_bytes());
    let facts = s.data_value()?;
    s.end()?;
    Ok(facts)
}

/// A cursor over JSON bytes.
pub struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Whether strings must be checked for UTF-8 (the input was not a `str`).
    check_utf8: bool,
}

impl<'a> Scanner<'a> {
    /// A scanner at the start of `bytes`, which are known to be UTF-8 (they
    /// come from a `str`).
    pub fn new(bytes: &'a [u8]) -> Scanner<'a> {
        Scanner {
            bytes,
            pos: 0,
            check_utf8: false,
        }
    }

    /// A scanner over bytes of unknown encoding: every string with non-ASCII
    /// bytes is checked for UTF-8. Since JSON allows non-ASCII bytes only
    /// inside strings, a text this scanner accepts is valid UTF-8 — one pass
    /// instead of a separate check of the whole text.
    pub fn new_unchecked(bytes: &'a [u8]) -> Scanner<'a> {
        Scanner {
            bytes,
            pos: 0,
            check_utf8: true,
        }
    }

    /// The current offset.
    pub fn pos(&self) -> usize {
        self.pos
    }

    fn err<T>(&self, message: &'static str) -> Result<T, JsonError> {
        // Whatever was expected, running out of input is the clearer story.
        let message = if self.pos >= self.bytes.len() {
            "unexpected end of input"
        } else {
            message
        };
        Err(JsonError {
            offset: self.pos,
            message,
        })
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Skips whitespace.
    pub fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    /// Requires the end of input (after whitespace).
    pub fn end(&mut self) -> Result<(), JsonError> {
        self.ws();
        if self.pos != self.bytes.len() {
            return self.err("trailing characters");
        }
        Ok(())
    }

    /// Consumes `byte` after whitespace.
    pub fn expect(&mut self, byte: u8, message: &'static str) -> Result<(), JsonError> {
        self.ws();
        if self.peek() != Some(byte) {
            return self.err(message);
        }
        self.pos += 1;
        Ok(())
    }

    /// Validates one value at the cursor (whitespace before it skipped).
    /// Arrays and objects are walked with a stack of their own, not by
    /// recursion, so a value nests as deep as its size allows (upstream
    /// stores whatever `JSON.stringify` wrote: a hook's parsed AST can be
    /// thousands of levels deep); `depth` is the caller's, unused here.
    pub fn value(&mut self, depth: usize) -> Result<(), JsonError> {
        let _ = depth;
        // The closer each open container awaits, innermost last.
        let mut open: Vec<u8> = Vec::new();
        'value: loop {
            self.ws();
            match self.peek() {
                Some(b'{') => {
                    self.pos += 1;
                    self.ws();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                    } else {
                        open.push(b'}');
                        self.key()?;
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    self.pos += 1;
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                    } else {
                        open.push(b']');
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    self.string()?;
                }
                Some(b'-' | b'0'..=b'9') => {
                    self.number()?;
                }
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'n') => self.literal(b"null")?,
                Some(_) => return self.err("expected a value"),
                None => return self.err("unexpected end of input"),
            }
            // A value ended: close every container that ends with it.
            loop {
                let Some(&closer) = open.last() else {
                    return Ok(());
                };
                self.ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        if closer == b'}' {
                            self.key()?;
                        }
                        continue 'value;
                    }
                    Some(c) if c == closer => {
                        self.pos += 1;
                        open.pop();
                    }
                    _ if closer == b'}' => return self.err("expected ',' or '}' in an object"),
                    _ => return self.err("expected ',' or ']' in an array"),
                }
            }
        }
    }

    /// An object member's key and its colon (whitespace before each
    /// skipped).
    fn key(&mut self) -> Result<(), JsonError> {
        self.ws();
        if self.peek() != Some(b'"') {
            return self.err("expected a string key");
        }
        self.string()?;
        self.expect(b':', "expected ':' after an object key")
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), JsonError> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            self.err("invalid literal")
        }
    }

    /// Scans an object, calling `member(scanner, key, depth)` with the
    /// cursor at each member's value (whitespace not yet skipped).
    pub fn object(
        &mut self,
        depth: usize,
        mut member: impl FnMut(&mut Self, Span, usize) -> Result<(), JsonError>,
    ) -> Result<(), JsonError> {
        if depth > MAX_DEPTH {
            return self.err("nesting too deep");
        }
        self.pos += 1; // '{'
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return self.err("expected a string key");
            }
            let key = self.string()?;
            self.expect(b':', "expected ':' after an object key")?;
            member(self, key, depth)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return self.err("expected ',' or '}' in an object"),
            }
        }
    }

    /// Scans a string at the cursor (which is on its opening quote) and
    /// returns the span of its raw contents.
    pub fn string(&mut self) -> Result<Span, JsonError> {
        self.pos += 1; // '"'
        let start = self.pos;
        let bytes = self.bytes;
        let mut non_ascii = false;
        loop {
            // The common case: a run of plain bytes, many at a time.
            self.pos = skip_plain(bytes, self.pos, &mut non_ascii);
            match self.peek() {
                Some(b'"') => {
                    if non_ascii
                        && self.check_utf8
                        && simdutf8::basic::from_utf8(&bytes[start..self.pos]).is_err()
                    {
                        let valid = std::str::from_utf8(&bytes[start..self.pos])
                            .err()
                            .map_or(0, |e| e.valid_up_to());
                        return Err(JsonError {
                            offset: start + valid,
                            message: "invalid UTF-8 in a string",
                        });
                    }
                    let span = Span::new(start, self.pos);
                    self.pos += 1;
                    return Ok(span);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 1
                        }
                        Some(b'u') => {
                            let hex = bytes.get(self.pos + 1..self.pos + 5);
                            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                                return self.err("invalid \\u escape");
                            }
                            self.pos += 5;
                        }
                        _ => return self.err("invalid escape"),
                    }
                }
                Some(_) => return self.err("control character in a string"),
                None => return self.err("unterminated string"),
            }
        }
    }

    /// Scans a number; returns its value when it is a non-negative integer.
    pub fn number(&mut self) -> Result<Num, JsonError> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let mut value: Option<u64> = Some(0);
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                while let Some(d @ b'0'..=b'9') = self.peek() {
                    value = value
                        .and_then(|v| v.checked_mul(10))
                        .and_then(|v| v.checked_add(u64::from(d - b'0')));
                    self.pos += 1;
                }
            }
            _ => return self.err("invalid number"),
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            integer = false;
            self.pos += 1;
            self.digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            integer = false;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.digits()?;
        }
        Ok(match (negative, integer, value) {
            (false, true, Some(v)) => Num::Int(v),
            _ => Num::Invalid,
        })
    }

    fn digits(&mut self) -> Result<(), JsonError> {
        if !matches!(self.peek(), Some(b'0'..=b'9')) {
            return self.err("invalid number");
        }
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        Ok(())
    }

    /// Scans an event's `data` value, collecting [`Facts`].
    pub fn data_value(&mut self) -> Result<Facts, JsonError> {
        let mut facts = Facts::default();
        self.ws();
        if self.peek() != Some(b'{') {
            self.value(0)?;
            return Ok(facts);
        }
        facts.object = true;
        let text = self.bytes;
        self.object(1, |s, key, depth| {
            match key_name(text, key) {
                b"turn" => facts.turn = s.number_field(depth)?,
                b"step" => {
                    facts.other_keys = true;
                    facts.step = s.number_field(depth)?;
                }
                b"callId" => {
                    facts.other_keys = true;
                    s.ws();
                    if s.peek() == Some(b'"') {
                        facts.call_id = s.string()?;
                    } else {
                        facts.call_id_invalid = true;
                        s.value(depth)?;
                    }
                }
                b"message" => {
                    facts.other_keys = true;
                    s.nested(depth, &[b"source", b"callId"], &mut |s| {
                        facts.source_call_id = s.string()?;
                        Ok(())
                    })?;
                }
                b"error" => {
                    facts.other_keys = true;
                    s.nested(depth, &[b"code"], &mut |s| {
                        facts.error_code = s.string()?;
                        Ok(())
                    })?;
                }
                b"reason" => facts.reason = s.reason(depth)?,
                _ => {
                    facts.other_keys = true;
                    s.value(depth)?;
                }
            }
            Ok(())
        })?;
        Ok(facts)
    }

    fn number_field(&mut self, depth: usize) -> Result<Num, JsonError> {
        self.ws();
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => self.value(depth).map(|()| Num::Invalid),
        }
    }

    /// Follows `path` through nested objects to a string and calls `found`
    /// with the cursor on it; validates everything else on the way.
    fn nested(
        &mut self,
        depth: usize,
        path: &[&[u8]],
        found: &mut dyn FnMut(&mut Self) -> Result<(), JsonError>,
    ) -> Result<(), JsonError> {
        self.ws();
        match (path.split_first(), self.peek()) {
            (None, Some(b'"')) => found(self),
            (Some((head, rest)), Some(b'{')) => {
                let text = self.bytes;
                self.object(depth + 1, |s, key, depth| {
                    if key_name(text, key) == *head {
                        s.nested(depth, rest, found)
                    } else {
                        s.value(depth)
                    }
                })
            }
            _ => self.value(depth),
        }
    }

    fn reason(&mut self, depth: usize) -> Result<Reason, JsonError> {
        self.ws();
        match self.peek() {
            Some(b'"') => {
                let span = self.string()?;
                Ok(if key_name(self.bytes, span) == b"fallback" {
                    Reason::Fallback
                } else {
                    Reason::Other
                })
            }
            Some(b'{') => {
                let text = self.bytes;
                let (mut kind, mut other_keys) = (None, false);
                self.object(depth + 1, |s, key, depth| {
                    s.ws();
                    if key_name(text, key) == b"kind" && s.peek() == Some(b'"') {
                        let span = s.string()?;
                        kind = Some(matches!(
                            key_name(text, span),
                            b"completed" | b"blocked" | b"max-tokens" | b"interrupted"
                        ));
                        Ok(())
                    } else {
                        other_keys = true;
                        s.value(depth)
                    }
                })?;
                Ok(match kind {
                    Some(plain) => Reason::Object { plain, other_keys },
                    None => Reason::ObjectWithoutKind,
                })
            }
            _ => self.value(depth).map(|()| Reason::Other),
        }
    }
}

/// The offset of the first byte at or after `pos` that ends a run of plain
/// string bytes: a quote, a backslash or a control character. Sets
/// `non_ascii` if the run has a byte >= 0x80.
fn skip_plain(bytes: &[u8], mut pos: usize, non_ascii: &mut bool) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8,
        };
        // SAFETY: SSE2 is part of the x86_64 baseline, and every 16-byte
        // unaligned load lies inside `bytes` (the loop condition).
        unsafe {
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            let control_max = _mm_set1_epi8(0x1f);
            while pos + 16 <= bytes.len() {
                let v = _mm_loadu_si128(bytes.as_ptr().add(pos).cast::<__m128i>());
                // A byte is below 0x20 exactly when max(byte, 0x1f) == 0x1f.
                let control = _mm_cmpeq_epi8(_mm_max_epu8(v, control_max), control_max);
                let stop = _mm_or_si128(
                    _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                    control,
                );
                let stops = _mm_movemask_epi8(stop) as u32;
                let highs = _mm_movemask_epi8(v) as u32;
                if stops != 0 {
                    let n = stops.trailing_zeros();
                    *non_ascii |= highs & ((1 << n) - 1) != 0;
                    return pos + n as usize;
                }
                *non_ascii |= highs != 0;
                pos += 16;
            }
        }
    }
    while let Some(&b) = bytes.get(pos) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        *non_ascii |= b >= 0x80;
        pos += 1;
    }
    pos
}

/// A key's raw bytes (escapes as written: a key spelled with escapes does not
/// match, which JSON writers never do for these ASCII names).
fn key_name(text: &[u8], span: Span) -> &[u8] {
    &text[span.start as usize..(span.start + span.len) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_json_allows() {
        for text in [
            "0",
            "-0",
            "-0.0",
            "1e+21",
            "1E-5",
            "123456789012345678901234567890",
            "true",
            "false",
            "null",
            r#""\ud800""#,
            r#""\u00e9\n\t\"\\\/""#,
            "[]",
            "{}",
            r#"{"a":[1,{"b":null}]}"#,
            " \n[ 1 , 2 ]\t",
            "\"日本🙂\"",
        ] {
            assert_eq!(validate(text), Ok(()), "{text}");
            assert!(
                serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok(),
                "serde agrees on {text}"
            );
        }
    }

    #[test]
    fn rejects_what_json_forbids() {
        for (text, message) in [
            ("NaN", "expected a value"),
            ("Infinity", "expected a value"),
            ("01", "trailing characters"),
            ("1.", "unexpected end of input"),
            ("1.x", "invalid number"),
            (".5", "expected a value"),
            ("-", "unexpected end of input"),
            ("-x", "invalid number"),
            ("1e", "unexpected end of input"),
            ("1ex", "invalid number"),
            ("[1,]", "expected a value"),
            ("{\"a\":1,}", "expected a string key"),
            ("{'a':1}", "expected a string key"),
            ("\"a\u{1}\"", "control character in a string"),
            (r#""\x""#, "invalid escape"),
            (r#""\u12""#, "invalid \\u escape"),
            ("\"abc", "unexpected end of input"),
            ("[1,", "unexpected end of input"),
            ("{\"a\":1", "unexpected end of input"),
            ("[1] x", "trailing characters"),
            ("", "unexpected end of input"),
            ("tru", "invalid literal"),
            ("{\"a\" 1}", "expected ':' after an object key"),
        ] {
            assert_eq!(
                validate(text).map_err(|e| e.message),
                Err(message),
                "{text:?}"
            );
        }
        // Nesting is bounded by size, not by a recursion limit: a million
        // levels of arrays and objects, and the errors inside them found.
        let n = 1_000_000;
        let deep = "[".repeat(n) + &"]".repeat(n);
        assert_eq!(validate(&deep), Ok(()));
        let objects = r#"{"a":"#.repeat(n) + "[1,{}]" + &"}".repeat(n);
        assert_eq!(validate(&objects), Ok(()));
        let unclosed = "[".repeat(n) + &"]".repeat(n - 1);
        assert_eq!(
            validate(&unclosed),
            Err(JsonError {
                offset: 2 * n - 1,
                message: "unexpected end of input"
            })
        );
        let bad_key = r#"{"a":"#.repeat(1000) + "{1:2}" + &"}".repeat(1001);
        assert_eq!(
            validate(&bad_key).map_err(|e| e.message),
            Err("expected a string key")
        );
    }

    #[test]
    fn facts_are_found_in_one_pass() {
        let data = r#"{"turn":3,"step":2,"message":{"id":"m","source":{"kind":"tool","callId":"c\"1"}},"error":{"name":"X","code":"TOOL_NOT_STARTED"},"callId":"k"}"#;
        let f = data_facts(data).unwrap();
        assert_eq!((f.turn, f.step), (Num::Int(3), Num::Int(2)));
        assert_eq!(f.source_call_id.of(data), Some(r#"c\"1"#));
        assert_eq!(f.call_id.of(data), Some("k"));
        assert_eq!(f.error_code.of(data), Some("TOOL_NOT_STARTED"));
        assert!(f.other_keys && f.object);

        let f = data_facts(r#"{"turn":1,"reason":{"kind":"completed"}}"#).unwrap();
        assert_eq!(
            f.reason,
            Reason::Object {
                plain: true,
                other_keys: false
            }
        );
        assert!(!f.other_keys);
        let f = data_facts(r#"{"turn":1.0,"reason":{"kind":"x","a":1},"z":0}"#).unwrap();
        assert_eq!(
            (f.turn, f.reason, f.other_keys),
            (
                Num::Invalid,
                Reason::Object {
                    plain: false,
                    other_keys: true
                },
                true
            )
        );
        let f = data_facts(r#"{"turn":-1,"reason":"fallback","step":"2"}"#).unwrap();
        assert_eq!(
            (f.turn, f.step, f.reason),
            (Num::Invalid, Num::Invalid, Reason::Fallback)
        );
        assert_eq!(data_facts("[1,2]").unwrap(), Facts::default());
        assert!(data_facts(r#"{"turn":1,"message":{"source":{"callId":"a\q"}}}"#).is_err());
    }
}
