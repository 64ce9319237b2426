//! Session metadata, kept outside the log.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use crate::event::MAX_SAFE_INTEGER;
use crate::upstream::jsstr;

/// The session format version this build reads and writes (the upstream
/// harness's `SESSION_FORMAT_VERSION`).
pub const SESSION_FORMAT_VERSION: i64 = 0;

/// The header of one session: `{version, id, createdAt, cwd?, parentSession?,
/// seedLength?, origin?, delegationDepth?, agentPreset?}`.
///
/// ```
/// use turnwal::SessionHeader;
/// let h = SessionHeader::new("s1", 1_700_000_000_000).with_cwd("/work/app");
/// assert_eq!(h.to_json(), r#"{"version":0,"id":"s1","createdAt":1700000000000,"cwd":"/work/app"}"#);
/// assert_eq!(SessionHeader::from_json(&h.to_json()).unwrap(), h);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHeader {
    /// Session format version; this build accepts only
    /// [`SESSION_FORMAT_VERSION`].
    pub version: i64,
    /// Session id: any non-empty string.
    pub id: String,
    /// Creation time, unix ms.
    pub created_at: u64,
    /// Absolute working directory.
    pub cwd: Option<String>,
    /// The session this one was forked from.
    pub parent_session: Option<String>,
    /// Number of inherited events (a fork's seed).
    pub seed_length: Option<u64>,
    /// `"subagent"` for subagent sessions.
    pub origin: Option<String>,
    /// Subagent recursion depth.
    pub delegation_depth: Option<u64>,
    /// Agent preset that decides tools and prompt on resume.
    pub agent_preset: Option<String>,
}

/// A header that fails validation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HeaderError(pub String);

/// A header written in another session format version: the refusal a
/// reader gives, worded as the upstream harness words it (which side to
/// upgrade).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", version_refusal_text(&self.id, &self.version.to_string(), self.version > SESSION_FORMAT_VERSION))]
pub struct ForeignVersion {
    /// The session id, as the header spells it.
    pub id: String,
    /// The version the header states.
    pub version: i64,
}

/// Why a stored header is not read: another format version (the log is
/// not ours to read), or an invalid header (the log is damaged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoredHeaderError {
    /// Another format version.
    Foreign(ForeignVersion),
    /// Invalid.
    Invalid(HeaderError),
}

impl From<HeaderError> for StoredHeaderError {
    fn from(e: HeaderError) -> StoredHeaderError {
        StoredHeaderError::Invalid(e)
    }
}

impl SessionHeader {
    /// A header with the required fields; the optional ones are unset.
    pub fn new(id: impl Into<String>, created_at: u64) -> SessionHeader {
        SessionHeader {
            version: SESSION_FORMAT_VERSION,
            id: id.into(),
            created_at,
            cwd: None,
            parent_session: None,
            seed_length: None,
            origin: None,
            delegation_depth: None,
            agent_preset: None,
        }
    }

    /// Sets `cwd`.
    pub fn with_cwd(mut self, cwd: impl Into<String>) -> SessionHeader {
        self.cwd = Some(cwd.into());
        self
    }

    /// Checks every field. A foreign `version` is reported separately by
    /// [`SessionHeader::check_version`], which readers call first.
    pub fn validate(&self) -> Result<(), HeaderError> {
        self.validate_stored()?;
        self.validate_cwd()
    }

    /// `cwd`, when set, is an absolute path: one that starts with `/`, as
    /// Node's `path.isAbsolute` says on the POSIX systems turnwal runs on
    /// (upstream's session store checks it there, and so refuses a Windows
    /// `C:\dir` on Linux).
    pub fn validate_cwd(&self) -> Result<(), HeaderError> {
        match &self.cwd {
            Some(cwd) if !cwd.starts_with('/') => Err(HeaderError(format!(
                "session metadata cwd must be an absolute path, got {:?}",
                jsstr::display(cwd)
            ))),
            _ => Ok(()),
        }
    }

