//! The HTTP exchange shared by the model providers: transient errors (timeouts, 429, 5xx)
//! retried with backoff, permanent ones (401/403, unknown model, malformed request) fatal.
//! Nothing here ever formats a header value, so an API key cannot leak into a message.

use super::ProviderError;
use serde_json::Value;
use std::time::Duration;

/// At most this many requests in all: the first and three retries.
const MAX_REQUESTS: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

pub struct Exchange<'a> {
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: &'a Value,
    pub provider: &'static str,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(REQUEST_TIMEOUT))
        .http_status_as_error(false)
        .build()
        .into()
}

enum Outcome {
    Done(Value),
    Retry(String, Option<Duration>),
    Fatal(String),
}

fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let msg = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .or_else(|| v.get("error"))
        })
        .and_then(|m| m.as_str().map(str::to_string))
        .unwrap_or_else(|| body.chars().take(200).collect());
    msg.lines().next().unwrap_or("").to_string()
}

fn once(agent: &ureq::Agent, ex: &Exchange<'_>) -> Outcome {
    let mut req = agent
        .post(&ex.url)
        .header("content-type", "application/json");
    for (name, value) in &ex.headers {
        req = req.header(*name, value);
    }
    let mut resp = match req.send(ex.body.to_string()) {
        Ok(r) => r,
        Err(e) => {
            return Outcome::Retry(
                format!("{}: request failed: {}", ex.provider, transport_kind(&e)),
                None,
            )
        }
    };
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s).min(MAX_RETRY_AFTER));
    let text = match resp.body_mut().read_to_string() {
        Ok(t) => t,
        Err(e) => {
            return Outcome::Retry(
                format!(
                    "{}: reading the response failed: {}",
                    ex.provider,
                    transport_kind(&e)
                ),
                None,
            )
        }
    };
    match status {
        200..=299 => match serde_json::from_str(&text) {
            Ok(v) => Outcome::Done(v),
            Err(_) => Outcome::Retry(format!("{}: the response is not JSON", ex.provider), None),
        },
        401 | 403 => Outcome::Fatal(format!(
            "{} refused the API key (HTTP {status}): {}",
            ex.provider,
            error_message(&text)
        )),
        404 => Outcome::Fatal(format!(
            "{}: unknown model or endpoint (HTTP 404): {}",
            ex.provider,
            error_message(&text)
        )),
        408 | 409 | 425 | 429 | 500..=599 => Outcome::Retry(
            format!("{}: HTTP {status}: {}", ex.provider, error_message(&text)),
            retry_after,
        ),
        _ => Outcome::Fatal(format!(
            "{} rejected the request (HTTP {status}): {}",
            ex.provider,
            error_message(&text)
        )),
    }
}

/// Names the kind of transport failure without echoing the request.
fn transport_kind(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "timed out".to_string(),
        ureq::Error::Io(io) => format!("i/o error: {}", io.kind()),
        ureq::Error::HostNotFound => "host not found".to_string(),
        ureq::Error::ConnectionFailed => "connection failed".to_string(),
        other => other
            .to_string()
            .lines()
            .next()
            .unwrap_or("error")
            .to_string(),
    }
}

/// Posts the request, retrying transient failures; `sleep` is injectable for tests.
pub fn post_json(ex: &Exchange<'_>) -> Result<Value, ProviderError> {
    let agent = agent();
    let mut backoff = FIRST_BACKOFF;
    let mut last = String::new();
    for n in 1..=MAX_REQUESTS {
        match interruptible(&agent, ex)? {
            Outcome::Done(v) => return Ok(v),
            Outcome::Fatal(msg) => return Err(ProviderError::Fatal(msg)),
            Outcome::Retry(msg, after) => {
                last = msg;
                if n < MAX_REQUESTS {
                    pause(after.unwrap_or(backoff))?;
                    backoff *= 2;
                }
            }
        }
    }
    Err(ProviderError::Failed(format!(
        "{last} (gave up after {MAX_REQUESTS} requests)"
    )))
}

fn interrupted() -> ProviderError {
    ProviderError::Failed("interrupted while waiting for the model".to_string())
}

/// Sleeps, waking early when the run is interrupted.
fn pause(d: Duration) -> Result<(), ProviderError> {
    let end = std::time::Instant::now() + d;
    while std::time::Instant::now() < end {
        if crate::interrupt::requested() {
            return Err(interrupted());
        }
        std::thread::sleep(
            end.saturating_duration_since(std::time::Instant::now())
                .min(Duration::from_millis(50)),
        );
    }
    Ok(())
}

/// One request on its own thread, so Ctrl-C is answered at once rather than when the model
/// replies (the abandoned request ends with the process).
fn interruptible(agent: &ureq::Agent, ex: &Exchange<'_>) -> Result<Outcome, ProviderError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (agent, url, headers, body, provider) = (
        agent.clone(),
        ex.url.clone(),
        ex.headers.clone(),
        ex.body.clone(),
        ex.provider,
    );
    std::thread::spawn(move || {
        let owned = Exchange {
            url,
            headers,
            body: &body,
            provider,
        };
        let _ = tx.send(once(&agent, &owned));
    });
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(outcome) => return Ok(outcome),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if crate::interrupt::requested() => {
                return Err(interrupted())
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(ProviderError::Failed(format!(
                    "{}: the request thread ended unexpectedly",
                    ex.provider
                )))
            }
        }
    }
}
