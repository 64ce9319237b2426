//! `turnwal show SESSION [--turn N] [--format text|markdown|html]`: the
//! transcript as a person reads it. Turns with their outcome and duration;
//! user and assistant text (a step's streamed chunks joined, where no
//! complete `assistant/message` replaced them); tool calls with their
//! arguments and results, failures marked; model and tokens per message;
//! the closers recovery would add to a crashed session, marked as such.
//! Read through the store's cursor ([`Store::read`]) and written a turn at
//! a time; writes nothing to the store. Every string
//! taken from the log is made visible (`cli::terminal`) before it is
//! rendered in any format: the text format paints its own escape
//! sequences on a terminal, so none may come from the data.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};

use serde_json::Value;

use super::args::{ShowArgs, ShowFormat};
use super::output::{display_id, iso_utc};
use super::terminal::{visible_line, visible_text};
use super::{Failure, Outcome, exit};
use turnwal::event::EventKind;
use turnwal::store::Store;
use turnwal::view::EventRef;

/// One turn of the transcript (turn 0 holds events before the first turn).
#[derive(Debug, Default)]
struct Turn {
    n: u64,
    start: Option<i64>,
    end: Option<i64>,
    /// The `turn/end` reason kind, if the turn ended.
    outcome: Option<String>,
    /// Whether recovery's closers end it (a crash left it open).
    recovered: bool,
    items: Vec<Item>,
}

#[derive(Debug)]
enum Item {
    User(String),
    Assistant {
        step: u64,
        text: String,
        reasoning: String,
        model: Option<String>,
        tokens: Option<(u64, u64)>,
        /// Only streamed chunks: the step ended (or crashed) before a
        /// complete message.
        streamed: bool,
    },
    Call {
        id: String,
        name: String,
        arguments: String,
    },
    Result {
        id: String,
        tool: Option<String>,
        text: String,
        failed: bool,
    },
    /// A synthetic closer recovery would write.
    Recovery(String),
    /// Any other event, by type.
    Other(String),
}

/// Streamed text of the current step, until a message replaces it.
#[derive(Default)]
struct Stream {
    step: u64,
    text: String,
    reasoning: String,
}

/// What `show` reads of a chunk's data (other fields are skipped; a chunk
/// whose fields have other types is read as a whole instead).
#[derive(serde::Deserialize)]
struct ChunkData<'a> {
    #[serde(borrow)]
    chunk: Option<ChunkBody<'a>>,
}

#[derive(serde::Deserialize)]
struct ChunkBody<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Default)]
struct Builder {
    turns: Vec<Turn>,
    stream: Stream,
    tools: std::collections::HashMap<String, String>,
}

fn text_of(blocks: Option<&Value>, kind: &str) -> String {
    let mut out = String::new();
    for block in blocks.and_then(Value::as_array).into_iter().flatten() {
        if block.get("type").and_then(Value::as_str) == Some(kind)
            && let Some(text) = block.get("text").and_then(Value::as_str)
        {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
    }
    out
}

/// A user message's text: its `text` content blocks joined; in the legacy
/// shapes upstream still reads, a top-level `content` or `text` string.
pub(crate) fn message_text(data: &Value) -> String {
    match data.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(blocks @ Value::Array(_)) => text_of(Some(blocks), "text"),
        _ => data
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    }
}

impl Builder {
    fn turn(&mut self) -> &mut Turn {
        if self.turns.is_empty() {
            self.turns.push(Turn::default());
        }
        self.turns.last_mut().expect("one turn at least")
    }

    /// The streamed text so far becomes an item of its own (no message
    /// came to replace it).
    fn flush_stream(&mut self) {
        let stream = std::mem::take(&mut self.stream);
        if !stream.text.is_empty() || !stream.reasoning.is_empty() {
            self.turn().items.push(Item::Assistant {
                step: stream.step,
                text: stream.text,
                reasoning: stream.reasoning,
                model: None,
                tokens: None,
                streamed: true,
            });
        }
    }

