//! OpenAI's Responses API (`POST {base}/responses`): the API OpenAI's own URL is spoken
//! through; every current OpenAI model accepts it and the `*-codex` models require it.

use super::api::{usage, Answer, Api, Ask, Param, Reader, Stop, Wire};
use super::http::{reported, Failure, Sink};
use super::sse::SseEvent;
use serde_json::{json, Map, Value};

pub struct Responses;

impl Wire for Responses {
    fn api(&self) -> Api {
        Api::Responses
    }

    fn url(&self, base: &str) -> String {
        format!("{}/responses", base.trim_end_matches('/'))
    }

    fn names(&self, p: Param) -> Option<(&'static str, &'static [&'static str])> {
        Some(match p {
            Param::Temperature => ("temperature", &["temperature"]),
            Param::Schema => ("text.format:json_schema", &["text.format", "json_schema"]),
            Param::JsonMode => ("text.format:json_object", &["text.format", "json_object"]),
            Param::Effort => ("reasoning.effort", &["reasoning.effort", "reasoning"]),
            Param::MaxOutput => ("max_output_tokens", &["max_output_tokens"]),
            Param::Stream => ("stream", &["stream"]),
            Param::Store => ("store", &["store"]),
            Param::Seed | Param::StreamOptions | Param::ToolChoice | Param::MaxOutputOlder => {
                return None
            }
        })
    }

    fn body(&self, ask: &Ask<'_>) -> Value {
        let mut b = Map::new();
        b.insert("model".into(), json!(ask.model));
        b.insert("instructions".into(), json!(ask.system));
        b.insert(
            "input".into(),
            json!([{"role": "user", "content": ask.prompt}]),
        );
        if ask.has(Param::Schema) {
            b.insert(
                "text".into(),
                json!({"format": {"type": "json_schema", "name": "proposal", "strict": true, "schema": ask.schema}}),
            );
        } else if ask.has(Param::JsonMode) {
            b.insert("text".into(), json!({"format": {"type": "json_object"}}));
        }
        if ask.has(Param::Temperature) {
            b.insert("temperature".into(), json!(ask.settings.temperature));
        }
        if let (true, Some(n)) = (ask.has(Param::MaxOutput), ask.settings.output_limit()) {
            b.insert("max_output_tokens".into(), json!(n));
        }
        if let (true, Some(e)) = (ask.has(Param::Effort), &ask.settings.reasoning_effort) {
            b.insert("reasoning".into(), json!({"effort": e}));
        }
        if ask.has(Param::Store) {
            // The prompt holds the user's code: not kept on the server.
            b.insert("store".into(), json!(false));
        }
        if ask.has(Param::Stream) {
            b.insert("stream".into(), json!(true));
        }
        Value::Object(b)
    }

    fn reader(&self) -> Box<dyn Reader> {
        Box::<ResponsesReader>::default()
    }
}

#[derive(Default)]
struct ResponsesReader {
    text: String,
    reasoning: String,
    refusal: String,
    deltas: u64,
    /// The final response object (`response.completed`/`incomplete`, or the whole body).
    done: Option<Value>,
}

impl ResponsesReader {
    /// Reads what the final response object holds, where the deltas did not already.
    fn take_final(&mut self, r: &Value) {
        let (mut text, mut reasoning, mut refusal) = (String::new(), String::new(), String::new());
        for item in r
            .get("output")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match item.get("type").and_then(Value::as_str) {
                Some("message") => {
                    for part in item
                        .get("content")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        match part.get("type").and_then(Value::as_str) {
                            Some("output_text") => text
                                .push_str(part.get("text").and_then(Value::as_str).unwrap_or("")),
                            Some("refusal") => refusal.push_str(
                                part.get("refusal").and_then(Value::as_str).unwrap_or(""),
                            ),
                            _ => {}
                        }
                    }
                }
                Some("reasoning") => {
                    for key in ["summary", "content"] {
                        for part in item
                            .get(key)
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                        {
                            if let Some(t) = part.get("text").and_then(Value::as_str) {
                                if !reasoning.is_empty() {
                                    reasoning.push('\n');
                                }
                                reasoning.push_str(t);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if self.text.is_empty() {
            self.text = text;
        }
        if self.reasoning.is_empty() {
            self.reasoning = reasoning;
        }
        if self.refusal.is_empty() {
            self.refusal = refusal;
        }
        self.done = Some(r.clone());
    }
}

/// A response whose status is `failed`, as the failure its `error` reports (an exhausted
/// quota is permanent, like the HTTP one).
fn failed(r: &Value) -> Option<Failure> {
    if r.get("status").and_then(Value::as_str) != Some("failed") {
        return None;
    }
    let error = match r.get("error") {
        Some(e) if e.is_object() => e.clone(),
        _ => json!({"message": "the response failed"}),
    };
    Some(reported(&json!({ "error": error }), "the response failed"))
}

impl Sink for ResponsesReader {
    fn event(&mut self, ev: &SseEvent) -> Result<(), Failure> {
        if ev.data.trim() == "[DONE]" {
            return Ok(());
        }
        let v: Value =
            serde_json::from_str(&ev.data).map_err(|e| format!("an event is not JSON: {e}"))?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(ev.event.as_deref())
            .unwrap_or("");
        let delta = || v.get("delta").and_then(Value::as_str).unwrap_or("");
        match kind {
            "response.output_text.delta" => {
                self.text.push_str(delta());
                self.deltas += 1;
            }
            "response.refusal.delta" => self.refusal.push_str(delta()),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.reasoning.push_str(delta());
                self.deltas += 1;
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                let r = v.get("response").cloned().unwrap_or(Value::Null);
                if let Some(e) = failed(&r) {
                    return Err(e);
                }
                self.take_final(&r);
            }
            "error" => {
                // The error's fields at the top (`code`, `message`), or in `error`.
                let error = v.get("error").filter(|e| e.is_object()).unwrap_or(&v);
                return Err(reported(
                    &json!({ "error": error }),
                    "the stream reported an error",
                ));
            }
            _ => {}
        }
        Ok(())
    }

    fn whole(&mut self, v: Value) -> Result<(), Failure> {
        if let Some(e) = failed(&v) {
            return Err(e);
        }
        if v.get("output").is_none() {
            return Err("the response has no output".into());
        }
        self.take_final(&v);
        Ok(())
    }

    fn tokens(&self) -> u64 {
        self.done
            .as_ref()
            .and_then(|r| r.pointer("/usage/output_tokens"))
            .and_then(Value::as_u64)
            .unwrap_or(self.deltas)
    }
}

impl Reader for ResponsesReader {
    fn usage_so_far(&self) -> Option<crate::store::records::Usage> {
        usage(self.done.as_ref()?.get("usage"), Api::Responses)
    }

    fn finish(self: Box<Self>) -> Result<Answer, String> {
        let Some(r) = &self.done else {
            return Err(
                "the stream ended before the answer was complete (no response.completed)"
                    .to_string(),
            );
        };
        let stop = if !self.refusal.is_empty() {
            Stop::Refused(self.refusal.clone())
        } else if r.get("status").and_then(Value::as_str) == Some("incomplete") {
            let reason = r
                .pointer("/incomplete_details/reason")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            if reason == "content_filter" {
                Stop::Refused("status: incomplete (content_filter)".to_string())
            } else {
                Stop::Cut(format!("status: incomplete ({reason})"))
            }
        } else {
            Stop::Complete
        };
        Ok(Answer {
            usage: usage(r.get("usage"), Api::Responses),
            model: r.get("model").and_then(Value::as_str).map(str::to_string),
            text: self.text,
            reasoning: self.reasoning,
            stop,
        })
    }
}
