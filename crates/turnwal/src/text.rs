//! Quoting what a message refuses: bounded excerpts of values and reasons,
//! so a refusal of a 30 MB value is not itself 30 MB. Below every layer
//! that writes a message (events, headers, the contract, errors).

/// At most the first 200 characters of `text`, and how long it was when
/// it was longer: what a message quotes of a value it refuses (an id, a
/// path, a payload), so a refusal of a 30 MB value is not itself 30 MB.
///
/// ```
/// use turnwal::text::excerpt;
/// assert_eq!(excerpt("short"), "short");
/// let long = "x".repeat(1000);
/// assert_eq!(excerpt(&long), format!("{}… (1000 bytes)", "x".repeat(200)));
/// ```
pub fn excerpt(text: &str) -> String {
    excerpt_within(text, 200)
}

/// At most the first `chars` characters of `text`, and how long it was
/// when it was longer ([`excerpt`] with another bound): what a message
/// keeps of a reason that may quote a value (a parser's own message).
pub fn excerpt_within(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}… ({} bytes)", &text[..cut], text.len()),
    }
}

/// The longest reason a message repeats: room for a rule, a position and
/// excerpts, never a whole value.
pub(crate) const REASON_CHARS: usize = 1_000;

/// At most the first 80 bytes of `text` (cut at a character boundary),
/// with `…` when it was longer: a value quoted inside a sentence (`got
/// "…"`), where [`excerpt`]'s length would crowd the rule it names.
pub(crate) fn abbreviate(text: &str) -> std::borrow::Cow<'_, str> {
    const LIMIT: usize = 80;
    if text.len() <= LIMIT {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…", &text[..end]))
}