    fn add(&mut self, event: EventRef<'_>, synthetic: bool) {
        // Nine events in ten are chunks: their text is taken without
        // building the whole of their data.
        if !synthetic
            && event.kind() == EventKind::AssistantChunk
            && let Ok(chunk) = serde_json::from_str::<ChunkData<'_>>(event.data())
        {
            let Some(body) = chunk.chunk else { return };
            match (body.kind.as_deref(), body.text) {
                (Some("text-delta"), Some(t)) => self.stream.text.push_str(&visible_text(&t)),
                (Some("reasoning-delta"), Some(t)) => {
                    self.stream.reasoning.push_str(&visible_text(&t));
                }
                _ => {}
            }
            return;
        }
        let data: Value = serde_json::from_str(event.data()).unwrap_or(Value::Null);
        if synthetic {
            self.flush_stream();
            let what = match event.kind() {
                EventKind::TurnEnd => {
                    let turn = self.turn();
                    turn.recovered = true;
                    turn.end = Some(event.time());
                    turn.outcome = Some("interrupted".into());
                    "turn/end, interrupted".to_owned()
                }
                EventKind::ToolResult => {
                    "tool/result, the call never ran (TOOL_NOT_STARTED)".to_owned()
                }
                _ => visible_line(event.event_type()).into_owned(),
            };
            self.turn().items.push(Item::Recovery(what));
            return;
        }
        match event.kind() {
            EventKind::TurnStart => {
                self.flush_stream();
                self.turns.push(Turn {
                    n: data.get("turn").and_then(Value::as_u64).unwrap_or(0),
                    start: Some(event.time()),
                    ..Turn::default()
                });
            }
            EventKind::TurnEnd => {
                self.flush_stream();
                let turn = self.turn();
                turn.end = Some(event.time());
                turn.outcome = data
                    .pointer("/reason/kind")
                    .and_then(Value::as_str)
                    .map(|kind| visible_line(kind).into_owned());
            }
            EventKind::StepEnd => self.flush_stream(),
            EventKind::StepStart => {
                self.flush_stream();
                self.stream.step = data.get("step").and_then(Value::as_u64).unwrap_or(0);
            }
            EventKind::UserMessage => {
                let text = visible_text(&message_text(&data)).into_owned();
                self.turn().items.push(Item::User(text));
            }
            EventKind::AssistantChunk => {
                let chunk = data.get("chunk");
                let text = chunk.and_then(|c| c.get("text")).and_then(Value::as_str);
                match (
                    chunk.and_then(|c| c.get("type")).and_then(Value::as_str),
                    text,
                ) {
                    (Some("text-delta"), Some(t)) => self.stream.text.push_str(&visible_text(t)),
                    (Some("reasoning-delta"), Some(t)) => {
                        self.stream.reasoning.push_str(&visible_text(t));
                    }
                    _ => {}
                }
            }
            EventKind::AssistantMessage => {
                // The complete message replaces what was streamed of it.
                self.stream = Stream {
                    step: self.stream.step,
                    ..Stream::default()
                };
                let message = data.get("message");
                let content = message.and_then(|m| m.get("content"));
                let source = message.and_then(|m| m.get("source"));
                let model = source.and_then(|s| s.get("model")).and_then(Value::as_str);
                let provider = source
                    .and_then(|s| s.get("provider"))
                    .and_then(Value::as_str);
                let usage = data.get("usage");
                let tokens = |key: &str| usage.and_then(|u| u.get(key)).and_then(Value::as_u64);
                let item = Item::Assistant {
                    step: data.get("step").and_then(Value::as_u64).unwrap_or(0),
                    text: visible_text(&text_of(content, "text")).into_owned(),
                    reasoning: visible_text(&text_of(content, "reasoning")).into_owned(),
                    model: model.map(|m| {
                        visible_line(&match provider {
                            Some(p) => format!("{p}/{m}"),
                            None => m.to_owned(),
                        })
                        .into_owned()
                    }),
                    tokens: tokens("inputTokens").zip(tokens("outputTokens")),
                    streamed: false,
                };
                self.turn().items.push(item);
            }
            EventKind::ToolCall => {
                let field = |k: &str| data.get(k).and_then(Value::as_str).unwrap_or("");
                let (id, name) = (field("callId"), visible_line(field("name")).into_owned());
                self.tools.insert(id.to_owned(), name.clone());
                self.turn().items.push(Item::Call {
                    id: visible_line(id).into_owned(),
                    name,
                    arguments: visible_text(field("arguments")).into_owned(),
                });
            }
            EventKind::ToolResult => {
                let block = data
                    .pointer("/message/content/0")
                    .cloned()
                    .unwrap_or(Value::Null);
                let id = block
                    .get("toolCallId")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let failed = data.get("error").is_some()
                    || block.get("isError").and_then(Value::as_bool) == Some(true);
                let tool = self.tools.get(id).cloned();
                self.turn().items.push(Item::Result {
                    tool,
                    text: visible_text(&text_of(block.get("content"), "text")).into_owned(),
                    id: visible_line(id).into_owned(),
                    failed,
                });
            }
            _ => {
                let name = visible_line(event.event_type()).into_owned();
                self.turn().items.push(Item::Other(name));
            }
        }
    }
}

