//! What a run cost, attacked again (SPEC §3.3 Cost): the money a server's usage report
//! says was spent that the record left out.

use crate::providers::{good, json_reply, run_served, Reply};
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
