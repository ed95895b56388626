//! The one transport of the model providers: one POST on its own thread (so Ctrl-C is answered
//! at once), its body streamed back to the caller's thread as it arrives, with a limit on
//! silence and one on the whole request. Retrying, dropping refused parameters and switching
//! APIs are decided by the caller (`client`). Nothing here ever formats a header value, so an
//! API key cannot leak into a message; and every text a server sends is redacted here, where
//! it enters (an error body, each event, a whole answer), before anything cuts or shapes it:
//! a key cut in half by the shown line's limit would no longer be found by a later redaction.

use super::sse::{SseEvent, SseParser, BOM};
use serde_json::Value;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime};

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

/// What the body of a 2xx answer is handed to, event by event or whole. A reader fails with
/// `Failure::Transient` (a `String` converts to it), or with `reported` for an error the
/// server reports inside its answer.
pub trait Sink {
    fn event(&mut self, event: &SseEvent) -> Result<(), Failure>;
    fn whole(&mut self, value: Value) -> Result<(), Failure>;
    /// Tokens received so far (for the live status line).
    fn tokens(&self) -> u64;
}

/// A server's error, in its own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    pub status: u16,
    /// The one line shown: the informative line of `text` (a validation error's `loc: msg`,
    /// not its heading), control characters escaped.
    pub message: String,
    /// The server's whole message, every line of it: what is searched for the parameter it
    /// names (SPEC §3.3, "Errors read whole").
    pub text: String,
    /// Parameter names the body points at (OpenAI's `param`, pydantic's `loc`).
    pub params: Vec<String>,
    /// The error's kind in the server's words: OpenAI's `type` and `code`, Gemini's `status`.
    pub kinds: Vec<String>,
    /// The quotas a Google error names (`QuotaFailure` violations: `quotaId`, `quotaMetric`).
    pub quotas: Vec<String>,
    /// The server's headers, else what its body says (`RetryInfo.retryDelay`, "Please retry
    /// in 0.3s").
    pub hint: RetryHint,
}

impl ServerError {
    /// An exhausted quota or spending limit: permanent, unlike other 429s (SPEC §3.3). OpenAI's
    /// `insufficient_quota`; Anthropic's usage and spend limits in each wording ("reached your
    /// specified API usage limits", "… workspace API usage limits", a credit balance too
    /// low); Gemini's `RESOURCE_EXHAUSTED` naming a quota by the day or the bill. A Gemini
    /// quota per minute or per second, or one that says when to retry, is a rate limit, and
    /// so is its classic "Resource has been exhausted (e.g. check quota)".
    pub fn is_quota(&self) -> bool {
        let text = self.text.to_ascii_lowercase();
        let kind = |k: &str| self.kinds.iter().any(|x| x.eq_ignore_ascii_case(k));
        if kind("insufficient_quota") {
            return true;
        }
        let limit_reached = (text.contains("usage limit") || text.contains("spend limit"))
            && (text.contains("reached") || text.contains("exceeded"));
        if limit_reached || text.contains("credit balance is too low") {
            return true;
        }
        if !kind("resource_exhausted") {
            return false;
        }
        let quotas = self.quotas.join(" ").to_ascii_lowercase();
        if quotas.contains("perday") || text.contains("per day") {
            return true;
        }
        let rate = ["perminute", "persecond"]
            .iter()
            .any(|w| quotas.contains(w))
            || ["per minute", "per second"]
                .iter()
                .any(|w| text.contains(w))
            || self.hint.after.is_some();
        !rate && (text.contains("exceeded your current quota") || text.contains("billing"))
    }

    /// The whole message as searched for the parameters it names: lowercase, without the
    /// request values a validation error echoes (`'input': …`, `input_value=…`), which may
    /// hold every parameter's name without refusing any.
    pub fn searched(&self) -> String {
        self.text
            .lines()
            .map(|l| {
                let cut = ["'input': ", "input_value="]
                    .iter()
                    .filter_map(|m| l.find(m))
                    .min()
                    .unwrap_or(l.len());
                &l[..cut]
            })
            .collect::<Vec<_>>()
            .join("\n")
            .to_ascii_lowercase()
    }
}

/// What a server's headers say about retrying (SPEC §3.3, "Retry hints").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryHint {
    /// `retry-after-ms`, else `Retry-After` in seconds or as an HTTP date.
    pub after: Option<Duration>,
    /// `x-should-retry: true` or `false`.
    pub should_retry: Option<bool>,
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
    Status(Box<ServerError>),
    Interrupted,
}

