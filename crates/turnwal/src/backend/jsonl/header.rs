//! The header line of a JSONL session log (reference §3): the first line,
//! `{"type":"session","version":0,"id":…,"createdAt":…,"cwd"?,
//! "parentSession"?,"seedLength"?,"origin"?,"delegationDepth":N,
//! "agentPreset"?}` in that key order. `delegationDepth` is required on disk
//! (the writer stores 0 for a top-level session, so a read always returns
//! it); `sandboxMode`/`approvalPolicy` are retired and refused; a foreign
//! `version` is refused before anything else is checked, with the text that
//! says which side to upgrade.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use super::records::{js_number_text, js_safe_integer, negative_zero};
use crate::header::{SESSION_FORMAT_VERSION, SessionHeader, version_refusal_text};
use crate::upstream::jsstr;

/// Why a header record does not give a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderProblem {
    /// The record is damaged or not a header: the session is corrupt.
    Corrupt(String),
    /// A header of another format version: which side to upgrade.
    Unsupported(String),
}

/// `JSON.stringify(toHeaderLine(header))`.
///
/// ```
/// use turnwal::SessionHeader;
/// use turnwal::backend::jsonl::header::header_line;
/// let h = SessionHeader::new("s1", 5).with_cwd("/w");
/// assert_eq!(header_line(&h), r#"{"type":"session","version":0,"id":"s1","createdAt":5,"cwd":"/w","delegationDepth":0}"#);
/// ```
pub fn header_line(h: &SessionHeader) -> String {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"{\"type\":\"session\",\"version\":");
    out.extend_from_slice(h.version.to_string().as_bytes());
    out.extend_from_slice(b",\"id\":");
    jsstr::write_json(&mut out, &h.id);
    out.extend_from_slice(b",\"createdAt\":");
    out.extend_from_slice(h.created_at.to_string().as_bytes());
    if let Some(cwd) = &h.cwd {
        out.extend_from_slice(b",\"cwd\":");
        jsstr::write_json(&mut out, cwd);
    }
    if let Some(parent) = &h.parent_session {
        out.extend_from_slice(b",\"parentSession\":");
        jsstr::write_json(&mut out, parent);
    }
    if let Some(n) = h.seed_length {
        out.extend_from_slice(format!(",\"seedLength\":{n}").as_bytes());
    }
    if let Some(origin) = &h.origin {
        out.extend_from_slice(b",\"origin\":");
        jsstr::write_json(&mut out, origin);
    }
    out.extend_from_slice(
        format!(",\"delegationDepth\":{}", h.delegation_depth.unwrap_or(0)).as_bytes(),
    );
    if let Some(preset) = &h.agent_preset {
        out.extend_from_slice(b",\"agentPreset\":");
        jsstr::write_json(&mut out, preset);
    }
    out.push(b'}');
    String::from_utf8(out).expect("JSON output is UTF-8")
}

const NOT_A_HEADER: &str = "corrupt session log: first line is not a session header";

fn not_header(why: &str) -> HeaderProblem {
    HeaderProblem::Corrupt(format!("{NOT_A_HEADER} ({why})"))
}

