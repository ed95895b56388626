#!/usr/bin/env bash
# End-to-end check against a real llama.cpp server: llama-cpp-python's (PyPI
# llama-cpp-python[server], built from source into a cache folder on first use, which takes a
# long while on a small machine) serving a tiny random model that scripts/tiny-gguf.py writes,
# so nothing is downloaded but the package. Not part of `cargo test` (the test
# providers::a_real_llama_cpp_python_server_… does the same where the package is installed).
#
# The server refuses `response_format: json_schema` with HTTP 500 and a multi-line message
# whose second line names the field. Expected: two requests (json_schema, then json_object),
# the drop recorded, and the random model's answer judged on its content (FAIL,
# llm_output_invalid), never a retried 500 (llm_call_failed).
# Usage: scripts/llama-cpp-e2e.sh

set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
cache=${GIT_FACTORY_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/git-factory-e2e}
mkdir -p "$cache"
venv="$cache/llama-venv"

if ! "$venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
    echo "installing llama-cpp-python[server] into $venv (built from source)"
    python3 -m venv "$venv" && "$venv/bin/pip" install -q 'llama-cpp-python[server]' ||
        { echo "llama-cpp-python: install failed"; exit 2; }
fi
(cd "$top" && cargo build -q) || exit 2
factory="$top/target/debug/git-factory"

work=$(mktemp -d "$cache/run.XXXXXX")
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
"$venv/bin/python" "$here/tiny-gguf.py" "$work/tiny.gguf" || exit 2
port=$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$venv/bin/python" -m llama_cpp.server --model "$work/tiny.gguf" --host 127.0.0.1 --port "$port" \
    --n_ctx 4096 >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 600); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.2
done

export HOME="$work/home"
mkdir -p "$HOME"
printf '[user]\n\tname = E2E User\n\temail = e2e@example.invalid\n' > "$HOME/.gitconfig"
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE OPENAI_API_KEY
repo="$work/repo"
mkdir -p "$repo" && cd "$repo" || exit 2
git init -q && printf 'one\ntwo\nthree\n' > app.txt && git add app.txt && git commit -qm init
git config factory.verify true
cat > "$work/order.json" <<EOF
{"id": "e2e-llama", "title": "Uppercase two", "intent": "Replace the line two with TWO.",
 "allowed_files": ["app.txt"], "context_files": ["app.txt"],
 "acceptance_commands": ["grep -qx TWO app.txt"]}
EOF
"$factory" run --json --max-attempts 1 --llm-model local --llm-base-url "http://127.0.0.1:$port/v1" \
    -w "$work/order.json" >"$work/summary.json" 2>"$work/stderr.txt"
code=$?
cat "$work/stderr.txt"

fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAILED: $1"; fail=1; fi; }
requests=$(grep -o '"POST /v1/chat/completions HTTP/1.1" [0-9]*' "$work/server.log" | awk '{print $NF}' | tr '\n' ' ')
read -r stage dropped < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print(s.get("ended_stage"), ",".join(s["attempts"][0].get("dropped_params", [])))
' "$work/summary.json")
check "exit code 1 (got $code)" '[ "$code" = 1 ]'
check "two requests, 500 then 200 (got $requests)" '[ "$requests" = "500 200 " ]'
check "stage llm_output_invalid (got $stage)" '[ "$stage" = llm_output_invalid ]'
check "response_format:json_schema dropped (got $dropped)" '[ "$dropped" = response_format:json_schema ]'
check "the drop is said" 'grep -q "refused response_format:json_schema" "$work/stderr.txt"'
exit $fail
