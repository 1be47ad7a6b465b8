#!/usr/bin/env bash
# Guest side of the default-vs-Nest trace comparison. Records the same
# small workload with `nest trace record`, first under the kernel's default
# scheduler into OUTDIR/default.nest.jsonl, then under each scx_nest
# configuration given (started before, stopped with SIGINT after the
# recording) into OUTDIR/NAME.nest.jsonl, and prints what it saw as key=value
# facts for the host to judge (crates/vm-tests). Never judges by itself;
# the analysis (`nest trace compare/metrics`) runs on the host.
#
# OUTDIR must be writable from the guest: `nest vm run --out OUTDIR`.
#
# Usage: compare.sh [--scx NAME=OPTIONS]... OUTDIR [COMMAND ARGS...]
#   --scx NAME=OPTIONS  record under `scx_nest OPTIONS` into NAME.nest.jsonl
#                       (repeatable, in order; default: one run named
#                       nest with $NEST_SCX_ARGS)
#   (default workload: $NEST_BIN/nest-load churn --count 100 --work-us 300)
# Environment: NEST_BIN (binaries, default target/debug),
#   NEST_TRACE_BUFFER_KB (per-CPU trace buffer, default 8192),
#   NEST_SCX_ARGS (scx_nest options of the default run, e.g. --disable
#   warm-spin).
set -u
# shellcheck source=tests/vm/lib.sh
. "$(dirname "$0")/lib.sh"
usage="usage: compare.sh [--scx NAME=OPTIONS]... OUTDIR [COMMAND ARGS...]"
runs=()
while [ "${1:-}" = --scx ]; do
	runs+=("${2:?$usage}")
	shift 2
done
[ ${#runs[@]} -gt 0 ] || runs=("nest=${NEST_SCX_ARGS:-}")
out=${1:?$usage}
shift
bin=${NEST_BIN:-target/debug}
if [ $# -eq 0 ]; then
	set -- "$bin/nest-load" churn --count 100 --work-us 300
fi
buffer_kb=${NEST_TRACE_BUFFER_KB:-8192}

# record NAME COMMAND...: record the command into $out/NAME.nest.jsonl.
record() {
	local name=$1 start
	shift
	fact "${name}_state_before" "$(state)"
	fact "${name}_enable_seq_before" "$(enable_seq)"
	start=$(now_ms)
	"$bin/nest" trace record --buffer-kb "$buffer_kb" --out "$out/$name.nest.jsonl" \
		-- "$@" >"/tmp/record-$name.out" 2>&1
	fact "${name}_record_exit" $?
	fact "${name}_record_ms" $(($(now_ms) - start))
	# What the recorder must have removed: its instance and its kprobe.
	fact "${name}_instances_after" "$(ls /sys/kernel/tracing/instances | tr '\n' ' ')"
	fact "${name}_kprobes_after" "$(tr '\n' ' ' </sys/kernel/tracing/kprobe_events)"
	fact "${name}_state_after" "$(state)"
	fact "${name}_enable_seq_after" "$(enable_seq)"
	sed "s/^/record $name: /" "/tmp/record-$name.out"
}

# record_scx NAME OPTIONS COMMAND...: record under `scx_nest OPTIONS`.
record_scx() {
	local name=$1 opts=$2 log=/tmp/scx_nest-$1.log sched
	shift 2
	# shellcheck disable=SC2086 # word splitting of the options wanted
	"$bin/scx_nest" $opts >"$log" 2>&1 &
	sched=$!
	wait_enabled $sched
	fact "${name}_scx_args" "$opts"
	fact "${name}_state_after_attach" "$(state)"
	fact "${name}_ops" "$(cat $sysfs/root/ops 2>/dev/null || echo none)"
	record "$name" "$@"
	stop_scheduler $sched "${name}_sched_exit"
	fact "${name}_state_after_exit" "$(state)"
	sed "s/^/scx_nest $name: /" "$log"
}

fact outdir "$out"
fact workload "$*"
fact cpus "$(nproc)"
mkdir -p "$out" || fact outdir_error "cannot create $out"
rm -f "$out/default.nest.jsonl"
for run in "${runs[@]}"; do
	rm -f "$out/${run%%=*}.nest.jsonl"
done

record default "$@"
for run in "${runs[@]}"; do
	record_scx "${run%%=*}" "${run#*=}" "$@"
done
ls -l "$out"
echo "--- dmesg"
dmesg
