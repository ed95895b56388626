#!/usr/bin/env bash
# End-to-end check of the README's --agent-edits recipes with the real agents: aider (PyPI
# aider-chat), Codex CLI (npm @openai/codex) and Claude Code (npm @anthropic-ai/claude-code),
# installed into a cache folder, each talking to a loopback model server that answers in its
# own wire format (scripts/agents-e2e-server.py). Not part of `cargo test`: it installs
# packages and takes minutes. Usage: scripts/agents-e2e.sh [aider|codex|claude]...
#
# Every scenario runs `git factory run` on a fresh repo whose app.txt has a line `two` that
# the work order wants as `TWO`, then checks: the verdict, that only app.txt changed in the
# user's tree, that no .gitignore appeared, and that the user's branch did not move.

set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
cache=${GIT_FACTORY_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/git-factory-e2e}
agents=${*:-aider codex claude}
mkdir -p "$cache"

say() { printf '\n== %s\n' "$*"; }

install() {
    if [ ! -x "$cache/aider-venv/bin/aider" ]; then
        say "installing aider-chat into $cache/aider-venv"
        python3 -m venv "$cache/aider-venv" && "$cache/aider-venv/bin/pip" install -q aider-chat ||
            { echo "aider: install failed"; return 1; }
    fi
    if [ ! -x "$cache/codex/node_modules/.bin/codex" ]; then
        say "installing @openai/codex into $cache/codex"
        npm install -s --prefix "$cache/codex" @openai/codex || { echo "codex: install failed"; return 1; }
    fi
    if [ ! -x "$cache/claude/node_modules/.bin/claude" ]; then
        say "installing @anthropic-ai/claude-code into $cache/claude"
        npm install -s --prefix "$cache/claude" @anthropic-ai/claude-code ||
            { echo "claude: install failed"; return 1; }
    fi
}

install || exit 2
(cd "$top" && cargo build -q) || exit 2
factory="$top/target/debug/git-factory"
echo "aider $("$cache/aider-venv/bin/aider" --version 2>/dev/null | tail -1)"
echo "$("$cache/codex/node_modules/.bin/codex" --version 2>/dev/null)"
echo "claude $("$cache/claude/node_modules/.bin/claude" --version 2>/dev/null)"

work=$(mktemp -d "$cache/run.XXXXXX")
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
python3 "$here/agents-e2e-server.py" "$work/port" "$work/server.log" 1800 2>"$work/server.err" &
server=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port") || exit 2
echo "model server on 127.0.0.1:$port"

# The user's home: outside /tmp (which the sandbox replaces), with a git identity as every
# user has (aider writes one into the repo's config when git has none).
export HOME="$work/home"
mkdir -p "$HOME"
printf '[user]\n\tname = E2E User\n\temail = e2e@example.invalid\n' > "$HOME/.gitconfig"
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE
# Offline: no update checks, analytics or model-price downloads (loopback is all there is).
export AIDER_CHECK_UPDATE=false AIDER_ANALYTICS=false LITELLM_LOCAL_MODEL_COST_MAP=True
export DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
export PATH="$cache/aider-venv/bin:$cache/codex/node_modules/.bin:$cache/claude/node_modules/.bin:$PATH"
# Keys in the environment, never as flags: the command line is stored in run_summary.json.
export OPENAI_API_KEY=e2e-not-a-key ANTHROPIC_API_KEY=e2e-not-a-key
export ANTHROPIC_BASE_URL="http://127.0.0.1:$port"
export CODEX_HOME="$HOME/.codex"
mkdir -p "$CODEX_HOME"
cat > "$CODEX_HOME/config.toml" <<EOF
model = "e2e-model"
model_provider = "e2e"

[model_providers.e2e]
name = "e2e loopback"
base_url = "http://127.0.0.1:$port/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
EOF

failures=0
# scenario NAME INTENT_EXTRA FLAGS AGENT_ARGV [git config key=value]...
scenario() {
    local name=$1 extra=$2 flags=$3 argv=$4
    shift 4
    local repo="$work/$name"
    git init -q -b main "$repo"
    printf 'one\ntwo\nthree\n' > "$repo/app.txt"
    git -C "$repo" add app.txt && git -C "$repo" commit -qm init
    git -C "$repo" config factory.verify true
    for kv in "$@"; do git -C "$repo" config --add "${kv%%=*}" "${kv#*=}"; done
    local head
    head=$(git -C "$repo" rev-parse HEAD)
    cat > "$work/$name.json" <<EOF
{"id": "e2e-$name", "title": "Make two uppercase", "intent": "In app.txt, change the line two to TWO.$extra",
 "allowed_files": ["app.txt"], "context_files": ["app.txt"], "acceptance_commands": ["grep -qx TWO app.txt"]}
EOF
    say "$name: git factory run $flags --agent-edits '$argv'"
    # shellcheck disable=SC2086
    (cd "$repo" && timeout 600 "$factory" run --json $flags -w "$work/$name.json" --agent-edits "$argv" \
        >"$work/$name.out" 2>"$work/$name.err")
    local code=$?
    grep -E '^(attempt|  (SE|TR|PO|✗)|PASS|FAIL|ERROR|warning|error|hint)' "$work/$name.err" | sed 's/^/   /'
    local verdict status ignore moved
    verdict=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["verdict"], [a.get("touched_files") for a in s["attempts"]])' "$work/$name.out" 2>/dev/null)
    status=$(git -C "$repo" status --porcelain --untracked-files=all | tr '\n' ';')
    ignore=$([ -e "$repo/.gitignore" ] && echo "present" || echo "absent")
    moved=$([ "$(git -C "$repo" rev-parse HEAD)" = "$head" ] && echo "unmoved" || echo "MOVED")
    echo "   -> exit $code; $verdict; status: $status .gitignore $ignore; main $moved"
    if [ "$code" != 0 ] || [ "$status" != " M app.txt;" ] || [ "$ignore" != absent ] || [ "$moved" != unmoved ]; then
        echo "   !! $name failed; agent output:"
        local id
        id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$work/$name.out" 2>/dev/null)
        git -C "$repo" show "refs/factory/$id:attempt_1/agent_stderr.txt" 2>/dev/null | tail -15 | sed 's/^/      /'
        failures=$((failures + 1))
    fi
}

for agent in $agents; do
    case $agent in
    aider)
        base="aider --model openai/e2e-model --openai-api-base http://127.0.0.1:$port/v1"
        scenario aider "" "" "$base --yes-always --message-file {prompt_file} app.txt"
        scenario aider-no-auto-commits "" "" "$base --yes-always --no-auto-commits --message-file {prompt_file} app.txt"
        scenario aider-sandbox "" "--sandbox" "$base --yes-always --message-file {prompt_file} app.txt" \
            "factory.agentWritable=~/.aider" "factory.agentWritable=~/.cache"
        ;;
    codex)
        scenario codex "" "" "codex exec --sandbox workspace-write"
        scenario codex-commits " Then commit it." "" "codex exec --sandbox workspace-write"
        # Under git factory's --sandbox, Codex's own sandbox is left off: it cannot set itself
        # up inside ours, and ours already confines it.
        scenario codex-sandbox "" "--sandbox" "codex exec --sandbox danger-full-access" \
            "factory.agentWritable=$CODEX_HOME"
        ;;
    claude)
        scenario claude-sandbox "" "--sandbox" "claude -p --permission-mode acceptEdits" \
            "factory.agentWritable=~/.claude" "factory.agentWritable=~/.claude.json"
        ;;
    esac
done

say "model server requests"
sort "$work/server.log" | uniq -c
say "$failures scenario(s) failed"
[ "$failures" = 0 ]
