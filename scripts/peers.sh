#!/bin/sh
# Build the scx project's schedulers from crates.io into the cache, so that
# `nest bench` can compare scx_nest with them (their code is never part of
# this repository).
#
# Usage: scripts/peers.sh [--list] [CRATE ...]
#   CRATE   crates to install (default: scx_bpfland scx_cosmos scx_lavd)
#   --list  print the installed peers and exit
#
# Installs with `cargo install --locked` into $NEST_CACHE/peers/bin (found
# there by `nest bench --schedulers installed`); a peer already installed
# at the newest published version is left alone. A first build of all three
# takes about 25 minutes on 2 cores. The scx build scripts call `clang`,
# which Debian 12 only ships as clang-19: a private link is put first on
# PATH for the build.
#
# Environment:
#   NEST_CACHE   cache directory (default /var/cache/nest)
set -eu

CACHE=${NEST_CACHE:-/var/cache/nest}
ROOT=$CACHE/peers
CRATES=

say() { echo "peers: $*" >&2; }
die() { say "error: $*"; exit 1; }

for arg in "$@"; do
	case $arg in
	--list)
		ls "$ROOT/bin" 2>/dev/null | grep '^scx_' || say "no peers installed in $ROOT/bin"
		exit 0 ;;
	-h | --help) sed -n '2,17s/^# \{0,1\}//p' "$0"; exit 0 ;;
	-*) die "unknown option '$arg' (try --help)" ;;
	*) CRATES="$CRATES $arg" ;;
	esac
done
[ -n "$CRATES" ] || CRATES="scx_bpfland scx_cosmos scx_lavd"

# shellcheck source=/dev/null
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
command -v cargo >/dev/null || die "cargo not found: run scripts/setup.sh first"
command -v clang-19 >/dev/null || die "clang-19 not found: run scripts/setup.sh first"

mkdir -p "$ROOT/clang" "$ROOT/target"
ln -sf "$(command -v clang-19)" "$ROOT/clang/clang"

for crate in $CRATES; do
	say "installing $crate into $ROOT/bin (cargo install --locked; already up to date is quick)"
	PATH="$ROOT/clang:$PATH" CARGO_TARGET_DIR="$ROOT/target" \
		cargo install --locked --root "$ROOT" "$crate"
done
say "installed: $(ls "$ROOT/bin" | grep '^scx_' | tr '\n' ' ')"
echo "$ROOT/bin"
