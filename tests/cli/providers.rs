//! Providers end to end: OpenAI and Anthropic wire formats against a server on 127.0.0.1,
//! and `--agent-command`.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

pub(crate) const APP: [&str; 3] = ["one", "two", "three"];

pub(crate) struct Recorded {
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Value,
    /// When the request arrived.
    pub(crate) at: std::time::Instant,
}

/// How the loopback server answers one connection.
pub(crate) enum Reply {
    /// A status and a JSON body, whole.
    Json(u16, String),
    /// A status, extra headers (`retry-after`, `x-should-retry`…) and a JSON body, whole.
    Headed(u16, Vec<(&'static str, String)>, String),
    /// `200` with this content type and body, whole.
    Typed(&'static str, Vec<u8>),
    /// `200 text/event-stream`, written in these pieces with a pause between them (a piece
    /// may end inside a line, an event or a UTF-8 character).
    Sse(Vec<Vec<u8>>),
    /// `200 text/event-stream`: these bytes, then silence for the given time, then close.
    Stall(Vec<u8>, std::time::Duration),
}

pub(crate) fn json_reply(status: u16, body: Value) -> Reply {
    Reply::Json(status, body.to_string())
}

/// Serves the given (status, body) responses in order, one connection each, and records
/// every request it got.
fn serve(
    responses: Vec<(u16, String)>,
) -> (
    String,
    Arc<Mutex<Vec<Recorded>>>,
    std::thread::JoinHandle<()>,
) {
    serve_replies(
        responses
            .into_iter()
            .map(|(s, b)| Reply::Json(s, b))
            .collect(),
    )
}

/// Serves the replies in order, one connection each (bounded: the thread ends after the
/// last one, or when no client comes within 60 s), recording every request.
pub(crate) fn serve_replies(
    replies: Vec<Reply>,
) -> (
    String,
    Arc<Mutex<Vec<Recorded>>>,
    std::thread::JoinHandle<()>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    listener.set_nonblocking(true).expect("nonblocking");
    let handle = std::thread::spawn(move || {
        let mut handlers = Vec::new();
        for reply in replies {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            let stream = loop {
                match listener.accept() {
                    Ok((stream, _)) => break stream,
                    Err(_) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(std::time::Duration::from_millis(10))
                    }
                    Err(_) => return,
                }
            };
            stream.set_nonblocking(false).expect("blocking");
            let log = Arc::clone(&log);
            // Each connection on its own thread, so a stalled one does not hold up the next.
            handlers.push(std::thread::spawn(move || answer(stream, reply, &log)));
        }
        for h in handlers {
            let _ = h.join();
        }
    });
    (url, seen, handle)
}

/// Reads one request, records it, and answers it with `reply`.
fn answer(stream: std::net::TcpStream, reply: Reply, log: &Mutex<Vec<Recorded>>) {
    {
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).is_err() || request_line.is_empty() {
            return;
        }
        let path = request_line.split(' ').nth(1).unwrap_or("").to_string();
        let mut headers = Vec::new();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("header");
            let line = line.trim_end().to_string();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
                if k == "content-length" {
                    length = v.parse().unwrap_or(0);
                }
                headers.push((k, v));
            }
        }
        let mut buf = vec![0u8; length];
        reader.read_exact(&mut buf).expect("body");
        log.lock().expect("lock").push(Recorded {
            path,
            headers,
            body: serde_json::from_slice(&buf).unwrap_or(Value::Null),
            at: std::time::Instant::now(),
        });
        let mut stream = stream;
        match reply {
            Reply::Json(status, body) => {
                let reason = if status == 200 { "OK" } else { "Error" };
                let _ = write!(
                        stream,
                        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
            }
            Reply::Headed(status, extra, body) => {
                let mut head =
                    format!("HTTP/1.1 {status} Error\r\ncontent-type: application/json\r\n");
                for (name, value) in extra {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                let _ = write!(
                    stream,
                    "{head}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
            Reply::Typed(content_type, body) => {
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(&body);
            }
            Reply::Sse(pieces) => {
                let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
                    );
                for piece in pieces {
                    let _ = stream.write_all(&piece);
                    let _ = stream.flush();
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
            Reply::Stall(bytes, silence) => {
                let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
                    );
                let _ = stream.write_all(&bytes);
                let _ = stream.flush();
                std::thread::sleep(silence);
            }
        }
    }
}

/// Server-sent events as `event: NAME` / `data: JSON` pairs (Responses and Anthropic name
/// their events; Chat Completions sends bare `data:` lines).
pub(crate) fn sse(events: &[(Option<&str>, Value)]) -> Vec<u8> {
    let mut out = String::new();
    for (name, data) in events {
        if let Some(name) = name {
            out.push_str(&format!("event: {name}\n"));
        }
        out.push_str(&format!("data: {data}\n\n"));
    }
    out.into_bytes()
}

/// Cuts bytes into pieces of `n` bytes: pieces end inside lines, events and characters.
fn pieces(bytes: &[u8], n: usize) -> Vec<Vec<u8>> {
    bytes.chunks(n).map(<[u8]>::to_vec).collect()
}

fn openai_answer(content: &str) -> String {
    json!({
        "id": "x", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    })
    .to_string()
}

pub(crate) fn good() -> String {
    proposal(
        &diff_replace("app.txt", &APP, "two", "TWO"),
        "uppercase two",
    )
}

#[test]
fn openai_request_shape_retry_on_500_and_usage() {
    let r = TestRepo::simple();
    let (url, seen, server) = serve(vec![
        (500, json!({"error": {"message": "overloaded"}}).to_string()),
        (200, openai_answer(&good())),
    ]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r
        .factory()
        .env("OPENAI_API_KEY", "sk-test-secret-123")
        .args([
            "run",
            "--json",
            "--llm-model",
            "openai:test-model",
            "--llm-base-url",
        ])
        .arg(&url)
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("runs");
    server.join().expect("server");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 2, "the 500 was retried once");
    let req = &seen[1];
    assert_eq!(req.path, "/chat/completions");
    assert!(req
        .headers
        .iter()
        .any(|(k, v)| k == "authorization" && v == "Bearer sk-test-secret-123"));
    assert_eq!(req.body["model"], "test-model");
    assert_eq!(req.body["temperature"], 0.0);
    assert_eq!(req.body["seed"], 0);
    assert_eq!(req.body["response_format"]["type"], "json_schema");
    assert_eq!(req.body["messages"][0]["role"], "system");
    assert!(req.body["messages"][1]["content"]
        .as_str()
        .unwrap_or("")
        .contains("# Work order wo-1"));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["attempts"][0]["usage"]["input_tokens"], 120);
    assert_eq!(s["config"]["model"], format!("openai:test-model@{url}"));
    // The key is in no artifact and no output.
    let id = s["run_id"].as_str().expect("id");
    let (code, found) = r.git_code(&[
        "grep",
        "-l",
        "sk-test-secret",
        &format!("refs/factory/{id}"),
    ]);
    assert_eq!(code, 1, "the key is in an artifact: {found}");
    assert!(
        !stderr_of(&out).contains("sk-test-secret") && !stdout_of(&out).contains("sk-test-secret")
    );
}

#[test]
fn openai_401_ends_the_run_with_exit_2_and_one_line_cause() {
    let r = TestRepo::simple();
    let (url, _seen, server) = serve(vec![(
        401,
        json!({"error": {"message": "Incorrect API key provided"}}).to_string(),
    )]);
    let wo = r.work_order(basic_order(&["true"]));
    let before = r.snapshot();
    let out = r
        .factory()
        .env("OPENAI_API_KEY", "sk-wrong-999")
        .args(["run", "--llm-model", "gpt-x", "--llm-base-url"])
        .arg(&url)
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("runs");
    server.join().expect("server");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("openai refused the API key (HTTP 401): Incorrect API key provided"),
        "{err}"
    );
    assert!(!err.contains("sk-wrong-999"));
    assert_eq!(r.snapshot(), before);
    let ids = r.run_ids();
    let s: Value = serde_json::from_str(
        &r.git(&["show", &format!("refs/factory/{}:run_summary.json", ids[0])]),
    )
    .expect("json");
    assert_eq!(s["verdict"], "ERROR");
}

#[test]
fn exhausted_retries_are_llm_call_failed() {
    let r = TestRepo::simple();
    let busy = json!({"error": {"message": "rate limited"}}).to_string();
    let (url, seen, server) = serve(vec![
        (429, busy.clone()),
        (429, busy.clone()),
        (503, busy.clone()),
        (429, busy),
    ]);
    let wo = r.work_order(basic_order(&["true"]));
    let out = r
        .factory()
        .env("OPENAI_API_KEY", "k")
        .args([
            "run",
            "--json",
            "--max-attempts",
            "1",
            "--llm-model",
            "m",
            "--llm-base-url",
        ])
        .arg(&url)
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("runs");
    server.join().expect("server");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(seen.lock().expect("lock").len(), 4);
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["ended_stage"], "llm_call_failed");
}

#[test]
fn anthropic_messages_wire_format() {
    let r = TestRepo::simple();
    let answer = json!({
        "id": "msg", "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": good()}],
        "usage": {"input_tokens": 11, "output_tokens": 7}
    });
    let (url, seen, server) = serve(vec![(200, answer.to_string())]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r
        .factory()
        .env("ANTHROPIC_API_KEY", "ant-key")
        .args([
            "run",
            "--json",
            "--llm-model",
            "anthropic:claude-test",
            "--llm-base-url",
        ])
        .arg(&url)
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("runs");
    server.join().expect("server");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let seen = seen.lock().expect("lock");
    assert_eq!(seen[0].path, "/v1/messages");
    assert!(seen[0]
        .headers
        .iter()
        .any(|(k, v)| k == "x-api-key" && v == "ant-key"));
    assert!(seen[0]
        .headers
        .iter()
        .any(|(k, _)| k == "anthropic-version"));
    assert_eq!(seen[0].body["model"], "claude-test");
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["attempts"][0]["usage"]["output_tokens"], 7);
}

#[test]
fn agent_command_reads_json_on_stdin_and_prints_a_bare_diff() {
    let r = TestRepo::simple();
    let script = r.outside.join("agent.sh");
    let seen = r.outside.join("request.json");
    let diff = diff_replace("app.txt", &APP, "two", "TWO");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat > {}\ncat <<'EOF'\n{diff}EOF\n",
            seen.display()
        ),
    )
    .expect("write");
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r
        .factory()
        .args(["run", "--agent-command"])
        .arg(format!("sh {}", script.display()))
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    let request: Value =
        serde_json::from_str(&std::fs::read_to_string(&seen).expect("request")).expect("json");
    assert_eq!(request["attempt"], 1);
    assert_eq!(request["work_order"]["id"], "wo-1");
    assert!(request["prompt"]
        .as_str()
        .unwrap_or("")
        .contains("Output contract"));
    assert_eq!(request["failure_brief"], Value::Null);
}

#[test]
fn agent_command_failure_is_llm_call_failed_with_its_stderr() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["true"]));
    let out = r
        .factory()
        .args([
            "run",
            "--json",
            "--max-attempts",
            "1",
            "--agent-command",
            "sh -c 'echo agent broke >&2; exit 3'",
            "-w",
        ])
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    let brief = &s["attempts"][0]["failure_brief"];
    assert_eq!(brief["stage"], "llm_call_failed");
    assert!(brief["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .contains("agent broke"));
}

#[test]
fn ctrl_c_while_waiting_for_the_model_ends_the_run_at_once() {
    let r = TestRepo::simple();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let (got_tx, got_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            let _ = got_tx.send(());
            std::thread::sleep(std::time::Duration::from_secs(30)); // never answers
            drop(stream);
        }
    });
    let wo = r.work_order(basic_order(&["true"]));
    let before = r.snapshot();
    let mut child = r
        .spawn(&[])
        .env("OPENAI_API_KEY", "k")
        .args([
            "run",
            "-q",
            "--llm-model",
            "m",
            "--llm-base-url",
            &url,
            "-w",
        ])
        .arg(&wo)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    got_rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the request arrived");
    let start = std::time::Instant::now();
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::INT,
    )
    .expect("signal");
    assert_eq!(child.wait().expect("ends").code(), Some(130));
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(r.snapshot(), before);
}

// ---------------------------------------------------------------------------------------
// Providers as they are: each server below answers as the real one does (OpenAI's OpenAPI
// description, the request and event types of Anthropic's SDK), and every request body is
// checked field by field.

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

/// The proposal schema as strict modes require it: an object at the root, every key of
/// every object required, no others; the form not used is null.
fn assert_strict_schema(schema: &Value) {
    assert_eq!(schema["type"], "object");
    assert_eq!(
        keys(&schema["properties"]),
        ["summary", "unified_diff", "writes"]
    );
    fn walk(v: &Value) {
        if let Some(o) = v.as_object() {
            if o.get("type") == Some(&json!("object")) {
                let mut req: Vec<String> = o["required"]
                    .as_array()
                    .expect("required")
                    .iter()
                    .map(|r| r.as_str().expect("str").to_string())
                    .collect();
                req.sort();
                assert_eq!(req, keys(&o["properties"]));
                assert_eq!(o["additionalProperties"], false);
            }
            o.values().for_each(walk);
        } else if let Some(a) = v.as_array() {
            a.iter().for_each(walk);
        }
    }
    walk(schema);
    assert_eq!(
        schema["properties"]["unified_diff"]["anyOf"][1],
        json!({"type": "null"})
    );
}

/// What a schema-following model answers: both forms present, the unused one null.
fn schema_answer() -> String {
    json!({
        "unified_diff": diff_replace("app.txt", &APP, "two", "TWO"),
        "writes": null,
        "summary": "uppercase two"
    })
    .to_string()
}

