//! What a run cost, attacked (SPEC §3.3 Cost, §1.1 `--max-cost`): every request of an
//! attempt held against the dollar budget, hostile budgets, price files and usage figures, a
//! recovered run's total, a batch's runs, and the time each request was priced at.

use crate::common::*;
use crate::providers::{
    artifact, brief_of, good, json_reply, run_agent_printing, run_model, run_served, serve_replies,
    sse, Reply, APP,
};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn close(got: &Value, want: f64) {
    let got = got.as_f64().unwrap_or(f64::NAN);
    assert!((got - want).abs() < 1e-9, "cost {got} is not {want}");
}

/// A whole Chat Completions answer naming `model`, with `usage` as the server sent it.
fn chat_whole(model: &str, content: &str, usage: Value) -> Reply {
    json_reply(
        200,
        json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage}),
    )
}

/// OpenAI's usage for 2000 input tokens (1000 of them cached) and 500 output: $0.0065 at
/// gpt-4.1's $2 / $0.50 / $8 per million.
fn gpt_usage() -> Value {
    json!({"prompt_tokens": 2000, "completion_tokens": 500, "total_tokens": 2500,
        "prompt_tokens_details": {"cached_tokens": 1000, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}})
}

/// The repo's refs (ours included), index and work tree: a refusal leaves all of them as
/// they were.
fn untouched(r: &TestRepo) -> (Snapshot, String) {
    (r.snapshot(), r.git(&["for-each-ref"]))
}

