//! The one transport of the model providers: one POST on its own thread (so Ctrl-C is answered
//! at once), its body streamed back to the caller's thread as it arrives, with a limit on
//! silence and one on the whole request. Retrying, dropping refused parameters and switching
//! APIs are decided by the caller (`client`). Nothing here ever formats a header value, so an
//! API key cannot leak into a message.

use super::sse::{SseEvent, SseParser};
use serde_json::Value;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// No byte from the server for this long is a transient failure (SPEC §3.3).
pub const SILENCE: Duration = Duration::from_secs(120);
/// The default limit on one whole request (`factory.llmTimeout`).
pub const DEFAULT_TOTAL: Duration = Duration::from_secs(900);
const CONNECT: Duration = Duration::from_secs(30);
/// An error body is read up to this size (it is only ever shown as one line).
const MAX_ERROR_BODY: usize = 1 << 20;
/// The largest answer (text and reasoning) we accept: 4 MiB. A proposal's writes are
/// limited to 500 KB; written as a diff plus JSON-escaped whole files that is at most about
/// 1 MB, and even the largest output limit (32,768 tokens) is far below 1 MB of text, so
/// anything above is a broken or hostile server, not a proposal.
pub const MAX_ANSWER: usize = 4 << 20;
/// The most bytes of a 2xx body read from the wire: a streamed answer pays about a hundred
/// bytes of event framing per token, so a legitimate stream stays far below this; reading
/// stops here, which bounds memory whatever the server sends.
pub const MAX_BODY: usize = 32 << 20;

pub struct Exchange {
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Value,
}

/// What the body of a 2xx answer is handed to, event by event or whole.
pub trait Sink {
    fn event(&mut self, event: &SseEvent) -> Result<(), String>;
    fn whole(&mut self, value: Value) -> Result<(), String>;
    /// Tokens received so far (for the live status line).
    fn tokens(&self) -> u64;
}

/// A server's error, in its own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    pub status: u16,
    /// One line: `error.message`, Gemini's array-wrapped error, pydantic's `loc: msg`.
    pub message: String,
    /// Parameter names the body points at (OpenAI's `param`, pydantic's `loc`).
    pub params: Vec<String>,
    pub retry_after: Option<Duration>,
}

pub enum Failure {
    /// Nothing answered: connection refused, unknown host.
    Unreachable(String),
    /// No answer in time from a server that may never have been reached (ureq's own
    /// timeouts: connect, send, first response byte).
    TimedOut(String),
    /// A broken connection, a stream that stalled or ended early, a limit of ours.
    Transient(String),
    /// A 2xx answer that is neither JSON nor events: on the first request, the base URL
    /// points at something that is not the API (a web UI); later, a transient failure.
    NotApi(String),
    /// A 2xx body larger than `MAX_BODY`: reading stopped there.
    TooLarge(String),
    Status(ServerError),
    Interrupted,
}

enum Msg {
    Head(Head),
    Bytes(Vec<u8>),
    End,
    Failed(Failure),
}

fn agent(total: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        // Only bounds the abandoned thread: the caller's own clock names the limit first.
        .timeout_global(Some(total + Duration::from_secs(5)))
        .timeout_connect(Some(CONNECT))
        .http_status_as_error(false)
        .build()
        .into()
}

/// The silence limit; the tests of a stalled stream shorten it (test builds only).
fn silence() -> Duration {
    #[cfg(feature = "test-hooks")]
    if let Some(ms) =
        crate::env::var("GIT_FACTORY_TEST_LLM_SILENCE_MS").and_then(|v| v.parse::<u64>().ok())
    {
        return Duration::from_millis(ms);
    }
    SILENCE
}

