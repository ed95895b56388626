//! OpenAI Chat Completions (`POST {base}/chat/completions`), spoken to every server the user
//! points `--llm-base-url` at: vLLM, Ollama, llama.cpp, OpenRouter, Gemini's and Azure's
//! OpenAI-compatible endpoints.

use super::api::{usage, Answer, Api, Ask, Param, Reader, Stop, Wire};
use super::http::{reported, Failure, Sink};
use super::sse::SseEvent;
use serde_json::{json, Map, Value};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

pub struct Chat;

impl Wire for Chat {
    fn api(&self) -> Api {
        Api::Chat
    }

    fn url(&self, base: &str) -> String {
        format!("{}/chat/completions", base.trim_end_matches('/'))
    }

    fn names(&self, p: Param) -> Option<(&'static str, &'static [&'static str])> {
        Some(match p {
            Param::Temperature => ("temperature", &["temperature"]),
            Param::Seed => ("seed", &["seed"]),
            Param::Schema => (
                "response_format:json_schema",
                &["response_format", "json_schema"],
            ),
            Param::JsonMode => (
                "response_format:json_object",
                &["response_format", "json_object"],
            ),
            Param::Effort => ("reasoning_effort", &["reasoning_effort"]),
            // OpenAI words a limit too large for the model by its older alias, `max_tokens`.
            Param::MaxOutput => (
                "max_completion_tokens",
                &["max_completion_tokens", "max_tokens"],
            ),
            Param::MaxOutputOlder => ("max_tokens", &["max_tokens"]),
            Param::Stream => ("stream", &["stream"]),
            Param::StreamOptions => ("stream_options", &["stream_options", "include_usage"]),
            Param::Store | Param::ToolChoice => return None,
        })
    }

    fn body(&self, ask: &Ask<'_>) -> Value {
        let mut b = Map::new();
        b.insert("model".into(), json!(ask.model));
        b.insert(
            "messages".into(),
            json!([
                {"role": "system", "content": ask.system},
                {"role": "user", "content": ask.prompt},
            ]),
        );
        if ask.has(Param::Temperature) {
            b.insert("temperature".into(), json!(ask.settings.temperature));
        }
        if ask.has(Param::Seed) {
            b.insert("seed".into(), json!(ask.settings.seed));
        }
        if ask.has(Param::Schema) {
            b.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {"name": "proposal", "strict": true, "schema": ask.schema}}),
            );
        } else if ask.has(Param::JsonMode) {
            b.insert("response_format".into(), json!({"type": "json_object"}));
        }
        if let (true, Some(n)) = (ask.has(Param::MaxOutput), ask.settings.output_limit()) {
            b.insert("max_completion_tokens".into(), json!(n));
        } else if let (true, Some(n)) =
            (ask.has(Param::MaxOutputOlder), ask.settings.output_limit())
        {
            b.insert("max_tokens".into(), json!(n));
        }
        if let (true, Some(e)) = (ask.has(Param::Effort), &ask.settings.reasoning_effort) {
            b.insert("reasoning_effort".into(), json!(e));
        }
        if ask.has(Param::Stream) {
            b.insert("stream".into(), json!(true));
            if ask.has(Param::StreamOptions) {
                b.insert("stream_options".into(), json!({"include_usage": true}));
            }
        }
        Value::Object(b)
    }

    fn reader(&self) -> Box<dyn Reader> {
        Box::<ChatReader>::default()
    }
}

#[derive(Default)]
struct ChatReader {
    text: String,
    reasoning: String,
    refusal: String,
    finish: Option<String>,
    usage: Option<crate::store::records::Usage>,
    chunks: u64,
    got_choice: bool,
    /// Read as a stream: it must end with a `finish_reason` or `[DONE]`, else it was cut.
    streamed: bool,
    ended: bool,
    /// The `model` the answer names.
    model: Option<String>,
}

/// `reasoning_content` (DeepSeek, vLLM, llama.cpp) or `reasoning` (OpenRouter, Ollama).
fn reasoning_of(m: &Value) -> Option<&str> {
    m.get("reasoning_content")
        .and_then(Value::as_str)
        .or_else(|| m.get("reasoning").and_then(Value::as_str))
}

/// A chunk or answer that is an error (`{"error": {...}}`), as the failure it reports.
fn stream_error(v: &Value, what: &str) -> Option<Failure> {
    v.get("error").filter(|e| !e.is_null())?;
    Some(reported(v, what))
}

impl Sink for ChatReader {
    fn event(&mut self, ev: &SseEvent) -> Result<(), Failure> {
        self.streamed = true;
        if ev.data.trim() == "[DONE]" {
            self.ended = true;
            return Ok(());
        }
        let v: Value =
            serde_json::from_str(&ev.data).map_err(|e| format!("an event is not JSON: {e}"))?;
        if let Some(e) = stream_error(&v, "the stream reported an error") {
            return Err(e);
        }
        if let Some(u) = usage(v.get("usage"), Api::Chat) {
            self.usage = Some(u);
        }
        // An empty `model` (Azure's first chunk, some proxies' last) names nothing.
        if let Some(m) = v
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
        {
            self.model = Some(m.to_string());
        }
        if let Some(choice) = v.pointer("/choices/0") {
            self.got_choice = true;
            let delta = &choice["delta"];
            if let Some(t) = delta.get("content").and_then(Value::as_str) {
                self.text.push_str(t);
                self.chunks += 1;
            }
            if let Some(t) = reasoning_of(delta) {
                self.reasoning.push_str(t);
                self.chunks += 1;
            }
            if let Some(t) = delta.get("refusal").and_then(Value::as_str) {
                self.refusal.push_str(t);
            }
            if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(f.to_string());
                self.ended = true;
            }
        }
        Ok(())
    }

    fn whole(&mut self, v: Value) -> Result<(), Failure> {
        if let Some(e) = stream_error(&v, "the answer is an error") {
            return Err(e);
        }
        self.usage = usage(v.get("usage"), Api::Chat);
        self.model = v.get("model").and_then(Value::as_str).map(str::to_string);
        let choice = v
            .pointer("/choices/0")
            .ok_or("the response has no choices")?;
        self.got_choice = true;
        let m = &choice["message"];
        self.text = m
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        self.reasoning = reasoning_of(m).unwrap_or("").to_string();
        self.refusal = m
            .get("refusal")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        self.finish = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok(())
    }

    fn tokens(&self) -> u64 {
        self.usage
            .as_ref()
            .and_then(|u| u.output_tokens)
            .unwrap_or(self.chunks)
    }
}

impl Reader for ChatReader {
    fn usage_so_far(&self) -> Option<crate::store::records::Usage> {
        self.usage.clone()
    }

    fn finish(self: Box<Self>) -> Result<Answer, String> {
        if !self.got_choice {
            return Err("the response has no choices".to_string());
        }
        if self.streamed && !self.ended {
            return Err(
                "the stream ended before the answer was complete (no finish_reason, no [DONE])"
                    .to_string(),
            );
        }
        let stop = if !self.refusal.is_empty() {
            Stop::Refused(self.refusal.clone())
        } else if self.finish.as_deref() == Some("length") {
            Stop::Cut("finish_reason: length".to_string())
        } else if self.finish.as_deref() == Some("content_filter") {
            Stop::Refused("finish_reason: content_filter".to_string())
        } else {
            Stop::Complete
        };
        Ok(Answer {
            text: self.text,
            reasoning: self.reasoning,
            usage: self.usage,
            stop,
            model: self.model,
        })
    }
}
