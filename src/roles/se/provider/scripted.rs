//! The demo's built-in proposer: fixed proposals, one per attempt.

use super::contract::{Provider, ProviderError, Request, Response};
use crate::roles::se::proposal::OutputFormat;

pub struct Scripted {
    pub proposals: Vec<String>,
}

impl Provider for Scripted {
    fn propose(&mut self, request: &Request<'_>) -> Result<Response, ProviderError> {
        let index = request.attempt.saturating_sub(1) as usize;
        let raw = self.proposals.get(index).cloned().ok_or_else(|| {
            ProviderError::Exhausted(format!("the script has no proposal {}", request.attempt))
        })?;
        Ok(Response::plain(raw.into_bytes(), OutputFormat::StrictJson))
    }
}