fn chat_chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// A Chat Completions stream: role, content pieces, finish, usage chunk, [DONE].
fn chat_stream(content: &str, finish: &str) -> Vec<u8> {
    let mut events = vec![(
        None,
        chat_chunk(json!({"role": "assistant", "content": ""}), None),
    )];
    let chars: Vec<char> = content.chars().collect();
    for piece in chars.chunks(40) {
        let text: String = piece.iter().collect();
        events.push((None, chat_chunk(json!({"content": text}), None)));
    }
    events.push((None, chat_chunk(json!({}), Some(finish))));
    events.push((
        None,
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
               "usage": {"prompt_tokens": 200, "completion_tokens": 60, "total_tokens": 260}}),
    ));
    let mut bytes = sse(&events);
    bytes.extend_from_slice(b"data: [DONE]\n\n");
    bytes
}

fn response_object(status: &str, text: &str, incomplete: Option<&str>) -> Value {
    json!({
        "id": "resp_1", "object": "response", "created_at": 1, "status": status, "error": null,
        "incomplete_details": incomplete.map(|r| json!({"reason": r})),
        "model": "gpt-5-codex",
        "output": [
            {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Look at app.txt first."}]},
            {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": text, "annotations": []}]}
        ],
        "usage": {"input_tokens": 300, "output_tokens": 80, "output_tokens_details": {"reasoning_tokens": 20}, "total_tokens": 380}
    })
}

/// A Responses stream as the OpenAPI description's example has it.
fn responses_stream(text: &str) -> Vec<u8> {
    let mut events = vec![
        (
            Some("response.created"),
            json!({"type": "response.created", "response": {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}}),
        ),
        (
            Some("response.reasoning_summary_text.delta"),
            json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": "Look at app.txt first."}),
        ),
        (
            Some("response.output_item.added"),
            json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}}),
        ),
        (
            Some("response.content_part.added"),
            json!({"type": "response.content_part.added", "item_id": "msg_1", "output_index": 1, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        ),
    ];
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(30) {
        let delta: String = piece.iter().collect();
        events.push((Some("response.output_text.delta"), json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": delta})));
    }
    events.push((Some("response.output_text.done"), json!({"type": "response.output_text.done", "item_id": "msg_1", "output_index": 1, "content_index": 0, "text": text})));
    events.push((
        Some("response.completed"),
        json!({"type": "response.completed", "response": response_object("completed", text, None)}),
    ));
    sse(&events)
}

/// An Anthropic Messages stream: message_start, a thinking block, a text block in pieces,
/// message_delta with the stop reason and usage, message_stop.
fn anthropic_stream(text: &str, stop_reason: &str) -> Vec<u8> {
    let mut events = vec![
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-opus-4-7", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 410, "output_tokens": 1}}}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "The line to change is two."}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}}),
        ),
        (
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (Some("ping"), json!({"type": "ping"})),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(25) {
        let t: String = piece.iter().collect();
        events.push((Some("content_block_delta"), json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": t}})));
    }
    events.push((
        Some("content_block_stop"),
        json!({"type": "content_block_stop", "index": 1}),
    ));
    events.push((Some("message_delta"), json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 95}})));
    events.push((Some("message_stop"), json!({"type": "message_stop"})));
    sse(&events)
}

pub(crate) struct Ran {
    pub(crate) code: i32,
    pub(crate) stderr: String,
    pub(crate) summary: Value,
}

/// `git factory run --json` with the given flags against the loopback server at `url`.
/// The order `grep -qx TWO app.txt` run with `flags` in a fresh simple repo, its model
/// behind a loopback server giving `replies`; returns the repo, the run, and the requests the
/// server recorded (it has ended).
pub(crate) fn run_served(
    replies: Vec<Reply>,
    flags: &[&str],
) -> (TestRepo, Ran, Arc<Mutex<Vec<Recorded>>>) {
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(replies);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(&r, &wo, &url, flags);
    server.join().expect("server");
    (r, ran, seen)
}

/// The time between the two requests the server recorded; there must be exactly two.
fn gap_between_two(seen: &Mutex<Vec<Recorded>>) -> std::time::Duration {
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 2);
    seen[1].at - seen[0].at
}

pub(crate) fn run_model(r: &TestRepo, wo: &std::path::Path, url: &str, flags: &[&str]) -> Ran {
    let out = r
        .factory()
        .env("OPENAI_API_KEY", "sk-loop")
        .env("ANTHROPIC_API_KEY", "ant-loop")
        .args(["run", "--json", "--llm-base-url", url])
        .args(flags)
        .arg("-w")
        .arg(wo)
        .output()
        .expect("runs");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stderr: stderr_of(&out),
        summary: serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null),
    }
}

/// A `run --json --force` of `wo` by an agent that prints `text`; its summary (exit 0 asserted,
/// `what` naming the case).
pub(crate) fn run_agent_printing(
    r: &TestRepo,
    wo: &std::path::Path,
    text: &str,
    what: &str,
) -> Value {
    let script = r.outside.join("agent-prints.sh");
    std::fs::write(&script, format!("#!/bin/sh\ncat <<'EOF'\n{text}\nEOF\n")).expect("write");
    let out = r
        .factory()
        .args(["run", "--json", "--force", "--agent-command"])
        .arg(format!("sh {}", script.display()))
        .arg("-w")
        .arg(wo)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr_of(&out));
    serde_json::from_str(&stdout_of(&out)).expect("json")
}

pub(crate) fn artifact(r: &TestRepo, run: &Value, path: &str) -> String {
    let id = run["run_id"].as_str().expect("run id");
    r.git(&["show", &format!("refs/factory/{id}:{path}")])
}

fn providers_json(r: &TestRepo) -> Value {
    serde_json::from_slice(
        &std::fs::read(r.root.join(".git/factory/providers.json")).unwrap_or_default(),
    )
    .unwrap_or(Value::Null)
}

#[test]
fn chat_completions_body_streams_and_joins_a_character_split_across_reads() {
    let r = TestRepo::simple();
    let answer = json!({
        "unified_diff": diff_replace("app.txt", &APP, "two", "twö€"),
        "writes": null,
        "summary": "two becomes twö€"
    })
    .to_string();
    let stream = chat_stream(&answer, "stop");
    // Three-byte pieces: every multi-byte character of the answer is split somewhere.
    let (url, seen, server) = serve_replies(vec![Reply::Sse(pieces(&stream, 7))]);
    let wo = r.work_order(basic_order(&["grep -qx twö€ app.txt"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "qwen3-coder"]);
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(r.read("app.txt").as_deref(), Some("one\ntwö€\nthree\n"));
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 1);
    let b = &seen[0].body;
    assert_eq!(seen[0].path, "/chat/completions");
    // CreateChatCompletionRequest: exactly these fields.
    assert_eq!(
        keys(b),
        [
            "messages",
            "model",
            "response_format",
            "seed",
            "stream",
            "stream_options",
            "temperature"
        ]
    );
    assert_eq!(b["model"], "qwen3-coder");
    assert_eq!(b["messages"][0]["role"], "system");
    assert_eq!(b["messages"][1]["role"], "user");
    assert_eq!(b["temperature"], 0.0);
    assert_eq!(b["seed"], 0);
    assert_eq!(b["stream"], true);
    assert_eq!(b["stream_options"], json!({"include_usage": true}));
    // ResponseFormatJsonSchema: {type, json_schema: {name, strict, schema}}.
    assert_eq!(b["response_format"]["type"], "json_schema");
    assert_eq!(
        keys(&b["response_format"]["json_schema"]),
        ["name", "schema", "strict"]
    );
    assert_eq!(b["response_format"]["json_schema"]["name"], "proposal");
    assert_eq!(b["response_format"]["json_schema"]["strict"], true);
    assert_strict_schema(&b["response_format"]["json_schema"]["schema"]);
    // The usage chunk at the end of the stream is recorded.
    assert_eq!(
        ran.summary["attempts"][0]["usage"],
        json!({"input_tokens": 200, "output_tokens": 60})
    );
    assert_eq!(
        artifact(&r, &ran.summary, "attempt_1/llm_output.txt"),
        answer
    );
}

#[test]
fn a_responses_only_model_switches_api_once_and_remembers() {
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![
        json_reply(
            404,
            json!({"error": {"message": "This model is only supported in v1/responses and not in v1/chat/completions.", "type": "invalid_request_error", "param": "model", "code": null}}),
        ),
        Reply::Sse(pieces(&responses_stream(&schema_answer()), 50)),
    ]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &[
            "--llm-model",
            "openai:gpt-5-codex",
            "--llm-reasoning-effort",
            "high",
        ],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let seen = seen.lock().expect("lock");
    assert_eq!(
        seen.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(),
        ["/chat/completions", "/responses"]
    );
    assert_eq!(seen[0].body["reasoning_effort"], "high");
    let b = &seen[1].body;
    // CreateResponse: instructions + input, text.format, reasoning.effort, no seed.
    assert_eq!(
        keys(b),
        [
            "input",
            "instructions",
            "model",
            "reasoning",
            "store",
            "stream",
            "temperature",
            "text"
        ]
    );
    assert_eq!(b["model"], "gpt-5-codex");
    assert_eq!(b["input"][0]["role"], "user");
    assert!(b["input"][0]["content"]
        .as_str()
        .unwrap_or("")
        .contains("# Work order wo-1"));
    assert_eq!(b["reasoning"], json!({"effort": "high"}));
    assert_eq!(b["store"], false);
    assert_eq!(b["stream"], true);
    assert_eq!(b["temperature"], 0.0);
    // TextResponseFormatJsonSchema: {type, name, schema, strict} directly under format.
    assert_eq!(
        keys(&b["text"]["format"]),
        ["name", "schema", "strict", "type"]
    );
    assert_eq!(b["text"]["format"]["type"], "json_schema");
    assert_strict_schema(&b["text"]["format"]["schema"]);
    let a = &ran.summary["attempts"][0];
    assert_eq!(a["api_switch"], "chat -> responses");
    assert_eq!(
        a["usage"],
        json!({"input_tokens": 300, "output_tokens": 80, "reasoning_tokens": 20})
    );
    assert_eq!(ran.summary["config"]["reasoning_effort"], "high");
    assert_eq!(
        artifact(&r, &ran.summary, "attempt_1/reasoning.txt"),
        "Look at app.txt first."
    );
    let key = format!("{url} gpt-5-codex");
    assert_eq!(providers_json(&r)[&key]["api"], "responses");
}

#[test]
fn a_gpt5_temperature_refusal_is_dropped_recorded_remembered_and_shown() {
    let r = TestRepo::simple();
    let refusal = json!({"error": {"message": "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported.", "type": "invalid_request_error", "param": "temperature", "code": "unsupported_value"}});
    let whole = response_object("completed", &schema_answer(), None);
    let (url, seen, server) = serve_replies(vec![
        json_reply(400, refusal.clone()),
        json_reply(200, whole.clone()),
    ]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let flags = ["--llm-model", "gpt-5", "--llm-api", "responses"];
    let ran = run_model(&r, &wo, &url, &flags);
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    {
        let seen = seen.lock().expect("lock");
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].body["temperature"], 0.0);
        assert!(
            seen[1].body.get("temperature").is_none(),
            "{}",
            seen[1].body
        );
        // Nothing else changed between the two requests.
        let mut first = seen[0].body.clone();
        first.as_object_mut().expect("object").remove("temperature");
        assert_eq!(first, seen[1].body);
    }
    assert_eq!(
        ran.summary["attempts"][0]["dropped_params"],
        json!(["temperature"])
    );
    assert!(ran.stderr.contains("refused temperature"), "{}", ran.stderr);
    let key = format!("{url} gpt-5");
    assert_eq!(
        providers_json(&r)[&key]["dropped"]["responses"],
        json!(["temperature"])
    );
    let id = ran.summary["run_id"].as_str().expect("id");
    let show = r.factory().args(["show", id]).output().expect("show");
    assert!(
        stdout_of(&show).contains("dropped: temperature"),
        "{}",
        stdout_of(&show)
    );

    // A later run does not pay the extra request: one request, without temperature.
    let wo2 = r.work_order(json!({
        "id": "wo-2", "title": "Again", "intent": "Replace TWO with two.",
        "allowed_files": ["app.txt"], "acceptance_commands": ["true"]
    }));
    r.git(&["commit", "-qam", "two"]);
    let (url2, seen2, server2) = serve_replies(vec![json_reply(200, whole)]);
    std::fs::rename(
        r.root.join(".git/factory/providers.json"),
        r.root.join(".git/factory/providers.old"),
    )
    .expect("move");
    let text = std::fs::read_to_string(r.root.join(".git/factory/providers.old")).expect("read");
    std::fs::write(
        r.root.join(".git/factory/providers.json"),
        text.replace(&url, &url2),
    )
    .expect("write");
    let ran2 = run_model(&r, &wo2, &url2, &flags);
    server2.join().expect("server");
    assert_ne!(ran2.code, 2, "{}", ran2.stderr);
    let seen2 = seen2.lock().expect("lock");
    assert_eq!(seen2.len(), 1);
    assert!(seen2[0].body.get("temperature").is_none());
}

#[test]
fn a_temperature_the_user_set_is_never_dropped() {
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![json_reply(
        400,
        json!({"error": {"message": "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.", "type": "invalid_request_error", "param": "temperature", "code": "unsupported_value"}}),
    )]);
    let wo = r.work_order(basic_order(&["true"]));
    let before = r.snapshot();
    let ran = run_model(
        &r,
        &wo,
        &url,
        &["--llm-model", "gpt-5", "--llm-temperature", "0.2"],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 1);
    assert!(
        ran.stderr.contains("openai refused the temperature you set (HTTP 400): Unsupported value: 'temperature' does not support 0.2 with this model."),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("{\""), "no raw JSON: {}", ran.stderr);
    assert_eq!(r.snapshot(), before);
}

