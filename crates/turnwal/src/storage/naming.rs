//! Session ids to file names: injective, and always inside the store.

/// Longest encoded name kept whole; longer ones are cut and hashed.
const MAX_PLAIN_NAME: usize = 200;
/// Bytes of the encoding kept before the hash of a long name.
const HASHED_PREFIX: usize = 180;

/// Encodes an id as a file name (see docs/FORMAT.md, "Store layout").
///
/// ```
/// use turnwal::storage::encode_file_name;
/// assert_eq!(encode_file_name("session-1"), "session-1");
/// assert_eq!(encode_file_name("../../etc/x"), "~2E.~2F..~2Fetc~2Fx");
/// assert_eq!(encode_file_name("a~b c"), "a~7Eb~20c");
/// ```
pub fn encode_file_name(id: &str) -> String {
    // WTF-8: a lone UTF-16 surrogate of a JavaScript id has bytes too.
    let bytes = crate::upstream::jsstr::to_wtf8(id);
    let mut out = String::with_capacity(bytes.len());
    for (i, &b) in bytes.iter().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("~{b:02X}"));
        }
    }
    if out.len() <= MAX_PLAIN_NAME {
        return out;
    }
    let mut cut = HASHED_PREFIX;
    // Never cut inside a `~HH` escape.
    while out.as_bytes()[cut.saturating_sub(2)..cut].contains(&b'~') {
        cut -= 1;
    }
    format!("{}~~{:016x}", &out[..cut], fnv1a64(&bytes))
}

/// Decodes a file name back to its id; `None` for a hashed (long) name or a
/// name that is not an encoding.
pub fn decode_file_name(name: &str) -> Option<String> {
    if name.contains("~~") {
        return None;
    }
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'~' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    crate::upstream::jsstr::from_wtf8(&out)
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_is_injective_and_decodes() {
        let ids = [
            "a",
            "A",
            ".",
            "..",
            ".hidden",
            "a.b",
            "a/b",
            "a~2Fb",
            "~",
            "日本",
            "a b",
            "-",
            "_x",
            // JavaScript ids with lone surrogates, and the pair they are not.
            "a\u{10FFFF}\u{100000}",
            "a\u{10FFFF}\u{100400}",
            "a\u{10FFFF}\u{100400}\u{10FFFF}\u{100000}",
            "a\u{10000}",
        ];
        let names: std::collections::HashSet<String> =
            ids.iter().map(|i| encode_file_name(i)).collect();
        assert_eq!(names.len(), ids.len());
        assert_eq!(encode_file_name(ids[13]), "a~ED~A0~80");
        for id in ids {
            let name = encode_file_name(id);
            assert!(!name.starts_with('.') && !name.contains('/'), "{name}");
            assert_eq!(decode_file_name(&name).as_deref(), Some(id));
        }
    }

    #[test]
    fn long_ids_are_cut_and_hashed() {
        let a = "x".repeat(500);
        let b = format!("{}y", "x".repeat(499));
        let (na, nb) = (encode_file_name(&a), encode_file_name(&b));
        assert_ne!(na, nb);
        assert!(na.len() <= 200 && na.contains("~~"));
        assert_eq!(decode_file_name(&na), None);
        let escaped = "/".repeat(100);
        let n = encode_file_name(&escaped);
        assert!(n.len() <= 200, "{}", n.len());
        assert!(
            n.split("~~").next().unwrap().len().is_multiple_of(3),
            "cut on an escape boundary: {n}"
        );
    }
}