/// `turnwal show`: each turn is rendered and written as soon as the next
/// one starts, so a session of any size holds one turn's transcript (plus
/// each turn's line of the HTML timeline).
pub(crate) fn show(store: &Store, args: &ShowArgs, out: &mut dyn Write) -> Outcome {
    let mut reader = store.read(&args.session)?;
    let header = reader.header();
    let title = Title {
        id: display_id(&args.session).into_owned(),
        cwd: header.cwd.as_deref().map(|c| visible_line(c).into_owned()),
        created: i64::try_from(header.created_at).ok().map(iso_utc),
        state: reader.state().code(),
    };
    let colour = args.format == ShowFormat::Text
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none();
    let mut page = Page {
        format: args.format,
        colour,
        title,
        only: args.turn,
        started: false,
        timeline: Vec::new(),
    };
    let mut builder = Builder::default();
    let stored = reader.stored();
    let mut i = 0u64;
    while let Some(event) = reader.next_event()? {
        builder.add(event, i >= stored);
        i += 1;
        while builder.turns.len() > 1 {
            let done = builder.turns.remove(0);
            page.turn(&done, out)?;
        }
    }
    builder.flush_stream();
    for done in builder.turns.drain(..) {
        page.turn(&done, out)?;
    }
    if let Some(n) = args.turn
        && !page.started
    {
        return Err(Failure::Other(format!(
            "session {:?} has no turn {n}",
            args.session
        )));
    }
    page.finish(out)?;
    Ok(exit::SUCCESS)
}

/// The transcript being written: its head goes out with the first turn
/// shown (a `--turn` that matches none writes nothing), its tail at the end.
struct Page {
    format: ShowFormat,
    colour: bool,
    title: Title,
    only: Option<u64>,
    started: bool,
    /// The HTML timeline's data, a small object per turn.
    timeline: Vec<Value>,
}

impl Page {
    fn start(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        if !self.started {
            self.started = true;
            let head = match self.format {
                ShowFormat::Text => text_head(&self.title, self.colour),
                ShowFormat::Markdown => markdown_head(&self.title),
                ShowFormat::Html => html_head(&self.title),
            };
            out.write_all(head.as_bytes())?;
        }
        Ok(())
    }

    fn turn(&mut self, t: &Turn, out: &mut dyn Write) -> std::io::Result<()> {
        // Events before the first turn (plugin events of a lenient log)
        // make a turn 0 only when there are any.
        if (t.n == 0 && t.items.is_empty()) || self.only.is_some_and(|n| t.n != n) {
            return Ok(());
        }
        self.start(out)?;
        let text = match self.format {
            ShowFormat::Text => text_turn(t, self.colour),
            ShowFormat::Markdown => markdown_turn(t),
            ShowFormat::Html => {
                let (html, data) = html_turn(t);
                self.timeline.push(data);
                html
            }
        };
        out.write_all(text.as_bytes())
    }