/// Runs `git factory ARGS` with a time limit: a command that never ends (reading
/// /dev/zero, opening a FIFO) is killed and reported rather than hanging the suite.
fn bounded(r: &TestRepo, args: &[&str]) -> (Option<i32>, String) {
    let mut child = r
        .spawn(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            use std::io::Read;
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return (status.code(), err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return (None, "still running after 30 s: killed".to_string());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_dollar_budget_that_is_not_a_positive_number_is_refused_naming_the_fix() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let wo = wo.to_str().expect("utf-8 path");
    let before = untouched(&r);
    let model = [
        "run",
        "--llm-model",
        "gpt-4.1",
        "--llm-base-url",
        "http://127.0.0.1:9/v1",
        "-w",
        wo,
    ];
    // NaN compares false with everything: taken as "no budget" it would let a run spend
    // without limit. A negative budget must reach the same refusal as any other.
    for budget in [
        "nan", "NaN", "-nan", "inf", "-inf", "1e309", "0", "-0", "-1", "-0.5",
    ] {
        for spelled in [
            vec!["--max-cost".to_string(), budget.to_string()],
            vec![format!("--max-cost={budget}")],
        ] {
            let mut args: Vec<&str> = model.to_vec();
            args.extend(spelled.iter().map(String::as_str));
            let (code, err) = bounded(&r, &args);
            assert_eq!(code, Some(2), "{spelled:?}: {err}");
            assert!(
                err.contains("error: --max-cost") && err.contains("is not a dollar budget"),
                "{spelled:?}: {err}"
            );
            assert!(
                err.contains("hint: give a positive number of US dollars"),
                "{spelled:?}: {err}"
            );
            assert_eq!(untouched(&r), before, "{spelled:?}");
        }
    }
    // Not a number at all: refused before anything is read, naming the fix as well.
    for budget in ["abc", "$5", "5 USD", ""] {
        let mut args: Vec<&str> = model.to_vec();
        let spelled = format!("--max-cost={budget}");
        args.push(&spelled);
        let (code, err) = bounded(&r, &args);
        assert_eq!(code, Some(2), "{spelled}: {err}");
        assert!(
            err.contains("error: ") && err.contains("--max-cost"),
            "{spelled}: {err}"
        );
        assert!(
            err.contains("hint: give a positive number of US dollars"),
            "{spelled}: {err}"
        );
        assert_eq!(untouched(&r), before, "{spelled}");
    }
    // The same from git config.
    for budget in ["nan", "-1", "0", "inf"] {
        r.git(&["config", "factory.maxCost", budget]);
        let before = untouched(&r);
        let (code, err) = bounded(&r, &model);
        assert_eq!(code, Some(2), "factory.maxCost {budget}: {err}");
        assert!(
            err.contains("factory.maxCost") && err.contains("hint: "),
            "factory.maxCost {budget}: {err}"
        );
        assert_eq!(untouched(&r), before, "factory.maxCost {budget}");
    }
}

#[test]
fn a_price_file_that_is_not_a_small_json_file_of_prices_is_refused() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let wo = wo.to_str().expect("utf-8 path");
    let dir = r.outside.join("prices");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let fifo = dir.join("fifo.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.json")).expect("symlink");
    std::os::unix::fs::symlink("/dev/urandom", dir.join("random.json")).expect("symlink");
    // Ten mebibytes of a valid JSON object: no price file is that large.
    let mut huge = String::from("{\"m\": {\"input\": 1, \"output\": 1}, \"pad\": \"");
    huge.push_str(&"x".repeat(10 << 20));
    huge.push_str("\"}");
    std::fs::write(dir.join("huge.json"), huge).expect("write");
    let files = [
        ("zero.json", "not a regular file"),
        ("random.json", "not a regular file"),
        ("fifo.json", "not a regular file"),
        ("huge.json", "larger than"),
        ("missing.json", "cannot read"),
        ("dir", "not a regular file"),
    ];
    std::fs::create_dir_all(dir.join("dir")).expect("mkdir");
    let contents = [
        ("text.json", "input = 1\n", "is invalid"),
        (
            "nan.json",
            r#"{"m": {"input": NaN, "output": 1}}"#,
            "is invalid",
        ),
        (
            "negative.json",
            r#"{"m": {"input": -1, "output": 1}}"#,
            "is not a price",
        ),
        (
            "string.json",
            r#"{"m": {"input": "1", "output": 1}}"#,
            "is not a price",
        ),
        (
            "overflow.json",
            r#"{"m": {"input": 1e400, "output": 1}}"#,
            "is invalid",
        ),
        (
            "kind.json",
            r#"{"m": {"inptu": 1, "output": 1}}"#,
            "use input, output",
        ),
        ("list.json", r#"[1, 2]"#, "not a JSON object"),
        ("bytes.json", "\u{feff}\u{0}\u{1}", "is invalid"),
    ];
    for (name, text, _) in contents {
        std::fs::write(dir.join(name), text).expect("write");
    }
    let cases = files
        .iter()
        .map(|(n, w)| (*n, *w))
        .chain(contents.iter().map(|(n, _, w)| (*n, *w)));
    for (name, why) in cases {
        let path = dir.join(name);
        r.git(&["config", "factory.priceFile", path.to_str().expect("utf-8")]);
        let before = untouched(&r);
        let started = Instant::now();
        let (code, err) = bounded(
            &r,
            &[
                "run",
                "--llm-model",
                "m",
                "--llm-base-url",
                "http://127.0.0.1:9/v1",
                "-w",
                wo,
            ],
        );
        assert_eq!(code, Some(2), "{name}: {err}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{name}: took {:?}",
            started.elapsed()
        );
        assert!(
            err.contains("error: ") && err.contains("factory.priceFile") && err.contains(why),
            "{name}: {err}"
        );
        assert!(err.contains("hint: "), "{name}: {err}");
        assert_eq!(untouched(&r), before, "{name}");
    }
}

#[test]
fn prices_for_odd_model_names_apply_and_bad_ones_are_refused_by_key() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    // (model, its input and output price): dots, slashes, colons, an @, unicode, case.
    let models = [
        ("org/Model.v2:q4_K_M", "1", "2"),
        ("modèle-ü.1@latest", "0.5", "4"),
        ("my model", "3", "3"),
    ];
    for (model, input, output) in models {
        r.git(&["config", &format!("factory-price.{model}.input"), input]);
        r.git(&["config", &format!("factory-price.{model}.output"), output]);
    }
    for (model, input, output) in models {
        let (url, _seen, server) = serve_replies(vec![chat_whole(
            model,
            &good(),
            json!({"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}),
        )]);
        let ran = run_model(
            &r,
            &wo,
            &url,
            &["--llm-model", &format!("openai:{model}"), "--max-cost", "1"],
        );
        server.join().expect("server");
        assert_eq!(ran.code, 0, "{model}: {}", ran.stderr);
        let a = &ran.summary["attempts"][0]["cost"];
        assert_eq!(a["source"], "override", "{model}: {a}");
        let want = (1000.0 * input.parse::<f64>().expect("n")
            + 100.0 * output.parse::<f64>().expect("n"))
            / 1e6;
        close(&a["usd"], want);
        r.git(&["reset", "--hard", "-q"]);
    }
    // A price that is not one is refused naming its key, whatever the model's name.
    for (key, value) in [
        ("factory-price.org/Model.v2:q4_K_M.input", "-1"),
        ("factory-price.modèle-ü.1@latest.output", "abc"),
        ("factory-price.my model.input", "nan"),
        ("factory-price.my model.cacheRead", "inf"),
        ("factory-price.my model.cacheWrite", "1e999"),
        ("factory-price.my model.input", ""),
    ] {
        let r = TestRepo::simple();
        r.git(&["config", key, value]);
        let before = untouched(&r);
        let (code, err) = bounded(
            &r,
            &[
                "run",
                "--llm-model",
                "gpt-4.1",
                "--llm-base-url",
                "http://127.0.0.1:9/v1",
                "-w",
                wo.to_str().expect("utf-8"),
            ],
        );
        assert_eq!(code, Some(2), "{key}={value}: {err}");
        // Git writes the key's last part in lower case.
        assert!(
            err.to_lowercase()
                .contains(&format!("error: git config {}", key.to_lowercase())),
            "{key}={value}: {err}"
        );
        // A name with a space is quoted in the command the hint gives.
        if key.contains(' ') {
            assert!(
                err.contains("e.g. git config 'factory-price.my model."),
                "{key}={value}: {err}"
            );
        }
        assert!(
            err.contains("hint: set a price in USD per million tokens"),
            "{key}={value}: {err}"
        );
        assert_eq!(untouched(&r), before, "{key}={value}");
    }
}

#[test]
fn usage_figures_that_are_not_counts_are_never_a_free_request() {
    // (what the server put in `usage`): none of it can be read as tokens, so the answer is
    // unpriced — never $0, which would give a dollar budget back what the request spent.
    let hostile = [
        json!({}),
        json!({"prompt_tokens": -1000, "completion_tokens": -5}),
        json!({"prompt_tokens": "2000", "completion_tokens": "500"}),
        json!({"prompt_tokens": 1.5, "completion_tokens": 2.5}),
        json!({"prompt_tokens": 1e30, "completion_tokens": 1e300}),
        json!({"prompt_tokens": null, "completion_tokens": [1]}),
        // One past the largest count, written as JSON can (a serde `Value` cannot hold it).
        json!({"prompt_tokens": "PAST_U64", "completion_tokens": {"n": 1}}),
    ];
    for usage in hostile {
        let reply = match chat_whole("gpt-4.1-2025-04-14", &good(), usage.clone()) {
            Reply::Json(status, body) => {
                Reply::Json(status, body.replace("\"PAST_U64\"", "18446744073709551616"))
            }
            other => other,
        };
        let (r, ran, _seen) = run_served(vec![reply], &["--llm-model", "gpt-4.1"]);
        assert_eq!(ran.code, 0, "{usage}: {}", ran.stderr);
        let cost = &ran.summary["attempts"][0]["cost"];
        assert_eq!(cost["usd"], Value::Null, "{usage}: {cost}");
        assert_eq!(cost["unpriced_requests"], 1, "{usage}: {cost}");
        let shown = r
            .factory()
            .args(["show", "--color", "never"])
            .output()
            .expect("show");
        assert!(
            stdout_of(&shown).contains("cost:       unpriced"),
            "{usage}: {}",
            stdout_of(&shown)
        );
    }
    // A server's own cost that cannot be a bill (negative, a string, absurd) is not
    // believed: the tokens are priced by the table instead. The largest count a server can
    // send is priced without overflow.
    let cases = [
        (json!(-0.5), 0.0065),
        (json!("0.0001"), 0.0065),
        (json!(1e300), 0.0065),
        (json!(0.0003), 0.0003),
    ];
    for (reported, usd) in cases {
        let mut usage = gpt_usage();
        usage["cost"] = reported.clone();
        let (_r, ran, _seen) = run_served(
            vec![chat_whole("gpt-4.1-2025-04-14", &good(), usage)],
            &["--llm-model", "gpt-4.1"],
        );
        assert_eq!(ran.code, 0, "{reported}: {}", ran.stderr);
        close(&ran.summary["cost"]["usd"], usd);
    }
    let huge = json!({"prompt_tokens": u64::MAX, "completion_tokens": u64::MAX,
        "prompt_tokens_details": {"cached_tokens": u64::MAX}});
    let (r, ran, _seen) = run_served(
        vec![chat_whole("gpt-4.1", &good(), huge)],
        &["--llm-model", "gpt-4.1"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let usd = ran.summary["cost"]["usd"].as_f64().expect("priced");
    assert!(usd.is_finite() && usd > 1e12, "{usd}");
    let listed = r
        .factory()
        .args(["log", "--cost", "--json"])
        .output()
        .expect("log");
    assert_eq!(listed.status.code(), Some(0), "{}", stderr_of(&listed));
}

#[test]
fn an_agent_that_forges_its_usage_gains_nothing() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let diff = diff_replace("app.txt", &APP, "two", "TWO");
    // Each last line is believed only as far as it can be a bill: a negative or textual
    // cost is no cost, and tokens that are not counts are no usage.
    for line in [
        r#"{"factory_usage": {"cost_usd": -100}}"#,
        r#"{"factory_usage": {"model": "gpt-4.1", "cost_usd": -100}}"#,
        r#"{"factory_usage": {"model": "gpt-4.1", "cost_usd": "0"}}"#,
        r#"{"factory_usage": {"model": "gpt-4.1", "input_tokens": -5, "output_tokens": -5}}"#,
        r#"{"factory_usage": {"model": "gpt-4.1"}}"#,
    ] {
        let s = run_agent_printing(&r, &wo, &format!("{diff}{line}"), line);
        assert_eq!(
            s["cost"],
            json!({"usd": null, "unpriced_requests": 1, "source": "unpriced"}),
            "{line}"
        );
        r.git(&["reset", "--hard", "-q"]);
    }
    // And under a dollar budget an agent is refused before it runs: nothing it prints can
    // give the budget back.
    let before = untouched(&r);
    let out = r
        .factory()
        .args(["run", "--max-cost", "5", "--agent-command", "true", "-w"])
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("hint: "), "{}", stderr_of(&out));
    assert_eq!(untouched(&r), before);
}

/// An Anthropic stream that reports its usage in `message_start` and then fails with an
/// `overloaded_error` event: the request was billed (3000 input tokens and one output token,
/// $0.009015 at claude-sonnet-4-5's $3 / $15 per million) and is retried.
fn billed_then_overloaded() -> Reply {
    Reply::Sse(vec![sse(&[
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 3000, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1, "service_tier": "standard"}}}),
        ),
        (Some("ping"), json!({"type": "ping"})),
        (
            Some("error"),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ])])
}

