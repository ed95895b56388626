//! OpenAI Chat Completions (and every server that speaks it: vLLM, Ollama, llama.cpp, …).

use super::http::{post_json, Exchange};
use super::{Provider, ProviderError, Request, Response};
use crate::roles::se::prompt::SYSTEM;
use crate::roles::se::proposal::OutputFormat;
use crate::store::records::Usage;
use serde_json::{json, Value};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

pub struct OpenAi {
    pub model: String,
    pub base_url: String,
    pub api_key: Option<String>,
    pub temperature: f64,
}

impl Provider for OpenAi {
    fn propose(&mut self, request: &Request<'_>) -> Result<Response, ProviderError> {
        let body = json!({
            "model": self.model,
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": request.prompt},
            ],
            "temperature": self.temperature,
            "seed": 0,
            "response_format": {"type": "json_object"},
        });
        let mut headers = Vec::new();
        if let Some(key) = &self.api_key {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        let value = post_json(&Exchange {
            url: format!("{}/chat/completions", self.base_url.trim_end_matches('/')),
            headers,
            body: &body,
            provider: "openai",
        })?;
        let raw = value
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ProviderError::Failed(
                    "openai: the response has no choices[0].message.content".into(),
                )
            })?
            .to_string();
        let usage = value.get("usage").map(|u| Usage {
            input_tokens: u.get("prompt_tokens").and_then(Value::as_u64),
            output_tokens: u.get("completion_tokens").and_then(Value::as_u64),
        });
        Ok(Response {
            raw: raw.into_bytes(),
            format: OutputFormat::StrictJson,
            usage,
        })
    }
}
