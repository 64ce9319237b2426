//! No control character from a log reaches a terminal (issue 26, item 6):
//! ESC, BEL, DEL and C1 controls in message text, tool output, tool and
//! model names, event types, reason kinds, the cwd and the session id are
//! shown as visible escapes by every human-readable output, on every
//! store; JSON output stays exact JSON.

use crate::support;

use std::path::Path;

use support::{T0, ev, lines, on};

/// A turn whose every field a person reads holds control sequences: an
/// OSC title, an OSC 52 clipboard write, a screen clear, DEL and an 8-bit
/// CSI (U+009B).
fn hostile_turn() -> Vec<String> {
    // JSON escapes C0 (`\u001b`), but DEL and the C1 controls may stand
    // raw in a JSON string: both spellings.
    let evil = format!(
        r"\u001b]0;PWNED\u0007\u001b]52;c;cm0gLXJmIH4K\u0007\u001b[2J{}\u007f\u009b",
        "\u{7f}\u{9b}31m"
    );
    vec![
        ev("turn/start", 0, T0, r#"{"turn":1}"#),
        ev(
            "user/message",
            1,
            T0 + 1,
            &format!(
                r#"{{"id":"u1","role":"user","content":[{{"type":"text","text":"hi {evil} there"}}]}}"#
            ),
        ),
        ev("step/start", 2, T0 + 2, r#"{"turn":1,"step":1}"#),
        ev(
            "assistant/chunk",
            3,
            T0 + 3,
            &format!(
                r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"streamed {evil}"}}}}"#
            ),
        ),
        ev(
            "assistant/message",
            4,
            T0 + 4,
            &format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"a1","role":"assistant","content":[{{"type":"text","text":"said {evil}"}},{{"type":"tool-call","id":"c1","name":"bash{evil}","arguments":"{{}}"}}],"source":{{"kind":"model","provider":"p{evil}","model":"m{evil}"}}}},"usage":{{"inputTokens":3,"outputTokens":4}}}}"#
            ),
        ),
        ev(
            "tool/call",
            5,
            T0 + 5,
            &format!(
                r#"{{"turn":1,"step":1,"callId":"c1","name":"bash{evil}","arguments":"{{}}"}}"#
            ),
        ),
        ev(
            "tool/result",
            6,
            T0 + 6,
            &format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"r1","role":"user","source":{{"kind":"tool","callId":"c1"}},"content":[{{"type":"tool-result","toolCallId":"c1","content":[{{"type":"text","text":"web page says {evil}"}}]}}]}}}}"#
            ),
        ),
        ev("step/end", 7, T0 + 7, r#"{"turn":1,"step":1}"#),
        ev(
            "turn/end",
            8,
            T0 + 8,
            &format!(r#"{{"turn":1,"reason":{{"kind":"completed{evil}"}}}}"#),
        ),
    ]
}

/// The first byte of `bytes` a terminal could act on: C0 but newline and
/// tab, DEL, or a C1 control's UTF-8 form.
fn first_control(bytes: &[u8]) -> Option<usize> {
    bytes.iter().enumerate().position(|(i, &b)| {
        matches!(b, 0x00..=0x08 | 0x0b..=0x1f | 0x7f)
            || (b == 0xc2 && bytes.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n)))
    })
}

fn assert_visible(store: &str, args: &[&str]) -> String {
    let out = on(Path::new(store), args, "");
    for (what, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        if let Some(at) = first_control(text.as_bytes()) {
            panic!(
                "{store} {args:?}: {what} carries a control character at byte {at}: {:?}",
                &text[at.saturating_sub(20)..(at + 20).min(text.len())]
            );
        }
    }
    out.stdout
}

#[test]
fn human_outputs_show_control_characters_as_escapes_and_json_stays_exact() {
    let dir = tempfile::tempdir().unwrap();
    let stores = [
        dir.path().join("wal").display().to_string(),
        dir.path().join("s.sqlite").display().to_string(),
        format!("jsonl+none:{}", dir.path().join("raw").display()),
    ];
    // An id and a cwd with control characters too (JSONL roots keep the
    // cwd in their layout, so the id alone there).
    let id = "evil\u{1b}]0;ID\u{7}\u{9b}";
    let cwd = "/tmp/\u{1b}]0;CWD\u{7}";
    let input = lines(&hostile_turn());
    for store in &stores {
        let mut args = vec!["append", id, "--create", "-q"];
        if !store.starts_with("jsonl") {
            args.extend(["--cwd", cwd]);
        }
        let out = on(Path::new(store), &args, &input);
        assert_eq!((out.status, out.stderr.as_str()), (0, ""), "{store}");

        let shown = assert_visible(store, &["show", id]);
        assert!(
            shown.contains(
                r"hi \x1b]0;PWNED\x07\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2J\x7f\u{9b}31m\x7f\u{9b} there"
            ),
            "{store}: {shown}"
        );
        assert!(shown.contains(r"p\x1b]0;PWNED\x07"), "{store}: {shown}");
        assert!(
            shown.contains(r"web page says \x1b]0;PWNED"),
            "{store}: {shown}"
        );
        assert!(shown.contains(r"completed\x1b]0;PWNED"), "{store}: {shown}");
        assert!(
            shown.contains(r#"session "evil\u001b]0;ID\u0007\u009b""#),
            "{store}: {shown}"
        );
        if !store.starts_with("jsonl") {
            assert!(
                shown.contains(r"cwd /tmp/\x1b]0;CWD\x07"),
                "{store}: {shown}"
            );
        }
        for args in [
            &["show", id, "--format", "markdown"][..],
            &["show", id, "--format", "html"],
            &["head", id],
            &["stats", id],
            &["stats"],
            &["ls"],
            &["grep", "PWNED"],
            &["grep", "31m"],
            &["grep", "--type", "tool/result", "web"],
            &["verify"],
            &["verify", id],
            &["du"],
            &["prune", "--keep", "5", "--dry-run"],
            &["recover", id, "--dry-run"],
        ] {
            assert_visible(store, args);
        }
        // An error naming the id: stderr is escaped too.
        let missing = format!("{id}-missing");
        let out = on(Path::new(store), &["show", &missing], "");
        assert_eq!(out.status, 4, "{store}");
        assert!(
            first_control(out.stderr.as_bytes()).is_none(),
            "{:?}",
            out.stderr
        );

        // JSON stays exact: `cat` gives back the input lines' events, and
        // `--json` listings are JSON whose strings hold the id as it is.
        let cat = on(Path::new(store), &["cat", id], "");
        assert_eq!(cat.status, 0);
        for (got, sent) in cat.stdout.lines().zip(hostile_turn()) {
            let got: serde_json::Value = serde_json::from_str(got).unwrap();
            let sent: serde_json::Value = serde_json::from_str(&sent).unwrap();
            assert_eq!(got["data"], sent["data"], "{store}");
        }
        let ls = on(Path::new(store), &["ls", "--json"], "");
        let row: serde_json::Value = serde_json::from_str(ls.stdout.trim()).unwrap();
        assert_eq!(row["id"], id, "{store}");
    }
}