#[test]
fn every_request_of_an_attempt_holds_its_worst_case_against_max_cost() {
    // With a 1000-token output limit each request's worst case is $0.015 of output at $15
    // per million, plus its input (the request's bytes ÷ 3 at $3 per million: under $0.01
    // for a request under 10 kB). $0.025 fits the first request; once it was billed
    // $0.009015 and failed, its retry's worst case would pass what is left: the retry is
    // never sent, though the provider would retry a transient error three times.
    let (r, ran, seen) = run_served(
        // Only the first is ever asked for (the server waits for the rest).
        vec![billed_then_overloaded()],
        &[
            "--llm-model",
            "anthropic:claude-sonnet-4-5",
            "--llm-max-output-tokens",
            "1000",
            "--max-cost",
            "0.025",
        ],
    );
    let sent = seen.lock().expect("lock");
    let bytes = sent[0].body.to_string().len();
    assert!(bytes < 10_000, "the request is {bytes} bytes");
    assert_eq!(sent.len(), 1, "{}", ran.stderr);
    drop(sent);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    let s = &ran.summary;
    assert_eq!(s["verdict"], "FAIL");
    assert_eq!(s["ended_stage"], "budget_exhausted");
    let a = &s["attempts"][0];
    assert_eq!(a["failure_brief"]["stage"], "budget_exhausted", "{a}");
    assert!(
        brief_of(&ran)
            .contains("the --max-cost budget of $0.0250 would be passed by the next request"),
        "{}",
        brief_of(&ran)
    );
    // The billed request is in the attempt's usage and cost, and the run's.
    assert_eq!(
        a["usage"],
        json!({"input_tokens": 3000, "output_tokens": 1, "cache_read_tokens": 0,
            "cache_write_tokens": 0, "failed_requests": 1})
    );
    close(&a["cost"]["usd"], 0.009015);
    close(&s["cost"]["usd"], 0.009015);
    let _ = artifact(&r, s, "attempt_1/prompt.txt");
}