#[test]
fn anthropic_as_it_is_now_schema_no_temperature_effort_thinking_stored() {
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![Reply::Sse(pieces(
        &anthropic_stream(&schema_answer(), "end_turn"),
        64,
    ))]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &[
            "--llm-model",
            "anthropic:claude-opus-4-7",
            "--llm-reasoning-effort",
            "high",
        ],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen[0].path, "/v1/messages");
    assert!(seen[0]
        .headers
        .iter()
        .any(|(k, v)| k == "anthropic-version" && v == "2023-06-01"));
    assert!(seen[0]
        .headers
        .iter()
        .any(|(k, v)| k == "x-api-key" && v == "ant-loop"));
    let b = &seen[0].body;
    // MessageCreateParams: no temperature unless the user set one.
    assert_eq!(
        keys(b),
        [
            "max_tokens",
            "messages",
            "model",
            "output_config",
            "stream",
            "system"
        ]
    );
    assert_eq!(b["model"], "claude-opus-4-7");
    assert_eq!(b["max_tokens"], 16384);
    assert_eq!(b["stream"], true);
    assert_eq!(b["messages"][0]["role"], "user");
    assert!(b["system"].is_string());
    // OutputConfigParam: {effort, format: JSONOutputFormatParam {type, schema}}.
    assert_eq!(keys(&b["output_config"]), ["effort", "format"]);
    assert_eq!(b["output_config"]["effort"], "high");
    assert_eq!(keys(&b["output_config"]["format"]), ["schema", "type"]);
    assert_eq!(b["output_config"]["format"]["type"], "json_schema");
    assert_strict_schema(&b["output_config"]["format"]["schema"]);
    assert_eq!(
        ran.summary["attempts"][0]["usage"],
        json!({"input_tokens": 410, "output_tokens": 95})
    );
    assert_eq!(
        artifact(&r, &ran.summary, "attempt_1/reasoning.txt"),
        "The line to change is two."
    );
    assert_eq!(
        artifact(&r, &ran.summary, "attempt_1/llm_output.txt"),
        schema_answer()
    );
}

#[test]
fn anthropic_temperature_the_user_set_is_refused_with_the_servers_words() {
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![json_reply(
        400,
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "`temperature` is deprecated for this model."}, "request_id": "req_1"}),
    )]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &[
            "--llm-model",
            "anthropic:claude-opus-4-7",
            "--llm-temperature",
            "0",
        ],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock")[0].body["temperature"], 0.0);
    assert!(
        ran.stderr.contains("anthropic refused the temperature you set (HTTP 400): `temperature` is deprecated for this model."),
        "{}",
        ran.stderr
    );
}

#[test]
fn anthropic_without_output_format_gets_a_forced_tool() {
    let r = TestRepo::simple();
    let input = schema_answer();
    let cut = input.len() / 2;
    let events = vec![
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "msg_2", "type": "message", "role": "assistant", "content": [], "model": "claude-3-5-haiku", "stop_reason": null, "usage": {"input_tokens": 50, "output_tokens": 1}}}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "propose_change", "input": {}}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": &input[..cut]}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": &input[cut..]}}),
        ),
        (
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            Some("message_delta"),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 70}}),
        ),
        (Some("message_stop"), json!({"type": "message_stop"})),
    ];
    let (url, seen, server) = serve_replies(vec![
        json_reply(
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "output_config.format: Extra inputs are not permitted"}}),
        ),
        Reply::Sse(vec![sse(&events)]),
    ]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &["--llm-model", "anthropic:claude-3-5-haiku"],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let seen = seen.lock().expect("lock");
    let b = &seen[1].body;
    assert_eq!(
        keys(b),
        [
            "max_tokens",
            "messages",
            "model",
            "stream",
            "system",
            "tool_choice",
            "tools"
        ]
    );
    assert_eq!(
        b["tool_choice"],
        json!({"type": "tool", "name": "propose_change"})
    );
    assert_eq!(
        keys(&b["tools"][0]),
        ["description", "input_schema", "name"]
    );
    assert_strict_schema(&b["tools"][0]["input_schema"]);
    assert_eq!(
        ran.summary["attempts"][0]["dropped_params"],
        json!(["output_config.format"])
    );
}

#[test]
fn gemini_and_pydantic_refusals_of_seed_are_dropped() {
    for (status, body) in [
        (
            400,
            json!([{"error": {"code": 400, "message": "Invalid JSON payload received. Unknown name \"seed\": Cannot find field.", "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"description": "Invalid JSON payload received. Unknown name \"seed\": Cannot find field."}]}]}}]),
        ),
        (
            422,
            json!({"detail": [{"type": "extra_forbidden", "loc": ["body", "seed"], "msg": "Extra inputs are not permitted", "input": 0}]}),
        ),
    ] {
        let r = TestRepo::simple();
        let (url, seen, server) = serve_replies(vec![
            json_reply(status, body),
            Reply::Sse(vec![chat_stream(&schema_answer(), "stop")]),
        ]);
        let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
        let ran = run_model(&r, &wo, &url, &["--llm-model", "gemini-2.5-pro"]);
        server.join().expect("server");
        assert_eq!(ran.code, 0, "{status}: {}", ran.stderr);
        let seen = seen.lock().expect("lock");
        assert_eq!(seen[0].body["seed"], 0);
        assert!(seen[1].body.get("seed").is_none());
        assert_eq!(
            ran.summary["attempts"][0]["dropped_params"],
            json!(["seed"])
        );
    }
}

#[test]
fn servers_errors_are_one_line_of_their_own_words() {
    let r = TestRepo::simple();
    let (url, _seen, server) = serve_replies(vec![json_reply(
        400,
        json!([{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT"}}]),
    )]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "gemini-2.5-pro"]);
    server.join().expect("server");
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("openai rejected the request (HTTP 400): API key not valid. Please pass a valid API key."),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("INVALID_ARGUMENT"), "{}", ran.stderr);
}

#[test]
fn a_500_naming_response_format_falls_back_to_json_mode() {
    let (_r, ran, seen) = run_served(
        vec![
            json_reply(
                500,
                json!({"error": {"message": "Internal Server Error: unsupported response_format type 'json_schema'", "type": "internal_server_error"}}),
            ),
            Reply::Sse(vec![chat_stream(&good(), "stop")]),
        ],
        &["--llm-model", "local"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let seen = seen.lock().expect("lock");
    assert_eq!(
        seen.len(),
        2,
        "dropped at once, not retried as a transient 500"
    );
    assert_eq!(
        seen[1].body["response_format"],
        json!({"type": "json_object"})
    );
    assert_eq!(
        ran.summary["attempts"][0]["dropped_params"],
        json!(["response_format:json_schema"])
    );
}

#[test]
fn a_server_without_json_mode_is_asked_with_no_format() {
    let (_r, ran, seen) = run_served(
        vec![
            json_reply(
                400,
                json!({"error": {"message": "response_format of type 'json_schema' is not supported", "type": "invalid_request_error", "param": "response_format"}}),
            ),
            json_reply(
                400,
                json!({"error": {"message": "response_format of type 'json_object' is not supported", "type": "invalid_request_error", "param": "response_format"}}),
            ),
            Reply::Sse(vec![chat_stream(&good(), "stop")]),
        ],
        &["--llm-model", "local"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen[0].body["response_format"]["type"], "json_schema");
    assert_eq!(seen[1].body["response_format"]["type"], "json_object");
    assert!(seen[2].body.get("response_format").is_none());
    assert_eq!(
        ran.summary["attempts"][0]["dropped_params"],
        json!(["response_format:json_schema", "response_format:json_object"])
    );
}

#[test]
fn refusals_are_named_as_such() {
    // Chat Completions: content null and a refusal.
    let r = TestRepo::simple();
    let (url, _seen, server) = serve_replies(vec![json_reply(
        200,
        json!({
            "id": "c", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": "I can't help with that."}, "finish_reason": "stop"}]
        }),
    )]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "m", "--max-attempts", "1"]);
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    let brief = &ran.summary["attempts"][0]["failure_brief"];
    assert_eq!(brief["stage"], "llm_output_invalid");
    assert!(
        brief["primary_error_excerpt"]
            .as_str()
            .unwrap_or("")
            .contains("the model refused to answer: I can't help with that."),
        "{brief}"
    );

    // Anthropic: stop_reason refusal.
    let r = TestRepo::simple();
    let (url, _seen, server) =
        serve_replies(vec![Reply::Sse(vec![anthropic_stream("", "refusal")])]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &[
            "--llm-model",
            "anthropic:claude-opus-4-7",
            "--max-attempts",
            "1",
        ],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    let excerpt = ran.summary["attempts"][0]["failure_brief"]["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        excerpt.contains("the model refused to answer: stop_reason: refusal"),
        "{excerpt}"
    );

    // Responses: a refusal content part.
    let r = TestRepo::simple();
    let (url, _seen, server) = serve_replies(vec![json_reply(
        200,
        json!({
            "id": "resp_2", "object": "response", "status": "completed",
            "output": [{"id": "msg_2", "type": "message", "role": "assistant",
                        "content": [{"type": "refusal", "refusal": "I can't assist with that."}]}],
            "usage": {"input_tokens": 10, "output_tokens": 5}
        }),
    )]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &[
            "--llm-model",
            "gpt-5",
            "--llm-api",
            "responses",
            "--max-attempts",
            "1",
        ],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    let excerpt = ran.summary["attempts"][0]["failure_brief"]["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        excerpt.contains("the model refused to answer: I can't assist with that."),
        "{excerpt}"
    );
    assert!(!excerpt.contains("EOF while parsing"), "{excerpt}");
}

#[test]
fn answers_cut_at_the_limit_ask_for_a_smaller_change() {
    let r = TestRepo::simple();
    let cut = &schema_answer()[..40];
    let (url, seen, server) = serve_replies(vec![Reply::Sse(vec![chat_stream(cut, "length")])]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &[
            "--llm-model",
            "m",
            "--max-attempts",
            "1",
            "--llm-max-output-tokens",
            "50",
        ],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(
        seen.lock().expect("lock")[0].body["max_completion_tokens"],
        50
    );
    assert_eq!(ran.summary["config"]["max_output_tokens"], 50);
    let excerpt = ran.summary["attempts"][0]["failure_brief"]["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        excerpt.contains("cut at the output limit (finish_reason: length)"),
        "{excerpt}"
    );
    assert!(excerpt.contains("smaller change"), "{excerpt}");
    assert!(
        !excerpt.contains("EOF"),
        "not a JSON syntax error: {excerpt}"
    );

    // Responses: status incomplete (max_output_tokens); the limit is max_output_tokens.
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![json_reply(
        200,
        json!({"id": "r", "object": "response", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "{\"unified"}]}], "usage": {"input_tokens": 1, "output_tokens": 50}}),
    )]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &[
            "--llm-model",
            "gpt-5",
            "--llm-api",
            "responses",
            "--max-attempts",
            "1",
            "--llm-max-output-tokens",
            "50",
        ],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock")[0].body["max_output_tokens"], 50);
    let excerpt = ran.summary["attempts"][0]["failure_brief"]["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        excerpt.contains("cut at the output limit (status: incomplete (max_output_tokens))"),
        "{excerpt}"
    );

    // Anthropic: stop_reason max_tokens; the limit is max_tokens.
    let r = TestRepo::simple();
    let (url, seen, server) =
        serve_replies(vec![Reply::Sse(vec![anthropic_stream(cut, "max_tokens")])]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &[
            "--llm-model",
            "anthropic:claude-sonnet-4-5",
            "--max-attempts",
            "1",
            "--llm-max-output-tokens",
            "50",
        ],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock")[0].body["max_tokens"], 50);
    let excerpt = ran.summary["attempts"][0]["failure_brief"]["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        excerpt.contains("cut at the output limit (stop_reason: max_tokens)"),
        "{excerpt}"
    );
}

#[test]
fn a_think_block_is_stored_as_reasoning_never_parsed() {
    let r = TestRepo::simple();
    let content = format!(
        "<think>\nThe user wants TWO. I'll write a diff.\n</think>\n\n{}",
        good()
    );
    let (url, _seen, server) = serve_replies(vec![Reply::Sse(vec![chat_stream(&content, "stop")])]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "deepseek-r1"]);
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(
        artifact(&r, &ran.summary, "attempt_1/reasoning.txt"),
        "\nThe user wants TWO. I'll write a diff.\n"
    );
    assert_eq!(
        artifact(&r, &ran.summary, "attempt_1/llm_output.txt"),
        content
    );
}

#[test]
fn reasoning_content_of_a_non_streaming_server_is_stored() {
    let (r, ran, _seen) = run_served(
        vec![json_reply(
            200,
            json!({
                "id": "c", "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": good(), "reasoning_content": "Only line two changes."}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 8, "total_tokens": 17}
            }),
        )],
        &["--llm-model", "m"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(
        artifact(&r, &ran.summary, "attempt_1/reasoning.txt"),
        "Only line two changes."
    );
}

#[test]
fn a_stream_that_stalls_mid_way_is_retried() {
    let r = TestRepo::simple();
    let stream = responses_stream(&schema_answer());
    let half = stream[..stream.len() / 2].to_vec();
    let (url, seen, server) = serve_replies(vec![
        Reply::Stall(half, std::time::Duration::from_secs(3)),
        Reply::Sse(pieces(&stream, 200)),
    ]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r
        .factory()
        .env("OPENAI_API_KEY", "k")
        .env("GIT_FACTORY_TEST_LLM_SILENCE_MS", "1000")
        .args([
            "run",
            "--json",
            "--llm-api",
            "responses",
            "--llm-model",
            "gpt-5",
            "--llm-base-url",
            &url,
            "-w",
        ])
        .arg(&wo)
        .output()
        .expect("runs");
    server.join().expect("server");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(seen.lock().expect("lock").len(), 2);

    // Stalled every time: the attempt fails with the silence named.
    let r = TestRepo::simple();
    let stall = || {
        Reply::Stall(
            b"event: response.created\n".to_vec(),
            std::time::Duration::from_secs(2),
        )
    };
    let (url, seen, server) = serve_replies(vec![stall(), stall(), stall(), stall()]);
    let wo = r.work_order(basic_order(&["true"]));
    let out = r
        .factory()
        .env("OPENAI_API_KEY", "k")
        .env("GIT_FACTORY_TEST_LLM_SILENCE_MS", "300")
        .args([
            "run",
            "--json",
            "--max-attempts",
            "1",
            "--llm-model",
            "m",
            "--llm-base-url",
            &url,
            "-w",
        ])
        .arg(&wo)
        .output()
        .expect("runs");
    server.join().expect("server");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(seen.lock().expect("lock").len(), 4);
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    let excerpt = s["attempts"][0]["failure_brief"]["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        excerpt.contains("no byte from the server for 0.3s"),
        "{excerpt}"
    );
}

#[test]
fn an_unreachable_provider_is_refused_before_the_first_attempt() {
    let r = TestRepo::simple();
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let wo = r.work_order(basic_order(&["true"]));
    let before = r.snapshot();
    let url = format!("http://127.0.0.1:{port}/v1");
    let ran = run_model(&r, &wo, &url, &["--llm-model", "qwen3"]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains(&format!(
            "error: openai: cannot reach {url}/chat/completions: connection refused"
        )),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr
            .contains("hint: start the server, or check --llm-base-url"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("llm_call_failed"), "{}", ran.stderr);
    assert!(r.run_ids().is_empty(), "nothing is recorded");
    assert_eq!(r.snapshot(), before);

    // In a worktree run too: no record, no branch, no worktree left behind.
    let ran = run_model(&r, &wo, &url, &["--llm-model", "qwen3", "--worktree"]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(r.run_ids().is_empty(), "nothing is recorded");
    only_idle_pooled_worktrees(&r);
    assert_eq!(r.git(&["branch", "--list", "factory/*"]), "");
    assert_eq!(r.snapshot(), before);
}

#[test]
fn a_404_on_the_first_request_is_a_misconfigured_base_url() {
    let r = TestRepo::simple();
    let (url, _seen, server) =
        serve_replies(vec![Reply::Json(404, "404 page not found".to_string())]);
    let wo = r.work_order(basic_order(&["true"]));
    let before = r.snapshot();
    let ran = run_model(&r, &wo, &url, &["--llm-model", "qwen3"]);
    server.join().expect("server");
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains(&format!(
            "openai: {url}/chat/completions answered HTTP 404: 404 page not found"
        )),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr
            .contains("hint: check the base URL (e.g. a missing /v1) and the model name"),
        "{}",
        ran.stderr
    );
    assert!(r.run_ids().is_empty(), "nothing is recorded");
    assert_eq!(r.snapshot(), before);
}

#[test]
fn dry_run_needs_no_api_key() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["true"]));
    for model in ["openai:gpt-5", "anthropic:claude-opus-4-7"] {
        let out = r
            .factory()
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .args(["run", "--dry-run", "--llm-model", model, "-w"])
            .arg(&wo)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(0), "{model}: {}", stderr_of(&out));
        assert!(stdout_of(&out).contains("# Work order wo-1"));
    }
    let out = r
        .factory()
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .args(["run", "--llm-model", "openai:gpt-5", "-w"])
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("OPENAI_API_KEY is not set"));
}