/// Sends one request and feeds a 2xx body to `sink`; `on_tokens` hears the sink's token
/// count whenever bytes arrive. Returns `Ok(())` once the whole body was read and accepted.
pub fn exchange<S: Sink + ?Sized>(
    ex: &Exchange,
    total: Duration,
    sink: &mut S,
    on_tokens: &mut dyn FnMut(u64),
) -> Result<(), Failure> {
    let rx = spawn(ex, total);
    let started = Instant::now();
    let silence = silence();
    let mut last = Instant::now();
    let mut body = Body::default();
    loop {
        // Checked on every turn: a server that trickles bytes never lets the wait time out.
        if crate::interrupt::requested() {
            return Err(Failure::Interrupted);
        }
        if started.elapsed() >= total {
            return Err(Failure::Transient(format!(
                "the request took longer than {}s (git config factory.llmTimeout)",
                total.as_secs()
            )));
        }
        let msg = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(msg) => msg,
            Err(RecvTimeoutError::Timeout) => {
                if last.elapsed() >= silence {
                    return Err(Failure::Transient(format!(
                        "no byte from the server for {}s",
                        silence.as_secs_f64()
                    )));
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Failure::Transient(
                    "the request thread ended unexpectedly".to_string(),
                ))
            }
        };
        last = Instant::now();
        match msg {
            Msg::Failed(f) => return Err(f),
            Msg::Head(head) => body.head = Some(head),
            Msg::Bytes(bytes) => {
                body.bytes(&bytes, sink)?;
                on_tokens(sink.tokens());
            }
            Msg::End => return body.end(sink),
        }
    }
}

/// A response's head: its status and the headers that decide how it is read.
struct Head {
    status: u16,
    event_stream: bool,
    retry_after: Option<Duration>,
}

/// A response body as it arrives.
#[derive(Default)]
struct Body {
    head: Option<Head>,
    parser: SseParser,
    /// An error body, a whole answer, or a stream's bytes before its first event.
    buffer: Vec<u8>,
    received: usize,
    events: usize,
}

impl Body {
    fn success(&self) -> bool {
        matches!(
            self.head,
            Some(Head {
                status: 200..=299,
                ..
            })
        )
    }

    /// Bytes of the body: a 2xx stream's events go to `sink` as they complete.
    fn bytes<S: Sink + ?Sized>(&mut self, bytes: &[u8], sink: &mut S) -> Result<(), Failure> {
        self.received += bytes.len();
        if self.success() && self.received > MAX_BODY {
            return Err(Failure::TooLarge(format!(
                "the answer was larger than {} MiB (reading stopped there)",
                MAX_BODY >> 20
            )));
        }
        if self.success() && self.head.as_ref().is_some_and(|h| h.event_stream) {
            // Kept until the first event: a server may label a plain JSON answer as an
            // event stream.
            if self.events == 0 {
                self.buffer.extend_from_slice(bytes);
            }
            for event in self.parser.push(bytes).map_err(Failure::Transient)? {
                self.events += 1;
                self.buffer = Vec::new();
                sink.event(&event).map_err(Failure::Transient)?;
            }
        } else if self.buffer.len() < MAX_ERROR_BODY || self.success() {
            self.buffer.extend_from_slice(bytes);
        }
        Ok(())
    }

    /// The body ended: an error status is the server's error; a stream's last event is
    /// handed over; a whole answer is read.
    fn end<S: Sink + ?Sized>(mut self, sink: &mut S) -> Result<(), Failure> {
        let Some(head) = self.head.take() else {
            return Err(Failure::Transient("the server sent no answer".to_string()));
        };
        if !(200..=299).contains(&head.status) {
            let mut error = server_error(head.status, &String::from_utf8_lossy(&self.buffer));
            error.retry_after = head.retry_after;
            return Err(Failure::Status(error));
        }
        if head.event_stream {
            if let Some(event) = self.parser.finish().map_err(Failure::Transient)? {
                self.events += 1;
                sink.event(&event).map_err(Failure::Transient)?;
            }
            if self.events > 0 {
                return Ok(());
            }
            // No event at all: a whole answer under the wrong label is read as one.
            if let Ok(value) = serde_json::from_slice::<Value>(&self.buffer) {
                return sink.whole(value).map_err(Failure::Transient);
            }
            return Ok(());
        }
        read_whole(self.buffer, sink)
    }
}