#[test]
fn requests_that_fail_unbilled_hold_nothing_once_they_are_done() {
    // 500s with no usage were not billed: the budget that held their worst case gets it
    // back, so three of them and an answer fit a budget of two worst cases.
    let (_r, ran, seen) = run_served(
        vec![
            json_reply(
                500,
                json!({"error": {"message": "boom", "type": "server_error"}}),
            ),
            json_reply(
                500,
                json!({"error": {"message": "boom", "type": "server_error"}}),
            ),
            json_reply(
                500,
                json!({"error": {"message": "boom", "type": "server_error"}}),
            ),
            chat_whole("gpt-4.1-2025-04-14", &good(), gpt_usage()),
        ],
        &[
            "--llm-model",
            "gpt-4.1",
            "--llm-max-output-tokens",
            "1000",
            "--max-cost",
            "0.03",
        ],
    );
    assert_eq!(seen.lock().expect("lock").len(), 4, "{}", ran.stderr);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    close(&ran.summary["cost"]["usd"], 0.0065);
}

#[test]
fn a_recovered_run_counts_what_its_attempts_cost() {
    let r = TestRepo::simple();
    let reached = r.outside.join("reached");
    // Attempt 1 is answered with a wrong change and fails its check; attempt 2's check is
    // where the run is killed.
    let accept = format!(
        "sh -c 'grep -qx TWO app.txt || exit 1; touch {}; sleep 30'",
        reached.display()
    );
    let wo = r.work_order(basic_order(&[&accept]));
    let wrong = proposal(&diff_replace("app.txt", &APP, "two", "TW0"), "wrong");
    let (url, _seen, server) = serve_replies(vec![
        chat_whole("gpt-4.1-2025-04-14", &wrong, gpt_usage()),
        chat_whole("gpt-4.1-2025-04-14", &good(), gpt_usage()),
    ]);
    let before = r.snapshot();
    let mut child = r
        .spawn(&[
            "run",
            "--llm-model",
            "gpt-4.1",
            "--llm-base-url",
            &url,
            "-w",
        ])
        .arg(&wo)
        .env("OPENAI_API_KEY", "sk-loop")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    wait_for(&reached);
    child.kill().expect("kill");
    let _ = child.wait();
    server.join().expect("server");
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert_eq!(r.snapshot(), before);
    let shown = r.factory().args(["show", "--json"]).output().expect("show");
    let s: Value = serde_json::from_str(&stdout_of(&shown)).expect("json");
    assert_eq!(s["verdict"], "INTERRUPTED");
    assert_eq!(s["attempts"].as_array().map(Vec::len), Some(2), "{s}");
    // Both answers were paid for: the one of the attempt the kill cut short too.
    close(&s["attempts"][0]["cost"]["usd"], 0.0065);
    close(&s["attempts"][1]["cost"]["usd"], 0.0065);
    assert_eq!(s["attempts"][1]["usage"]["input_tokens"], 2000, "{s}");
    close(&s["cost"]["usd"], 0.013);
    let sums = r
        .factory()
        .args(["log", "--cost", "--json"])
        .output()
        .expect("log");
    let sums: Value = serde_json::from_str(&stdout_of(&sums)).expect("json");
    close(&sums["total"]["usd"], 0.013);
    let listed = r
        .factory()
        .args(["log", "--color", "never"])
        .output()
        .expect("log");
    assert!(
        stdout_of(&listed).contains("$0.0130"),
        "{}",
        stdout_of(&listed)
    );
}