    /// Every check but [`SessionHeader::validate_cwd`]: what upstream's
    /// persistence layer checks when it parses a stored header (its reads of
    /// a stored suffix accept any cwd; its `inspect` and `load` do not).
    pub fn validate_stored(&self) -> Result<(), HeaderError> {
        if self.version != SESSION_FORMAT_VERSION {
            return Err(HeaderError(format!(
                "session metadata version must be {SESSION_FORMAT_VERSION}, got {}",
                self.version
            )));
        }
        self.validate_fields()
    }

    /// Every check but the version's and the cwd's: what a header of any
    /// format version must satisfy to be stored as given (upstream's
    /// backends store a foreign version and refuse it when read).
    pub fn validate_fields(&self) -> Result<(), HeaderError> {
        let fail = |msg: &str| Err(HeaderError(msg.to_owned()));
        if self.id.is_empty() {
            return fail("session metadata id must be a non-empty string");
        }
        for (key, value) in self.strings() {
            jsstr::check(value)
                .map_err(|why| HeaderError(format!("session metadata {key}: {why}")))?;
        }
        if self.created_at > MAX_SAFE_INTEGER {
            return fail("session metadata createdAt must be a non-negative safe integer");
        }
        if let Some(parent) = &self.parent_session
            && parent.is_empty()
        {
            return fail("session metadata parentSession must be a non-empty string");
        }
        if self.seed_length.is_some_and(|n| n > MAX_SAFE_INTEGER) {
            return fail("session metadata seedLength must be a non-negative safe integer");
        }
        if self.delegation_depth.is_some_and(|n| n > MAX_SAFE_INTEGER) {
            return fail("session metadata delegationDepth must be a non-negative safe integer");
        }
        if let Some(origin) = &self.origin
            && origin != "subagent"
        {
            return Err(HeaderError(format!(
                "session metadata origin must be \"subagent\", got {origin:?}"
            )));
        }
        Ok(())
    }

    /// The refusal a reader gives for a header written by another format
    /// version, worded as the upstream harness words it: which side to upgrade.
    pub fn check_version(&self) -> Result<(), ForeignVersion> {
        version_refusal(&self.id, self.version)
    }

    /// The header as JSON, keys in the upstream order, strings as
    /// `JSON.stringify` writes them (a lone surrogate as `\udXXX`).
    pub fn to_json(&self) -> String {
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(format!("{{\"version\":{}", self.version).as_bytes());
        push_string(&mut out, "id", Some(&self.id));
        push_number(&mut out, "createdAt", Some(self.created_at));
        push_string(&mut out, "cwd", self.cwd.as_ref());
        push_string(&mut out, "parentSession", self.parent_session.as_ref());
        push_number(&mut out, "seedLength", self.seed_length);
        push_string(&mut out, "origin", self.origin.as_ref());
        push_number(&mut out, "delegationDepth", self.delegation_depth);
        push_string(&mut out, "agentPreset", self.agent_preset.as_ref());
        out.push(b'}');
        String::from_utf8(out).expect("JSON output is UTF-8")
    }

