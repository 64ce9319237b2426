//! A session log builder shared by the contract and SQLite upstream tests:
//! builds a log the way the harness writes it, turns and steps numbered
//! from 1, surface events carrying `surfaceOp`; [`Log::batch`] hands out
//! what was added since the last batch.

use turnwal::Event;

/// A JSON string literal.
pub fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// A session log under construction. Each event's time is one more than
/// the one before unless set with [`Log::at`].
pub struct Log {
    /// Every event so far.
    pub events: Vec<Event>,
    /// How many of them [`Log::batch`] handed out.
    pub taken: usize,
    /// The last turn started.
    pub turn: u64,
    /// The last step started in that turn.
    pub step: u64,
    /// The time of the next event.
    pub time: i64,
}

impl Log {
    /// An empty log: event `i` has seq `i` and time `i + 1`.
    pub fn new() -> Log {
        Log::after(&[])
    }

    /// An empty log whose first event is at `time`.
    pub fn starting_at(time: i64) -> Log {
        Log { time, ..Log::new() }
    }

    /// Continues a stored, balanced log (seq `i` at time `i + 1`).
    pub fn after(events: &[Event]) -> Log {
        Log {
            events: events.to_vec(),
            taken: events.len(),
            turn: events
                .iter()
                .filter(|e| e.event_type() == "turn/start")
                .count() as u64,
            step: 0,
            time: events.len() as i64 + 1,
        }
    }

    pub fn next_seq(&self) -> u64 {
        self.events.len() as u64
    }

    /// Sets the time of the next event.
    pub fn at(&mut self, time: i64) -> &mut Log {
        self.time = time;
        self
    }

    pub fn push_event(&mut self, event: Event) -> u64 {
        self.events.push(event);
        self.time += 1;
        self.events.len() as u64 - 1
    }

    pub fn push(&mut self, event_type: &str, data: &str) -> u64 {
        let e = Event::new(event_type, self.next_seq(), self.time, data).unwrap();
        self.push_event(e)
    }

    pub fn push_surface(&mut self, event_type: &str, data: &str, sources: Option<&[u64]>) -> u64 {
        let mut e = Event::new(event_type, self.next_seq(), self.time, data)
            .unwrap()
            .with_surface_op("\"append\"")
            .unwrap();
        if let Some(sources) = sources {
            e = e.with_source_event_seqs(sources).unwrap();
        }
        self.push_event(e)
    }

    pub fn ignorable(&mut self, event_type: &str, data: &str) -> &mut Log {
        let e = Event::new(event_type, self.next_seq(), self.time, data)
            .unwrap()
            .with_ignorable();
        self.push_event(e);
        self
    }