    fn finish(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        self.start(out)?;
        if self.format == ShowFormat::Html {
            out.write_all(html_tail(&self.timeline).as_bytes())?;
        }
        Ok(())
    }
}

struct Title {
    id: String,
    cwd: Option<String>,
    created: Option<String>,
    state: &'static str,
}

impl Title {
    fn line(&self) -> String {
        let mut parts = vec![format!("session {}", self.id)];
        if let Some(cwd) = &self.cwd {
            parts.push(format!("cwd {cwd}"));
        }
        if let Some(created) = &self.created {
            parts.push(format!("created {created}"));
        }
        parts.push(self.state.to_owned());
        parts.join(" · ")
    }
}

/// `completed · 1.50 s`, `open, closed as interrupted by recovery`, …
fn turn_status(t: &Turn) -> String {
    let duration = match (t.start, t.end) {
        (Some(a), Some(b)) if !t.recovered => format!(" · {}", super::output::human_ms(b - a)),
        _ => String::new(),
    };
    match (&t.outcome, t.recovered) {
        (_, true) => "open (a crash); recovery closes it as interrupted".to_owned(),
        (Some(kind), false) => format!("{kind}{duration}"),
        (None, false) => "open".to_owned(),
    }
}

fn turn_title(t: &Turn) -> String {
    if t.n == 0 {
        return "Before the first turn".to_owned();
    }
    let start = t
        .start
        .map(|s| format!(" · {}", iso_utc(s)))
        .unwrap_or_default();
    format!("Turn {}{start} · {}", t.n, turn_status(t))
}

fn assistant_label(
    step: u64,
    model: &Option<String>,
    tokens: &Option<(u64, u64)>,
    streamed: bool,
) -> String {
    let mut parts = vec![format!("step {step}")];
    if let Some(model) = model {
        parts.push(model.clone());
    }
    if let Some((i, o)) = tokens {
        parts.push(format!("{i} in / {o} out tokens"));
    }
    if streamed {
        parts.push("streamed, never completed".into());
    }
    parts.join(", ")
}

fn tool_label(tool: &Option<String>, id: &str) -> String {
    match tool {
        Some(name) => format!("{name} ({id})"),
        None => format!("({id})"),
    }
}

fn indent(text: &str, by: &str) -> String {
    text.lines().map(|l| format!("{by}{l}\n")).collect()
}

/// `s` in the terminal colour `code`, when painting.
fn paint(colour: bool, code: &str, s: &str) -> String {
    if colour {
        format!("\x1b[{code}m{s}\x1b[0m")
    } else {
        s.to_owned()
    }
}

fn text_head(title: &Title, colour: bool) -> String {
    format!("{}\n", paint(colour, "1", &title.line()))
}

fn text_turn(t: &Turn, colour: bool) -> String {
    let paint = |code: &str, s: &str| paint(colour, code, s);
    let mut out = String::new();
    {
        let _ = writeln!(out, "\n{}", paint("1", &turn_title(t)));
        for item in &t.items {
            match item {
                Item::User(text) => {
                    let _ = write!(out, "  {}\n{}", paint("32", "user:"), indent(text, "    "));
                }
                Item::Assistant {
                    step,
                    text,
                    reasoning,
                    model,
                    tokens,
                    streamed,
                } => {
                    let label = assistant_label(*step, model, tokens, *streamed);
                    let _ = writeln!(out, "  {} ({label})", paint("36", "assistant:"));
                    if !reasoning.is_empty() {
                        out.push_str(&paint("2", &indent(reasoning, "    (reasoning) ")));
                    }
                    out.push_str(&indent(text, "    "));
                }
                Item::Call {
                    id,
                    name,
                    arguments,
                } => {
                    let _ = writeln!(out, "  {} {name} ({id}) {arguments}", paint("35", "→ call"));
                }
                Item::Result {
                    id,
                    tool,
                    text,
                    failed,
                } => {
                    let mark = if *failed {
                        paint("31", "✗ failed")
                    } else {
                        paint("35", "← result")
                    };
                    let _ = write!(
                        out,
                        "  {mark} {}\n{}",
                        tool_label(tool, id),
                        indent(text, "    ")
                    );
                }
                Item::Recovery(what) => {
                    let _ = writeln!(out, "  {}", paint("33", &format!("[recovery] {what}")));
                }
                Item::Other(kind) => {
                    let _ = writeln!(out, "  {}", paint("2", &format!("· {kind}")));
                }
            }
        }
    }
    out
}

