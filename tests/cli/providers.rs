//! Providers end to end: OpenAI and Anthropic wire formats against a server on 127.0.0.1,
//! and `--agent-command`.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

const APP: [&str; 3] = ["one", "two", "three"];

struct Recorded {
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
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
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let handle = std::thread::spawn(move || {
        for (status, body) in responses {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut request_line = String::new();
            reader.read_line(&mut request_line).expect("request line");
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
            });
            let reason = if status == 200 { "OK" } else { "Error" };
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, seen, handle)
}

fn openai_answer(content: &str) -> String {
    json!({
        "id": "x", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    })
    .to_string()
}

fn good() -> String {
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
    assert_eq!(req.body["response_format"]["type"], "json_object");
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