/// Parses the first line (without its newline) as upstream's
/// `parseHeaderRecord` does: JSON, then the version refusal, then the shape
/// (`isHeaderLine`), then the retired fields; then turnwal's own header
/// validation (string fields, safe integers; the cwd is checked by the
/// reads that need a valid session, `JsonlBackend::plan_bytes`).
pub fn parse_header_line(line: &[u8]) -> Result<SessionHeader, HeaderProblem> {
    let invalid =
        || HeaderProblem::Corrupt("corrupt session log: header line is not valid JSON".into());
    let text = std::str::from_utf8(line).map_err(|_| invalid())?;
    let value: &RawValue = serde_json::from_str(text).map_err(|_| invalid())?;
    let Ok(map) = serde_json::from_str::<BTreeMap<String, &RawValue>>(value.get()) else {
        // A scalar or an array: no version to refuse, and not a header.
        return Err(HeaderProblem::Corrupt(NOT_A_HEADER.into()));
    };
    refuse_foreign_version(&map)?;
    let get = |key: &str| map.get(key).map(|v| v.get());
    if get("type") != Some("\"session\"") {
        return Err(not_header("type must be \"session\""));
    }
    if get("version").is_none() {
        return Err(not_header("version must be a number"));
    }
    let string = |key: &str| -> Result<Option<String>, HeaderProblem> {
        let Some(raw) = map.get(key) else {
            return Ok(None);
        };
        if !raw.get().starts_with('"') {
            return Err(not_header(&format!("{key} must be a string")));
        }
        jsstr::from_json(raw.get()).map(Some).map_err(|why| {
            HeaderProblem::Unsupported(format!(
                "session header field {key} {} cannot be represented: {why}",
                raw.get()
            ))
        })
    };
    let id = string("id")?.ok_or_else(|| not_header("id must be a string"))?;
    let count = |key: &str| -> Result<Option<u64>, HeaderProblem> {
        let Some(raw) = map.get(key) else {
            return Ok(None);
        };
        match js_safe_integer(raw) {
            Some(n) if n >= 0 && !negative_zero(raw) => Ok(Some(n as u64)),
            _ => Err(not_header(&format!(
                "{key} must be a non-negative safe integer"
            ))),
        }
    };
    let created_at = count("createdAt")?
        .ok_or_else(|| not_header("createdAt must be a non-negative safe integer"))?;
    let delegation_depth = count("delegationDepth")?
        .ok_or_else(|| not_header("delegationDepth must be a non-negative safe integer"))?;
    let origin = string("origin")?;
    if origin.as_deref().is_some_and(|o| o != "subagent") {
        return Err(not_header("origin must be \"subagent\""));
    }
    let agent_preset = string("agentPreset")?;
    if map.contains_key("sandboxMode") || map.contains_key("approvalPolicy") {
        return Err(HeaderProblem::Corrupt(
            "session header uses retired policy baseline fields".into(),
        ));
    }
    let header = SessionHeader {
        version: SESSION_FORMAT_VERSION,
        id,
        created_at,
        cwd: string("cwd")?,
        parent_session: string("parentSession")?,
        seed_length: count("seedLength")?,
        origin,
        delegation_depth: Some(delegation_depth),
        agent_preset,
    };
    // The cwd is checked by `inspect` and `load`, not here: upstream's reads
    // of a stored suffix take any cwd (JsonlBackend::plan_bytes).
    header
        .validate_stored()
        .map_err(|e| HeaderProblem::Corrupt(format!("invalid session header: {}", e.0)))?;
    Ok(header)
}

