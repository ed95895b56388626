#!/usr/bin/env python3
"""A loopback model server for scripts/agents-e2e.sh: it answers each coding agent in its own
wire format with the one change the end-to-end work order asks for (line `two` of app.txt
becomes `TWO`), the way a real model would drive that agent:

- Chat Completions (aider through litellm): the whole file in aider's `whole` edit format,
  and a one-line commit message when aider asks for one; streamed when asked to stream.
- Responses API (Codex CLI): an `exec_command` call running `apply_patch`, then — once the
  call's output comes back — a second call that commits when the prompt says "commit it",
  then a final message.
- Anthropic Messages (Claude Code): Read app.txt, then Edit it, then a final message; any
  side request (titles, summaries) gets a short text answer.

Usage: agents-e2e-server.py PORT_FILE LOG_FILE [SECONDS]. It binds 127.0.0.1 on a free port,
writes the port to PORT_FILE, logs one line per request to LOG_FILE and stops by itself.
"""

import http.server
import json
import os
import sys
import threading
import time

NEW_APP = "one\nTWO\nthree\n"
PATCH = "*** Begin Patch\n*** Update File: app.txt\n@@\n one\n-two\n+TWO\n*** End Patch\n"

port_file, log_file = sys.argv[1], sys.argv[2]
lifetime = float(sys.argv[3]) if len(sys.argv) > 3 else 900


def log(line):
    with open(log_file, "a") as f:
        f.write(line + "\n")


def text_of(value):
    """All text in a request body, to recognise what an agent asks."""
    return json.dumps(value)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_sse(self, events):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for name, data in events:
            chunk = ""
            if name:
                chunk += f"event: {name}\n"
            chunk += f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
            self.wfile.write(chunk.encode())
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self):
        log(f"GET {self.path}")
        if self.path.rstrip("/").endswith("/models"):
            self.send_json(200, {"object": "list", "data": [{"id": "e2e-model", "object": "model"}]})
        else:
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/chat/completions"):
            return self.chat(body)
        if path.endswith("/responses"):
            return self.openai_responses(body)
        if path.endswith("/messages/count_tokens"):
            log("POST count_tokens")
            return self.send_json(200, {"input_tokens": 100})
        if path.endswith("/messages"):
            return self.messages(body)
        log(f"POST {self.path} (no route)")
        self.send_json(404, {"error": {"message": f"no route {self.path}"}})

    # --- Chat Completions (aider) -------------------------------------------------------
    def chat(self, body):
        asked = text_of(body.get("messages", []))
        if "commit message" in asked.lower():
            answer, kind = "fix: make two uppercase in app.txt", "commit message"
        else:
            answer, kind = "app.txt\n```\n" + NEW_APP + "```\n", "whole-file edit"
        log(f"POST chat/completions -> {kind}")
        model = body.get("model", "e2e-model")
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            return self.send_json(200, {
                "id": "chatcmpl-e2e", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                             "finish_reason": "stop"}],
                "usage": usage,
            })
        def chunk(delta, finish=None):
            return {"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": 0,
                    "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        events = [(None, chunk({"role": "assistant", "content": ""}))]
        for i in range(0, len(answer), 16):
            events.append((None, chunk({"content": answer[i:i + 16]})))
        last = chunk({}, "stop")
        last["usage"] = usage
        events += [(None, last), (None, "[DONE]")]
        self.send_sse(events)

    # --- Responses API (Codex CLI) ------------------------------------------------------
    def openai_responses(self, body):
        items = body.get("input", [])
        if isinstance(items, str):
            items = []
        outputs = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
        # A work order that says "commit it" gets a model that commits, as Codex models do
        # when asked to.
        commit = "commit it" in text_of(items)
        if not outputs:
            cmd = "apply_patch <<'EOF'\n" + PATCH + "EOF\n"
            item = self.call("call_patch", cmd)
            kind = "exec_command apply_patch"
        elif commit and len(outputs) == 1:
            item = self.call("call_commit", "git add app.txt && git commit -q -m 'Make two uppercase'")
            kind = "exec_command git commit"
        else:
            item = {"type": "message", "role": "assistant", "id": "msg_e2e",
                    "content": [{"type": "output_text", "text": "Changed two to TWO in app.txt.", "annotations": []}]}
            kind = "final message"
        log(f"POST responses -> {kind}")
        rid = f"resp_e2e_{len(outputs)}"
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        self.send_sse([
            ("response.created", {"type": "response.created", "response": {"id": rid}}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed",
                                    "response": {"id": rid, "status": "completed", "usage": usage}}),
        ])

    @staticmethod
    def call(call_id, cmd):
        return {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id,
                "name": "exec_command", "arguments": json.dumps({"cmd": cmd})}

    # --- Anthropic Messages (Claude Code) -----------------------------------------------
    def messages(self, body):
        tools = [t.get("name") for t in body.get("tools", []) if isinstance(t, dict)]
        msgs = body.get("messages", [])
        results = 0
        for m in msgs:
            content = m.get("content")
            if m.get("role") == "user" and isinstance(content, list):
                results += sum(1 for c in content if isinstance(c, dict) and c.get("type") == "tool_result")
        # The agent starts in the repo: paths relative to it, as a model would write them.
        app = "app.txt"
        if "Read" not in tools or "Edit" not in tools:
            content = [{"type": "text", "text": "e2e"}]
            kind, stop = "side request", "end_turn"
        elif results == 0:
            content = [{"type": "tool_use", "id": "toolu_read", "name": "Read", "input": {"file_path": app}}]
            kind, stop = f"Read {app}", "tool_use"
        elif results == 1:
            content = [{"type": "tool_use", "id": "toolu_edit", "name": "Edit",
                        "input": {"file_path": app, "old_string": "two\n", "new_string": "TWO\n"}}]
            kind, stop = "Edit app.txt", "tool_use"
        else:
            content = [{"type": "text", "text": "Changed two to TWO in app.txt."}]
            kind, stop = "final message", "end_turn"
        log(f"POST messages -> {kind}")
        message = {"id": "msg_e2e", "type": "message", "role": "assistant", "model": body.get("model", "e2e"),
                   "content": content, "stop_reason": stop, "stop_sequence": None,
                   "usage": {"input_tokens": 10, "output_tokens": 5}}
        if not body.get("stream"):
            return self.send_json(200, message)
        start = dict(message, content=[], stop_reason=None)
        events = [("message_start", {"type": "message_start", "message": start})]
        for i, block in enumerate(content):
            if block["type"] == "text":
                events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": {"type": "text", "text": ""}}))
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "text_delta", "text": block["text"]}}))
            else:
                events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": dict(block, input={})}))
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "input_json_delta",
                                                                 "partial_json": json.dumps(block["input"])}}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                         "usage": {"output_tokens": 5}}))
        events.append(("message_stop", {"type": "message_stop"}))
        self.send_sse(events)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.replace(port_file + ".tmp", port_file)
threading.Timer(lifetime, server.shutdown).start()
server.serve_forever()