#[test]
fn a_batch_budgets_each_run_alone_and_its_table_shows_what_each_cost() {
    let r = TestRepo::simple();
    r.write("b.txt", "one\ntwo\nthree\n");
    r.git(&["add", "b.txt"]);
    r.git(&["commit", "-qm", "b"]);
    let first = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let mut other = basic_order(&["grep -qx TWO b.txt"]);
    other["id"] = json!("wo-2");
    other["allowed_files"] = json!(["b.txt"]);
    other["context_files"] = json!(["b.txt"]);
    let second = r.outside.join("wo-2.json");
    std::fs::write(&second, other.to_string()).expect("write");
    let b = proposal(&diff_replace("b.txt", &APP, "two", "TWO"), "b");
    // Each run's worst case is about $0.012 (1000 output tokens at $8 per million and its
    // input) and each spends $0.0065: both fit $0.015 alone, not together.
    let (url, seen, server) = serve_replies(vec![
        chat_whole("gpt-4.1-2025-04-14", &good(), gpt_usage()),
        chat_whole("gpt-4.1-2025-04-14", &b, gpt_usage()),
    ]);
    let out = r
        .factory()
        .env("OPENAI_API_KEY", "sk-loop")
        .args([
            "run",
            "--color",
            "never",
            "--jobs",
            "1",
            "--llm-model",
            "gpt-4.1",
        ])
        .args(["--llm-base-url", &url, "--llm-max-output-tokens", "1000"])
        .args(["--max-cost", "0.015", "-w"])
        .arg(&first)
        .arg(&second)
        .output()
        .expect("batch");
    server.join().expect("server");
    let said = format!("{}{}", stdout_of(&out), stderr_of(&out));
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert_eq!(seen.lock().expect("lock").len(), 2);
    let head = said
        .lines()
        .find(|l| l.starts_with("work order"))
        .expect("table");
    assert!(head.trim_end().ends_with("cost"), "{said}");
    let rows: Vec<&str> = said.lines().filter(|l| l.starts_with("wo-")).collect();
    assert_eq!(rows.len(), 2, "{said}");
    for row in rows {
        assert!(row.trim_end().ends_with("$0.0065"), "{row}");
    }
    assert!(said.contains(", cost $0.0130"), "{said}");
}