    /// The header's string fields that are set, with their JSON keys.
    pub fn strings(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("id", Some(&self.id)),
            ("cwd", self.cwd.as_ref()),
            ("parentSession", self.parent_session.as_ref()),
            ("origin", self.origin.as_ref()),
            ("agentPreset", self.agent_preset.as_ref()),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some((key, value?.as_str())))
    }

    /// Parses and validates a header. A foreign `version` is refused before
    /// the shape is checked, so the message says which side to upgrade.
    pub fn from_json(text: &str) -> Result<SessionHeader, HeaderError> {
        SessionHeader::from_stored_json(text).map_err(|e| match e {
            StoredHeaderError::Foreign(v) => HeaderError(v.to_string()),
            StoredHeaderError::Invalid(e) => e,
        })
    }

    /// [`SessionHeader::from_json`], telling a header of another format
    /// version (refused before its fields are read) from an invalid one.
    pub(crate) fn from_stored_json(text: &str) -> Result<SessionHeader, StoredHeaderError> {
        SessionHeader::parse(text, false)
    }

    /// Parses and validates a header of any format version (its fields
    /// otherwise as [`SessionHeader::from_json`] checks them): what a
    /// [`crate::contract::Policy::Permissive`] session is created with.
    pub fn from_json_any_version(text: &str) -> Result<SessionHeader, HeaderError> {
        SessionHeader::parse(text, true).map_err(|e| match e {
            StoredHeaderError::Invalid(e) => e,
            StoredHeaderError::Foreign(_) => unreachable!("any version is read"),
        })
    }

    fn parse(text: &str, any_version: bool) -> Result<SessionHeader, StoredHeaderError> {
        let value: &RawValue = serde_json::from_str(text)
            .map_err(|e| HeaderError(format!("session header is not valid JSON: {e}")))?;
        let map: Fields = serde_json::from_str(value.get())
            .map_err(|_| HeaderError("session header is not a JSON object".into()))?;
        let id_text = match map.get("id") {
            Some(raw) => jsstr::from_json(raw.get())
                .map(|id| jsstr::display(&id).into_owned())
                .unwrap_or_else(|_| raw.get().to_owned()),
            None => String::new(),
        };
        let version = match map.get("version").map(|raw| raw.get().parse::<i64>()) {
            Some(Ok(version)) => version,
            _ => {
                return Err(
                    HeaderError("session metadata version must be an integer".into()).into(),
                );
            }
        };
        if !any_version {
            version_refusal(&id_text, version).map_err(StoredHeaderError::Foreign)?;
        }
        for key in map.keys() {
            if !HEADER_KEYS.contains(&key.as_str()) {
                return Err(
                    HeaderError(format!("session header has unknown field {key:?}")).into(),
                );
            }
        }
        let header = SessionHeader {
            version,
            id: string_field(&map, "id")?.unwrap_or_default(),
            created_at: safe_uint(&map, "createdAt")?.ok_or_else(|| {
                HeaderError("session metadata createdAt must be a non-negative safe integer".into())
            })?,
            cwd: string_field(&map, "cwd")?,
            parent_session: string_field(&map, "parentSession")?,
            seed_length: safe_uint(&map, "seedLength")?,
            origin: string_field(&map, "origin")?,
            delegation_depth: safe_uint(&map, "delegationDepth")?,
            agent_preset: string_field(&map, "agentPreset")?,
        };
        if any_version {
            header.validate_fields()?;
            header.validate_cwd()?;
        } else {
            header.validate()?;
        }
        Ok(header)
    }
}

/// A header object's fields, values as written.
type Fields<'a> = BTreeMap<String, &'a RawValue>;

const HEADER_KEYS: &[&str] = &[
    "version",
    "id",
    "createdAt",
    "cwd",
    "parentSession",
    "seedLength",
    "origin",
    "delegationDepth",
    "agentPreset",
];

fn version_refusal(id: &str, version: i64) -> Result<(), ForeignVersion> {
    if version == SESSION_FORMAT_VERSION {
        return Ok(());
    }
    Err(ForeignVersion {
        id: id.to_owned(),
        version,
    })
}

/// The upstream refusal of a session written in format `v{version}`:
/// `newer` says the log is newer than this build (upgrade the harness).
pub(crate) fn version_refusal_text(id: &str, version: &str, newer: bool) -> String {
    if newer {
        format!(
            "session {id:?} uses log format v{version}, but this harness reads only \
             v{SESSION_FORMAT_VERSION}: the log was written by a newer harness \u{2014} \
             upgrade the harness to open it"
        )
    } else {
        format!(
            "session {id:?} uses log format v{version}, older than the supported \
             v{SESSION_FORMAT_VERSION}, and this build ships no upgrade path for it"
        )
    }
}