impl From<String> for Failure {
    fn from(why: String) -> Self {
        Failure::Transient(why)
    }
}

impl From<&str> for Failure {
    fn from(why: &str) -> Self {
        Failure::Transient(why.to_string())
    }
}

/// An error a server reports inside a 2xx answer (a stream's error event or chunk, a failed
/// response), given as `{"error": {...}}`: an exhausted quota is judged like the HTTP one
/// (permanent, SPEC §3.3); anything else is transient, named with `what`.
pub fn reported(body: &Value, what: &str) -> Failure {
    let error = server_error(200, &body.to_string());
    if error.is_quota() {
        Failure::Status(Box::new(error))
    } else {
        Failure::Transient(format!("{what}: {}", error.message))
    }
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
    hint: RetryHint,
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
                sink.event(&redacted(event))?;
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
            error.hint.should_retry = head.hint.should_retry;
            error.hint.after = head.hint.after.or(error.hint.after);
            return Err(Failure::Status(Box::new(error)));
        }
        if head.event_stream {
            if let Some(event) = self.parser.finish().map_err(Failure::Transient)? {
                self.events += 1;
                sink.event(&redacted(event))?;
            }
            if self.events > 0 {
                return Ok(());
            }
            // No event at all: a whole answer under the wrong label is read as one.
            let text = crate::secrets::redact_bytes(&self.buffer);
            let text = text.strip_prefix(BOM).unwrap_or(&text);
            if let Ok(value) = serde_json::from_slice::<Value>(text) {
                return sink.whole(value);
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
    let text = crate::secrets::redact(&text);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    if text.trim_start().starts_with("data:") || text.trim_start().starts_with("event:") {
        let mut parser = SseParser::default();
        let mut events = parser.push(text.as_bytes()).map_err(Failure::Transient)?;
        events.extend(parser.finish().map_err(Failure::Transient)?);
        for event in &events {
            sink.event(event)?;
        }
        return Ok(());
    }
    let value: Value = serde_json::from_str(text).map_err(|_| {
        let page = text.trim_start().starts_with('<');
        Failure::NotApi(if page {
            "the answer is a web page, not JSON".to_string()
        } else {
            "the answer is not JSON".to_string()
        })
    })?;
    sink.whole(value)
}

/// An event with every secret in its data redacted (SPEC §3.3: keys never appear anywhere).
fn redacted(mut event: SseEvent) -> SseEvent {
    event.data = crate::secrets::redact(&event.data);
    event
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
        let hint = RetryHint {
            after: retry_after(
                header("retry-after-ms").as_deref(),
                header("retry-after").as_deref(),
                std::time::SystemTime::now(),
            ),
            should_retry: match header("x-should-retry").map(|v| v.trim().to_ascii_lowercase()) {
                Some(v) if v == "true" => Some(true),
                Some(v) if v == "false" => Some(false),
                _ => None,
            },
        };
        if tx
            .send(Msg::Head(Head {
                status,
                event_stream,
                hint,
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

/// How long a server asks us to wait: `retry-after-ms` (milliseconds), else `Retry-After` as
/// seconds or as an HTTP date (the wait is then counted from `now`; a date past is no wait).
/// A wait too long for a `Duration` (`1e20`, twenty digits) is the longest one: it is only
/// ever compared with the longest wait honoured, and named.
pub fn retry_after(ms: Option<&str>, header: Option<&str>, now: SystemTime) -> Option<Duration> {
    let seconds = |v: &str, scale: f64| {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|s| !s.is_nan() && *s >= 0.0)
            .map(|s| Duration::try_from_secs_f64(s / scale).unwrap_or(Duration::MAX))
    };
    if let Some(d) = ms.and_then(|v| seconds(v, 1000.0)) {
        return Some(d);
    }
    let header = header?;
    if let Some(d) = seconds(header, 1.0) {
        return Some(d);
    }
    let at = http_date(header)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// An HTTP date in the three forms RFC 9110 says a recipient accepts: IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and
/// asctime (`Sun Nov  6 08:49:37 1994`); `httpdate` parses all three (a weekday that does
/// not fit the date is no date).
fn http_date(text: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(text.trim()).ok()
}

/// Reads a server's error body: its whole message in the server's words, and the one line
/// shown of it. Secrets are redacted from the body first, before any line is picked or cut.
pub fn server_error(status: u16, body: &str) -> ServerError {
    let body = crate::secrets::redact(body);
    let body = body.as_str();
    let parsed: Option<Value> = serde_json::from_str(body.trim()).ok();
    let mut params = Vec::new();
    let mut kinds = Vec::new();
    let mut quotas = Vec::new();
    let mut after = None;
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
        for key in ["type", "code", "status"] {
            if let Some(k) = error.and_then(|e| e.get(key)).and_then(Value::as_str) {
                kinds.push(k.to_string());
            }
        }
        google_details(
            error.and_then(|e| e.get("details")),
            &mut quotas,
            &mut after,
        );
        message = error
            .and_then(|e| e.get("message"))
            .or(error.filter(|e| e.is_string()))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
            .map(str::to_string);
        if message.is_none() {
            message = pydantic_detail(v.get("detail"), &mut params);
        }
    }
    let text = message.unwrap_or_else(|| {
        let text = body.trim();
        if text.is_empty() {
            format!("HTTP {status} with an empty body")
        } else {
            text.to_string()
        }
    });
    let after = after.or_else(|| retry_in(&text));
    ServerError {
        status,
        message: one_line(&informative_line(&text)),
        text,
        params,
        kinds,
        quotas,
        hint: RetryHint {
            after,
            should_retry: None,
        },
    }
}

/// Google's error `details`: the quotas a `QuotaFailure` names, and `RetryInfo.retryDelay`
/// (a protobuf duration, `"17s"`, `"0.4s"`).
fn google_details(details: Option<&Value>, quotas: &mut Vec<String>, after: &mut Option<Duration>) {
    for d in details.and_then(Value::as_array).into_iter().flatten() {
        for v in d
            .get("violations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for key in ["quotaId", "quotaMetric"] {
                if let Some(q) = v.get(key).and_then(Value::as_str) {
                    quotas.push(q.to_string());
                }
            }
        }
        if let Some(delay) = d.get("retryDelay").and_then(Value::as_str) {
            *after = after.or_else(|| wait_of(delay));
        }
    }
}

/// "Please retry in 0.3s." / "retry in 17.39s" / "retry in 500ms" in a message.
fn retry_in(text: &str) -> Option<Duration> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find("retry in ")? + "retry in ".len();
    wait_of(&lower[at..])
}

/// A wait written as a number and a unit, `0.4s` or `500ms` (what follows is ignored); a
/// wait too long for a `Duration` is the longest one.
fn wait_of(text: &str) -> Option<Duration> {
    let text = text.trim_start();
    let digits = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let n: f64 = text[..digits].parse().ok()?;
    let scale = match &text[digits..] {
        u if u.starts_with("ms") => 1000.0,
        u if u.starts_with('s') => 1.0,
        _ => return None,
    };
    Some(Duration::try_from_secs_f64(n / scale).unwrap_or(Duration::MAX))
}

/// pydantic (FastAPI) validation: `detail` is a list of `{loc, msg}`, or a string.
fn pydantic_detail(detail: Option<&Value>, params: &mut Vec<String>) -> Option<String> {
    match detail? {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
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
                    let named: Vec<&String> = loc.iter().filter(|p| p.as_str() != "body").collect();
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
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        _ => None,
    }
}

/// The line of a message that says what is wrong. A validation error's first line is only
/// its heading (`1 validation error:`, `2 validation errors for Request`); what follows names
/// the field and the fault, as a Python dict (`{'loc': ('body', 'x'), 'msg': '…'}`, FastAPI)
/// or as pydantic prints it (the field's path, then the fault indented below it).
fn informative_line(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let Some(first) = lines.first() else {
        return String::new();
    };
    // A Python traceback says what went wrong on its last line (`ValueError: …`).
    if first.starts_with("Traceback (most recent call last)") {
        return lines.last().unwrap_or(first).to_string();
    }
    if !is_validation_heading(first) || lines.len() < 2 {
        return first.to_string();
    }
    let second = lines[1];
    if let Some(shown) = python_dict_error(second) {
        return shown;
    }
    match lines.get(2) {
        // pydantic v1: `body -> messages -> 0 -> content` then `none is not … (type=…)`.
        Some(fault) if second.contains(" -> ") => {
            let fault = fault.split(" (type=").next().unwrap_or(fault);
            format!("{}: {fault}", second.replace(" -> ", "."))
        }
        // pydantic's own form: `response_format.type` then `Input should be … [type=…]`.
        Some(fault) if !second.contains(' ') => {
            let fault = fault.split(" [type=").next().unwrap_or(fault);
            format!("{second}: {fault}")
        }
        _ => second.to_string(),
    }
}

/// `1 validation error:`, `2 validation errors for CreateChatCompletionRequest`.
fn is_validation_heading(line: &str) -> bool {
    let mut words = line.split_whitespace();
    words.next().is_some_and(|n| n.parse::<u32>().is_ok())
        && words.next() == Some("validation")
        && words
            .next()
            .is_some_and(|w| w.trim_end_matches(':').starts_with("error"))
}

/// `{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': "Input …"}`
/// as `body.response_format.type: Input …`.
fn python_dict_error(line: &str) -> Option<String> {
    let loc = line.split("'loc': (").nth(1)?.split(')').next()?;
    let loc: Vec<&str> = loc
        .split(',')
        .map(|p| p.trim().trim_matches(|c| c == '\'' || c == '"'))
        .filter(|p| !p.is_empty())
        .collect();
    let msg = line.split("'msg': ").nth(1)?;
    let quote = msg.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let msg = msg[1..].split(quote).next()?;
    Some(format!("{}: {msg}", loc.join(".")))
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
    use std::time::UNIX_EPOCH;

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

    #[test]
    fn a_validation_error_is_searched_whole_and_shown_by_its_informative_line() {
        // FastAPI's words, as llama-cpp-python's server sends them in an HTTP 500.
        let body = r#"{"error":{"message":"1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': {'expected': \"'text' or 'json_object'\"}}\n","type":"internal_server_error","param":null,"code":null}}"#;
        let e = server_error(500, body);
        assert_eq!(
            e.message,
            "body.response_format.type: Input should be 'text' or 'json_object'"
        );
        assert!(e.searched().contains("response_format"));
        assert!(!e.searched().contains("json_schema"), "{}", e.searched());
        assert_eq!(e.kinds, vec!["internal_server_error"]);
        // pydantic's own form (vLLM).
        let e = server_error(
            400,
            r#"{"object":"error","message":"1 validation error for ChatCompletionRequest\nresponse_format.type\n  Input should be 'text' or 'json_object' [type=literal_error, input_value='json_schema', input_type=str]","type":"BadRequestError","param":null,"code":400}"#,
        );
        assert_eq!(
            e.message,
            "response_format.type: Input should be 'text' or 'json_object'"
        );
        assert_eq!(
            server_error(400, r#"{"error":{"message":"plain\nsecond"}}"#).message,
            "plain"
        );
    }

    #[test]
    fn retry_hints_in_milliseconds_seconds_and_as_a_date() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(
            retry_after(Some("1500"), Some("9"), now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after(None, Some("2.5"), now),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(
            retry_after(None, Some("Sun, 06 Nov 1994 08:51:37 GMT"), now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            retry_after(None, Some("Sun, 06 Nov 1994 08:00:00 GMT"), now),
            Some(Duration::ZERO)
        );
        assert_eq!(http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(UNIX_EPOCH));
        let same = Some(UNIX_EPOCH + Duration::from_secs(784_111_777));
        assert_eq!(http_date("Sunday, 06-Nov-94 08:49:37 GMT"), same);
        assert_eq!(http_date("Sun Nov  6 08:49:37 1994"), same);
        assert_eq!(http_date("Sun, 06 Nov 1994 08:49:37 GMT"), same);
        assert_eq!(http_date("Sunday, 06-Nov-1994 08:49:37 GMT"), None);
        assert_eq!(
            http_date("Mon, 06 Nov 1994 08:49:37 GMT"),
            None,
            "not a Monday"
        );
        assert_eq!(http_date("Sun, 06 Nov 1994 24:00:00 GMT"), None);
        assert_eq!(
            http_date("Tue, 29 Feb 2028 23:59:59 GMT"),
            Some(UNIX_EPOCH + Duration::from_secs(1_835_481_599))
        );
        assert_eq!(retry_after(None, Some("soon"), now), None);
        assert_eq!(retry_after(None, Some("1e20"), now), Some(Duration::MAX));
        assert_eq!(retry_after(Some("1e30"), None, now), Some(Duration::MAX));
        assert_eq!(retry_after(Some("inf"), None, now), Some(Duration::MAX));
        assert_eq!(retry_after(Some("NaN"), None, now), None);
        assert_eq!(retry_after(Some("-1"), None, now), None);
    }
}