#[test]
fn the_time_each_request_was_priced_at_is_recorded_and_no_identity_depends_on_it() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let mut ids = Vec::new();
    let (url, _seen, server) = serve_replies(vec![
        chat_whole("gpt-4.1-2025-04-14", &good(), gpt_usage()),
        chat_whole("gpt-4.1-2025-04-14", &good(), gpt_usage()),
    ]);
    for _ in 0..2 {
        let ran = run_model(&r, &wo, &url, &["--llm-model", "gpt-4.1", "--force"]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        let a = &ran.summary["attempts"][0];
        let times = a["requested_utc"].as_array().expect("request times");
        assert_eq!(times.len(), 1, "{a}");
        let t = times[0].as_str().expect("a time");
        assert!(
            t.len() == 20 && t.ends_with('Z') && t.as_bytes()[10] == b'T',
            "{t}"
        );
        ids.push(ran.summary["run_id"].clone());
        r.git(&["reset", "--hard", "-q"]);
        std::thread::sleep(Duration::from_millis(1100));
    }
    server.join().expect("server");
    assert_eq!(ids[0], ids[1]);
}

#[test]
fn only_what_prices_a_request_decodes_the_price_table() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let traced = |cmd: &mut assert_cmd::Command| {
        let out = cmd.env("GIT_FACTORY_TRACE", "1").output().expect("runs");
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        stderr_of(&out).contains("price table decoded")
    };
    // A replay costs $0 without the table; an unpriced model is looked up in it.
    let replay = r.replay("rp", &[("1.json", good())]);
    assert!(!traced(r.replay_command(&wo, &replay, &[]).arg("--force")));
    r.git(&["reset", "--hard", "-q"]);
    let (url, _seen, server) = serve_replies(vec![
        chat_whole("gpt-4.1-2025-04-14", &good(), gpt_usage()),
        chat_whole("house-model", &good(), gpt_usage()),
    ]);
    for model in ["gpt-4.1", "house-model"] {
        let mut run = r.factory();
        run.env("OPENAI_API_KEY", "sk-loop")
            .args([
                "run",
                "--force",
                "--llm-base-url",
                &url,
                "--llm-model",
                model,
                "-w",
            ])
            .arg(&wo);
        assert!(traced(&mut run), "{model}");
        r.git(&["reset", "--hard", "-q"]);
    }
    server.join().expect("server");
    // Reading records never prices: their cost is recorded.
    for args in [
        &["log"][..],
        &["log", "--cost"],
        &["log", "--cost", "--json"],
        &["show"],
        &["show", "--json"],
        &["report"],
    ] {
        assert!(!traced(r.factory().args(args)), "{args:?}");
    }
}

