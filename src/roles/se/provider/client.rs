//! The model client shared by the three wire APIs: sends a request through `http`, retries
//! transient failures (as long as the server's retry hints allow), ends the run on an
//! exhausted quota, drops an optional parameter a server refuses by name (and remembers
//! that), switches once to the OpenAI API a server says the model lives on, and turns the
//! answer into a `Response`. What a server refused is data, never a list of model names.

use super::api::{Answer, Ask, Param, Wire, ALL_PARAMS};
pub use super::api::{Api, Settings, Stop};
use super::contract::{Learnt, Provider, ProviderError, Request, Response};
use super::http::{self, Exchange, Failure, ServerError};
use super::memory::Memory;
use crate::roles::se::proposal::{self, OutputFormat};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

/// At most this many requests for transient failures: the first and three retries.
const MAX_REQUESTS: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait a server's retry hint is honoured for (as OpenAI's own SDK does).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);

pub fn wire(api: Api) -> Box<dyn Wire> {
    match api {
        Api::Chat => Box::new(super::openai::Chat),
        Api::Responses => Box::new(super::responses::Responses),
        Api::Anthropic => Box::new(super::anthropic::Messages),
    }
}

/// What one call (one attempt's proposal) has done so far, across its requests.
struct Call {
    /// Names of the parameters dropped during this call (`dropped_params`).
    dropped_now: Vec<String>,
    /// What to remember in `providers.json` once the server answers.
    learnt: Vec<(Api, String)>,
    switched_to: Option<Api>,
    /// `chat -> responses` when the call switched API.
    api_switch: Option<String>,
    /// Transient failures so far.
    transient: u32,
    /// Requests sent so far (a dropped parameter's request counts too).
    requests: u32,
    /// The server refused the API key: what the call learnt is not remembered.
    key_refused: bool,
    /// The usage of requests the server reported usage for and that then failed: billed,
    /// so counted in the attempt's usage (`failed_requests`).
    billed: Option<crate::store::records::Usage>,
    backoff: Duration,
}

impl Default for Call {
    fn default() -> Self {
        Call {
            dropped_now: Vec::new(),
            learnt: Vec::new(),
            switched_to: None,
            api_switch: None,
            transient: 0,
            requests: 0,
            key_refused: false,
            billed: None,
            backoff: FIRST_BACKOFF,
        }
    }
}

impl Call {
    /// Counts a failed request the server reported usage for: it was billed.
    fn bill(&mut self, usage: Option<crate::store::records::Usage>) {
        if let Some(u) = usage {
            let billed = crate::store::records::Usage {
                failed_requests: 1,
                ..u
            };
            self.billed = Some(match self.billed.take() {
                Some(before) => before.add(&billed),
                None => billed,
            });
        }
    }
}

/// What follows a failed request.
enum Flow {
    /// Send the request again.
    Retry,
    /// The call ends with this answer.
    Done(Box<Response>),
    /// The server answered with an error status.
    Status(Box<ServerError>),
}