fn push_string(out: &mut Vec<u8>, key: &str, value: Option<&String>) {
    if let Some(value) = value {
        out.extend_from_slice(format!(",\"{key}\":").as_bytes());
        jsstr::write_json(out, value);
    }
}

fn push_number(out: &mut Vec<u8>, key: &str, value: Option<u64>) {
    if let Some(value) = value {
        out.extend_from_slice(format!(",\"{key}\":{value}").as_bytes());
    }
}

fn string_field(map: &Fields, key: &str) -> Result<Option<String>, HeaderError> {
    let Some(raw) = map.get(key) else {
        return Ok(None);
    };
    if !raw.get().starts_with('"') {
        return Err(HeaderError(format!(
            "session metadata {key} must be a string"
        )));
    }
    jsstr::from_json(raw.get())
        .map(Some)
        .map_err(|why| HeaderError(format!("session metadata {key}: {why}")))
}

fn safe_uint(map: &Fields, key: &str) -> Result<Option<u64>, HeaderError> {
    let Some(raw) = map.get(key) else {
        return Ok(None);
    };
    match raw.get().parse::<u64>() {
        Ok(n) if n <= MAX_SAFE_INTEGER => Ok(Some(n)),
        _ => Err(HeaderError(format!(
            "session metadata {key} must be a non-negative safe integer"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_messages() {
        let err =
            SessionHeader::from_json(r#"{"version":0,"id":"a","createdAt":1.5}"#).unwrap_err();
        assert_eq!(
            err.0,
            "session metadata createdAt must be a non-negative safe integer"
        );
        let err = SessionHeader::from_json(r#"{"version":0,"id":"a","createdAt":-1}"#).unwrap_err();
        assert_eq!(
            err.0,
            "session metadata createdAt must be a non-negative safe integer"
        );
        let err = SessionHeader::new("a", 1)
            .with_cwd("rel/dir")
            .validate()
            .unwrap_err();
        assert!(err.0.contains("absolute"));
        let err =
            SessionHeader::from_json(r#"{"version":0,"id":"a","createdAt":1,"x":1}"#).unwrap_err();
        assert!(err.0.contains("unknown field \"x\""));
        assert!(SessionHeader::new("", 1).validate().is_err());
        // Node's path.isAbsolute on POSIX, where upstream runs the check.
        for cwd in ["C:\\work", "C:/work", "\\\\server\\share", "~/x", ""] {
            let err = SessionHeader::new("a", 1)
                .with_cwd(cwd)
                .validate()
                .unwrap_err();
            assert!(err.0.contains("must be an absolute path"), "{cwd}: {err}");
            assert!(
                SessionHeader::new("a", 1)
                    .with_cwd(cwd)
                    .validate_stored()
                    .is_ok()
            );
        }
    }

    #[test]
    fn foreign_versions_are_refused_with_direction() {
        let err = SessionHeader::from_json(r#"{"version":99,"id":"s","alien":true}"#).unwrap_err();
        assert!(err.0.contains("written by a newer harness"), "{err}");
        assert!(err.0.contains("upgrade the harness"), "{err}");
        let err = SessionHeader::from_json(r#"{"version":-1,"id":"s","createdAt":1}"#).unwrap_err();
        assert!(err.0.contains("older than the supported v0"), "{err}");
        assert!(err.0.contains("no upgrade path"), "{err}");
    }

    #[test]
    fn round_trip_keeps_every_field() {
        let h = SessionHeader {
            version: 0,
            id: "child".into(),
            created_at: 1000,
            cwd: Some("/w".into()),
            parent_session: Some("parent".into()),
            seed_length: Some(6),
            origin: Some("subagent".into()),
            delegation_depth: Some(2),
            agent_preset: Some("coder".into()),
        };
        assert_eq!(SessionHeader::from_json(&h.to_json()).unwrap(), h);
    }
}
