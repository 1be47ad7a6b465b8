#!/bin/sh
# Run a nest bench suite in the emulated 2 sockets x 4 cores x 2 threads
# NUMA guest (the short forms paper-guest and peers-guest are sized for
# it): fetches the Debian sources the suite needs on the host first (the
# guest has no network but sees the host's cache, and the peers that
# scripts/peers.sh installed there), boots the guest with the results
# directory shared, and runs `nest bench --suite SUITE` in it. The
# results (results.json, report.html, figures/, logs/) land in
# OUT/results on the host; the bench's table is printed.
#
# Under emulation every vCPU is a turn of one host thread: times say where
# work ran, not how fast (docs/reference/bench.md, "Under emulation"); the guest has
# no cpufreq or RAPL, so governors are ignored with a note.
#
# Usage: scripts/bench/guest-suite.sh SUITE [--out DIR] [--timeout DURATION]
#                                     [--guest-clock CLOCK]
#                                     [-- NEST_BENCH_OPTIONS...]
#   SUITE         paper-guest, peers-guest, or any suite
#   --out DIR     host directory for the results (default out/guest-SUITE)
#   --timeout D   the guest's deadline, only for hangs (default 21600s)
#   --guest-clock host (default) or icount: with icount the guest's time
#                 is its instruction count (1 ns each), the same whatever
#                 the host's load, so times compare across runs; it costs
#                 every instruction alike, so it is a count of work, not
#                 of a real machine's time (`nest vm run --help`)
#   -- ...        more `nest bench` options (--runs 1 --warmup 0, --trace)
#
# Environment: NEST_BIN (binaries, default target/release: `cargo build
# --release -p nest -p scx_nest -p nest-load`), NEST_CACHE.
set -eu
cd "$(dirname "$0")/../.."

BIN=${NEST_BIN:-target/release}
TIMEOUT=21600s
CLOCK=host

say() { echo "guest-suite: $*" >&2; }
die() { say "error: $*"; exit 1; }

[ $# -gt 0 ] || die "usage: $0 SUITE [--out DIR] [--timeout D] [--guest-clock C] [-- NEST_BENCH_OPTIONS...]"
case $1 in -h | --help) sed -n '2,29s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
SUITE=$1
shift
OUT=out/guest-$SUITE
while [ $# -gt 0 ]; do
	case $1 in
	--out) OUT=${2:?--out needs a directory}; shift 2 ;;
	--timeout) TIMEOUT=${2:?--timeout needs a duration}; shift 2 ;;
	--guest-clock) CLOCK=${2:?--guest-clock needs host or icount}; shift 2 ;;
	--) shift; break ;;
	*) die "unknown argument '$1' (try --help)" ;;
	esac
done
[ -x "$BIN/nest" ] || die "no $BIN/nest: build it (cargo build --release -p nest -p scx_nest -p nest-load)"
BIN=$(cd "$BIN" && pwd)

say "fetching the Debian sources $SUITE needs (on the host: the guest has no network)"
"$BIN/nest" bench --suite "$SUITE" --dry-run >/dev/null || die "bad suite $SUITE"
for package in $("$BIN/nest" bench --suite "$SUITE" --dry-run |
	sed -n 's/.*`nest bench fetch \([^`]*\)`.*/\1/p' | sort -u); do
	"$BIN/nest" bench fetch "$package" >/dev/null
done

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -rf "$OUT/results"
say "running nest bench --suite $SUITE $* in the 2x4x2 guest; results in $OUT/results"
start=$(date +%s)
status=0
"$BIN/nest" vm run --sockets 2 --cores 4 --threads 2 --numa --mem-mib 3072 \
	--timeout "$TIMEOUT" --guest-clock "$CLOCK" --out "$OUT" -- \
	"$BIN/nest" bench --suite "$SUITE" -o "$OUT/results" "$@" || status=$?
say "guest done in $(($(date +%s) - start)) s, exit status $status"
exit $status