pub struct ModelClient {
    pub provider: &'static str,
    pub model: String,
    pub base_url: String,
    /// Authentication headers (never formatted into a message).
    pub headers: Vec<(&'static str, String)>,
    pub api: Api,
    pub settings: Settings,
    pub schema: Value,
    /// Parameters refused by this server for this model, per API.
    dropped: Vec<(Api, Param)>,
    switched: bool,
    /// The server was reached at least once (it answered, or a connection was made): a 404
    /// or a refused connection now is no longer a misconfiguration caught up front.
    answered: bool,
    /// What the last call learnt before it failed (`Provider::learnt`).
    learnt: Learnt,
}

impl ModelClient {
    pub fn new(
        provider: &'static str,
        model: String,
        base_url: String,
        headers: Vec<(&'static str, String)>,
        api: Api,
        settings: Settings,
    ) -> Self {
        let mut client = ModelClient {
            provider,
            model,
            base_url,
            headers,
            api,
            settings,
            schema: super::schema::proposal(),
            dropped: Vec::new(),
            switched: false,
            answered: false,
            learnt: Learnt::default(),
        };
        if let Some(memory) = client.memory() {
            if client.settings.api.is_none() && client.provider == "openai" {
                if let Some(api) = memory.api(&client.base_url, &client.model) {
                    client.api = api;
                }
            }
            for api in [Api::Chat, Api::Responses, Api::Anthropic] {
                let w = wire(api);
                for name in memory.dropped(&client.base_url, &client.model, api) {
                    if let Some(p) = ALL_PARAMS
                        .into_iter()
                        .find(|p| w.names(*p).is_some_and(|(n, _)| n == name))
                    {
                        if !client.user_set(p) {
                            client.dropped.push((api, p));
                        }
                    }
                }
            }
        }
        client
    }

    fn memory(&self) -> Option<Memory> {
        self.settings.memory.as_deref().map(Memory::at)
    }

    /// Set by the user (flag or git config): never dropped.
    fn user_set(&self, p: Param) -> bool {
        match p {
            Param::Temperature => self.settings.temperature_set,
            Param::MaxOutput | Param::MaxOutputOlder => self.settings.max_output_tokens.is_some(),
            Param::Effort => self.settings.reasoning_effort.is_some(),
            _ => false,
        }
    }

    /// What this request sends: what the harness wants, less what the server refused; the
    /// JSON-mode rung only once the schema was refused.
    fn sendable(&self, w: &dyn Wire) -> BTreeSet<Param> {
        let api = w.api();
        let mut send: BTreeSet<Param> = ALL_PARAMS
            .into_iter()
            .filter(|p| w.names(*p).is_some())
            .filter(|p| match p {
                Param::Temperature => api != Api::Anthropic || self.settings.temperature_set,
                Param::Effort => self.settings.reasoning_effort.is_some(),
                Param::MaxOutput => self.settings.output_limit().is_some() || w.required(*p),
                Param::MaxOutputOlder => self.settings.output_limit().is_some(),
                _ => true,
            })
            .filter(|p| !self.dropped.contains(&(api, *p)))
            .collect();
        if send.contains(&Param::Schema) {
            send.remove(&Param::JsonMode);
        }
        if !send.contains(&Param::JsonMode) {
            send.remove(&Param::ToolChoice);
        }
        send
    }

    /// Writes what this request learnt (refused parameters, the API switch) to
    /// `providers.json`: only once the server answered, so a run that ended in ERROR
    /// teaches later runs nothing.
    fn remember(&self, dropped: &[(Api, String)], switched_to: Option<Api>) {
        let Some(memory) = self.memory() else { return };
        for (api, name) in dropped {
            memory.add_dropped(&self.base_url, &self.model, *api, name);
        }
        if let Some(api) = switched_to {
            memory.set_api(&self.base_url, &self.model, api);
        }
    }

    /// One attempt's proposal. A parameter the server refused by name stays refused whatever
    /// fails after (a transient error, retries exhausted): the failed attempt records it and
    /// `providers.json` remembers it, unless the server then refused the API key.
    fn call(&mut self, request: &Request<'_>) -> Result<Response, ProviderError> {
        let mut call = Call::default();
        let result = self.requests(request, &mut call);
        self.learnt = Learnt::default();
        if result.is_err() {
            if !call.key_refused {
                self.remember(&call.learnt, call.switched_to);
            }
            self.learnt = Learnt {
                dropped_params: call.dropped_now,
                api_switch: call.api_switch,
                billed: call.billed,
            };
        }
        result
    }

    /// The call's requests, until one is answered or the call ends.
    fn requests(
        &mut self,
        request: &Request<'_>,
        call: &mut Call,
    ) -> Result<Response, ProviderError> {
        loop {
            let w = wire(self.api);
            let send = self.sendable(w.as_ref());
            let url = w.url(&self.base_url);
            let ex = self.request_for(w.as_ref(), &send, &url, request);
            // Every request holds its worst case against the dollar budget (SPEC §3.3 Cost).
            let held = (request.meter)
                .hold(|| ex.body.to_string().len())
                .map_err(ProviderError::OverBudget)?;
            call.requests += 1;
            let error = match self.exchange(w.as_ref(), &ex, request, call, held) {
                Ok(answer) => return Ok(self.answered(answer, std::mem::take(call))),
                Err(failure) => match self.transport_failure(failure, &url, call)? {
                    Flow::Retry => continue,
                    Flow::Done(response) => return Ok(*response),
                    Flow::Status(error) => *error,
                },
            };
            self.status_failure(error, w.as_ref(), &send, &url, call)?;
        }
    }

    /// One request: its body built from what is sent.
    fn request_for(
        &self,
        w: &dyn Wire,
        send: &BTreeSet<Param>,
        url: &str,
        request: &Request<'_>,
    ) -> Exchange {
        let ask = Ask {
            model: &self.model,
            system: crate::roles::se::prompt::SYSTEM,
            prompt: request.prompt,
            settings: &self.settings,
            send,
            schema: &self.schema,
        };
        Exchange {
            url: url.to_string(),
            headers: self.headers.clone(),
            body: w.body(&ask),
        }
    }

    /// One request sent, its answer read by the wire's reader, and what it cost settled:
    /// billed when answered, or when the server reported usage before it failed (or sent an
    /// answer too large to keep). Once the server answered, what the call learnt so far is
    /// remembered.
    fn exchange(
        &mut self,
        w: &dyn Wire,
        ex: &Exchange,
        request: &Request<'_>,
        call: &mut Call,
        held: crate::cost::Held,
    ) -> Result<Answer, Failure> {
        let mut reader = w.reader();
        let sent = http::exchange(
            ex,
            self.settings.total_timeout,
            reader.as_mut(),
            &mut |tokens| (request.on_tokens)(tokens),
        );
        let seen = reader.usage_so_far();
        if let Err(failure) = sent {
            let billed = seen.is_some() || matches!(failure, Failure::TooLarge(_));
            request.meter.settle(held, seen.as_ref(), billed, None);
            call.bill(seen);
            return Err(failure);
        }
        self.answered = true;
        self.remember(&call.learnt, call.switched_to);
        match reader.finish() {
            Ok(answer) => {
                let served = answer.model.as_deref().map(http::one_line);
                (request.meter).settle(held, answer.usage.as_ref(), true, served.as_deref());
                Ok(answer)
            }
            Err(why) => {
                request
                    .meter
                    .settle(held, seen.as_ref(), seen.is_some(), None);
                call.bill(seen);
                Err(Failure::Transient(why))
            }
        }
    }

    /// The answer of a request that succeeded.
    fn answered(&self, answer: Answer, call: Call) -> Response {
        let mut answer = answer;
        if let Some(billed) = &call.billed {
            answer.usage = Some(match &answer.usage {
                Some(u) => u.add(billed),
                None => billed.clone(),
            });
        }
        if answer.text.len() + answer.reasoning.len() > http::MAX_ANSWER {
            return Response {
                usage: answer.usage,
                ..too_large(
                    format!("the answer was larger than {} MiB", http::MAX_ANSWER >> 20),
                    call.dropped_now,
                    call.api_switch,
                )
            };
        }
        self.response(answer, call.dropped_now, call.api_switch)
    }

    /// A request that got no HTTP error status: retried, ended, or refused up front when the
    /// server was never reached.
    fn transport_failure(
        &mut self,
        failure: Failure,
        url: &str,
        call: &mut Call,
    ) -> Result<Flow, ProviderError> {
        match failure {
            Failure::TooLarge(why) => Ok(Flow::Done(Box::new(Response {
                // What the call's billed requests used stays the attempt's.
                usage: call.billed.take(),
                ..too_large(
                    why,
                    std::mem::take(&mut call.dropped_now),
                    call.api_switch.take(),
                )
            }))),
            Failure::Interrupted => Err(ProviderError::Failed(
                "interrupted while waiting for the model".to_string(),
            )),
            Failure::Unreachable(why) if !self.answered => Err(ProviderError::Unreachable {
                message: format!("{}: cannot reach {url}: {why}", self.provider),
                hint: "start the server, or check --llm-base-url (git config factory.baseUrl)"
                    .to_string(),
            }),
            Failure::NotApi(why) if !self.answered => Err(ProviderError::Unreachable {
                message: format!("{}: {url} answered 200 but {why}", self.provider),
                hint: "the base URL points at something that is not the API: check --llm-base-url (git config factory.baseUrl), e.g. a missing /v1".to_string(),
            }),
            Failure::TimedOut(why) => {
                self.wait(call, None, format!("{}: {why}", self.provider))?;
                Ok(Flow::Retry)
            }
            Failure::Unreachable(why) | Failure::Transient(why) | Failure::NotApi(why) => {
                self.answered = true;
                self.wait(call, None, format!("{}: {why}", self.provider))?;
                Ok(Flow::Retry)
            }
            Failure::Status(e) => Ok(Flow::Status(e)),
        }
    }

    /// A server's error status: switch the API, drop a refused parameter, retry a transient
    /// error (each returns `Ok` for the next request), or end the call.
    fn status_failure(
        &mut self,
        error: ServerError,
        w: &dyn Wire,
        send: &BTreeSet<Param>,
        url: &str,
        call: &mut Call,
    ) -> Result<(), ProviderError> {
        let first = !self.answered;
        self.answered = true;
        // 1. The model lives on the other OpenAI API: switch once.
        if let Some(other) = self.other_api(&error) {
            call.api_switch = Some(format!("{} -> {}", self.api.as_str(), other.as_str()));
            self.api = other;
            self.switched = true;
            call.switched_to = Some(other);
            return Ok(());
        }
        // 2. An exhausted quota or spending limit: no retry can help (SPEC §3.3).
        if error.is_quota() {
            let said = if (200..=299).contains(&error.status) {
                "reported in the answer".to_string()
            } else {
                format!("HTTP {}", error.status)
            };
            return Err(ProviderError::Fatal(format!(
                "{}: the account's quota or spending limit is used up ({said}): {}",
                self.provider, error.message
            )));
        }
        // 3. Optional parameters the server refused by name.
        if self.drop_refused(&error, w, send, call)? {
            return Ok(());
        }
        // 4. Transient errors, and what the server's headers say about retrying.
        let msg = format!(
            "{}: HTTP {}: {}",
            self.provider, error.status, error.message
        );
        let transient = matches!(error.status, 408 | 409 | 425 | 429 | 500..=599);
        match error.hint.should_retry {
            Some(true) => return self.wait(call, error.hint.after, msg),
            Some(false) if transient => {
                return Err(ProviderError::Failed(format!(
                    "{msg} (the server said not to retry: x-should-retry: false)"
                )))
            }
            None if transient => return self.wait(call, error.hint.after, msg),
            _ => {}
        }
        if matches!(error.status, 401 | 403) {
            call.key_refused = true;
        }
        match error.status {
            401 | 403 => Err(ProviderError::Fatal(format!(
                "{} refused the API key (HTTP {}): {}",
                self.provider, error.status, error.message
            ))),
            404 if first => Err(ProviderError::Unreachable {
                message: format!(
                    "{}: {url} answered HTTP 404: {}",
                    self.provider, error.message
                ),
                hint: "check the base URL (e.g. a missing /v1) and the model name".to_string(),
            }),
            404 => Err(ProviderError::Fatal(format!(
                "{}: unknown model or endpoint (HTTP 404): {}",
                self.provider, error.message
            ))),
            status => Err(ProviderError::Fatal(format!(
                "{} rejected the request (HTTP {status}): {}",
                self.provider, error.message
            ))),
        }
    }

    /// Drops the optional parameters the error names (noting it in `call`; `true`: send the
    /// request again), or refuses the run when it names one the user set.
    fn drop_refused(
        &mut self,
        error: &ServerError,
        w: &dyn Wire,
        send: &BTreeSet<Param>,
        call: &mut Call,
    ) -> Result<bool, ProviderError> {
        let mut named: Vec<Param> = send
            .iter()
            .copied()
            .filter(|p| names_param(error, w.names(*p).map(|n| n.1).unwrap_or(&[])))
            .collect();
        // A refusal of `tool_choice` is about the choice, whatever it says of the tools.
        if named.contains(&Param::ToolChoice) {
            named.retain(|p| *p != Param::JsonMode);
        }
        let droppable: Vec<Param> = named
            .iter()
            .copied()
            .filter(|p| !self.user_set(*p) && !w.required(*p))
            .collect();
        if !droppable.is_empty() && !matches!(error.status, 401 | 403 | 429) {
            for p in droppable {
                let name = w.names(p).map(|n| n.0).unwrap_or("?");
                // The older name of the limit is in the body only once the newer is gone.
                let in_body = p != Param::MaxOutputOlder || !send.contains(&Param::MaxOutput);
                if in_body {
                    call.dropped_now.push(name.to_string());
                }
                self.dropped.push((w.api(), p));
                call.learnt.push((w.api(), name.to_string()));
            }
            return Ok(true);
        }
        if let Some(p) = named.iter().find(|p| self.user_set(**p)) {
            let name = w.names(*p).map(|n| n.0).unwrap_or("?");
            return Err(ProviderError::Fatal(format!(
                "{} refused the {name} you set (HTTP {}): {}",
                self.provider, error.status, error.message
            )));
        }
        Ok(false)
    }

    /// Counts a transient failure; sleeps before the next request (as long as the server
    /// asks, up to `MAX_RETRY_AFTER`), or gives up. A server that asks for a longer wait fails
    /// the attempt at once, naming the wait.
    fn wait(
        &self,
        call: &mut Call,
        retry_after: Option<Duration>,
        msg: String,
    ) -> Result<(), ProviderError> {
        if let Some(d) = retry_after.filter(|d| *d > MAX_RETRY_AFTER) {
            return Err(ProviderError::Failed(format!(
                "{msg} (the server asks to wait {} before retrying, longer than the {} s a request waits: try again later)",
                wait_words(d),
                MAX_RETRY_AFTER.as_secs()
            )));
        }
        call.transient += 1;
        if call.transient >= MAX_REQUESTS {
            return Err(ProviderError::Failed(format!(
                "{msg} (gave up after {} requests)",
                call.requests
            )));
        }
        pause(retry_after.unwrap_or(call.backoff))?;
        call.backoff *= 2;
        Ok(())
    }

    /// The OpenAI API a server says the model is only served by, once per run.
    fn other_api(&self, error: &ServerError) -> Option<Api> {
        if self.switched || self.settings.api.is_some() || self.provider != "openai" {
            return None;
        }
        let msg = error.text.to_ascii_lowercase();
        match self.api {
            Api::Chat if msg.contains("only supported in v1/responses") => Some(Api::Responses),
            Api::Responses if msg.contains("only supported in v1/chat/completions") => {
                Some(Api::Chat)
            }
            _ => None,
        }
    }

    fn response(
        &self,
        answer: Answer,
        dropped: Vec<String>,
        api_switch: Option<String>,
    ) -> Response {
        let (think, rest) = proposal::split_reasoning(&answer.text);
        let mut reasoning = answer.reasoning.clone();
        if let Some(t) = think {
            if !reasoning.is_empty() {
                reasoning.push('\n');
            }
            reasoning.push_str(t);
        }
        Response {
            text: rest.as_bytes().to_vec(),
            raw: answer.text.clone().into_bytes(),
            format: OutputFormat::StrictJson,
            usage: answer.usage,
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
            stop: answer.stop,
            dropped_params: dropped,
            api_switch,
            served_model: answer
                .model
                .as_deref()
                .map(http::one_line)
                .filter(|m| !m.is_empty()),
            sandbox: None,
        }
    }
}

/// An answer too large to be a proposal: nothing of it is kept.
fn too_large(why: String, dropped: Vec<String>, api_switch: Option<String>) -> Response {
    Response {
        stop: Stop::TooLarge(why),
        dropped_params: dropped,
        api_switch,
        ..Response::plain(Vec::new(), OutputFormat::StrictJson)
    }
}

impl Provider for ModelClient {
    fn propose(&mut self, request: &Request<'_>) -> Result<Response, ProviderError> {
        self.call(request)
    }

