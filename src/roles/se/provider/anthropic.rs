//! Anthropic Messages API.

use super::http::{post_json, Exchange};
use super::{Provider, ProviderError, Request, Response};
use crate::roles::se::prompt::SYSTEM;
use crate::roles::se::proposal::OutputFormat;
use crate::store::records::Usage;
use serde_json::{json, Value};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";
const MAX_TOKENS: u64 = 16384;

pub struct Anthropic {
    pub model: String,
    pub base_url: String,
    pub api_key: String,
    pub temperature: f64,
}

impl Provider for Anthropic {
    fn propose(&mut self, request: &Request<'_>) -> Result<Response, ProviderError> {
        let body = json!({
            "model": self.model,
            "max_tokens": MAX_TOKENS,
            "temperature": self.temperature,
            "system": SYSTEM,
            "messages": [{"role": "user", "content": request.prompt}],
        });
        let value = post_json(&Exchange {
            url: format!("{}/v1/messages", self.base_url.trim_end_matches('/')),
            headers: vec![
                ("x-api-key", self.api_key.clone()),
                ("anthropic-version", API_VERSION.to_string()),
            ],
            body: &body,
            provider: "anthropic",
        })?;
        let parts = value
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                ProviderError::Failed("anthropic: the response has no content".into())
            })?;
        let raw: String = parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect();
        let usage = value.get("usage").map(|u| Usage {
            input_tokens: u.get("input_tokens").and_then(Value::as_u64),
            output_tokens: u.get("output_tokens").and_then(Value::as_u64),
        });
        Ok(Response {
            raw: raw.into_bytes(),
            format: OutputFormat::StrictJson,
            usage,
        })
    }
}
