#!/usr/bin/env bash
# The work-order steps of factory.yml. They live in this script, not in the workflow's
# `run:` lines, so that the very same lines can run (and be tested) anywhere.
#
#   factory-orders.sh plan
#       Prints `shards=[0,1,…]` (for $GITHUB_OUTPUT): one shard per work order, at most
#       $FACTORY_JOBS shards (default 8); `shards=[]` when there is no work order.
#   factory-orders.sh shard I N [RUN FLAGS…]
#       Runs the work orders of shard I of N as one batch, each its own run in a pooled
#       worktree (`git factory run --worktree RUN FLAGS -w ORDER…`), then `git factory push`es
#       every record to origin, also when runs failed.
#   factory-orders.sh install
#       Installs git-factory and prints the folder its binary is in (for $GITHUB_PATH). With
#       $GIT_FACTORY_VERSION and $GIT_FACTORY_SHA256 set: the release archive of that version
#       for this machine (x86_64 or aarch64 Linux), downloaded from $GIT_FACTORY_RELEASES
#       (default: the project's GitHub releases) and checked against that SHA-256 before
#       anything of it is unpacked, into $FACTORY_PREFIX (default ~/.local); `git-factory
#       --version` must then name that version. Else built from source: `cargo install --locked
#       --git $GIT_FACTORY_GIT --rev $GIT_FACTORY_REV`.
#
# The work orders are the files matching $FACTORY_ORDERS (default `orders/*.json`), in byte
# order of their names; shard I takes those whose position p has p mod N = I, so every job of
# the matrix, listing the same commit, takes its own share and no order is run twice.
#
# Exit code of `shard`: the batch's — 0 when every run PASSed, 1 when one FAILed, 2 when one
# ended in an error; push's own code when the push fails.
set -euo pipefail
export LC_ALL=C

orders() {
    local pattern="${FACTORY_ORDERS:-orders/*.json}"
    local IFS=
    shopt -s nullglob
    # Unquoted on purpose: the pattern is globbed (IFS is empty, so names are never split).
    # shellcheck disable=SC2206
    ORDERS=($pattern)
    shopt -u nullglob
}

plan() {
    orders
    local most="${FACTORY_JOBS:-8}"
    case "$most" in '' | *[!0-9]* | 0)
        echo "factory-orders.sh: FACTORY_JOBS must be a positive number, not '$most'" >&2
        exit 2
        ;;
    esac
    local n=${#ORDERS[@]}
    if [ "$n" -gt "$most" ]; then n=$most; fi
    local list="" i
    for ((i = 0; i < n; i++)); do
        list+="${list:+,}$i"
    done
    echo "shards=[$list]"
}

shard() {
    local index="$1" total="$2"
    shift 2
    case "$index$total" in *[!0-9]*)
        echo "factory-orders.sh: shard I N takes two numbers, not '$index' '$total'" >&2
        exit 2
        ;;
    esac
    if [ "$total" -eq 0 ] || [ "$index" -ge "$total" ]; then
        echo "factory-orders.sh: shard $index of $total does not exist" >&2
        exit 2
    fi
    orders
    local mine=() p code=0
    for ((p = index; p < ${#ORDERS[@]}; p += total)); do
        mine+=("${ORDERS[p]}")
    done
    # One batch (SPEC §5.2): each order its own run in a pooled worktree, --jobs at once;
    # exit 0 when all PASSed, 1 when one FAILed, 2 when one ended in an error.
    if [ "${#mine[@]}" -gt 0 ]; then
        git factory run --worktree "$@" -w "${mine[@]}" || code=$?
    fi
    # Records of failed runs are worth sharing too: push whatever happened above.
    git factory push
    exit "$code"
}

release_url="https://github.com/git-factory/git-factory/releases/download"

install_release() {
    local version="$GIT_FACTORY_VERSION" sum="$GIT_FACTORY_SHA256"
    case "$version" in '' | v* | */* | *[!0-9A-Za-z.+-]*)
        echo "factory-orders.sh: GIT_FACTORY_VERSION must be a version like 1.2.3 (no v), not '$version'" >&2
        exit 2
        ;;
    esac
    case "$sum" in *[!0-9a-f]* | '')
        echo "factory-orders.sh: GIT_FACTORY_SHA256 must be the archive's SHA-256 in lower-case hex (from the release's SHA256SUMS)" >&2
        exit 2
        ;;
    esac
    if [ ${#sum} -ne 64 ]; then
        echo "factory-orders.sh: GIT_FACTORY_SHA256 must be 64 hex digits, not ${#sum}" >&2
        exit 2
    fi
    local arch
    arch=$(uname -m)
    case "$arch" in x86_64 | aarch64) ;; *)
        echo "factory-orders.sh: no release binary for $arch; build from source (GIT_FACTORY_GIT, GIT_FACTORY_REV)" >&2
        exit 2
        ;;
    esac
    local name="git-factory-v$version-$arch-unknown-linux-musl"
    local base="${GIT_FACTORY_RELEASES:-$release_url}"
    local prefix="${FACTORY_PREFIX:-$HOME/.local}"
    local scratch
    scratch=$(mktemp -d)
    # shellcheck disable=SC2064
    trap "rm -rf '$scratch'" EXIT
    curl -fsSL --proto '=https,file' --retry 3 -o "$scratch/$name.tar.gz" "$base/v$version/$name.tar.gz"
    if ! (cd "$scratch" && echo "$sum  $name.tar.gz" | sha256sum --check --status); then
        echo "factory-orders.sh: $name.tar.gz does not have the SHA-256 GIT_FACTORY_SHA256 gives; nothing installed" >&2
        exit 1
    fi
    mkdir -p "$prefix"
    tar -xzf "$scratch/$name.tar.gz" -C "$prefix" --strip-components=1 --no-same-owner
    if ! "$prefix/bin/git-factory" --version --json | grep -q "\"version\":\"$version\""; then
        echo "factory-orders.sh: the installed git-factory is not version $version" >&2
        exit 1
    fi
    "$prefix/bin/git-factory" --version >&2
    echo "$prefix/bin"
}

install_source() {
    if [ -z "${GIT_FACTORY_GIT:-}" ] || [ -z "${GIT_FACTORY_REV:-}" ]; then
        echo "::error::fill in GIT_FACTORY_GIT (the git URL of git-factory) and GIT_FACTORY_REV (the commit to build) at the top of the workflow, or GIT_FACTORY_VERSION and GIT_FACTORY_SHA256 (a release)" >&2
        exit 1
    fi
    cargo install --locked --git "$GIT_FACTORY_GIT" --rev "$GIT_FACTORY_REV" git-factory >&2
    echo "${CARGO_HOME:-$HOME/.cargo}/bin"
}

case "${1:-}" in
plan) plan ;;
install)
    if [ -n "${GIT_FACTORY_VERSION:-}" ] || [ -n "${GIT_FACTORY_SHA256:-}" ]; then
        install_release
    else
        install_source
    fi
    ;;
shard)
    if [ $# -lt 3 ]; then
        echo "usage: factory-orders.sh shard I N [git factory run flags…]" >&2
        exit 2
    fi
    shift
    shard "$@"
    ;;
*)
    echo "usage: factory-orders.sh plan | install | shard I N [git factory run flags…]" >&2
    exit 2
    ;;
esac
