#!/usr/bin/env bash
# Set up everything the tests need (idempotently), then run every test:
# formatting, lints, host tests (policy, simulator, trace tools), and the
# VM suite, which boots a sched_ext kernel under QEMU and runs scx_nest in it.
#
# Usage: scripts/test.sh [--host-only]
#   --host-only  skip the guest kernels and the VM suite (quick local loop)
#
# The VM suite runs whole on the newest sched_ext kernel; its
# kernel-independent tests (lifecycle, robustness, fairness, partial mode)
# run again on each older series of NEST_TEST_KERNELS (default "6.12", the
# first sched_ext release, built from Debian's source once: its verifier,
# enqueue flags and real-time handling differ most; "6.12 7.2" adds sid's).
#
# Needs root (packages, tracefs, QEMU guests); CI runs it as root.
set -euo pipefail
cd "$(dirname "$0")/.."

host_only=false
matrix=${NEST_TEST_KERNELS-6.12}
for arg in "$@"; do
	case $arg in
	--host-only) host_only=true ;;
	-h | --help) sed -n '2,14s/^# \{0,1\}//p' "$0"; exit 0 ;;
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
	for series in $matrix; do
		step "guest kernel $series (fetched, or built from source once)"
		echo "using $(scripts/guest-kernel.sh --version "$series" | tail -n 1)"
	done
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
	rm -rf "${CARGO_TARGET_DIR:-target}"/debug/verifier
	failed=
	cargo test -p nest-vm -p vm-tests --no-fail-fast -- --ignored --test-threads=1 ||
		failed=" the newest kernel"
	for series in $matrix; do
		step "VM tests on Linux $series: lifecycle, robustness, fairness, partial mode"
		NEST_GUEST_KERNEL=$(scripts/guest-kernel.sh --cached --version "$series" | tail -n 1) \
			cargo test -p vm-tests --test scx_nest --test sched --test partial \
			--no-fail-fast -- --ignored --test-threads=1 || failed="$failed, $series"
	done
	step "instructions the verifier processed to load scx_nest, per kernel and program"
	cat "${CARGO_TARGET_DIR:-target}"/debug/verifier/*.tsv 2>/dev/null || echo "(none: the lifecycle tests did not get that far)"
	[ -z "$failed" ] || { echo "VM tests failed on${failed#,}" >&2; exit 1; }
fi

step "all tests passed in $((SECONDS - started)) s"