/// A 2xx body that is not labelled as events: JSON, or events from a server that ignored
/// `stream` but still framed its answer so.
fn read_whole<S: Sink + ?Sized>(buffer: Vec<u8>, sink: &mut S) -> Result<(), Failure> {
    let text = String::from_utf8(buffer)
        .map_err(|_| Failure::NotApi("the response is not UTF-8".to_string()))?;
    if text.trim_start().starts_with("data:") || text.trim_start().starts_with("event:") {
        let mut parser = SseParser::default();
        let mut events = parser.push(text.as_bytes()).map_err(Failure::Transient)?;
        events.extend(parser.finish().map_err(Failure::Transient)?);
        for event in &events {
            sink.event(event).map_err(Failure::Transient)?;
        }
        return Ok(());
    }
    let value: Value = serde_json::from_str(&text).map_err(|_| {
        let page = text.trim_start().starts_with('<');
        Failure::NotApi(if page {
            "the answer is a web page, not JSON".to_string()
        } else {
            "the answer is not JSON".to_string()
        })
    })?;
    sink.whole(value).map_err(Failure::Transient)
}

/// Runs the request on its own thread; the thread ends with the connection (or the global
/// timeout) when the caller stops listening.
fn spawn(ex: &Exchange, total: Duration) -> Receiver<Msg> {
    let (tx, rx) = channel();
    let (url, headers, body) = (ex.url.clone(), ex.headers.clone(), ex.body.to_string());
    std::thread::spawn(move || {
        let agent = agent(total);
        let mut req = agent.post(&url).header("content-type", "application/json");
        for (name, value) in &headers {
            req = req.header(*name, value);
        }
        let resp = match req.send(body) {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(Msg::Failed(transport_failure(&e)));
                return;
            }
        };
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let event_stream = header("content-type")
            .is_some_and(|t| t.to_ascii_lowercase().contains("text/event-stream"));
        let retry_after = header("retry-after")
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        if tx
            .send(Msg::Head(Head {
                status,
                event_stream,
                retry_after,
            }))
            .is_err()
        {
            return;
        }
        let mut reader = resp.into_body().into_reader();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match std::io::Read::read(&mut reader, &mut buf) {
                Ok(0) => {
                    let _ = tx.send(Msg::End);
                    return;
                }
                Ok(n) => {
                    if tx.send(Msg::Bytes(buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = tx.send(Msg::Failed(Failure::Transient(format!(
                        "reading the response failed: {}",
                        e.kind()
                    ))));
                    return;
                }
            }
        }
    });
    rx
}

/// Names the kind of transport failure without echoing the request.
fn transport_failure(e: &ureq::Error) -> Failure {
    match e {
        ureq::Error::Timeout(_) => Failure::TimedOut("request failed: timed out".to_string()),
        ureq::Error::HostNotFound => Failure::Unreachable("host not found".to_string()),
        ureq::Error::ConnectionFailed => Failure::Unreachable("connection failed".to_string()),
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            Failure::Unreachable("connection refused".to_string())
        }
        ureq::Error::Io(io) => {
            Failure::Transient(format!("request failed: i/o error: {}", io.kind()))
        }
        other => Failure::Transient(format!(
            "request failed: {}",
            other.to_string().lines().next().unwrap_or("error")
        )),
    }
}

