#!/usr/bin/env bash
# The release archives, as .github/workflows/release.yml makes them and tests/cli/release.rs
# checks them. An archive is laid out as an installation prefix, so that unpacking it into
# ~/.local (or /usr/local) with --strip-components=1 puts each file where its reader looks:
#
#   git-factory-v<VERSION>-<TARGET>/bin/git-factory
#   git-factory-v<VERSION>-<TARGET>/share/man/man1/git-factory*.1          (man: ../share/man of PATH)
#   git-factory-v<VERSION>-<TARGET>/share/bash-completion/completions/git-factory
#   git-factory-v<VERSION>-<TARGET>/share/zsh/site-functions/_git-factory
#   git-factory-v<VERSION>-<TARGET>/share/fish/vendor_completions.d/git-factory.fish
#   git-factory-v<VERSION>-<TARGET>/share/doc/git-factory/{README.md,LICENSE-MIT,LICENSE-APACHE}
#
#   release-archive.sh version
#       Prints the package version of Cargo.toml.
#   release-archive.sh check-tag TAG
#       Fails unless TAG is v<the package version> (a release is made from its own version).
#   release-archive.sh archive BINARY TARGET OUTDIR
#       Writes OUTDIR/git-factory-v<VERSION>-<TARGET>.tar.gz with BINARY as bin/git-factory.
#       Byte-identical for the same inputs: sorted names, owner 0, every mtime
#       $SOURCE_DATE_EPOCH (default 0), gzip (level $GZIP_LEVEL, default 9) without a name or time.
#   release-archive.sh sums DIR
#       Writes DIR/SHA256SUMS: the SHA-256 of every .tar.gz in DIR, as `sha256sum --check`
#       reads it.
set -euo pipefail
export LC_ALL=C
top=$(cd "$(dirname "$0")/.." && pwd)

die() {
    echo "release-archive.sh: $*" >&2
    exit 2
}

version() {
    # The first `version = "…"` of Cargo.toml is the [package]'s.
    local v
    v=$(sed -n 's/^version = "\([^"]*\)"$/\1/p' "$top/Cargo.toml" | head -n 1)
    [ -n "$v" ] || die "no package version in Cargo.toml"
    echo "$v"
}

check_tag() {
    local tag="$1" want
    want="v$(version)"
    [ "$tag" = "$want" ] || die "the tag is '$tag' but Cargo.toml's version makes it '$want'"
}

archive() {
    local binary="$1" target="$2" out="$3"
    [ -f "$binary" ] && [ -x "$binary" ] || die "no executable at $binary"
    case "$target" in '' | */* | .*) die "not a target name: '$target'" ;; esac
    local name
    name="git-factory-v$(version)-$target"
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    stage=$(mktemp -d)
    trap 'rm -rf "$stage"' EXIT
    local root="$stage/$name"
    install -D -m 0755 "$binary" "$root/bin/git-factory"
    local page
    for page in "$top"/man/man1/*.1; do
        install -D -m 0644 "$page" "$root/share/man/man1/$(basename "$page")"
    done
    install -D -m 0644 "$top/completions/git-factory.bash" "$root/share/bash-completion/completions/git-factory"
    install -D -m 0644 "$top/completions/_git-factory" "$root/share/zsh/site-functions/_git-factory"
    install -D -m 0644 "$top/completions/git-factory.fish" "$root/share/fish/vendor_completions.d/git-factory.fish"
    local doc
    for doc in README.md LICENSE-MIT LICENSE-APACHE; do
        install -D -m 0644 "$top/$doc" "$root/share/doc/git-factory/$doc"
    done
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@${SOURCE_DATE_EPOCH:-0}" \
        -C "$stage" -cf - "$name" | gzip -n "-${GZIP_LEVEL:-9}" >"$out/$name.tar.gz"
    echo "$out/$name.tar.gz"
}

sums() {
    local dir="$1"
    cd "$dir"
    shopt -s nullglob
    local archives=(*.tar.gz)
    [ ${#archives[@]} -gt 0 ] || die "no .tar.gz in $dir"
    sha256sum -- "${archives[@]}" >SHA256SUMS
    echo "$dir/SHA256SUMS"
}

case "${1:-}" in
version) version ;;
check-tag) [ $# -eq 2 ] || die "usage: check-tag TAG"; check_tag "$2" ;;
archive) [ $# -eq 4 ] || die "usage: archive BINARY TARGET OUTDIR"; archive "$2" "$3" "$4" ;;
sums) [ $# -eq 2 ] || die "usage: sums DIR"; sums "$2" ;;
*) die "usage: release-archive.sh version | check-tag TAG | archive BINARY TARGET OUTDIR | sums DIR" ;;
esac
