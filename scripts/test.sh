#!/usr/bin/env bash
# Set up everything the tests need (idempotently), then run every test:
# formatting, lints, host tests (policy, simulator, trace tools), and the
# VM suite, which boots a sched_ext kernel under QEMU and runs scx_nest in it.
#
# Usage: scripts/test.sh [--host-only]
#   --host-only  skip the guest kernel and the VM suite (quick local loop)
#
# Needs root (packages, tracefs, QEMU guests); CI runs it as root.
set -euo pipefail
cd "$(dirname "$0")/.."

host_only=false
for arg in "$@"; do
	case $arg in
	--host-only) host_only=true ;;
	-h | --help) sed -n '2,8s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) echo "test.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
	esac
done

step() { printf '\n==> %s\n' "$*"; }
started=$SECONDS

step "setup (system packages, Rust toolchain)"
scripts/setup.sh
# shellcheck source=/dev/null
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

if ! $host_only; then
	step "guest kernel with sched_ext"
	echo "using $(scripts/guest-kernel.sh | tail -n 1)"
	step "Debian 11's 5.10 kernel (the reference of nest validate)"
	echo "using $(scripts/guest-kernel.sh --linux-5.10 | tail -n 1)"
fi

step "rustfmt"
cargo fmt --all --check

step "clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "layering: the scheduler links nothing above the policy"
if cargo tree -p scx_nest -e normal --prefix none | grep -E '^(nest-trace|nest-sim|resvg) '; then
	echo "scx_nest depends on the crates above (see README, Layout)" >&2
	exit 1
fi

step "host tests"
cargo test --workspace

step "host tests that need root, tracefs, protoc and chromium"
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
cargo test -p nest-trace -- --ignored --skip throughput

step "host tests that need the Debian mirror (GNU hello's source, fetched once into /var/cache/nest)"
cargo test -p nest --test bench_cli -- --ignored

if ! $host_only; then
	step "VM suite (QEMU guests, software emulation)"
	cargo build -p scx_nest -p nest-load -p nest
	cargo test -p nest-vm -p vm-tests --no-fail-fast -- --ignored --test-threads=1
fi

step "all tests passed in $((SECONDS - started)) s"
