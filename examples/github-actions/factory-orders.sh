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

case "${1:-}" in
plan) plan ;;
shard)
    if [ $# -lt 3 ]; then
        echo "usage: factory-orders.sh shard I N [git factory run flags…]" >&2
        exit 2
    fi
    shift
    shard "$@"
    ;;
*)
    echo "usage: factory-orders.sh plan | shard I N [git factory run flags…]" >&2
    exit 2
    ;;
esac