#[test]
fn a_recovered_race_counts_what_every_candidate_cost() {
    let r = TestRepo::simple();
    let marks = r.outside.join("marks");
    std::fs::create_dir_all(&marks).expect("mkdir");
    // Both candidates reach their check, which is where the race is killed.
    let accept = format!(
        "sh -c 'grep -qx TWO app.txt || exit 1; mktemp -p {} >/dev/null; sleep 30'",
        marks.display()
    );
    let wo = r.work_order(basic_order(&[&accept]));
    let (url, _seen, server) = serve_replies(vec![
        chat_whole("gpt-4.1-2025-04-14", &good(), gpt_usage()),
        chat_whole("gpt-4.1-2025-04-14", &good(), gpt_usage()),
    ]);
    let before = r.snapshot();
    let mut child = r
        .spawn(&["run", "--llm-model", "gpt-4.1", "--llm-base-url", &url])
        .args(["--candidates", "2", "--jobs", "2", "-w"])
        .arg(&wo)
        .env("OPENAI_API_KEY", "sk-loop")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(&marks).map(|d| d.count()).unwrap_or(0) < 2 {
        assert!(
            Instant::now() < deadline,
            "the candidates never reached their check"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().expect("kill");
    let _ = child.wait();
    server.join().expect("server");
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert_eq!(r.snapshot(), before);
    let shown = r.factory().args(["show", "--json"]).output().expect("show");
    let s: Value = serde_json::from_str(&stdout_of(&shown)).expect("json");
    assert_eq!(s["verdict"], "INTERRUPTED", "{s}");
    close(&s["cost"]["usd"], 0.013);
    let sums = r
        .factory()
        .args(["log", "--cost", "--json"])
        .output()
        .expect("log");
    let sums: Value = serde_json::from_str(&stdout_of(&sums)).expect("json");
    close(&sums["total"]["usd"], 0.013);
}

#[test]
fn billed_requests_of_a_failed_attempt_count_in_max_tokens() {
    // Attempt 1's four requests are each billed 3001 tokens and fail: the attempt fails with
    // 12,004 tokens spent, past the 1000 of --max-tokens, so no second attempt is made.
    let (_r, ran, seen) = run_served(
        (0..4).map(|_| billed_then_overloaded()).collect(),
        &[
            "--llm-model",
            "anthropic:claude-sonnet-4-5",
            "--max-tokens",
            "1000",
            "--max-attempts",
            "2",
        ],
    );
    assert_eq!(seen.lock().expect("lock").len(), 4, "{}", ran.stderr);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    let s = &ran.summary;
    assert_eq!(s["ended_stage"], "budget_exhausted", "{s}");
    assert_eq!(s["attempts"].as_array().map(Vec::len), Some(1), "{s}");
    assert!(
        brief_of(&ran)
            .contains("the --max-tokens budget of 1000 tokens is spent (12004 reported so far)"),
        "{}",
        brief_of(&ran)
    );
    assert_eq!(s["attempts"][0]["usage"]["failed_requests"], 4, "{s}");
    assert_eq!(s["attempts"][0]["usage"]["input_tokens"], 12000, "{s}");
    close(&s["cost"]["usd"], 4.0 * 0.009015);
}

#[test]
fn under_a_dollar_budget_a_request_may_not_outgrow_its_worst_case() {
    // A request's worst case assumes 32,768 output tokens when the user set no limit; sent
    // without one, a model could answer with more. Under --max-cost the limit is sent; without
    // a budget nothing changes.
    let responses = {
        let mut r = json!({"id": "resp_1", "object": "response", "created_at": 1, "status": "completed",
            "error": null, "incomplete_details": null, "model": "gpt-4.1-2025-04-14",
            "output": [{"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": good(), "annotations": []}]}]});
        r["usage"] = json!({"input_tokens": 2000, "input_tokens_details": {"cached_tokens": 1000},
            "output_tokens": 500, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2500});
        r
    };
    for (api, field) in [
        ("chat", "max_completion_tokens"),
        ("responses", "max_output_tokens"),
    ] {
        for budget in [true, false] {
            let reply = if api == "chat" {
                chat_whole("gpt-4.1-2025-04-14", &good(), gpt_usage())
            } else {
                json_reply(200, responses.clone())
            };
            let mut flags = vec!["--llm-model", "gpt-4.1", "--llm-api", api];
            if budget {
                flags.extend(["--max-cost", "1"]);
            }
            let (_r, ran, seen) = run_served(vec![reply], &flags);
            assert_eq!(ran.code, 0, "{api} {budget}: {}", ran.stderr);
            close(&ran.summary["cost"]["usd"], 0.0065);
            let body = &seen.lock().expect("lock")[0].body;
            let want = if budget { json!(32768) } else { Value::Null };
            assert_eq!(body[field], want, "{api} {budget}: {body}");
            // The harness's cap is no setting of the user's: not in the recorded config.
            assert_eq!(
                ran.summary["config"].get("max_output_tokens"),
                None,
                "{api} {budget}"
            );
        }
    }
}