#[test]
fn effort_and_output_limit_enter_the_config_hash_only_when_set() {
    use sha2::{Digest, Sha256};
    let hex = |line: String| {
        Sha256::digest(line.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let mut ids = Vec::new();
    for (flags, suffix) in [
        (vec![], ""),
        (vec!["--llm-reasoning-effort", "high"], "|effort=high"),
        (
            vec![
                "--llm-reasoning-effort",
                "high",
                "--llm-max-output-tokens",
                "9000",
            ],
            "|effort=high|max_output=9000",
        ),
    ] {
        let (url, _seen, server) =
            serve_replies(vec![Reply::Sse(vec![chat_stream(&good(), "stop")])]);
        let mut all = vec!["--llm-model", "m"];
        all.extend(flags);
        let ran = run_model(&r, &wo, &url, &all);
        server.join().expect("server");
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        assert_eq!(
            ran.summary["config"]["config_hash"],
            hex(format!(
                "openai:m@{url}|0|2|600|p1|ladder{suffix}|verify={}",
                // What judges (SPEC §4.3): git config factory.verify is `true`.
                hex("true\n".to_string())
            )),
            "{suffix}"
        );
        ids.push(ran.summary["run_id"].clone());
        r.git(&["checkout", "-q", "--", "app.txt"]);
    }
    assert_ne!(ids[0], ids[1]);
    assert_ne!(ids[1], ids[2]);

    let bad = r
        .factory()
        .args([
            "run",
            "--dry-run",
            "--llm-model",
            "m",
            "--llm-reasoning-effort",
            "Hi gh",
            "-w",
        ])
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr_of(&bad).contains("is not an effort level"),
        "{}",
        stderr_of(&bad)
    );
    let bad = r
        .factory()
        .args([
            "run",
            "--dry-run",
            "--agent-command",
            "true",
            "--llm-reasoning-effort",
            "high",
            "-w",
        ])
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr_of(&bad).contains("--llm-reasoning-effort applies to --llm-model only"),
        "{}",
        stderr_of(&bad)
    );
}

#[test]
fn the_whole_request_has_a_time_limit() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.llmTimeout", "1"]);
    // Keep-alives every 20 ms: the silence limit never fires, the whole-request one does.
    let slow = || Reply::Sse(vec![b": keep-alive\n\n".to_vec(); 150]);
    let (url, seen, server) = serve_replies(vec![slow(), slow(), slow(), slow()]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "m", "--max-attempts", "1"]);
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(
        seen.lock().expect("lock").len(),
        4,
        "a timeout is transient: retried"
    );
    let excerpt = ran.summary["attempts"][0]["failure_brief"]["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        excerpt.contains("the request took longer than 1s (git config factory.llmTimeout)"),
        "{excerpt}"
    );
}

#[test]
fn an_error_event_mid_stream_is_transient() {
    let r = TestRepo::simple();
    let overloaded = sse(&[
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        ),
        (
            Some("error"),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ]);
    let (url, seen, server) = serve_replies(vec![
        Reply::Sse(vec![overloaded]),
        Reply::Sse(vec![anthropic_stream(&schema_answer(), "end_turn")]),
    ]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &["--llm-model", "anthropic:claude-sonnet-4-5"],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body, seen[1].body, "the same request, sent again");
}

// Hardening: what a hostile or broken server sends must not leak the key, exhaust memory
// or be misread.

const SECRET_OPENAI: &str = "sk-proj-LOOPSECRET0123456789";
const SECRET_ANTHROPIC: &str = "sk-ant-LOOPSECRET9876543210";

/// `git factory run --json` with long, recognisable keys in the environment.
fn run_with_keys(r: &TestRepo, wo: &std::path::Path, url: &str, flags: &[&str]) -> (Ran, String) {
    let out = r
        .factory()
        .env("OPENAI_API_KEY", SECRET_OPENAI)
        .env("ANTHROPIC_API_KEY", SECRET_ANTHROPIC)
        .args(["run", "--json", "--llm-base-url", url])
        .args(flags)
        .arg("-w")
        .arg(wo)
        .output()
        .expect("runs");
    let stdout = stdout_of(&out);
    (
        Ran {
            code: out.status.code().unwrap_or(-1),
            stderr: stderr_of(&out),
            summary: serde_json::from_str(&stdout).unwrap_or(Value::Null),
        },
        stdout,
    )
}

/// Whether any file of any stored run holds `needle`.
fn stored_anywhere(r: &TestRepo, needle: &str) -> bool {
    r.run_ids().iter().any(|id| {
        r.git_code(&["grep", "-l", "-F", needle, &format!("refs/factory/{id}")])
            .0
            == 0
    })
}

#[test]
fn a_server_that_echoes_the_key_never_gets_it_printed_or_stored() {
    let r = TestRepo::simple();
    let echo = |key: &str| {
        json_reply(
            400,
            json!({"error": {"message": format!("invalid key Bearer {key}")}}),
        )
    };
    let (url, _seen, server) = serve_replies(vec![echo(SECRET_OPENAI)]);
    let wo = r.work_order(basic_order(&["true"]));
    let (ran, stdout) = run_with_keys(&r, &wo, &url, &["--llm-model", "m1"]);
    server.join().expect("server");
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("invalid key Bearer [redacted]"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("LOOPSECRET") && !stdout.contains("LOOPSECRET"));
    assert!(!stored_anywhere(&r, "LOOPSECRET"));

    // Anthropic: a mid-stream error event naming the key, then a good answer; the key is
    // neither stored nor sent back to the model in the next attempt's prompt.
    let r = TestRepo::simple();
    let partial = sse(&[
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 3, "output_tokens": 0}}}),
        ),
        (
            Some("error"),
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": format!("bad key {SECRET_ANTHROPIC}")}}),
        ),
    ]);
    let mut replies: Vec<Reply> = (0..4).map(|_| Reply::Sse(vec![partial.clone()])).collect();
    replies.push(Reply::Sse(vec![anthropic_stream(&good(), "end_turn")]));
    let (url, seen, server) = serve_replies(replies);
    let wo = r.work_order(basic_order(&["grep -q TWO app.txt"]));
    let (ran, stdout) = run_with_keys(&r, &wo, &url, &["--llm-model", "anthropic:c"]);
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(!ran.stderr.contains("LOOPSECRET") && !stdout.contains("LOOPSECRET"));
    assert!(!stored_anywhere(&r, "LOOPSECRET"));
    let brief = artifact(&r, &ran.summary, "attempt_1/failure_brief.json");
    assert!(brief.contains("bad key [redacted]"), "{brief}");
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 5);
    assert!(!seen[4].body.to_string().contains("LOOPSECRET"));
    assert!(seen[4].body.to_string().contains("bad key [redacted]"));
}

#[test]
fn an_answer_too_large_to_be_a_proposal_fails_the_attempt_and_is_not_stored() {
    let r = TestRepo::simple();
    // Attempt 1: a 40 MB body (reading stops at 32 MiB); attempt 2: a 5 MB streamed answer
    // (over the 4 MiB answer limit).
    let huge_body = format!("{{\"pad\": \"{}\"}}", "x".repeat(40 << 20)).into_bytes();
    let (url, _seen, server) = serve_replies(vec![
        Reply::Typed("application/json", huge_body),
        Reply::Sse(vec![chat_stream(&"y".repeat(5 << 20), "stop")]),
    ]);
    let wo = r.work_order(basic_order(&["true"]));
    let before = r.snapshot();
    let (ran, _) = run_with_keys(&r, &wo, &url, &["--llm-model", "m1"]);
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(ran.summary["ended_stage"], "llm_output_invalid");
    for n in [1, 2] {
        let brief = artifact(&r, &ran.summary, &format!("attempt_{n}/failure_brief.json"));
        assert!(brief.contains("the answer was larger than"), "{brief}");
        assert!(brief.contains("propose a smaller change"), "{brief}");
    }
    let id = ran.summary["run_id"].as_str().expect("id");
    let sizes = r.git(&["ls-tree", "-r", "-l", &format!("refs/factory/{id}")]);
    for line in sizes.lines() {
        let size: u64 = line
            .split_whitespace()
            .nth(3)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        assert!(size < 1 << 20, "stored whole: {line}");
    }
    assert_eq!(r.snapshot(), before);
}

#[test]
fn a_web_page_at_the_base_url_is_refused_before_any_attempt() {
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![Reply::Typed(
        "text/html",
        b"<html><body>Welcome to nginx</body></html>".to_vec(),
    )]);
    let wo = r.work_order(basic_order(&["true"]));
    let before = r.snapshot();
    let (ran, _) = run_with_keys(&r, &wo, &url, &["--llm-model", "m1"]);
    server.join().expect("server");
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 1);
    assert!(
        ran.stderr
            .contains("answered 200 but the answer is a web page, not JSON"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr
            .contains("hint: the base URL points at something that is not the API"),
        "{}",
        ran.stderr
    );
    assert!(r.run_ids().is_empty());
    assert_eq!(r.snapshot(), before);
}

#[test]
fn odd_streams_json_labelled_as_events_and_a_cut_stream() {
    // A whole answer under a text/event-stream label is read as the answer it is.
    let r = TestRepo::simple();
    let (url, _seen, server) = serve_replies(vec![Reply::Typed(
        "text/event-stream",
        openai_answer(&good()).into_bytes(),
    )]);
    let wo = r.work_order(basic_order(&["grep -q TWO app.txt"]));
    let (ran, _) = run_with_keys(&r, &wo, &url, &["--llm-model", "m1"]);
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);

    // A stream that ends with neither finish_reason nor [DONE] is a transient failure,
    // retried in the same attempt, never parsed as a cut proposal.
    let r = TestRepo::simple();
    let cut = sse(&[(None, chat_chunk(json!({"content": &good()[..40]}), None))]);
    let (url, seen, server) = serve_replies(vec![
        Reply::Sse(vec![cut]),
        Reply::Sse(vec![chat_stream(&good(), "stop")]),
    ]);
    let wo = r.work_order(basic_order(&["grep -q TWO app.txt"]));
    let (ran, _) = run_with_keys(&r, &wo, &url, &["--llm-model", "m1", "--max-attempts", "1"]);
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 2);
    assert_eq!(ran.summary["attempts"].as_array().map(Vec::len), Some(1));

    // Cut on every request: the attempt fails as a call failure naming the cut, with the
    // provider named once.
    let r = TestRepo::simple();
    let cut = sse(&[(None, chat_chunk(json!({"content": "{"}), None))]);
    let (url, _seen, server) =
        serve_replies((0..4).map(|_| Reply::Sse(vec![cut.clone()])).collect());
    let (ran, _) = run_with_keys(&r, &wo, &url, &["--llm-model", "m1", "--max-attempts", "1"]);
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(ran.summary["ended_stage"], "llm_call_failed");
    let brief = artifact(&r, &ran.summary, "attempt_1/failure_brief.json");
    assert!(
        brief.contains("openai: the stream ended before the answer was complete"),
        "{brief}"
    );
    assert!(!brief.contains("openai: openai:"), "{brief}");
}

