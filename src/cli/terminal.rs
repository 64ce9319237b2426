//! What reaches a terminal. Event data is the harness's, and much of it is
//! the world's: a tool result holds a web page, a model name a provider's
//! string. A terminal acts on control characters — ESC starts sequences
//! that retitle it, clear it, move the cursor, or set the clipboard (OSC
//! 52) — so nothing turnwal prints for people may carry one from a log.
//!
//! Every human-readable output shows C0 controls (other than newline and
//! tab inside text bodies), DEL and the C1 controls (U+0080–U+009F, which
//! some terminals act on as 8-bit sequences) as visible escapes: `\x1b`,
//! `\x7f`, `\u{9b}`; a one-line field also shows a newline as `\n` and a tab
//! as `\t`. JSON output (`cat`, `tail`, `export`, every `--json`) stays
//! exact JSON: it escapes C0 itself, and a reader of JSON is a program.
//!
//! Two ways in, for two kinds of output:
//!
//! - [`Visible`] wraps the output of a command that prints only text (`ls`,
//!   `verify`, `stats`, `grep`, …): nothing it writes can hold a raw control
//!   character, whatever the code above it forgot;
//! - [`visible_text`] and [`visible_line`] escape one string, for output
//!   that adds control sequences of its own (`show` colours its text on a
//!   terminal) and so escapes the data it shows before it paints it.
//!
//! Error messages on stderr go through [`warn`].

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::io::{self, Write};

/// Whether `c` is a control character a terminal may act on: C0, DEL, C1.
fn is_terminal_control(c: char) -> bool {
    matches!(c, '\0'..='\x1f' | '\x7f' | '\u{80}'..='\u{9f}')
}

fn escaped(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_terminal_control(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_terminal_control(c) || keep(c) {
            out.push(c);
            continue;
        }
        let _ = match c {
            '\n' => write!(out, "\\n"),
            '\t' => write!(out, "\\t"),
            '\r' => write!(out, "\\r"),
            '\0'..='\x1f' | '\x7f' => write!(out, "\\x{:02x}", c as u32),
            _ => write!(out, "\\u{{{:x}}}", c as u32),
        };
    }
    Cow::Owned(out)
}

/// A text body (a message, a tool result) for a terminal: its lines and
/// tabs kept, every other control character shown as an escape.
pub(crate) fn visible_text(text: &str) -> Cow<'_, str> {
    escaped(text, |c| c == '\n' || c == '\t')
}

/// A one-line field (a name, an id, a cwd, a table cell) for a terminal:
/// every control character shown as an escape, newline and tab included.
pub(crate) fn visible_line(text: &str) -> Cow<'_, str> {
    escaped(text, |_| false)
}

/// A writer that passes text through with every control character but
/// newline and tab shown as an escape, as [`visible_text`] does. Its input
/// is UTF-8 (what a command formats); a C1 character split across two
/// writes is still recognized.
pub(crate) struct Visible<'a> {
    inner: &'a mut dyn Write,
    /// A `0xC2` lead byte that ended the previous write: the first byte of
    /// a C1 control, or of another character in U+0080–U+00BF.
    lead: bool,
}

impl<'a> Visible<'a> {
    pub(crate) fn new(inner: &'a mut dyn Write) -> Visible<'a> {
        Visible { inner, lead: false }
    }
}

impl Write for Visible<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut out = Vec::with_capacity(buf.len() + 8);
        let mut bytes = buf.iter().copied().peekable();
        if std::mem::take(&mut self.lead) {
            match bytes.peek() {
                Some(&b @ 0x80..=0x9f) => {
                    bytes.next();
                    let _ = write!(out, "\\u{{{b:x}}}");
                }
                _ => out.push(0xc2),
            }
        }
        while let Some(b) = bytes.next() {
            match b {
                b'\n' | b'\t' => out.push(b),
                0x00..=0x1f | 0x7f => {
                    let _ = write!(out, "\\x{b:02x}");
                }
                0xc2 => match bytes.peek() {
                    Some(&c @ 0x80..=0x9f) => {
                        bytes.next();
                        let _ = write!(out, "\\u{{{c:x}}}");
                    }
                    None => self.lead = true,
                    Some(_) => out.push(b),
                },
                _ => out.push(b),
            }
        }
        self.inner.write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if std::mem::take(&mut self.lead) {
            self.inner.write_all(&[0xc2])?;
        }
        self.inner.flush()
    }
}

impl Drop for Visible<'_> {
    fn drop(&mut self) {
        if self.lead {
            let _ = self.inner.write_all(&[0xc2]);
        }
    }
}

/// Prints `turnwal: MESSAGE` on stderr, its control characters escaped
/// (a message may quote an id, a path or a type name from a log).
pub(crate) fn warn(message: impl fmt::Display) {
    eprintln!("turnwal: {}", visible_text(&message.to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str =
        "hi \u{1b}]0;PWNED\u{7}\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[2J\ttab\nnext \u{7f}\u{9b}31m é ü";

    #[test]
    fn strings_show_every_control_character() {
        assert_eq!(
            visible_text(HOSTILE),
            "hi \\x1b]0;PWNED\\x07\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\ttab\nnext \\x7f\\u{9b}31m é ü"
        );
        assert_eq!(
            visible_line(HOSTILE),
            "hi \\x1b]0;PWNED\\x07\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\ttab\\nnext \\x7f\\u{9b}31m é ü"
        );
        assert!(matches!(visible_line("plain é"), Cow::Borrowed(_)));
        assert_eq!(visible_line("a\rb\0"), "a\\rb\\x00");
    }

    #[test]
    fn the_writer_escapes_what_visible_text_escapes_at_any_split() {
        let bytes = HOSTILE.as_bytes();
        for split in 0..=bytes.len() {
            let mut sink = Vec::new();
            {
                let mut w = Visible::new(&mut sink);
                w.write_all(&bytes[..split]).unwrap();
                w.write_all(&bytes[split..]).unwrap();
                w.flush().unwrap();
            }
            assert_eq!(
                String::from_utf8(sink).unwrap(),
                visible_text(HOSTILE),
                "split at {split}"
            );
        }
        // A lone 0xC2 at the very end of the output still goes out.
        let mut sink = Vec::new();
        Visible::new(&mut sink).write_all(&[b'a', 0xc2]).unwrap();
        assert_eq!(sink, [b'a', 0xc2]);
    }
}