/// Reads a server's error body as the one line it means, in the server's words.
pub fn server_error(status: u16, body: &str) -> ServerError {
    let parsed: Option<Value> = serde_json::from_str(body.trim()).ok();
    let mut params = Vec::new();
    let mut message = None;
    if let Some(v) = &parsed {
        // Gemini's OpenAI-compatible endpoint wraps its error in an array.
        let v = match v {
            Value::Array(items) if !items.is_empty() => &items[0],
            other => other,
        };
        let error = v.get("error");
        if let Some(p) = error.and_then(|e| e.get("param")).and_then(Value::as_str) {
            params.push(p.to_string());
        }
        message = error
            .and_then(|e| e.get("message"))
            .or(error.filter(|e| e.is_string()))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
            .map(str::to_string);
        if message.is_none() {
            // pydantic (FastAPI) validation: detail is a list of {loc, msg}, or a string.
            match v.get("detail") {
                Some(Value::String(s)) => message = Some(s.clone()),
                Some(Value::Array(items)) => {
                    let parts: Vec<String> = items
                        .iter()
                        .map(|item| {
                            let loc: Vec<String> = item
                                .get("loc")
                                .and_then(Value::as_array)
                                .map(|l| {
                                    l.iter()
                                        .map(|p| match p {
                                            Value::String(s) => s.clone(),
                                            other => other.to_string(),
                                        })
                                        .collect()
                                })
                                .unwrap_or_default();
                            let msg = item.get("msg").and_then(Value::as_str).unwrap_or("invalid");
                            let named: Vec<&String> =
                                loc.iter().filter(|p| p.as_str() != "body").collect();
                            if let Some(last) = named.last() {
                                params.push((*last).clone());
                            }
                            if loc.is_empty() {
                                msg.to_string()
                            } else {
                                format!("{}: {msg}", loc.join("."))
                            }
                        })
                        .collect();
                    if !parts.is_empty() {
                        message = Some(parts.join("; "));
                    }
                }
                _ => {}
            }
        }
    }
    let message = message.unwrap_or_else(|| {
        let text = body.trim();
        if text.is_empty() {
            format!("HTTP {status} with an empty body")
        } else {
            text.to_string()
        }
    });
    ServerError {
        status,
        message: one_line(&message),
        params,
        retry_after: None,
    }
}

/// The first line, at most 300 characters, with control characters escaped so a server's
/// words cannot drive the terminal.
pub fn one_line(text: &str) -> String {
    let first = text.trim().lines().next().unwrap_or("").trim();
    let mut out = String::new();
    for (i, c) in first.chars().enumerate() {
        if i == 300 {
            out.push('…');
            break;
        }
        match c {
            '\u{1b}' => out.push_str("\\e"),
            '\u{7}' => out.push_str("\\a"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push('^');
                out.push(char::from(((c as u8) ^ 0x40) & 0x7f));
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_errors_in_their_own_words() {
        let openai = r#"{"error":{"message":"Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported.","type":"invalid_request_error","param":"temperature","code":"unsupported_value"}}"#;
        let e = server_error(400, openai);
        assert!(e.message.starts_with("Unsupported value: 'temperature'"));
        assert_eq!(e.params, vec!["temperature"]);
        let gemini = r#"[{"error":{"code":400,"message":"Invalid JSON payload received. Unknown name \"seed\": Cannot find field.","status":"INVALID_ARGUMENT"}}]"#;
        assert_eq!(
            server_error(400, gemini).message,
            "Invalid JSON payload received. Unknown name \"seed\": Cannot find field."
        );
        let pydantic = r#"{"detail":[{"type":"extra_forbidden","loc":["body","seed"],"msg":"Extra inputs are not permitted","input":0}]}"#;
        let e = server_error(422, pydantic);
        assert_eq!(e.message, "body.seed: Extra inputs are not permitted");
        assert_eq!(e.params, vec!["seed"]);
        assert_eq!(
            server_error(400, r#"{"error":"model not found"}"#).message,
            "model not found"
        );
        assert_eq!(
            server_error(502, "Bad gateway\n<html>").message,
            "Bad gateway"
        );
        assert_eq!(one_line("a\u{1b}]52;c\u{7}b"), "a\\e]52;c\\ab");
    }
}
