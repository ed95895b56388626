//! Anthropic Messages API (`POST {base}/v1/messages`) as it is now: no `temperature` unless
//! the user set one, the proposal's schema in `output_config.format` (a forced tool whose
//! `input_schema` it is where a model lacks that), `output_config.effort`, thinking blocks
//! kept apart from the answer.

use super::api::{usage, Answer, Api, Ask, Param, Reader, Stop, Wire};
use super::http::{one_line, reported, Failure, Sink};
use super::sse::SseEvent;
use crate::store::records::Usage;
use serde_json::{json, Map, Value};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` is required; this is sent when the user gives no limit.
pub const DEFAULT_MAX_TOKENS: u64 = 16384;
/// The tool's name, when a model lacks `output_config.format`.
const TOOL: &str = "propose_change";
/// Said to a model that refuses a forced tool, offered the tool with `tool_choice: auto`.
const CALL_THE_TOOL: &str = "Answer by calling the propose_change tool once, with the proposal as its input, and write no other text.";

/// The most content blocks an answer may have. A real one has a few (thinking, text, a tool
/// call); an index beyond this is a malformed stream, refused before anything is allocated for
/// it (an index of 2^62 would overflow, one of 10^8 would take gigabytes).
const MAX_BLOCKS: u64 = 256;

pub struct Messages;

impl Wire for Messages {
    fn api(&self) -> Api {
        Api::Anthropic
    }

    fn url(&self, base: &str) -> String {
        format!("{}/v1/messages", base.trim_end_matches('/'))
    }

    fn names(&self, p: Param) -> Option<(&'static str, &'static [&'static str])> {
        Some(match p {
            Param::Temperature => ("temperature", &["temperature"]),
            Param::Schema => (
                "output_config.format",
                &[
                    "output_config.format",
                    "output_format",
                    "output_config",
                    "json_schema",
                ],
            ),
            Param::JsonMode => ("tools", &["tools", "input_schema"]),
            Param::ToolChoice => ("tool_choice", &["tool_choice"]),
            Param::Effort => ("output_config.effort", &["output_config.effort", "effort"]),
            Param::MaxOutput => ("max_tokens", &["max_tokens"]),
            Param::Stream => ("stream", &["stream"]),
            Param::Seed | Param::StreamOptions | Param::Store | Param::MaxOutputOlder => {
                return None
            }
        })
    }

    fn required(&self, p: Param) -> bool {
        p == Param::MaxOutput
    }

    fn body(&self, ask: &Ask<'_>) -> Value {
        let mut b = Map::new();
        b.insert("model".into(), json!(ask.model));
        b.insert(
            "max_tokens".into(),
            json!(ask.settings.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
        );
        // A model that refuses a forced tool is told to call it (SPEC §3.3).
        let auto_tool =
            ask.has(Param::JsonMode) && !ask.has(Param::Schema) && !ask.has(Param::ToolChoice);
        if auto_tool {
            b.insert(
                "system".into(),
                json!(format!("{} {CALL_THE_TOOL}", ask.system)),
            );
        } else {
            b.insert("system".into(), json!(ask.system));
        }
        b.insert(
            "messages".into(),
            json!([{"role": "user", "content": ask.prompt}]),
        );
        let mut output = Map::new();
        if ask.has(Param::Schema) {
            output.insert(
                "format".into(),
                json!({"type": "json_schema", "schema": ask.schema}),
            );
        } else if ask.has(Param::JsonMode) {
            b.insert(
                "tools".into(),
                json!([{
                    "name": TOOL,
                    "description": "Propose the change: a unified diff or whole-file writes, and a one-line summary.",
                    "input_schema": ask.schema,
                }]),
            );
            if ask.has(Param::ToolChoice) {
                b.insert("tool_choice".into(), json!({"type": "tool", "name": TOOL}));
            } else {
                b.insert("tool_choice".into(), json!({"type": "auto"}));
            }
        }
        if let (true, Some(e)) = (ask.has(Param::Effort), &ask.settings.reasoning_effort) {
            output.insert("effort".into(), json!(e));
        }
        if !output.is_empty() {
            b.insert("output_config".into(), Value::Object(output));
        }
        if ask.has(Param::Temperature) {
            b.insert("temperature".into(), json!(ask.settings.temperature));
        }
        if ask.has(Param::Stream) {
            b.insert("stream".into(), json!(true));
        }
        Value::Object(b)
    }

    fn reader(&self) -> Box<dyn Reader> {
        Box::<MessagesReader>::default()
    }
}

#[derive(Default)]
struct MessagesReader {
    /// Content blocks by index: their type and text so far.
    blocks: Vec<(String, String)>,
    stop_reason: Option<String>,
    /// The usage as reported so far: `message_start` has it all, `message_delta` the
    /// cumulative counts that changed (each count taken from the latest event naming it).
    reported: Option<Usage>,
    deltas: u64,
    stopped: bool,
    /// The `model` the answer names.
    model: Option<String>,
}

impl MessagesReader {
    /// The block at `index`, made (with any before it) when new. An index beyond
    /// `MAX_BLOCKS` fails the request as a malformed stream: transient, like a stream cut
    /// short or an event that is not JSON, since it is the wire that is broken, not the
    /// model's proposal.
    fn block(&mut self, index: u64) -> Result<&mut (String, String), String> {
        if index >= MAX_BLOCKS {
            return Err(format!(
                "the stream names content block {index}, beyond the {MAX_BLOCKS} an answer may have (a malformed stream)"
            ));
        }
        let index = index as usize;
        if self.blocks.len() <= index {
            self.blocks
                .resize(index + 1, (String::new(), String::new()));
        }
        Ok(&mut self.blocks[index])
    }

    fn usage(&mut self, u: Option<&Value>) {
        let Some(new) = usage(u, Api::Anthropic) else {
            return;
        };
        let old = self.reported.take().unwrap_or_default();
        self.reported = Some(Usage {
            input_tokens: new.input_tokens.or(old.input_tokens),
            output_tokens: new.output_tokens.or(old.output_tokens),
            cache_read_tokens: new.cache_read_tokens.or(old.cache_read_tokens),
            cache_write_tokens: new.cache_write_tokens.or(old.cache_write_tokens),
            cache_write_1h_tokens: new.cache_write_1h_tokens.or(old.cache_write_1h_tokens),
            server_cost_usd: new.server_cost_usd.or(old.server_cost_usd),
            ..Usage::default()
        });
    }

    /// The usage with the cache reads and writes counted as input too (Anthropic's
    /// `input_tokens` leaves them out), so `input_tokens` means every input token.
    fn total_usage(&self) -> Option<Usage> {
        let u = self.reported.clone()?;
        let cached = u
            .cache_read_tokens
            .unwrap_or(0)
            .saturating_add(u.cache_write_tokens.unwrap_or(0));
        Some(Usage {
            input_tokens: u.input_tokens.map(|n| n.saturating_add(cached)),
            ..u
        })
    }
}

/// A content block's text: text, thinking, or a forced tool's input as JSON.
fn start_text(block: &Value) -> (String, String) {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let text = match kind.as_str() {
        "text" => block
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        "thinking" => block
            .get("thinking")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        "tool_use" => match block.get("input") {
            Some(Value::Object(m)) if !m.is_empty() => Value::Object(m.clone()).to_string(),
            _ => String::new(),
        },
        _ => String::new(),
    };
    (kind, text)
}

impl Sink for MessagesReader {
    fn event(&mut self, ev: &SseEvent) -> Result<(), Failure> {
        let v: Value =
            serde_json::from_str(&ev.data).map_err(|e| format!("an event is not JSON: {e}"))?;
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                self.usage(v.pointer("/message/usage"));
                if let Some(m) = v.pointer("/message/model").and_then(Value::as_str) {
                    self.model = Some(m.to_string());
                }
            }
            "content_block_start" => {
                let started = start_text(&v["content_block"]);
                *self.block(index)? = started;
            }
            "content_block_delta" => {
                let d = &v["delta"];
                let piece = match d.get("type").and_then(Value::as_str) {
                    Some("text_delta") => d.get("text"),
                    Some("thinking_delta") => d.get("thinking"),
                    Some("input_json_delta") => d.get("partial_json"),
                    _ => None,
                };
                if let Some(t) = piece.and_then(Value::as_str) {
                    self.block(index)?.1.push_str(t);
                    self.deltas += 1;
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.to_string());
                }
                self.usage(v.get("usage"));
            }
            "message_stop" => self.stopped = true,
            "error" => return Err(reported(&v, "the stream reported an error")),
            _ => {} // ping, content_block_stop
        }
        Ok(())
    }

    fn whole(&mut self, v: Value) -> Result<(), Failure> {
        if v.get("type").and_then(Value::as_str) == Some("error") {
            return Err(reported(&v, "the answer is an error"));
        }
        let parts = v
            .get("content")
            .and_then(Value::as_array)
            .ok_or("the response has no content")?;
        self.blocks = parts.iter().map(start_text).collect();
        self.model = v.get("model").and_then(Value::as_str).map(str::to_string);
        self.stop_reason = v
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_string);
        self.usage(v.get("usage"));
        self.stopped = true;
        Ok(())
    }

    fn tokens(&self) -> u64 {
        (self.reported.as_ref())
            .and_then(|u| u.output_tokens)
            .filter(|n| *n > 0)
            .unwrap_or(self.deltas)
    }
}

impl Reader for MessagesReader {
    fn usage_so_far(&self) -> Option<Usage> {
        self.total_usage()
    }

    fn finish(self: Box<Self>) -> Result<Answer, String> {
        if !self.stopped && self.stop_reason.is_none() {
            return Err(
                "the stream ended before the answer was complete (no message_stop)".to_string(),
            );
        }
        // The tool's input is the answer where the model called it; text beside it (a model
        // offered the tool with `tool_choice: auto` may say what it is about to do) is kept
        // with the reasoning, never parsed.
        let called = self.blocks.iter().any(|(kind, _)| kind == "tool_use");
        let mut text = String::new();
        let mut reasoning = String::new();
        for (kind, t) in &self.blocks {
            match kind.as_str() {
                "tool_use" => text.push_str(t),
                "text" if !called => text.push_str(t),
                "thinking" | "text" => reasoning.push_str(t),
                _ => {}
            }
        }
        let stop = match self.stop_reason.as_deref() {
            Some("refusal") => Stop::Refused(if text.trim().is_empty() {
                "stop_reason: refusal".to_string()
            } else {
                format!("stop_reason: refusal: {}", one_line(&text))
            }),
            Some(r @ ("max_tokens" | "model_context_window_exceeded")) => {
                Stop::Cut(format!("stop_reason: {r}"))
            }
            _ => Stop::Complete,
        };
        let usage = self.total_usage();
        Ok(Answer {
            text,
            reasoning,
            usage,
            stop,
            model: self.model,
        })
    }
}
