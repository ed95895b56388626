//! What a run cost, attacked again (SPEC §3.3 Cost): the money a server's usage report
//! says was spent that the record left out.

use crate::common::*;
use crate::providers::{good, json_reply, run_model, run_served, serve_replies, Reply};
use serde_json::{json, Value};

fn close(got: &Value, want: f64) {
    let got = got.as_f64().unwrap_or(f64::NAN);
    assert!((got - want).abs() < 1e-9, "cost {got} is not {want}");
}

/// A whole Chat Completions answer naming `model`, with `usage` as the server sent it.
fn chat_whole(model: &str, usage: Value) -> Reply {
    json_reply(
        200,
        json!({"id": "gen-1", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": good()}, "finish_reason": "stop"}],
            "usage": usage}),
    )
}

#[test]
fn a_request_on_the_users_own_provider_key_costs_what_the_provider_charged_too() {
    // OpenRouter with the user's own provider key (BYOK): `cost` is only OpenRouter's fee;
    // what the provider charged the user's own account is `cost_details.
    // upstream_inference_cost`. Both were spent: the request cost their sum, not the fee.
    let usage = json!({"prompt_tokens": 2000, "completion_tokens": 500, "total_tokens": 2500,
        "prompt_tokens_details": {"cached_tokens": 1000},
        "cost": 0.0003, "is_byok": true,
        "cost_details": {"upstream_inference_cost": 0.0065}});
    let (_r, ran, _seen) = run_served(
        vec![chat_whole("openai/gpt-4.1", usage)],
        &["--llm-model", "openai/gpt-4.1"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    close(&ran.summary["attempts"][0]["cost"]["usd"], 0.0068);
    close(&ran.summary["cost"]["usd"], 0.0068);
    // Credits paid through OpenRouter: `cost` already holds what the provider charged, and
    // the upstream figure beside it is not spent twice.
    let usage = json!({"prompt_tokens": 2000, "completion_tokens": 500,
        "cost": 0.0065, "is_byok": false,
        "cost_details": {"upstream_inference_cost": 0.0065}});
    let (_r, ran, _seen) = run_served(
        vec![chat_whole("openai/gpt-4.1", usage)],
        &["--llm-model", "openai/gpt-4.1"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    close(&ran.summary["cost"]["usd"], 0.0065);
}

#[test]
fn cache_writes_kept_for_an_hour_cost_the_hour_rate() {
    // Anthropic splits its cache writes by how long they are kept: an hour's write costs
    // twice the input price, five minutes' 1.25 times. claude-haiku-4-5: $1 in, $1.25 per
    // 5-minute write, $2 per 1-hour write, $5 out per million. 1000 plain input tokens,
    // 1,000,000 written for an hour, 1000 out: $0.001 + $2 + $0.005.
    let answer = json!({"id": "msg_1", "type": "message", "role": "assistant",
        "model": "claude-haiku-4-5-20251001",
        "content": [{"type": "text", "text": good()}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 1000, "output_tokens": 1000,
            "cache_read_input_tokens": 0, "cache_creation_input_tokens": 1_000_000,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 1_000_000}}});
    let (_r, ran, _seen) = run_served(
        vec![json_reply(200, answer)],
        &["--llm-model", "anthropic:claude-haiku-4-5"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let a = &ran.summary["attempts"][0];
    assert_eq!(a["usage"]["cache_write_tokens"], 1_000_000, "{a}");
    assert_eq!(a["usage"]["cache_write_1h_tokens"], 1_000_000, "{a}");
    close(&a["cost"]["usd"], 2.006);
    close(&ran.summary["cost"]["usd"], 2.006);
}

#[test]
fn a_forced_re_run_keeps_what_the_run_before_it_cost_in_the_sums() {
    // A forced re-run moves `refs/factory/<run_id>` to its own record, with the run before it
    // as a parent "so no run is ever lost": what that run spent was spent all the same, so
    // `log --cost` still counts it, per model and per work order.
    let usage = json!({"prompt_tokens": 2000, "completion_tokens": 500,
        "prompt_tokens_details": {"cached_tokens": 1000}});
    let r = TestRepo::simple();
    let (url, _seen, server) = serve_replies(vec![
        chat_whole("gpt-4.1-2025-04-14", usage.clone()),
        chat_whole("gpt-4.1-2025-04-14", usage),
    ]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let first = run_model(&r, &wo, &url, &["--llm-model", "gpt-4.1"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    r.git(&["checkout", "--", "."]);
    let again = run_model(&r, &wo, &url, &["--llm-model", "gpt-4.1", "--force"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    server.join().expect("server");
    assert_eq!(first.summary["run_id"], again.summary["run_id"]);
    let listed = r
        .factory()
        .args(["log", "--cost", "--json"])
        .output()
        .expect("log");
    assert_eq!(listed.status.code(), Some(0), "{}", stderr_of(&listed));
    let sums: Value = serde_json::from_str(&stdout_of(&listed)).expect("json");
    close(&sums["total"]["usd"], 0.013);
    assert_eq!(sums["runs"], 2, "{sums}");
    close(&sums["by_model"][0]["cost"]["usd"], 0.013);
    close(&sums["by_work_order"][0]["cost"]["usd"], 0.013);
}

#[test]
fn a_server_that_refuses_the_cap_by_name_is_still_asked_with_a_limit_under_max_cost() {
    // Under --max-cost each request's worst case assumes the 32,768-token cap the harness
    // sends. A server that knows only the older name of the limit (`max_tokens`) refuses
    // `max_completion_tokens` as an unknown field; the cap is the harness's, so it may be
    // dropped — yet a request sent with no limit at all can cost any amount, past the budget.
    // The limit must stay on the request, under the name the server knows.
    let refused = json_reply(
        422,
        json!({"detail": [{"type": "extra_forbidden", "loc": ["body", "max_completion_tokens"],
            "msg": "Extra inputs are not permitted", "input": 32768}]}),
    );
    let answer = chat_whole(
        "gpt-4.1-2025-04-14",
        json!({"prompt_tokens": 2000, "completion_tokens": 500}),
    );
    let (_r, ran, seen) = run_served(
        vec![refused, answer],
        &["--llm-model", "gpt-4.1", "--max-cost", "1"],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 2, "{}", ran.stderr);
    assert_eq!(seen[0].body["max_completion_tokens"], 32768);
    assert_eq!(seen[1].body.get("max_completion_tokens"), None);
    assert_eq!(seen[1].body["max_tokens"], 32768, "{}", seen[1].body);
}

#[test]
fn reasoning_a_server_left_out_of_its_completion_count_is_still_paid_for() {
    // OpenAI counts reasoning inside `completion_tokens`. Gemini's OpenAI-compatible
    // endpoint and many proxies report it beside: `completion_tokens` is the answer alone and
    // `total_tokens` is prompt + answer + reasoning. Reasoning is billed as output, so those
    // 4000 tokens are output, not free. (Reasoning that is inside the count is not counted
    // twice: the same answer reported OpenAI's way costs the same.)
    let apart = json!({"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 5100,
        "completion_tokens_details": {"reasoning_tokens": 4000}});
    let inside = json!({"prompt_tokens": 1000, "completion_tokens": 4100, "total_tokens": 5100,
        "completion_tokens_details": {"reasoning_tokens": 4000}});
    let mut costs = Vec::new();
    for usage in [apart, inside] {
        let (_r, ran, _seen) = run_served(
            vec![chat_whole("gemini-2.5-flash", usage.clone())],
            &["--llm-model", "gemini-2.5-flash"],
        );
        assert_eq!(ran.code, 0, "{usage}: {}", ran.stderr);
        let a = &ran.summary["attempts"][0];
        assert_eq!(a["usage"]["output_tokens"], 4100, "{usage}: {a}");
        assert_eq!(a["usage"]["reasoning_tokens"], 4000, "{usage}: {a}");
        costs.push(a["cost"]["usd"].as_f64().expect("priced"));
    }
    close(&json!(costs[0]), costs[1]);
}

#[test]
fn once_a_dearer_model_served_the_run_its_price_holds_the_next_request() {
    // A request is priced by the model the answer names (SPEC §3.3). Asked for gpt-4.1-nano
    // ($0.10 / $0.40 per million), the server answered as gpt-4.1 ($2 / $8): 2000 tokens out
    // cost $0.016 of the $0.02 budget. The next request's worst case at gpt-4.1's price
    // (1000 out: $0.008, plus its input) passes the $0.004 left, though at nano's it would
    // not: the model that served the run is now known, so its price holds the request.
    let invalid = chat_whole_text(
        "gpt-4.1-2025-04-14",
        "not a proposal",
        json!({"prompt_tokens": 0, "completion_tokens": 2000}),
    );
    let (_r, ran, seen) = run_served(
        vec![invalid],
        &[
            "--llm-model",
            "gpt-4.1-nano",
            "--llm-max-output-tokens",
            "1000",
            "--max-cost",
            "0.02",
        ],
    );
    assert_eq!(seen.lock().expect("lock").len(), 1, "{}", ran.stderr);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    let s = &ran.summary;
    assert_eq!(s["ended_stage"], "budget_exhausted", "{s}");
    close(&s["cost"]["usd"], 0.016);
}

/// A whole Chat Completions answer of `content`.
fn chat_whole_text(model: &str, content: &str, usage: Value) -> Reply {
    json_reply(
        200,
        json!({"id": "gen-1", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage}),
    )
}
