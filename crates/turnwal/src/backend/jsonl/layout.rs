//! Where the upstream harness's JSONL store keeps a session (reference §3):
//! `<root>/<projectKey(cwd) | "_no-cwd">/<encodeSegment(id)>/session.jsonl`
//! (raw) or `…/session.jsonl.zstd` (zstd). Both encodings look at UTF-16
//! code units, as JavaScript strings do.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::upstream::jsstr;

/// The project directory of sessions without a cwd.
pub const NO_CWD: &str = "_no-cwd";

/// The transcript of a raw (`compression: "none"`) store.
pub const RAW_LOG: &str = "session.jsonl";

/// The transcript of a zstd store.
pub const ZSTD_LOG: &str = "session.jsonl.zstd";

/// A JSONL store's physical encoding. A root holds one encoding only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// One independent checksummed zstd frame per append batch (upstream's
    /// default).
    #[default]
    Zstd,
    /// Plain JSONL text.
    None,
}

impl Compression {
    /// The transcript file name: `session.jsonl.zstd` or `session.jsonl`.
    pub fn log_name(self) -> &'static str {
        match self {
            Compression::Zstd => ZSTD_LOG,
            Compression::None => RAW_LOG,
        }
    }

    /// The suffix upstream names in its messages: `.jsonl.zstd` or `.jsonl`.
    pub fn suffix(self) -> &'static str {
        match self {
            Compression::Zstd => ".jsonl.zstd",
            Compression::None => ".jsonl",
        }
    }

    /// The other encoding.
    pub fn opposite(self) -> Compression {
        match self {
            Compression::Zstd => Compression::None,
            Compression::None => Compression::Zstd,
        }
    }

    /// Upstream's configuration value: `"zstd"` or `"none"`.
    pub fn config_name(self) -> &'static str {
        match self {
            Compression::Zstd => "zstd",
            Compression::None => "none",
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.config_name())
    }
}

fn safe_unit(unit: u16) -> bool {
    matches!(unit, 0x30..=0x39 | 0x41..=0x5A | 0x61..=0x7A | 0x2E | 0x5F | 0x2D)
}

fn push_escape(out: &mut String, unit: u16) {
    use std::fmt::Write as _;
    let _ = write!(out, "~{unit:04X}");
}

/// A name upstream's layout cannot give a file or directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// An empty session id (or other path segment).
    #[error("cannot encode an empty path segment")]
    EmptySegment,
    /// An empty `cwd`.
    #[error("cannot encode an empty project path")]
    EmptyProjectPath,
}

/// `encodeSegment`: an id as one safe path segment, injectively over UTF-16
/// strings. `[A-Za-z0-9._-]` units stay; every other unit (`~` included)
/// becomes `~XXXX`; `.` and `..` are escaped whole.
///
/// ```
/// use turnwal::backend::jsonl::layout::encode_segment;
/// assert_eq!(encode_segment("a~b").unwrap(), "a~007Eb");
/// assert_eq!(encode_segment("../../etc/pwn").unwrap(), "..~002F..~002Fetc~002Fpwn");
/// assert_eq!(encode_segment("..").unwrap(), "~002E~002E");
/// assert!(encode_segment("").is_err());
/// ```
pub fn encode_segment(raw: &str) -> Result<String, LayoutError> {
    encode_segment_units(&jsstr::to_utf16(raw))
}

/// [`encode_segment`] over UTF-16 code units (lone surrogates included:
/// `\u{D800}` alone becomes `~D800`).
pub fn encode_segment_units(units: &[u16]) -> Result<String, LayoutError> {
    if units.is_empty() {
        return Err(LayoutError::EmptySegment);
    }
    if units == [0x2E] {
        return Ok("~002E".into());
    }
    if units == [0x2E, 0x2E] {
        return Ok("~002E~002E".into());
    }
    let mut out = String::with_capacity(units.len());
    for &unit in units {
        if safe_unit(unit) {
            out.push(unit as u8 as char);
        } else {
            push_escape(&mut out, unit);
        }
    }
    Ok(out)
}

/// Inverts [`encode_segment_units`]; `None` for a name no id encodes to.
pub fn decode_segment_units(segment: &str) -> Option<Vec<u16>> {
    match segment {
        "~002E" => return Some(vec![0x2E]),
        "~002E~002E" => return Some(vec![0x2E, 0x2E]),
        "" | "." | ".." => return None,
        _ => {}
    }
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'~' {
            let hex = segment.get(i + 1..i + 5)?;
            if !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
            {
                return None;
            }
            let unit = u16::from_str_radix(hex, 16).ok()?;
            if safe_unit(unit) {
                return None;
            }
            out.push(unit);
            i += 5;
        } else if safe_unit(u16::from(bytes[i])) {
            out.push(u16::from(bytes[i]));
            i += 1;
        } else {
            return None;
        }
    }
    Some(out)
}