#[test]
fn a_parameter_dropped_in_a_run_that_ended_in_error_is_not_remembered() {
    let r = TestRepo::simple();
    let (url, _seen, server) = serve_replies(vec![
        json_reply(
            400,
            json!({"error": {"message": "Unsupported parameter: 'seed' is not supported with this model.", "param": "seed"}}),
        ),
        json_reply(
            401,
            json!({"error": {"message": "Incorrect API key provided"}}),
        ),
    ]);
    let wo = r.work_order(basic_order(&["true"]));
    let (ran, _) = run_with_keys(&r, &wo, &url, &["--llm-model", "m1"]);
    server.join().expect("server");
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        !providers_json(&r).to_string().contains("seed"),
        "{}",
        providers_json(&r)
    );
}

// ---- Providers, second contact (SPEC §3.3): errors read whole, forced tools refused,
// quota, retry hints, the model that answered.

fn headed(status: u16, headers: &[(&'static str, &str)], body: Value) -> Reply {
    Reply::Headed(
        status,
        headers.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        body.to_string(),
    )
}

/// The first attempt's failure brief, as the model and `show` get it.
pub(crate) fn brief_of(ran: &Ran) -> String {
    ran.summary["attempts"][0]["failure_brief"]["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The stored summary of the repo's only run (a run that ended in ERROR prints none).
fn stored_summary(r: &TestRepo) -> Value {
    let ids = r.run_ids();
    serde_json::from_str(&r.git(&["show", &format!("refs/factory/{}:run_summary.json", ids[0])]))
        .expect("json")
}

/// How llama-cpp-python's server refuses `response_format: {type: json_schema}`: HTTP 500,
/// `param: null`, and FastAPI's multi-line words, whose first line is only a heading.
fn llama_cpp_refusal() -> Value {
    json!({"error": {
        "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File \"/usr/lib/python3/site-packages/llama_cpp/server/app.py\", line 376, in create_chat_completion\n    POST /v1/chat/completions",
        "type": "internal_server_error", "param": null, "code": null}})
}

#[test]
fn a_500_naming_response_format_on_its_second_line_is_a_refusal_not_a_transient_error() {
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![
        json_reply(500, llama_cpp_refusal()),
        Reply::Sse(vec![chat_stream(&good(), "stop")]),
    ]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &["--llm-model", "local", "--max-attempts", "1"],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 2, "json_schema, then json_object: no retry");
    assert_eq!(seen[0].body["response_format"]["type"], "json_schema");
    assert_eq!(
        seen[1].body["response_format"],
        json!({"type": "json_object"})
    );
    assert_eq!(
        ran.summary["attempts"][0]["dropped_params"],
        json!(["response_format:json_schema"])
    );
    assert!(
        ran.stderr.contains("refused response_format:json_schema"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_multi_line_validation_error_is_shown_by_its_informative_line() {
    // vLLM's words: pydantic's own form, the field's path under the heading.
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![json_reply(
        400,
        json!({"object": "error", "message": "1 validation error for ChatCompletionRequest\nmessages.1.content\n  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]\n    For further information visit https://errors.pydantic.dev/2.11/v/string_type", "type": "BadRequestError", "param": null, "code": 400}),
    )]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "local"]);
    server.join().expect("server");
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 1);
    assert!(
        ran.stderr.contains(
            "openai rejected the request (HTTP 400): messages.1.content: Input should be a valid string\n"
        ),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("validation error"), "{}", ran.stderr);
}

#[test]
fn anthropic_a_model_that_refuses_a_forced_tool_is_offered_it_with_auto() {
    let r = TestRepo::simple();
    let input = schema_answer();
    let events = vec![
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "msg_3", "type": "message", "role": "assistant", "content": [], "model": "claude-opus-4-7", "stop_reason": null, "usage": {"input_tokens": 50, "output_tokens": 1}}}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "I'll propose the change with the tool."}}),
        ),
        (
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "propose_change", "input": {}}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": input}}),
        ),
        (
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            Some("message_delta"),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 80}}),
        ),
        (Some("message_stop"), json!({"type": "message_stop"})),
    ];
    let refused = |message: &str| {
        json_reply(
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}, "request_id": "req_011"}),
        )
    };
    let (url, seen, server) = serve_replies(vec![
        refused("output_config.format: Extra inputs are not permitted"),
        refused("tool_choice: type \"tool\" and \"any\" are not supported for this model"),
        Reply::Sse(vec![sse(&events)]),
    ]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "anthropic:claude-opus-4-7"]);
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 3);
    assert_eq!(
        seen[1].body["tool_choice"],
        json!({"type": "tool", "name": "propose_change"})
    );
    let b = &seen[2].body;
    assert_eq!(b["tool_choice"], json!({"type": "auto"}));
    assert_eq!(b["tools"][0]["name"], "propose_change");
    assert_strict_schema(&b["tools"][0]["input_schema"]);
    assert!(
        b["system"]
            .as_str()
            .unwrap_or("")
            .contains("calling the propose_change tool"),
        "{b}"
    );
    assert_eq!(
        ran.summary["attempts"][0]["dropped_params"],
        json!(["output_config.format", "tool_choice"])
    );
    let key = format!("{url} claude-opus-4-7");
    assert_eq!(
        providers_json(&r)[&key]["dropped"]["anthropic"],
        json!(["output_config.format", "tool_choice"])
    );
}