/// `refuseForeignFormatVersion`: a numeric `version` other than 0 is refused
/// before the shape is looked at.
fn refuse_foreign_version(map: &BTreeMap<String, &RawValue>) -> Result<(), HeaderProblem> {
    let Some(raw) = map.get("version") else {
        return Ok(());
    };
    let Ok(number) = serde_json::from_str::<serde_json::Number>(raw.get()) else {
        return Ok(());
    };
    let value = number.as_f64().unwrap_or(0.0);
    if value == 0.0 {
        return Ok(());
    }
    let id = match map.get("id") {
        None => "undefined".to_owned(),
        Some(raw) => match jsstr::from_json(raw.get()) {
            Ok(s) => jsstr::display(&s).into_owned(),
            Err(_) => raw.get().to_owned(),
        },
    };
    Err(HeaderProblem::Unsupported(version_refusal_text(
        &id,
        &js_number_text(&number),
        value > 0.0,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corrupt(line: &str) -> String {
        match parse_header_line(line.as_bytes()) {
            Err(HeaderProblem::Corrupt(m)) => m,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn header_lines_round_trip() {
        let h = SessionHeader {
            version: 0,
            id: "c".into(),
            created_at: 7,
            cwd: Some("/w".into()),
            parent_session: Some("p".into()),
            seed_length: Some(3),
            origin: Some("subagent".into()),
            delegation_depth: Some(2),
            agent_preset: Some("coder".into()),
        };
        let line = header_line(&h);
        assert_eq!(
            line,
            r#"{"type":"session","version":0,"id":"c","createdAt":7,"cwd":"/w","parentSession":"p","seedLength":3,"origin":"subagent","delegationDepth":2,"agentPreset":"coder"}"#
        );
        assert_eq!(parse_header_line(line.as_bytes()).unwrap(), h);
    }

    #[test]
    fn shapes_are_checked() {
        let base = r#""type":"session","version":0,"id":"s""#;
        for (extra, why) in [
            (r#","createdAt":1.5,"delegationDepth":0"#, "createdAt"),
            (r#","createdAt":-1,"delegationDepth":0"#, "createdAt"),
            (r#","createdAt":-0,"delegationDepth":0"#, "createdAt"),
            (
                r#","createdAt":9007199254740992,"delegationDepth":0"#,
                "createdAt",
            ),
            (r#","createdAt":1"#, "delegationDepth"),
            (r#","createdAt":1,"delegationDepth":"0""#, "delegationDepth"),
            (r#","createdAt":1,"delegationDepth":0.5"#, "delegationDepth"),
            (r#","createdAt":1,"delegationDepth":-1"#, "delegationDepth"),
            (r#","createdAt":1,"delegationDepth":-0"#, "delegationDepth"),
            (
                r#","createdAt":1,"delegationDepth":0,"agentPreset":5"#,
                "agentPreset",
            ),
            (
                r#","createdAt":1,"delegationDepth":0,"origin":"x""#,
                "origin",
            ),
        ] {
            let m = corrupt(&format!("{{{base}{extra}}}"));
            assert!(m.starts_with(NOT_A_HEADER) && m.contains(why), "{m}");
        }
        assert_eq!(corrupt("42"), NOT_A_HEADER);
        assert_eq!(
            corrupt("{"),
            "corrupt session log: header line is not valid JSON"
        );
        assert_eq!(
            corrupt(&format!(
                r#"{{{base},"createdAt":1,"delegationDepth":0,"sandboxMode":"x"}}"#
            )),
            "session header uses retired policy baseline fields"
        );
        // 1.0 is a safe integer in JavaScript.
        let h = parse_header_line(
            format!(r#"{{{base},"createdAt":1.0,"delegationDepth":0}}"#).as_bytes(),
        )
        .unwrap();
        assert_eq!((h.created_at, h.delegation_depth), (1, Some(0)));
    }

    #[test]
    fn lone_surrogates_in_header_strings_are_kept_exact() {
        let line = r#"{"type":"session","version":0,"id":"a\ud800","createdAt":1,"cwd":"/w/\udfff","parentSession":"\udc00p","delegationDepth":0,"agentPreset":"x\ud83d"}"#;
        let h = parse_header_line(line.as_bytes()).unwrap();
        assert_eq!(jsstr::to_utf16(&h.id), [0x61, 0xD800]);
        assert_eq!(jsstr::display(h.cwd.as_deref().unwrap()), r"/w/\udfff");
        assert_eq!(header_line(&h), line);
        // Upper-case escapes read the same and are written as JSON.stringify does.
        let upper = line.replace(r"\ud800", r"\uD800");
        assert_eq!(parse_header_line(upper.as_bytes()).unwrap(), h);
        // The one string turnwal cannot hold: U+10FFFF, its spelling mark.
        let mark = r#"{"type":"session","version":0,"id":"a\udbff\udfff","createdAt":1,"delegationDepth":0}"#;
        match parse_header_line(mark.as_bytes()) {
            Err(HeaderProblem::Unsupported(m)) => {
                assert!(
                    m.starts_with(
                        r#"session header field id "a\udbff\udfff" cannot be represented: "#
                    ),
                    "{m}"
                );
                assert!(m.contains("U+10FFFF"), "{m}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn foreign_versions_are_refused_first() {
        let unsupported = |line: &str| match parse_header_line(line.as_bytes()) {
            Err(HeaderProblem::Unsupported(m)) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            unsupported(r#"{"version":42,"id":123,"alien":[]}"#),
            "session \"123\" uses log format v42, but this harness reads only v0: the log was written by a newer harness \u{2014} upgrade the harness to open it"
        );
        assert_eq!(
            unsupported(r#"{"type":"session","version":-1,"id":"s"}"#),
            "session \"s\" uses log format v-1, older than the supported v0, and this build ships no upgrade path for it"
        );
    }
}