    fn meters_requests(&self) -> bool {
        true
    }

    fn learnt(&mut self) -> Learnt {
        std::mem::take(&mut self.learnt)
    }
}

/// Whether a server's error names a parameter: anywhere in its whole message, OpenAI's `param`
/// or pydantic's `loc`, as a whole word (`stream` is not `stream_options`).
pub fn names_param(error: &ServerError, words: &[&str]) -> bool {
    let msg = error.searched();
    words.iter().any(|w| {
        error.params.iter().any(|p| {
            let p = p.to_ascii_lowercase();
            p == *w || p.starts_with(&format!("{w}.")) || p.starts_with(&format!("{w}["))
        }) || has_word(&msg, w)
    })
}

fn has_word(haystack: &str, word: &str) -> bool {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let mut from = 0;
    while let Some(i) = haystack[from..].find(word) {
        let start = from + i;
        let end = start + word.len();
        if !ident(haystack[..start].chars().next_back()) && !ident(haystack[end..].chars().next()) {
            return true;
        }
        from = start + 1;
        while !haystack.is_char_boundary(from) {
            from += 1;
        }
    }
    false
}

/// A wait as the user reads it: whole seconds, rounded up; beyond a year, only that.
fn wait_words(d: Duration) -> String {
    const YEAR: u64 = 365 * 24 * 3600;
    let secs = d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0));
    if secs > YEAR {
        "more than a year".to_string()
    } else {
        format!("{secs} s")
    }
}