#[test]
fn an_exhausted_quota_is_permanent_not_a_rate_limit() {
    let openai = json!({"error": {"message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.", "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}});
    let gemini = json!([{"error": {"code": 429, "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.", "status": "RESOURCE_EXHAUSTED"}}]);
    let anthropic = json!({"type": "error", "error": {"type": "rate_limit_error", "message": "You have reached your specified API usage limits. You will regain access on 2026-12-01 at 00:00 UTC."}, "request_id": "req_012"});
    let cases: [(&str, Value, &[&str], &str); 4] = [
        (
            "chat",
            openai.clone(),
            &["--llm-model", "gpt-4o"],
            "You exceeded your current quota",
        ),
        (
            "responses",
            openai,
            &["--llm-model", "gpt-5", "--llm-api", "responses"],
            "You exceeded your current quota",
        ),
        (
            "gemini",
            gemini,
            &["--llm-model", "gemini-2.5-pro"],
            "You exceeded your current quota",
        ),
        (
            "anthropic",
            anthropic,
            &["--llm-model", "anthropic:claude-opus-4-7"],
            "You have reached your specified API usage limits",
        ),
    ];
    for (name, body, flags, words) in cases {
        let r = TestRepo::simple();
        let before = r.snapshot();
        let (url, seen, server) =
            serve_replies(vec![headed(429, &[("x-should-retry", "true")], body)]);
        let wo = r.work_order(basic_order(&["true"]));
        let ran = run_model(&r, &wo, &url, flags);
        server.join().expect("server");
        assert_eq!(ran.code, 2, "{name}: {}", ran.stderr);
        assert_eq!(seen.lock().expect("lock").len(), 1, "{name}: no retry");
        assert!(
            ran.stderr
                .contains("quota or spending limit is used up (HTTP 429): ")
                && ran.stderr.contains(words),
            "{name}: {}",
            ran.stderr
        );
        assert_eq!(r.snapshot(), before, "{name}");
        let s = stored_summary(&r);
        assert_eq!(s["verdict"], "ERROR", "{name}");
        assert_eq!(s["ended_stage"], "llm_call_failed", "{name}");
    }
}

#[test]
fn retry_hints_in_milliseconds_seconds_and_dates_are_honoured() {
    let busy = json!({"error": {"message": "Rate limit reached for requests", "type": "requests", "param": null, "code": "rate_limit_exceeded"}});
    // retry-after-ms wins over Retry-After (100 s here: honoured, the test would hang).
    let (_r, ran, seen) = run_served(
        vec![
            headed(
                429,
                &[("retry-after-ms", "300"), ("retry-after", "100")],
                busy.clone(),
            ),
            Reply::Sse(vec![chat_stream(&good(), "stop")]),
        ],
        &["--llm-model", "m"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let gap = gap_between_two(&seen);
    assert!(gap >= std::time::Duration::from_millis(290), "{gap:?}");
    assert!(gap < std::time::Duration::from_secs(10), "{gap:?}");
    // Retry-After in seconds: a second, not the half-second backoff.
    let (_r, ran, seen) = run_served(
        vec![
            headed(
                503,
                &[("retry-after", "1")],
                json!({"error": {"message": "overloaded"}}),
            ),
            Reply::Sse(vec![chat_stream(&good(), "stop")]),
        ],
        &["--llm-model", "m"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let gap = gap_between_two(&seen);
    assert!(gap >= std::time::Duration::from_millis(950), "{gap:?}");
    // Retry-After as an HTTP date already past: retried, no wait asked.
    let (_r, ran, seen) = run_served(
        vec![
            headed(
                503,
                &[("retry-after", "Thu, 01 Jan 2015 00:00:00 GMT")],
                json!({"error": {"message": "overloaded"}}),
            ),
            Reply::Sse(vec![chat_stream(&good(), "stop")]),
        ],
        &["--llm-model", "m"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 2);
}

#[test]
fn a_wait_over_120_seconds_fails_the_attempt_at_once_naming_it() {
    let busy = json!({"error": {"message": "Rate limit reached for requests", "type": "requests", "param": null, "code": "rate_limit_exceeded"}});
    for (hint, value, named) in [
        ("retry-after", "300", "asks to wait 300 s before retrying"),
        (
            "retry-after-ms",
            "121000",
            "asks to wait 121 s before retrying",
        ),
        (
            "retry-after",
            "Fri, 31 Dec 2100 23:59:59 GMT",
            "asks to wait ",
        ),
    ] {
        let r = TestRepo::simple();
        let (url, seen, server) = serve_replies(vec![headed(429, &[(hint, value)], busy.clone())]);
        let wo = r.work_order(basic_order(&["true"]));
        let started = std::time::Instant::now();
        let ran = run_model(&r, &wo, &url, &["--llm-model", "m", "--max-attempts", "1"]);
        server.join().expect("server");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{hint}: waited"
        );
        assert_eq!(ran.code, 1, "{hint}: {}", ran.stderr);
        assert_eq!(seen.lock().expect("lock").len(), 1, "{hint}");
        assert_eq!(ran.summary["ended_stage"], "llm_call_failed");
        let brief = brief_of(&ran);
        assert!(
            brief.contains(named) && brief.contains("longer than the 120 s a request waits"),
            "{hint}: {brief}"
        );
        assert!(
            brief.contains("HTTP 429: Rate limit reached for requests"),
            "{brief}"
        );
    }
}

#[test]
fn x_should_retry_is_obeyed_and_408_409_are_transient() {
    // A 500 marked x-should-retry: false is sent once (Chat Completions).
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![headed(
        500,
        &[("x-should-retry", "false")],
        json!({"error": {"message": "The server had an error processing your request.", "type": "server_error"}}),
    )]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "m", "--max-attempts", "1"]);
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 1);
    assert_eq!(ran.summary["ended_stage"], "llm_call_failed");
    assert!(
        brief_of(&ran).contains("x-should-retry: false"),
        "{}",
        brief_of(&ran)
    );

    // Anthropic's 529 overloaded_error marked false: once.
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![headed(
        529,
        &[("x-should-retry", "false")],
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &[
            "--llm-model",
            "anthropic:claude-opus-4-7",
            "--max-attempts",
            "1",
        ],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 1);
    assert!(
        brief_of(&ran).contains("anthropic: HTTP 529: Overloaded"),
        "{}",
        brief_of(&ran)
    );

    // A 400 marked x-should-retry: true is retried.
    let (_r, ran, seen) = run_served(
        vec![
            headed(
                400,
                &[("x-should-retry", "true"), ("retry-after-ms", "10")],
                json!({"error": {"message": "Please retry your request.", "type": "invalid_request_error"}}),
            ),
            Reply::Sse(vec![chat_stream(&good(), "stop")]),
        ],
        &["--llm-model", "m"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 2);

    // 408 and 409 are transient (Responses API).
    let r = TestRepo::simple();
    let quick = [("retry-after-ms", "10")];
    let (url, seen, server) = serve_replies(vec![
        headed(
            408,
            &quick,
            json!({"error": {"message": "Request timed out."}}),
        ),
        headed(
            409,
            &quick,
            json!({"error": {"message": "Conflict: another request is being processed."}}),
        ),
        json_reply(200, response_object("completed", &schema_answer(), None)),
    ]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &["--llm-model", "gpt-5", "--llm-api", "responses"],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 3);
}

#[test]
fn the_model_that_answered_is_recorded_shown_and_written_out() {
    let snapshot = "gpt-5.1-2026-08-07";
    let chat = String::from_utf8(chat_stream(&good(), "stop"))
        .expect("utf-8")
        .replace("\"model\":\"m\"", &format!("\"model\":\"{snapshot}\""));
    let mut responses = response_object("completed", &schema_answer(), None);
    responses["model"] = json!(snapshot);
    let anthropic = String::from_utf8(anthropic_stream(&schema_answer(), "end_turn"))
        .expect("utf-8")
        .replace("\"claude-opus-4-7\"", "\"claude-opus-4-7-20260315\"");
    let cases: [(Reply, &[&str], &str); 3] = [
        (
            Reply::Sse(vec![chat.into_bytes()]),
            &["--llm-model", "gpt-5.1"],
            snapshot,
        ),
        (
            json_reply(200, responses),
            &["--llm-model", "gpt-5.1", "--llm-api", "responses"],
            snapshot,
        ),
        (
            Reply::Sse(vec![anthropic.into_bytes()]),
            &["--llm-model", "anthropic:claude-opus-4-7"],
            "claude-opus-4-7-20260315",
        ),
    ];
    for (reply, flags, served) in cases {
        let r = TestRepo::simple();
        let (url, _seen, server) = serve_replies(vec![reply]);
        let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
        let out_dir = r.outside.join("out");
        let mut all: Vec<&str> = flags.to_vec();
        let out_arg = out_dir.to_string_lossy().to_string();
        all.extend(["--out", &out_arg]);
        let ran = run_model(&r, &wo, &url, &all);
        server.join().expect("server");
        assert_eq!(ran.code, 0, "{served}: {}", ran.stderr);
        assert_eq!(ran.summary["attempts"][0]["served_model"], served);
        let id = ran.summary["run_id"].as_str().expect("id");
        let stored: Value =
            serde_json::from_str(&r.git(&["show", &format!("refs/factory/{id}:run_summary.json")]))
                .expect("json");
        assert_eq!(stored["attempts"][0]["served_model"], served);
        let written: Value = serde_json::from_slice(
            &std::fs::read(out_dir.join(id).join("run_summary.json")).expect("--out"),
        )
        .expect("json");
        assert_eq!(written["attempts"][0]["served_model"], served);
        let show = r.factory().args(["show", id]).output().expect("show");
        assert!(
            stdout_of(&show).contains(&format!("  served by: {served}\n")),
            "{}",
            stdout_of(&show)
        );
    }
}

#[test]
fn reasoning_fields_and_context_window_cuts_keep_holding() {
    // Chat Completions `reasoning` (vLLM), in deltas: stored, never parsed.
    let r = TestRepo::simple();
    let mut events = vec![(
        None,
        chat_chunk(
            json!({"role": "assistant", "reasoning": "Line two becomes TWO."}),
            None,
        ),
    )];
    events.push((None, chat_chunk(json!({"content": good()}), None)));
    events.push((None, chat_chunk(json!({}), Some("stop"))));
    let mut stream = sse(&events);
    stream.extend_from_slice(b"data: [DONE]\n\n");
    let (url, _seen, server) = serve_replies(vec![Reply::Sse(vec![stream])]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "qwen3"]);
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(
        artifact(&r, &ran.summary, "attempt_1/reasoning.txt"),
        "Line two becomes TWO."
    );

    // Anthropic `model_context_window_exceeded` is a cut answer.
    let r = TestRepo::simple();
    let cut = &schema_answer()[..40];
    let (url, _seen, server) = serve_replies(vec![Reply::Sse(vec![anthropic_stream(
        cut,
        "model_context_window_exceeded",
    )])]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &[
            "--llm-model",
            "anthropic:claude-opus-4-7",
            "--max-attempts",
            "1",
        ],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(ran.summary["ended_stage"], "llm_output_invalid");
    assert!(
        brief_of(&ran)
            .contains("cut at the output limit (stop_reason: model_context_window_exceeded)"),
        "{}",
        brief_of(&ran)
    );
}

/// llama-cpp-python's server, started on a tiny random model that `scripts/tiny-gguf.py`
/// writes (nothing is downloaded); killed when dropped.
struct LlamaServer {
    child: std::process::Child,
    url: String,
    log: std::path::PathBuf,
}

impl LlamaServer {
    /// `None` (the test is skipped, saying why) where the package is not installed.
    fn start(dir: &std::path::Path) -> Option<LlamaServer> {
        let importable = std::process::Command::new("python3")
            .args(["-c", "import llama_cpp.server"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !importable {
            eprintln!(
                "skipped: llama-cpp-python is not importable here (pip install 'llama-cpp-python[server]' builds it from source)"
            );
            return None;
        }
        let model = dir.join("tiny.gguf");
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/tiny-gguf.py");
        let made = std::process::Command::new("python3")
            .arg(&script)
            .arg(&model)
            .status()
            .expect("python3 runs");
        assert!(made.success(), "tiny-gguf.py failed");
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let log = dir.join("llama-server.log");
        let out = std::fs::File::create(&log).expect("log");
        let child = std::process::Command::new("python3")
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(&model)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--n_ctx",
                "4096",
            ])
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("the server starts");
        let server = LlamaServer {
            child,
            url: format!("http://127.0.0.1:{port}/v1"),
            log,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the server did not start: {}",
                std::fs::read_to_string(&server.log).unwrap_or_default()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Some(server)
    }

    /// The chat requests the server logged, by status.
    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split("\"POST /v1/chat/completions HTTP/1.1\" ").nth(1))
            .map(|status| status.split(' ').next().unwrap_or("").to_string())
            .collect()
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_real_llama_cpp_python_server_that_refuses_json_schema_is_asked_in_json_mode() {
    let r = TestRepo::simple();
    let Some(server) = LlamaServer::start(&r.outside) else {
        return;
    };
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(
        &r,
        &wo,
        &server.url,
        &["--llm-model", "local", "--max-attempts", "1"],
    );
    // Two requests: json_schema (refused with HTTP 500), then json_object, answered.
    assert_eq!(server.requests(), ["500", "200"], "{}", ran.stderr);
    let url = server.url.clone();
    drop(server);
    // The random model's answer is judged on its content: not a proposal.
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(ran.summary["verdict"], "FAIL");
    assert_eq!(ran.summary["ended_stage"], "llm_output_invalid");
    assert_eq!(
        ran.summary["attempts"][0]["dropped_params"],
        json!(["response_format:json_schema"])
    );
    assert!(
        ran.stderr.contains(
            "the server refused response_format:json_schema: sent again without (remembered in .git/factory/providers.json)\n"
        ),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("HTTP 500"), "{}", ran.stderr);
    assert_eq!(
        providers_json(&r)[&format!("{url} local")]["dropped"]["chat"],
        json!(["response_format:json_schema"])
    );
}

// ---- What a hostile server sends: keys at the cut of the shown line, absurd retry hints
// and block indices, quotas and rate limits in every wording, drops that a later failure
// must not lose, and the model that answered each candidate.

/// Every file under `dir`, read (a missing folder is empty).
fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else if let Ok(bytes) = std::fs::read(&p) {
            out.push((p, bytes));
        }
    }
    out
}

#[test]
fn a_key_at_the_cut_of_the_shown_line_is_redacted_before_the_cut() {
    // The shown line is cut at 300 characters: the key starts at character 275, so a cut
    // made before redaction would show 26 of its 28 characters.
    let r = TestRepo::simple();
    let message = format!("{} {SECRET_OPENAI} tail", "x".repeat(273));
    let (url, seen, server) = serve_replies(vec![json_reply(
        400,
        json!({"error": {"message": message}}),
    )]);
    let wo = r.work_order(basic_order(&["true"]));
    let out_dir = r.outside.join("out");
    let out_arg = out_dir.to_string_lossy().to_string();
    let (ran, stdout) = run_with_keys(
        &r,
        &wo,
        &url,
        &[
            "--llm-model",
            "m1",
            "--max-attempts",
            "1",
            "--out",
            &out_arg,
        ],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 1);
    // Any 12 characters of the key in a row are a leak.
    let part = &SECRET_OPENAI[..12];
    assert!(ran.stderr.contains("x [redacted] tail"), "{}", ran.stderr);
    assert!(!ran.stderr.contains(part), "{}", ran.stderr);
    assert!(!stdout.contains(part), "{stdout}");
    assert!(!stored_anywhere(&r, part));
    let out_files = files_under(&out_dir);
    assert!(!out_files.is_empty(), "--out wrote nothing");
    for (path, bytes) in out_files
        .iter()
        .chain(&files_under(&r.root.join(".git/factory")))
    {
        assert!(
            !String::from_utf8_lossy(bytes).contains(part),
            "{}",
            path.display()
        );
    }
    let s = stored_summary(&r);
    assert!(
        s.to_string().contains("x [redacted] tail"),
        "{}",
        s["attempts"][0]["failure_brief"]
    );
}

#[test]
fn absurd_retry_hints_never_panic() {
    let quota = json!({"error": {"message": "You exceeded your current quota, please check your plan and billing details.", "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}});
    // A quota with a wait of 1e20 s is still a quota: exit 2 after one request, no panic.
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![headed(429, &[("retry-after", "1e20")], quota)]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "m"]);
    server.join().expect("server");
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("quota or spending limit is used up (HTTP 429)"),
        "{}",
        ran.stderr
    );
    assert_eq!(seen.lock().expect("lock").len(), 1);
    // A 503 asking for 1e30 ms, or twenty digits of seconds: the attempt fails at once,
    // naming the wait.
    for (hint, value) in [
        ("retry-after-ms", "1e30"),
        ("retry-after", "99999999999999999999"),
    ] {
        let r = TestRepo::simple();
        let (url, seen, server) = serve_replies(vec![headed(
            503,
            &[(hint, value)],
            json!({"error": {"message": "overloaded"}}),
        )]);
        let wo = r.work_order(basic_order(&["true"]));
        let ran = run_model(&r, &wo, &url, &["--llm-model", "m", "--max-attempts", "1"]);
        server.join().expect("server");
        assert_eq!(ran.code, 1, "{hint}: {}", ran.stderr);
        assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
        assert_eq!(seen.lock().expect("lock").len(), 1, "{hint}");
        assert_eq!(ran.summary["ended_stage"], "llm_call_failed");
        let brief = brief_of(&ran);
        assert!(
            brief.contains("HTTP 503: overloaded")
                && brief.contains("asks to wait ")
                && brief.contains("longer than the 120 s a request waits"),
            "{hint}: {brief}"
        );
    }
}

/// An Anthropic stream whose first content block claims the given index.
fn anthropic_block_at(index: u64) -> Reply {
    Reply::Sse(vec![sse(&[
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "claude-x-20250101", "content": [], "stop_reason": null, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": "{}"}}),
        ),
        (
            Some("message_delta"),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
        ),
        (Some("message_stop"), json!({"type": "message_stop"})),
    ])])
}

#[test]
fn a_block_index_from_the_server_is_bounded() {
    // 2^62 overflowed the capacity (a panic, the run left RUNNING); 10^8 would allocate
    // gigabytes. Both are a malformed stream: transient, retried, then llm_call_failed.
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![
        anthropic_block_at(1 << 62),
        anthropic_block_at(100_000_000),
        anthropic_block_at(1 << 62),
        anthropic_block_at(100_000_000),
    ]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &["--llm-model", "anthropic:claude-x", "--max-attempts", "1"],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 4);
    assert_eq!(ran.summary["verdict"], "FAIL");
    assert_eq!(ran.summary["ended_stage"], "llm_call_failed");
    let brief = brief_of(&ran);
    assert!(
        brief.contains("content block 100000000") && brief.contains("gave up after 4 requests"),
        "{brief}"
    );
    assert_eq!(stored_summary(&r)["verdict"], "FAIL");
}

/// Gemini's 429 as its OpenAI-compatible endpoint sends it, naming the quota it hit.
fn gemini_429(quota_id: &str, retry_delay: &str, retry_in: &str) -> Value {
    json!([{"error": {"code": 429,
    "message": format!("You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: gemini-2.5-flash\nPlease retry in {retry_in}."),
    "status": "RESOURCE_EXHAUSTED",
    "details": [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests", "quotaId": quota_id, "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"}, "quotaValue": "10"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}
    ]}}])
}

#[test]
fn a_per_minute_quota_is_a_rate_limit_and_its_retry_delay_a_hint() {
    let good_answer = || Reply::Sse(vec![chat_stream(&good(), "stop")]);
    // Per minute, with a retry delay: transient; the delay (0.4 s) is the wait.
    let (_r, ran, seen) = run_served(
        vec![
            json_reply(
                429,
                gemini_429(
                    "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                    "0.4s",
                    "0.4s",
                ),
            ),
            good_answer(),
        ],
        &["--llm-model", "gemini-2.5-flash"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let gap = gap_between_two(&seen);
    assert!(gap >= std::time::Duration::from_millis(390), "{gap:?}");
    // Only "Please retry in 0.3s." in the words: still the hint.
    let (_r, ran, seen) = run_served(
        vec![
            json_reply(
                429,
                json!([{"error": {"code": 429, "message": "Quota exceeded for quota metric 'Generate Content API requests per minute'. Please retry in 0.3s.", "status": "RESOURCE_EXHAUSTED"}}]),
            ),
            good_answer(),
        ],
        &["--llm-model", "gemini-2.5-flash"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let gap = gap_between_two(&seen);
    assert!(gap >= std::time::Duration::from_millis(290), "{gap:?}");
    assert!(gap < std::time::Duration::from_millis(480), "{gap:?}");
    // The classic wording names no quota that is used up: a rate limit.
    let (_r, ran, seen) = run_served(
        vec![
            json_reply(
                429,
                json!([{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED"}}]),
            ),
            good_answer(),
        ],
        &["--llm-model", "gemini-2.5-flash"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 2);
    // Per day (Gemini sends a retry delay with it too): a quota, permanent.
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![json_reply(
        429,
        gemini_429(
            "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            "38s",
            "38.2s",
        ),
    )]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "gemini-2.5-flash"]);
    server.join().expect("server");
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 1);
    assert!(
        ran.stderr
            .contains("quota or spending limit is used up (HTTP 429)"),
        "{}",
        ran.stderr
    );
}

#[test]
fn anthropic_usage_limits_in_each_wording_are_permanent() {
    for message in [
        "You have reached your specified workspace API usage limits. You will regain access on 2026-12-01 at 00:00 UTC.",
        "You have reached your specified API usage limits. You will regain access on 2026-12-01 at 00:00 UTC.",
    ] {
        let r = TestRepo::simple();
        let (url, seen, server) = serve_replies(vec![json_reply(
            429,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}),
        )]);
        let wo = r.work_order(basic_order(&["true"]));
        let ran = run_model(&r, &wo, &url, &["--llm-model", "anthropic:claude-x"]);
        server.join().expect("server");
        assert_eq!(ran.code, 2, "{message}: {}", ran.stderr);
        assert_eq!(seen.lock().expect("lock").len(), 1, "{message}");
        assert!(ran.stderr.contains(message), "{}", ran.stderr);
    }
}

#[test]
fn a_quota_inside_a_stream_is_permanent_like_the_http_one() {
    let quota = json!({"message": "You exceeded your current quota, please check your plan and billing details.", "type": "insufficient_quota", "param": null, "code": "insufficient_quota"});
    let chat = sse(&[(None, json!({"error": quota}))]);
    let responses = sse(&[
        (
            Some("response.created"),
            json!({"type": "response.created", "response": {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}}),
        ),
        (
            Some("response.failed"),
            json!({"type": "response.failed", "response": {"id": "resp_1", "object": "response", "status": "failed", "output": [], "error": {"code": "insufficient_quota", "message": "You exceeded your current quota, please check your plan and billing details."}}}),
        ),
    ]);
    let cases: [(&str, Vec<u8>, &[&str]); 2] = [
        ("chat", chat, &["--llm-model", "m"]),
        (
            "responses",
            responses,
            &["--llm-model", "gpt-5", "--llm-api", "responses"],
        ),
    ];
    for (name, stream, flags) in cases {
        let r = TestRepo::simple();
        let (url, seen, server) = serve_replies(vec![Reply::Sse(vec![stream])]);
        let wo = r.work_order(basic_order(&["true"]));
        let mut all = flags.to_vec();
        all.extend(["--max-attempts", "2"]);
        let ran = run_model(&r, &wo, &url, &all);
        server.join().expect("server");
        assert_eq!(ran.code, 2, "{name}: {}", ran.stderr);
        assert_eq!(seen.lock().expect("lock").len(), 1, "{name}: no retry");
        assert!(
            ran.stderr.contains("quota or spending limit is used up")
                && ran.stderr.contains("You exceeded your current quota"),
            "{name}: {}",
            ran.stderr
        );
        let s = stored_summary(&r);
        assert_eq!(s["verdict"], "ERROR", "{name}");
        assert_eq!(s["ended_stage"], "llm_call_failed", "{name}");
    }
}

#[test]
fn a_parameter_refused_before_a_failure_is_recorded_remembered_and_counted() {
    // json_schema refused by name (llama-cpp-python's 500), then four 503s: the attempt
    // fails, yet the drop is the server's word and is kept; five requests were sent.
    let r = TestRepo::simple();
    let busy = || {
        headed(
            503,
            &[("retry-after-ms", "10")],
            json!({"error": {"message": "overloaded", "type": "server_error"}}),
        )
    };
    let (url, seen, server) = serve_replies(vec![
        json_reply(500, llama_cpp_refusal()),
        busy(),
        busy(),
        busy(),
        busy(),
    ]);
    let wo = r.work_order(basic_order(&["true"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "m", "--max-attempts", "1"]);
    server.join().expect("server");
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 5);
    assert_eq!(ran.summary["ended_stage"], "llm_call_failed");
    assert_eq!(
        ran.summary["attempts"][0]["dropped_params"],
        json!(["response_format:json_schema"])
    );
    let brief = brief_of(&ran);
    assert!(
        brief.contains("HTTP 503: overloaded") && brief.contains("gave up after 5 requests"),
        "{brief}"
    );
    assert!(
        providers_json(&r)
            .to_string()
            .contains("response_format:json_schema"),
        "{}",
        providers_json(&r)
    );
    let id = ran.summary["run_id"].as_str().expect("id");
    let show = stdout_of(&r.factory().args(["show", id]).output().expect("show"));
    assert!(
        show.contains("  dropped: response_format:json_schema (refused by the server)\n"),
        "{show}"
    );
}

#[test]
fn the_model_that_answered_each_candidate_is_visible() {
    let snapshot = "gpt-5.1-2026-08-07";
    let answer = || {
        Reply::Sse(vec![String::from_utf8(chat_stream(&good(), "stop"))
            .expect("utf-8")
            .replace("\"model\":\"m\"", &format!("\"model\":\"{snapshot}\""))
            .into_bytes()])
    };
    let r = TestRepo::simple();
    let (url, seen, server) = serve_replies(vec![answer(), answer()]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &["--llm-model", "gpt-5.1", "--candidates", "2", "--jobs", "1"],
    );
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(seen.lock().expect("lock").len(), 2);
    let attempts = ran.summary["attempts"].as_array().expect("attempts");
    assert!(!attempts.is_empty());
    for a in attempts {
        assert_eq!(a["served_model"], snapshot, "{a}");
    }
    for c in ran.summary["candidates"].as_array().expect("candidates") {
        assert_eq!(c["served_model"], snapshot, "{c}");
    }
    let id = ran.summary["run_id"].as_str().expect("id");
    let show = stdout_of(&r.factory().args(["show", id]).output().expect("show"));
    assert!(
        show.contains(&format!("  served by: {snapshot}\n")),
        "{show}"
    );
    let table: Vec<&str> = show
        .lines()
        .filter(|l| l.contains("openai:gpt-5.1@") && !l.contains("model: "))
        .collect();
    assert_eq!(table.len(), 2, "{show}");
    assert!(
        table
            .iter()
            .all(|l| l.contains(&format!("served by {snapshot}"))),
        "{show}"
    );
}

#[test]
fn the_shown_line_of_a_traceback_and_of_pydantic_v1_is_the_informative_one() {
    let cases = [
        (
            "Traceback (most recent call last):\n  File \"server.py\", line 10, in create\n    raise ValueError('x')\nValueError: messages must alternate between user and assistant",
            "rejected the request (HTTP 400): ValueError: messages must alternate between user and assistant\n",
        ),
        (
            "1 validation error for Request\nbody -> messages -> 0 -> content\n  none is not an allowed value (type=type_error.none.not_allowed)",
            "rejected the request (HTTP 400): body.messages.0.content: none is not an allowed value\n",
        ),
    ];
    for (message, shown) in cases {
        let r = TestRepo::simple();
        let (url, seen, server) = serve_replies(vec![json_reply(
            400,
            json!({"error": {"message": message, "type": "invalid_request_error"}}),
        )]);
        let wo = r.work_order(basic_order(&["true"]));
        let ran = run_model(&r, &wo, &url, &["--llm-model", "m"]);
        server.join().expect("server");
        assert_eq!(ran.code, 2, "{}", ran.stderr);
        assert_eq!(seen.lock().expect("lock").len(), 1);
        assert!(ran.stderr.contains(shown), "{}", ran.stderr);
    }
}

#[test]
fn a_tool_choice_refusal_that_speaks_of_tools_keeps_the_tools() {
    let r = TestRepo::simple();
    let refused = |message: &str| {
        json_reply(
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}),
        )
    };
    let called = sse(&[
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "model": "claude-x", "stop_reason": null, "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "propose_change", "input": {}}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": schema_answer()}}),
        ),
        (
            Some("message_delta"),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
        ),
        (Some("message_stop"), json!({"type": "message_stop"})),
    ]);
    let (url, seen, server) = serve_replies(vec![
        refused("output_config.format: Extra inputs are not permitted"),
        refused("tool_choice: type \"tool\" and \"any\" are not supported for this model when tools are given"),
        Reply::Sse(vec![called]),
    ]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "anthropic:claude-x"]);
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[2].body["tool_choice"], json!({"type": "auto"}));
    assert_eq!(seen[2].body["tools"][0]["name"], "propose_change");
    assert_eq!(
        ran.summary["attempts"][0]["dropped_params"],
        json!(["output_config.format", "tool_choice"])
    );
}