#[test]
fn a_price_file_under_the_home_folder_is_found_as_git_finds_its_paths() {
    let r = TestRepo::simple();
    std::fs::write(
        r.home.join("prices.json"),
        r#"{"house-model": {"input": 4, "output": 40}}"#,
    )
    .expect("write");
    // Written into the config as is (no shell expanded it), as a hand-edited file has it.
    r.git(&["config", "factory.priceFile", "~/prices.json"]);
    let (url, _seen, server) = serve_replies(vec![chat_whole("house-model", &good(), gpt_usage())]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(&r, &wo, &url, &["--llm-model", "house-model"]);
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    // 2000 × $4 + 500 × $40 per million.
    close(&ran.summary["cost"]["usd"], 0.028);
    assert_eq!(ran.summary["cost"]["source"], "override");
}

#[test]
fn a_fetched_record_that_claims_a_negative_cost_takes_nothing_off_the_sums() {
    let r = TestRepo::simple();
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let (url, _seen, server) =
        serve_replies(vec![chat_whole("gpt-4.1-2025-04-14", &good(), gpt_usage())]);
    let ran = run_model(&r, &wo, &url, &["--llm-model", "gpt-4.1"]);
    server.join().expect("server");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    r.git(&["reset", "--hard", "-q"]);
    // A second run, replayed ($0), whose record is then forged as records fetched from
    // anyone can be: its header says it cost minus five dollars.
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r.run_replay(&wo, &replay, &["--force", "--json"]);
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    let id = s["run_id"].as_str().expect("id").to_string();
    let rref = format!("refs/factory/{id}");
    let commit = r.git(&["rev-parse", &rref]).trim().to_string();
    let message = r.git(&["log", "-1", "--format=%B", &commit]);
    let forged_message = message
        .lines()
        .map(|l| {
            if l.starts_with("cost: ") {
                "cost: -5.000000000 0 server".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(forged_message.trim(), message.trim(), "{message}");
    let tree = r.git(&["rev-parse", &format!("{commit}^{{tree}}")]);
    let mut args = vec!["commit-tree".to_string(), tree.trim().to_string()];
    for p in r.git(&["rev-parse", &format!("{commit}^@")]).lines() {
        args.extend(["-p".to_string(), p.to_string()]);
    }
    args.extend(["-m".to_string(), forged_message]);
    let forged = r.git(&args.iter().map(String::as_str).collect::<Vec<_>>());
    r.git(&["update-ref", &rref, forged.trim()]);
    let sums = r
        .factory()
        .args(["log", "--cost", "--json"])
        .output()
        .expect("log");
    let sums: Value = serde_json::from_str(&stdout_of(&sums)).expect("json");
    close(&sums["total"]["usd"], 0.0065);
    let listed = r
        .factory()
        .args(["log", "--color", "never"])
        .output()
        .expect("log");
    assert!(!stdout_of(&listed).contains("-5"), "{}", stdout_of(&listed));
}

#[test]
fn a_race_of_four_at_once_never_spends_past_max_cost_and_counts_every_candidate() {
    // Four candidates ask at once. Each request's worst case is its 10,000-token output
    // limit ($0.08 at gpt-4.1's $8 per million) plus its input (under $0.01); each answer
    // costs $0.04. With $0.175 at most two requests are in flight together and at most three
    // are ever made: the others are stopped before they are sent.
    let r = TestRepo::simple();
    let usage = json!({"prompt_tokens": 0, "completion_tokens": 5000, "total_tokens": 5000});
    let (url, seen, _server) = serve_replies(
        (0..3)
            .map(|_| chat_whole("gpt-4.1", &good(), usage.clone()))
            .collect(),
    );
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let ran = run_model(
        &r,
        &wo,
        &url,
        &[
            "--llm-model",
            "gpt-4.1",
            "--candidates",
            "4",
            "--jobs",
            "4",
            "--max-attempts",
            "1",
            "--llm-max-output-tokens",
            "10000",
            "--max-cost",
            "0.175",
        ],
    );
    let sent = seen.lock().expect("lock").len();
    assert!((2..=3).contains(&sent), "{sent} requests: {}", ran.stderr);
    let s = &ran.summary;
    assert_eq!(s["ended_stage"], "budget_exhausted", "{s}");
    close(&s["cost"]["usd"], 0.04 * sent as f64);
    let candidates = s["candidates"].as_array().expect("candidates");
    assert_eq!(candidates.len(), 4);
    let paid = candidates
        .iter()
        .filter(|c| {
            c["cost"]["usd"]
                .as_f64()
                .is_some_and(|u| (u - 0.04).abs() < 1e-9)
        })
        .count();
    let stopped = candidates
        .iter()
        .filter(|c| c["ended_stage"] == "budget_exhausted" && c["cost"].is_null())
        .count();
    assert_eq!((paid, stopped), (sent, 4 - sent), "{s}");
}

#[test]
fn a_model_whose_own_output_limit_is_lower_refuses_the_cap_and_is_asked_without_it() {
    // gpt-4o answers at most 16,384 tokens: OpenAI refuses the 32,768 the budget's worst case
    // assumes, naming the limit by its older name. The harness chose it, so it is dropped and
    // the request sent again; the model's own lower limit keeps the worst case true.
    let too_large = json_reply(
        400,
        json!({"error": {"message": "max_tokens is too large: 32768. This model supports at most 16384 completion tokens, whereas you provided 32768.",
            "type": "invalid_request_error", "param": "max_tokens", "code": "invalid_value"}}),
    );
    let (_r, ran, seen) = run_served(
        vec![
            too_large,
            chat_whole("gpt-4o-2024-08-06", &good(), gpt_usage()),
        ],
        &["--llm-model", "gpt-4o", "--max-cost", "1"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let sent = seen.lock().expect("lock");
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].body["max_completion_tokens"], 32768);
    assert_eq!(sent[1].body.get("max_completion_tokens"), None);
    assert_eq!(
        ran.summary["attempts"][0]["dropped_params"],
        json!(["max_completion_tokens"])
    );
}