/// Sleeps, waking early when the run is interrupted.
fn pause(d: Duration) -> Result<(), ProviderError> {
    let end = std::time::Instant::now() + d;
    while std::time::Instant::now() < end {
        if crate::interrupt::requested() {
            return Err(ProviderError::Failed(
                "interrupted while waiting for the model".to_string(),
            ));
        }
        std::thread::sleep(
            end.saturating_duration_since(std::time::Instant::now())
                .min(Duration::from_millis(50)),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(message: &str, params: &[&str]) -> ServerError {
        ServerError {
            status: 400,
            message: message.to_string(),
            text: message.to_string(),
            params: params.iter().map(|s| s.to_string()).collect(),
            kinds: Vec::new(),
            quotas: Vec::new(),
            hint: Default::default(),
        }
    }

    #[test]
    fn a_refusal_names_a_parameter_as_a_whole_word() {
        assert!(names_param(
            &err("`temperature` is deprecated for this model.", &[]),
            &["temperature"]
        ));
        assert!(names_param(
            &err(
                "Invalid JSON payload received. Unknown name \"seed\": Cannot find field.",
                &[]
            ),
            &["seed"]
        ));
        assert!(names_param(
            &err("body.seed: Extra inputs are not permitted", &["seed"]),
            &["seed"]
        ));
        assert!(names_param(
            &err("bad", &["text.format.schema"]),
            &["text.format"]
        ));
        assert!(!names_param(
            &err("stream_options is not supported", &[]),
            &["stream"]
        ));
        assert!(!names_param(&err("upstream error", &[]), &["stream"]));
        assert!(names_param(
            &err("stream_options is not supported", &[]),
            &["stream_options"]
        ));
    }
}