#[test]
fn retry_after_as_an_rfc_850_or_asctime_date_is_read() {
    let busy = json!({"error": {"message": "overloaded"}});
    for date in ["Friday, 31-Dec-60 23:59:59 GMT", "Fri Dec 31 23:59:59 2100"] {
        let r = TestRepo::simple();
        let (url, seen, server) =
            serve_replies(vec![headed(503, &[("retry-after", date)], busy.clone())]);
        let wo = r.work_order(basic_order(&["true"]));
        let ran = run_model(&r, &wo, &url, &["--llm-model", "m", "--max-attempts", "1"]);
        server.join().expect("server");
        assert_eq!(ran.code, 1, "{date}: {}", ran.stderr);
        assert_eq!(seen.lock().expect("lock").len(), 1, "{date}");
        let brief = brief_of(&ran);
        assert!(
            brief.contains("asks to wait more than a year before retrying"),
            "{date}: {brief}"
        );
    }
}

#[test]
fn an_empty_last_model_and_a_leading_byte_order_mark_are_harmless() {
    let snapshot = "gpt-4o-2024-08-06";
    let chunk = |model: &str, delta: Value, finish: Option<&str>| {
        json!({"id": "c", "object": "chat.completion.chunk", "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut stream = sse(&[
        (None, chunk(snapshot, json!({"content": good()}), None)),
        (None, chunk("", json!({}), Some("stop"))),
    ]);
    stream.extend_from_slice(b"data: [DONE]\n\n");
    let mut marked = b"\xEF\xBB\xBF".to_vec();
    marked.extend_from_slice(&stream);
    for (name, bytes) in [("empty model", stream), ("byte-order mark", marked)] {
        let r = TestRepo::simple();
        let (url, _seen, server) = serve_replies(vec![Reply::Sse(vec![bytes])]);
        let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
        let ran = run_model(&r, &wo, &url, &["--llm-model", "gpt-4o"]);
        server.join().expect("server");
        assert_eq!(ran.code, 0, "{name}: {}", ran.stderr);
        assert_eq!(
            ran.summary["attempts"][0]["served_model"], snapshot,
            "{name}"
        );
    }
}

/// What a run cost (SPEC §3.3 Cost): usage as each API reports it, priced at genai-prices'
/// published per-million rates (worked out by hand below), the user's prices, the unpriced,
/// and the dollar budget of a race.
mod cost {
    use super::*;

    /// gpt-4.1 in genai-prices: $2 input, $0.50 cached input, $8 output per million tokens.
    /// claude-sonnet-4-5: $3 input, $3.75 cache write, $0.30 cache read, $15 output.
    fn close(got: &Value, want: f64) {
        let got = got.as_f64().unwrap_or(f64::NAN);
        assert!((got - want).abs() < 1e-9, "cost {got} is not {want}");
    }

    /// A Responses API answer as the OpenAPI description has it: cached input in
    /// `input_tokens_details`, reasoning in `output_tokens_details`.
    fn responses_answer() -> Value {
        let mut r = response_object("completed", &schema_answer(), None);
        r["model"] = json!("gpt-4.1-2025-04-14");
        r["usage"] = json!({"input_tokens": 1200, "input_tokens_details": {"cached_tokens": 400},
            "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 100}, "total_tokens": 1500});
        r
    }

    /// Chat Completions usage as OpenAI sends it (in the last chunk of a stream asked with
    /// `stream_options.include_usage`), with OpenRouter's `cost` when given.
    fn chat_usage(cost: Option<f64>) -> Value {
        let mut u = json!({"prompt_tokens": 2000, "completion_tokens": 500, "total_tokens": 2500,
            "prompt_tokens_details": {"cached_tokens": 1000, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}});
        if let Some(c) = cost {
            u["cost"] = json!(c);
        }
        u
    }

    fn chat_whole(model: &str, usage: Value) -> Reply {
        json_reply(
            200,
            json!({"id": "x", "object": "chat.completion", "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": good()}, "finish_reason": "stop"}],
                "usage": usage}),
        )
    }

    fn chat_streamed(model: &str, usage: Value) -> Reply {
        let text = String::from_utf8(chat_stream(&good(), "stop"))
            .expect("utf-8")
            .replace("\"model\":\"m\"", &format!("\"model\":\"{model}\""))
            .replace(
                "{\"completion_tokens\":60,\"prompt_tokens\":200,\"total_tokens\":260}",
                &usage.to_string(),
            );
        assert!(
            text.contains("cached_tokens"),
            "the usage chunk was replaced"
        );
        Reply::Sse(vec![text.into_bytes()])
    }

    /// Anthropic's usage: `input_tokens` without the cache, its reads and writes beside it;
    /// streamed, all of it in `message_start` and the output count in `message_delta`.
    fn anthropic_usage() -> Value {
        json!({"input_tokens": 50, "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 2000,
            "output_tokens": 400, "service_tier": "standard"})
    }

    fn anthropic_streamed() -> Reply {
        let mut start = anthropic_usage();
        start["output_tokens"] = json!(1);
        let text = String::from_utf8(anthropic_stream(&schema_answer(), "end_turn"))
            .expect("utf-8")
            .replace("\"claude-opus-4-7\"", "\"claude-sonnet-4-5-20250929\"")
            .replace(
                "{\"input_tokens\":410,\"output_tokens\":1}",
                &start.to_string(),
            )
            .replace("{\"output_tokens\":95}", "{\"output_tokens\":400}");
        assert!(text.contains("cache_read_input_tokens"), "usage replaced");
        Reply::Sse(vec![text.into_bytes()])
    }

    fn anthropic_whole() -> Reply {
        json_reply(
            200,
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
                "content": [{"type": "text", "text": schema_answer()}],
                "stop_reason": "end_turn", "stop_sequence": null, "usage": anthropic_usage()}),
        )
    }

    /// An answer, the flags, then what is recorded: input, cache read, cache write, output,
    /// reasoning tokens, dollars and where the price came from.
    type Case = (
        Reply,
        &'static [&'static str],
        u64,
        u64,
        Option<u64>,
        u64,
        u64,
        f64,
        &'static str,
    );

    #[test]
    fn usage_and_cost_as_each_api_reports_them() {
        let streamed_responses = {
            let text = String::from_utf8(responses_stream(&schema_answer())).expect("utf-8");
            let mut completed = response_object("completed", &schema_answer(), None);
            completed["usage"] = json!({"input_tokens": 300, "output_tokens": 80, "output_tokens_details": {"reasoning_tokens": 20}, "total_tokens": 380});
            let old = json!({"type": "response.completed", "response": completed}).to_string();
            let new = json!({"type": "response.completed", "response": responses_answer()});
            assert!(text.contains(&old));
            Reply::Sse(vec![text.replace(&old, &new.to_string()).into_bytes()])
        };
        let gpt: &'static [&'static str] = &["--llm-model", "gpt-4.1"];
        let responses: &'static [&'static str] =
            &["--llm-model", "gpt-4.1", "--llm-api", "responses"];
        let claude: &'static [&'static str] = &["--llm-model", "anthropic:claude-sonnet-4-5"];
        let router: &'static [&'static str] = &["--llm-model", "openai/gpt-4.1"];
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            // 800 × $2 + 400 × $0.50 + 300 × $8, per million.
            (json_reply(200, responses_answer()), responses, 1200, 400, None, 300, 100, 0.0042, "table"),
            (streamed_responses, responses, 1200, 400, None, 300, 100, 0.0042, "table"),
            // 1000 × $2 + 1000 × $0.50 + 500 × $8.
            (chat_streamed("gpt-4.1-2025-04-14", chat_usage(None)), gpt, 2000, 1000, None, 500, 0, 0.0065, "table"),
            (chat_whole("gpt-4.1-2025-04-14", chat_usage(None)), gpt, 2000, 1000, None, 500, 0, 0.0065, "table"),
            // 50 × $3 + 1000 × $3.75 + 2000 × $0.30 + 400 × $15.
            (anthropic_streamed(), claude, 3050, 2000, Some(1000), 400, 0, 0.0105, "table"),
            (anthropic_whole(), claude, 3050, 2000, Some(1000), 400, 0, 0.0105, "table"),
            // OpenRouter says what the request cost: believed over the table.
            (chat_whole("openai/gpt-4.1", chat_usage(Some(0.000123))), router, 2000, 1000, None, 500, 0, 0.000123, "server"),
            (chat_streamed("openai/gpt-4.1", chat_usage(Some(0.000456))), router, 2000, 1000, None, 500, 0, 0.000456, "server"),
        ];
        for (i, (reply, flags, input, read, write, output, reasoning, usd, source)) in
            cases.into_iter().enumerate()
        {
            let (r, ran, seen) = run_served(vec![reply], flags);
            assert_eq!(ran.code, 0, "case {i}: {}", ran.stderr);
            let a = &ran.summary["attempts"][0];
            let u = &a["usage"];
            assert_eq!(u["input_tokens"], input, "case {i}: {u}");
            assert_eq!(u["cache_read_tokens"], read, "case {i}: {u}");
            assert_eq!(u["cache_write_tokens"], json!(write), "case {i}: {u}");
            assert_eq!(u["output_tokens"], output, "case {i}: {u}");
            if reasoning > 0 {
                assert_eq!(u["reasoning_tokens"], reasoning, "case {i}: {u}");
            }
            close(&a["cost"]["usd"], usd);
            assert_eq!(a["cost"]["source"], source, "case {i}");
            assert_eq!(a["cost"]["unpriced_requests"], 0, "case {i}");
            close(&ran.summary["cost"]["usd"], usd);
            // A stream asks for its usage where the API needs asking.
            let body = &seen.lock().expect("lock")[0].body;
            if body["stream"] == true && body.get("messages").is_some() && flags != claude {
                assert_eq!(body["stream_options"]["include_usage"], true, "case {i}");
            }
            let shown = r
                .factory()
                .args(["show", "--color", "never"])
                .output()
                .expect("show");
            let text = stdout_of(&shown);
            let dollars = if usd < 0.0001 {
                format!("${usd:.6}")
            } else {
                format!("${usd:.4}")
            };
            assert!(
                text.contains(&format!("cost:       {dollars} ({source})")),
                "case {i}: {text}"
            );
            assert!(
                text.contains(&format!("  cost: {dollars} ({source})")),
                "{text}"
            );
            assert!(
                text.contains(&format!("usage: {input} in ({read} cache read")),
                "{text}"
            );
        }
    }

    #[test]
    fn a_users_prices_override_the_table_for_dotted_and_colon_names_and_log_sums_them() {
        let r = TestRepo::simple();
        r.git(&["config", "factory-price.gpt-4.1.input", "1"]);
        r.git(&["config", "factory-price.gpt-4.1.output", "2"]);
        r.git(&["config", "factory-price.llama3.1:8b.input", "0.1"]);
        r.git(&["config", "factory-price.llama3.1:8b.output", "0.2"]);
        r.git(&["config", "factory-price.llama3.1:8b.cacheRead", "0.05"]);
        let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
        // (model, served, dollars): 2000 in of which 1000 cached, 500 out.
        let cases = [
            // No cache-read price: cached input costs the input price. 2000 × $1 + 500 × $2.
            ("gpt-4.1", "gpt-4.1-2025-04-14", 0.003),
            // 1000 × $0.10 + 1000 × $0.05 + 500 × $0.20.
            ("llama3.1:8b", "llama3.1:8b", 0.00025),
        ];
        for (model, served, usd) in cases {
            let (url, _seen, server) = serve_replies(vec![chat_whole(served, chat_usage(None))]);
            let ran = run_model(&r, &wo, &url, &["--llm-model", model]);
            server.join().expect("server");
            assert_eq!(ran.code, 0, "{model}: {}", ran.stderr);
            close(&ran.summary["attempts"][0]["cost"]["usd"], usd);
            assert_eq!(ran.summary["attempts"][0]["cost"]["source"], "override");
            r.git(&["reset", "--hard", "-q"]);
        }
        let out = r
            .factory()
            .args(["log", "--cost", "--json"])
            .output()
            .expect("log");
        let sums: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
        assert_eq!(sums["runs"], 2, "{sums}");
        close(&sums["total"]["usd"], 0.003 + 0.00025);
        assert_eq!(sums["by_work_order"][0]["name"], "wo-1");
        assert_eq!(sums["by_work_order"][0]["runs"], 2);
        let models: Vec<&str> = (sums["by_model"].as_array().expect("models").iter())
            .filter_map(|m| m["name"].as_str())
            .collect();
        assert_eq!(models.len(), 2, "{sums}");
        assert!(models[0].starts_with("openai:gpt-4.1@"), "{models:?}");
        assert!(models[1].starts_with("openai:llama3.1:8b@"), "{models:?}");
        let listed = r
            .factory()
            .args(["log", "--color", "never"])
            .output()
            .expect("log");
        assert!(
            stdout_of(&listed).contains("$0.0030"),
            "{}",
            stdout_of(&listed)
        );
        // A price file, for a model neither the table nor git config prices.
        let file = r.outside.join("prices.json");
        std::fs::write(&file, r#"{"house-model": {"input": 4, "output": 40}}"#).expect("write");
        r.git(&["config", "factory.priceFile", &file.display().to_string()]);
        let (url, _seen, server) = serve_replies(vec![chat_whole("house-model", chat_usage(None))]);
        let ran = run_model(&r, &wo, &url, &["--llm-model", "house-model"]);
        server.join().expect("server");
        // 2000 × $4 + 500 × $40.
        close(&ran.summary["cost"]["usd"], 0.028);
    }

    #[test]
    fn an_unpriced_model_is_unpriced_never_zero_and_max_cost_refuses_it_up_front() {
        let (r, ran, _seen) = run_served(
            vec![chat_whole("no-such-model-xyz", chat_usage(None))],
            &["--llm-model", "no-such-model-xyz"],
        );
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        let cost = &ran.summary["cost"];
        assert_eq!(cost["usd"], Value::Null, "{cost}");
        assert_eq!(cost["unpriced_requests"], 1);
        let shown = r
            .factory()
            .args(["show", "--color", "never"])
            .output()
            .expect("show");
        assert!(
            stdout_of(&shown).contains("cost:       unpriced"),
            "{}",
            stdout_of(&shown)
        );
        let listed = r
            .factory()
            .args(["log", "--color", "never"])
            .output()
            .expect("log");
        assert!(
            stdout_of(&listed).contains("unpriced"),
            "{}",
            stdout_of(&listed)
        );
        assert!(!stdout_of(&listed).contains("$0.0000"));
        // A dollar budget needs a price before the first request.
        r.git(&["reset", "--hard", "-q"]);
        let before = r.snapshot();
        let refs = r.git(&["for-each-ref"]);
        let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
        let ran = run_model(
            &r,
            &wo,
            "http://127.0.0.1:9/v1",
            &[
                "--llm-model",
                "other-unknown-model",
                "--max-cost",
                "1",
                "--force",
            ],
        );
        assert_eq!(ran.code, 2, "{}", ran.stderr);
        assert!(
            ran.stderr
                .contains("the model other-unknown-model has no price"),
            "{}",
            ran.stderr
        );
        assert!(
            ran.stderr
                .contains("git config factory-price.other-unknown-model.input"),
            "{}",
            ran.stderr
        );
        assert_eq!(r.snapshot(), before);
        assert_eq!(r.git(&["for-each-ref"]), refs);
        // So is an agent that can only say what it cost after it ran.
        let out = r
            .factory()
            .args(["run", "--agent-command", "true", "--max-cost", "1", "-w"])
            .arg(&wo)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        assert!(stderr_of(&out).contains("has no price before it runs"));
    }

    #[test]
    fn replays_cost_nothing_and_agents_are_priced_by_what_they_report() {
        let r = TestRepo::simple();
        let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
        let replay = r.replay("rp", &[("1.json", good())]);
        let out = r.run_replay(&wo, &replay, &["--json"]);
        let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
        assert_eq!(
            s["cost"],
            json!({"usd": 0.0, "unpriced_requests": 0, "source": "replay"})
        );
        r.git(&["reset", "--hard", "-q"]);
        let diff = diff_replace("app.txt", &APP, "two", "TWO");
        // (what the agent's last line says, the dollars, the source)
        let cases = [
            (String::new(), None, "unpriced"),
            // 1000 × $2 + 100 × $8 at gpt-4.1's table price.
            (
                r#"{"factory_usage": {"model": "gpt-4.1", "input_tokens": 1000, "output_tokens": 100}}"#.to_string(),
                Some(0.0028),
                "table",
            ),
            (
                r#"{"factory_usage": {"cost_usd": 0.75, "input_tokens": 5}}"#.to_string(),
                Some(0.75),
                "server",
            ),
        ];
        for (i, (line, usd, source)) in cases.into_iter().enumerate() {
            let s = run_agent_printing(&r, &wo, &format!("{diff}{line}"), &format!("case {i}"));
            let cost = &s["attempts"][0]["cost"];
            assert_eq!(cost["source"], source, "case {i}: {cost}");
            match usd {
                Some(usd) => close(&cost["usd"], usd),
                None => assert_eq!(cost["usd"], Value::Null),
            }
            r.git(&["reset", "--hard", "-q"]);
        }
    }

    #[test]
    fn a_coding_agent_that_reports_what_it_cost_is_priced_by_it() {
        let r = TestRepo::simple();
        let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
        let script = r.outside.join("edits.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\nsed -i 's/^two$/TWO/' app.txt\necho 'all done'\necho '{\"factory_usage\": {\"model\": \"claude-sonnet-4-5\", \"cost_usd\": 0.5}}'\n",
        )
        .expect("write");
        let out = r
            .factory()
            .args(["run", "--json", "--agent-edits"])
            .arg(format!("sh {}", script.display()))
            .arg("-w")
            .arg(&wo)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
        assert_eq!(s["attempts"][0]["served_model"], "claude-sonnet-4-5");
        assert_eq!(
            s["cost"],
            json!({"usd": 0.5, "unpriced_requests": 0, "source": "server"})
        );
        assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    }

    #[test]
    fn a_request_billed_before_it_failed_is_counted_in_the_attempts_usage_and_cost() {
        let mut start = anthropic_usage();
        start["output_tokens"] = json!(1);
        let overloaded = sse(&[
            (
                Some("message_start"),
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "usage": start}}),
            ),
            (
                Some("error"),
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ),
        ]);
        let (_r, ran, seen) = run_served(
            vec![Reply::Sse(vec![overloaded]), anthropic_streamed()],
            &["--llm-model", "anthropic:claude-sonnet-4-5"],
        );
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        assert_eq!(seen.lock().expect("lock").len(), 2);
        let a = &ran.summary["attempts"][0];
        assert_eq!(
            a["usage"],
            json!({"input_tokens": 6100, "output_tokens": 401, "cache_read_tokens": 4000,
                "cache_write_tokens": 2000, "failed_requests": 1})
        );
        // Twice 50 × $3 + 1000 × $3.75 + 2000 × $0.30, and 401 × $15.
        close(&a["cost"]["usd"], 0.015015);
    }

    #[test]
    fn a_race_of_four_stops_before_the_request_that_would_pass_max_cost() {
        // Each answer reports 5000 output tokens: $0.04 at gpt-4.1's $8 per million. Each
        // request's worst case is its whole 10,000-token output limit ($0.08) plus its input
        // (the request body's bytes ÷ 3 at $2 per million: well under $0.01), so with $0.175 three
        // requests fit ($0.08 + W ≤ $0.175 before the third) and the fourth ($0.12 + W) would
        // pass the budget: it is never sent.
        let usage = json!({"prompt_tokens": 0, "completion_tokens": 5000, "total_tokens": 5000});
        let replies = (0..3)
            .map(|_| chat_whole("gpt-4.1", usage.clone()))
            .collect();
        let (r, ran, seen) = run_served(
            replies,
            &[
                "--llm-model",
                "gpt-4.1",
                "--candidates",
                "4",
                "--jobs",
                "1",
                "--max-attempts",
                "1",
                "--llm-max-output-tokens",
                "10000",
                "--max-cost",
                "0.175",
            ],
        );
        assert_eq!(seen.lock().expect("lock").len(), 3, "{}", ran.stderr);
        assert_eq!(ran.code, 1, "{}", ran.stderr);
        let s = &ran.summary;
        assert_eq!(s["verdict"], "FAIL");
        assert_eq!(s["ended_stage"], "budget_exhausted");
        let stages: Vec<&str> = (s["candidates"].as_array().expect("candidates").iter())
            .filter_map(|c| c["ended_stage"].as_str())
            .collect();
        assert_eq!(stages[3], "budget_exhausted", "{stages:?}");
        close(&s["cost"]["usd"], 0.12);
        close(&s["candidates"][0]["cost"]["usd"], 0.04);
        assert_eq!(s["candidates"][3]["cost"], Value::Null);
        let brief = artifact(&r, s, "candidate_4/attempt_1/failure_brief.json");
        assert!(
            brief.contains("the --max-cost budget of $0.1750 would be passed by the next request"),
            "{brief}"
        );
    }
}
