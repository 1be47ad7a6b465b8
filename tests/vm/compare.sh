#!/usr/bin/env bash
# Guest side of the default-vs-Nest trace comparison. Records the same
# small workload with `nest trace record`, first under the kernel's default
# scheduler and then under scx_nest (started before, stopped with SIGINT
# after the recording), into OUTDIR/default.trace and OUTDIR/nest.trace,
# and prints what it saw as key=value facts for the host to judge
# (crates/vm-tests/tests/trace.rs). Never judges by itself; the analysis
# (`nest trace compare/metrics`) runs on the host.
#
# OUTDIR must be writable from the guest: `nest vm run --out OUTDIR`.
#
# Usage: compare.sh OUTDIR [COMMAND ARGS...]
#   (default workload: $NEST_BIN/nest-load churn --count 100 --work-us 300)
# Environment: NEST_BIN (binaries, default target/debug),
#   NEST_TRACE_BUFFER_KB (per-CPU trace buffer, default 8192),
#   NEST_SCX_ARGS (extra scx_nest options, e.g. --disable warm-spin).
set -u
# shellcheck source=tests/vm/lib.sh
. "$(dirname "$0")/lib.sh"
out=${1:?usage: compare.sh OUTDIR [COMMAND ARGS...]}
shift
bin=${NEST_BIN:-target/debug}
if [ $# -eq 0 ]; then
	set -- "$bin/nest-load" churn --count 100 --work-us 300
fi
buffer_kb=${NEST_TRACE_BUFFER_KB:-8192}
log=/tmp/scx_nest.log

state() { cat $sysfs/state 2>/dev/null || echo none; }
# Times sched_ext was enabled since boot: unchanged across the recording
# and enabled at both ends means enabled during the whole recording.
enable_seq() { cat $sysfs/enable_seq 2>/dev/null || echo none; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# record NAME: record the workload into $out/NAME.trace.
record() {
	local name=$1 start
	shift
	fact "${name}_state_before" "$(state)"
	fact "${name}_enable_seq_before" "$(enable_seq)"
	start=$(now_ms)
	"$bin/nest" trace record --buffer-kb "$buffer_kb" --out "$out/$name.trace" \
		-- "$@" >"/tmp/record-$name.out" 2>&1
	fact "${name}_record_exit" $?
	fact "${name}_record_ms" $(($(now_ms) - start))
	fact "${name}_state_after" "$(state)"
	fact "${name}_enable_seq_after" "$(enable_seq)"
	sed "s/^/record $name: /" "/tmp/record-$name.out"
}

fact outdir "$out"
fact workload "$*"
fact cpus "$(nproc)"
mkdir -p "$out" || fact outdir_error "cannot create $out"
rm -f "$out/default.trace" "$out/nest.trace"

record default "$@"

# shellcheck disable=SC2086 # word splitting of the options wanted
"$bin/scx_nest" ${NEST_SCX_ARGS:-} >"$log" 2>&1 &
sched=$!
wait_enabled $sched
fact state_after_attach "$(state)"
fact ops "$(cat $sysfs/root/ops 2>/dev/null || echo none)"

record nest "$@"

stop_scheduler $sched
fact state_after_exit "$(state)"
sed 's/^/scx_nest: /' "$log"
ls -l "$out"
echo "--- dmesg"
dmesg