    pub fn turn_start(&mut self) -> &mut Log {
        self.turn += 1;
        self.step = 0;
        self.push("turn/start", &format!(r#"{{"turn":{}}}"#, self.turn));
        self
    }

    pub fn turn_end(&mut self) -> &mut Log {
        let data = format!(
            r#"{{"turn":{},"reason":{{"kind":"completed"}}}}"#,
            self.turn
        );
        self.push("turn/end", &data);
        self
    }

    pub fn step_start(&mut self) -> &mut Log {
        self.step += 1;
        let data = format!(r#"{{"turn":{},"step":{}}}"#, self.turn, self.step);
        self.push("step/start", &data);
        self
    }

    pub fn step_end(&mut self) -> &mut Log {
        let data = format!(r#"{{"turn":{},"step":{}}}"#, self.turn, self.step);
        self.push("step/end", &data);
        self
    }

    pub fn user(&mut self, id: &str, text: &str) -> &mut Log {
        let data = format!(
            r#"{{"id":{},"role":"user","content":[{{"type":"text","text":{}}}],"source":{{"kind":"user"}}}}"#,
            q(id),
            q(text)
        );
        self.push_surface("user/message", &data, None);
        self
    }

    /// An `assistant/chunk` whose chunk is `chunk` (JSON text).
    pub fn raw_chunk(&mut self, chunk: &str) -> &mut Log {
        let data = format!(
            r#"{{"turn":{},"step":{},"chunk":{chunk}}}"#,
            self.turn, self.step
        );
        self.push("assistant/chunk", &data);
        self
    }

    pub fn text(&mut self, index: u32, text: &str) -> &mut Log {
        self.raw_chunk(&format!(
            r#"{{"type":"text-delta","index":{index},"text":{}}}"#,
            q(text)
        ))
    }

    /// A text delta at index 0.
    pub fn chunk(&mut self, text: &str) -> &mut Log {
        self.text(0, text)
    }

    pub fn reasoning(&mut self, index: u32, text: &str) -> &mut Log {
        self.raw_chunk(&format!(
            r#"{{"type":"reasoning-delta","index":{index},"text":{}}}"#,
            q(text)
        ))
    }

    pub fn tool_delta(&mut self, index: u32, id: &str, name: Option<&str>, args: &str) -> &mut Log {
        let name = name.map_or(String::new(), |n| format!(r#","name":{}"#, q(n)));
        self.raw_chunk(&format!(
            r#"{{"type":"tool-call-delta","index":{index},"id":{}{name},"argumentsDelta":{}}}"#,
            q(id),
            q(args)
        ))
    }

    /// An assistant message with a text block and one tool-call block per
    /// `(callId, name, arguments)`.
    pub fn assistant(&mut self, text: &str, calls: &[(&str, &str, &str)]) -> &mut Log {
        self.assistant_with_sources(text, calls, None);
        self
    }

    /// [`Log::assistant`] with `sourceEventSeqs`; returns its seq.
    pub fn assistant_with_sources(
        &mut self,
        text: &str,
        calls: &[(&str, &str, &str)],
        sources: Option<&[u64]>,
    ) -> u64 {
        let mut blocks = vec![format!(r#"{{"type":"text","text":{}}}"#, q(text))];
        for (id, name, args) in calls {
            blocks.push(format!(
                r#"{{"type":"tool-call","id":{},"name":{},"arguments":{}}}"#,
                q(id),
                q(name),
                q(args)
            ));
        }
        let data = format!(
            r#"{{"turn":{},"step":{},"message":{{"id":"assistant-{}","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"mock","model":"mock"}}}},"usage":{{"inputTokens":12,"outputTokens":3}}}}"#,
            self.turn,
            self.step,
            self.next_seq(),
            blocks.join(",")
        );
        self.push_surface("assistant/message", &data, sources)
    }

    pub fn tool_call(&mut self, id: &str, name: &str, args: &str) -> u64 {
        let data = format!(
            r#"{{"turn":{},"step":{},"callId":{},"name":{},"arguments":{}}}"#,
            self.turn,
            self.step,
            q(id),
            q(name),
            q(args)
        );
        self.push("tool/call", &data)
    }

    pub fn tool_result(&mut self, id: &str, text: &str, call_seq: u64) -> &mut Log {
        let data = format!(
            r#"{{"turn":{},"step":{},"message":{{"id":{},"role":"user","source":{{"kind":"tool","callId":{}}},"content":[{{"type":"tool-result","toolCallId":{},"isError":false,"content":[{{"type":"text","text":{}}}]}}]}}}}"#,
            self.turn,
            self.step,
            q(&format!("result-{id}")),
            q(id),
            q(id),
            q(text)
        );
        self.push_surface("tool/result", &data, Some(&[call_seq]));
        self
    }

    /// `turn/start`, a prompt, one step answering it, `turn/end`.
    pub fn simple_turn(&mut self, user_id: &str, prompt: &str, answer: &str) -> &mut Log {
        self.turn_start()
            .user(user_id, prompt)
            .step_start()
            .assistant(answer, &[])
            .step_end()
            .turn_end()
    }

    /// [`Log::simple_turn`] whose prompt's id is `user-<its seq>`.
    pub fn prompt_turn(&mut self, prompt: &str, answer: &str) -> &mut Log {
        let id = format!("user-{}", self.next_seq());
        self.simple_turn(&id, prompt, answer)
    }

    /// A turn with streamed chunks, a tool call and its result, and a second
    /// step that answers.
    pub fn tool_turn(&mut self, call_id: &str) -> &mut Log {
        self.turn_start()
            .user(&format!("prompt-{call_id}"), "what is in a.txt?")
            .step_start()
            .chunk("Let me ")
            .chunk("look.")
            .assistant(
                "Let me look.",
                &[(call_id, "read_file", r#"{"path":"a.txt"}"#)],
            );
        let call = self.tool_call(call_id, "read_file", r#"{"path":"a.txt"}"#);
        self.tool_result(call_id, "hello from a.txt", call)
            .step_end()
            .step_start()
            .chunk("It says hello.")
            .assistant("It says hello.", &[])
            .step_end()
            .turn_end()
    }

    /// Upstream's `chunkLog(n)` as one more turn: `turn/start`,
    /// `step/start`, `n` text deltas, `step/end`, `turn/end`.
    pub fn chunk_turn(&mut self, n: usize) -> &mut Log {
        self.turn_start().step_start();
        for i in 0..n {
            self.text(0, &format!("t{i} "));
        }
        self.step_end().turn_end()
    }

    pub fn batch(&mut self) -> Vec<Event> {
        let batch = self.events[self.taken..].to_vec();
        self.taken = self.events.len();
        batch
    }

    pub fn all(&self) -> &[Event] {
        &self.events
    }
}