/// A fenced code block that no backtick run inside `text` can close.
fn fence(text: &str, lang: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let ticks = "`".repeat(longest.max(2) + 1);
    format!("{ticks}{lang}\n{text}\n{ticks}\n")
}

fn markdown_head(title: &Title) -> String {
    let mut out = format!("# Session `{}`\n\n", title.id.replace('`', "'"));
    if let Some(cwd) = &title.cwd {
        let _ = writeln!(out, "- cwd: `{}`", cwd.replace('`', "'"));
    }
    if let Some(created) = &title.created {
        let _ = writeln!(out, "- created: {created}");
    }
    let _ = writeln!(out, "- state: {}", title.state);
    out
}

fn markdown_turn(t: &Turn) -> String {
    let mut out = String::new();
    {
        let _ = writeln!(out, "\n## {}\n", turn_title(t));
        for item in &t.items {
            match item {
                Item::User(text) => {
                    let _ = writeln!(out, "**User:**\n\n{text}\n");
                }
                Item::Assistant {
                    step,
                    text,
                    reasoning,
                    model,
                    tokens,
                    streamed,
                } => {
                    let label = assistant_label(*step, model, tokens, *streamed);
                    let _ = writeln!(out, "**Assistant** ({label}):\n");
                    if !reasoning.is_empty() {
                        let _ = writeln!(out, "{}", indent(reasoning, "> "));
                    }
                    if !text.is_empty() {
                        let _ = writeln!(out, "{text}\n");
                    }
                }
                Item::Call {
                    id,
                    name,
                    arguments,
                } => {
                    let _ = writeln!(
                        out,
                        "**Tool call** `{name}` (`{id}`):\n\n{}",
                        fence(arguments, "json")
                    );
                }
                Item::Result {
                    id,
                    tool,
                    text,
                    failed,
                } => {
                    let status = if *failed { " — **failed**" } else { "" };
                    let _ = writeln!(
                        out,
                        "**Result** {}{status}:\n\n{}",
                        tool_label(tool, id),
                        fence(text, "")
                    );
                }
                Item::Recovery(what) => {
                    let _ = writeln!(out, "*[recovery] {what}*\n");
                }
                Item::Other(kind) => {
                    let _ = writeln!(out, "*{kind}*\n");
                }
            }
        }
    }
    out
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}\
h1{font-size:1.3rem}h2{font-size:1.05rem;border-top:1px solid #ddd;padding-top:.8rem}\
.meta{color:#666}.role{font-weight:600}.user .role{color:#16794c}.assistant .role{color:#0b6a88}\
.call .role,.result .role{color:#7a3e9d}.failed .role{color:#b3261e}.recovery{color:#8a6100;font-style:italic}\
.other{color:#888;font-size:.9em}pre{background:#f6f6f6;padding:.5rem;overflow-x:auto;white-space:pre-wrap}\
.reasoning{color:#666;border-left:3px solid #ccc;padding-left:.5rem}\
#timeline{display:flex;gap:2px;margin:1rem 0;align-items:stretch}\
#timeline a{display:block;min-width:1.5rem;padding:.2rem;font-size:.75rem;color:#fff;text-decoration:none;\
background:#0b6a88;overflow:hidden;white-space:nowrap}#timeline a.interrupted{background:#8a6100}\
#timeline a.failed{background:#b3261e}";

/// The page's one script: the per-turn timeline, drawn from the turns'
/// data (bars as wide as each turn lasted, at least a sliver).
const TIMELINE: &str = "(function(){var turns=JSON.parse(document.getElementById('turn-data').textContent);\
var total=turns.reduce(function(s,t){return s+Math.max(t.ms,1)},0);\
var bar=document.getElementById('timeline');turns.forEach(function(t){var a=document.createElement('a');\
a.href='#turn-'+t.n;a.className='turn '+t.status;a.style.flexGrow=String(Math.max(t.ms,1)/total*100);\
a.title='turn '+t.n+': '+t.label;a.textContent=String(t.n);a.setAttribute('data-turn',String(t.n));\
bar.appendChild(a)});bar.setAttribute('data-turns',String(turns.length))})();";

fn html_head(title: &Title) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>{title}</title>\
         <style>{STYLE}</style></head>\n<body><h1>{heading}</h1>\n\
         <nav id=\"timeline\" aria-label=\"turns\"></nav>\n",
        title = escape(&format!("turnwal: {}", title.id)),
        heading = escape(&title.line()),
    )
}

/// A turn's section, and its line of the timeline's data.
fn html_turn(t: &Turn) -> (String, Value) {
    let mut body = String::new();
    let data;
    {
        let failed = t
            .items
            .iter()
            .any(|i| matches!(i, Item::Result { failed: true, .. }));
        let status = if t.recovered || t.outcome.as_deref() == Some("interrupted") {
            "interrupted"
        } else if failed {
            "failed"
        } else {
            "ok"
        };
        let ms = match (t.start, t.end) {
            (Some(a), Some(b)) => (b - a).max(0),
            _ => 0,
        };
        data = serde_json::json!({ "n": t.n, "ms": ms, "status": status, "label": turn_status(t) });
        let _ = writeln!(
            body,
            "<section class=\"turn\" id=\"turn-{}\"><h2>{}</h2>",
            t.n,
            escape(&turn_title(t))
        );
        for item in &t.items {
            let html = match item {
                Item::User(text) => format!(
                    "<div class=\"user\"><span class=\"role\">User</span><pre>{}</pre></div>",
                    escape(text)
                ),
                Item::Assistant {
                    step,
                    text,
                    reasoning,
                    model,
                    tokens,
                    streamed,
                } => {
                    let reasoning = if reasoning.is_empty() {
                        String::new()
                    } else {
                        format!("<pre class=\"reasoning\">{}</pre>", escape(reasoning))
                    };
                    format!(
                        "<div class=\"assistant\"><span class=\"role\">Assistant</span> <span class=\"meta\">({})</span>{reasoning}<pre>{}</pre></div>",
                        escape(&assistant_label(*step, model, tokens, *streamed)),
                        escape(text)
                    )
                }
                Item::Call {
                    id,
                    name,
                    arguments,
                } => format!(
                    "<div class=\"call\"><span class=\"role\">Tool call</span> <code>{}</code> <span class=\"meta\">({})</span><pre>{}</pre></div>",
                    escape(name),
                    escape(id),
                    escape(arguments)
                ),
                Item::Result {
                    id,
                    tool,
                    text,
                    failed,
                } => format!(
                    "<div class=\"result{}\"><span class=\"role\">{}</span> <code>{}</code><pre>{}</pre></div>",
                    if *failed { " failed" } else { "" },
                    if *failed { "Failed" } else { "Result" },
                    escape(&tool_label(tool, id)),
                    escape(text)
                ),
                Item::Recovery(what) => {
                    format!("<div class=\"recovery\">[recovery] {}</div>", escape(what))
                }
                Item::Other(kind) => format!("<div class=\"other\">{}</div>", escape(kind)),
            };
            body.push_str(&html);
            body.push('\n');
        }
        body.push_str("</section>\n");
    }
    (body, data)
}

fn html_tail(timeline: &[Value]) -> String {
    // JSON inside a script element: `<` escaped so no `</script>` can end it.
    let data = serde_json::to_string(timeline)
        .expect("JSON values serialize")
        .replace('<', "\\u003c");
    format!(
        "<script type=\"application/json\" id=\"turn-data\">{data}</script>\n\
         <script>{TIMELINE}</script>\n</body></html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_outlasts_every_backtick_run_inside() {
        assert_eq!(fence("a", "json"), "```json\na\n```\n");
        assert_eq!(fence("x ``` y `` z", ""), "````\nx ``` y `` z\n````\n");
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