/// The id a session directory name encodes (spelled as `crate::upstream::jsstr` says
/// when it holds a lone surrogate).
pub fn decode_segment(segment: &str) -> Option<String> {
    jsstr::from_utf16(&decode_segment_units(segment)?).ok()
}

/// `projectKey`: the readable directory of a cwd. Runs of `/`, `\` and `:`
/// become one `-`, other units escape as in [`encode_segment`], leading `-`
/// are stripped (an empty key is `root`), and the key is cut to 251
/// characters and wrapped as `--key--`. Lossy on purpose.
///
/// ```
/// use turnwal::backend::jsonl::layout::project_key;
/// assert_eq!(project_key("/Users/qyj/work/deepseek-harness").unwrap(), "--Users-qyj-work-deepseek-harness--");
/// assert_eq!(project_key("C:\\work\\agent").unwrap(), "--C-work-agent--");
/// assert_eq!(project_key("/").unwrap(), "--root--");
/// ```
pub fn project_key(cwd: &str) -> Result<String, LayoutError> {
    project_key_units(&jsstr::to_utf16(cwd))
}

/// [`project_key`] over UTF-16 code units.
pub fn project_key_units(units: &[u16]) -> Result<String, LayoutError> {
    if units.is_empty() {
        return Err(LayoutError::EmptyProjectPath);
    }
    let mut readable = String::with_capacity(units.len());
    let mut separator_run = false;
    for &unit in units {
        if matches!(unit, 0x2F | 0x5C | 0x3A) {
            if !separator_run {
                readable.push('-');
            }
            separator_run = true;
        } else {
            if safe_unit(unit) {
                readable.push(unit as u8 as char);
            } else {
                push_escape(&mut readable, unit);
            }
            separator_run = false;
        }
    }
    let trimmed = readable.trim_start_matches('-');
    let key = if trimmed.is_empty() { "root" } else { trimmed };
    // Every character is ASCII here, so bytes are UTF-16 units.
    let key = &key[..key.len().min(251)];
    Ok(format!("--{key}--"))
}

/// The project directory of a cwd (`_no-cwd` without one).
pub fn project_dir(root: &Path, cwd: Option<&str>) -> Result<PathBuf, LayoutError> {
    Ok(match cwd {
        None => root.join(NO_CWD),
        Some(cwd) => root.join(project_key(cwd)?),
    })
}

/// The directory a session owns.
pub fn session_dir(root: &Path, cwd: Option<&str>, id: &str) -> Result<PathBuf, LayoutError> {
    Ok(project_dir(root, cwd)?.join(encode_segment(id)?))
}

/// `logPath`: the transcript of a session.
///
/// ```
/// use std::path::Path;
/// use turnwal::backend::jsonl::layout::{Compression, log_path};
/// let p = log_path(Path::new("/r"), Some("/w/app"), "s-1", Compression::Zstd).unwrap();
/// assert_eq!(p, Path::new("/r/--w-app--/s-1/session.jsonl.zstd"));
/// let p = log_path(Path::new("/r"), None, "../../etc/pwn", Compression::None).unwrap();
/// assert_eq!(p, Path::new("/r/_no-cwd/..~002F..~002Fetc~002Fpwn/session.jsonl"));
/// ```
pub fn log_path(
    root: &Path,
    cwd: Option<&str>,
    id: &str,
    compression: Compression,
) -> Result<PathBuf, LayoutError> {
    Ok(session_dir(root, cwd, id)?.join(compression.log_name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_round_trip_and_stay_single() {
        for id in ["a", "a~b", "..", ".", "x/y", "开发", "~002F", "a b\u{0}"] {
            let enc = encode_segment(id).unwrap();
            assert!(!enc.contains('/') && enc != "." && enc != "..", "{enc}");
            assert_eq!(decode_segment(&enc).as_deref(), Some(id));
        }
        assert_ne!(
            encode_segment("~002F").unwrap(),
            encode_segment("/").unwrap()
        );
        assert_eq!(encode_segment_units(&[0xD800]).unwrap(), "~D800");
        assert_ne!(
            encode_segment_units(&[0xD800]).unwrap(),
            encode_segment_units(&[0xDC00]).unwrap()
        );
        assert_eq!(decode_segment_units("~D800"), Some(vec![0xD800]));
        let lone = decode_segment("a~D800").unwrap();
        assert_eq!(jsstr::to_utf16(&lone), [0x61, 0xD800]);
        assert_eq!(encode_segment(&lone).unwrap(), "a~D800");
        assert_eq!(
            decode_segment("~0041"),
            None,
            "a safe unit is never escaped"
        );
        assert_eq!(decode_segment("a~00"), None);
    }

    #[test]
    fn project_keys() {
        assert_eq!(
            project_key("/开发/~agent").unwrap(),
            "--~5F00~53D1-~007Eagent--"
        );
        assert_eq!(project_key("//a::b\\\\c").unwrap(), "--a-b-c--");
        let long = format!("/{}", "a".repeat(999));
        assert_eq!(project_key(&long).unwrap().len(), 255);
        assert!(project_key("").is_err());
    }
}
