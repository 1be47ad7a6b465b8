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
# Usage: compare.sh OUTDIR [NEST_LOAD_ARGS...]
#   (default workload: nest-load churn --count 100 --work-us 300)
# Environment: NEST_BIN (binaries, default target/debug),
#   NEST_TRACE_BUFFER_KB (per-CPU trace buffer, default 8192).
set -u
out=${1:?usage: compare.sh OUTDIR [NEST_LOAD_ARGS...]}
shift
if [ $# -eq 0 ]; then
	set -- churn --count 100 --work-us 300
fi
bin=${NEST_BIN:-target/debug}
buffer_kb=${NEST_TRACE_BUFFER_KB:-8192}
sysfs=/sys/kernel/sched_ext
log=/tmp/scx_nest.log

fact() { printf '%s=%s\n' "$1" "$2"; }
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
		-- "$bin/nest-load" "$@" >"/tmp/record-$name.out" 2>&1
	fact "${name}_record_exit" $?
	fact "${name}_record_ms" $(($(now_ms) - start))
	fact "${name}_state_after" "$(state)"
	fact "${name}_enable_seq_after" "$(enable_seq)"
	sed "s/^/record $name: /" "/tmp/record-$name.out"
}

fact outdir "$out"
fact workload "nest-load $*"
fact cpus "$(nproc)"
mkdir -p "$out" || fact outdir_error "cannot create $out"
rm -f "$out/default.trace" "$out/nest.trace"

record default "$@"

"$bin/scx_nest" >"$log" 2>&1 &
sched=$!
# Loading BPF under software emulation takes a few seconds.
for _ in $(seq 1 300); do
	[ "$(state)" = enabled ] && break
	kill -0 $sched 2>/dev/null || break
	sleep 0.1
done
fact state_after_attach "$(state)"
fact ops "$(cat $sysfs/root/ops 2>/dev/null || echo none)"

record nest "$@"

kill -INT $sched 2>/dev/null
for _ in $(seq 1 100); do
	kill -0 $sched 2>/dev/null || break
	sleep 0.1
done
if kill -0 $sched 2>/dev/null; then
	fact sched_exit still-running
	kill -KILL $sched
else
	wait $sched
	fact sched_exit $?
fi
fact state_after_exit "$(state)"
sed 's/^/scx_nest: /' "$log"
ls -l "$out"
echo "--- dmesg"
dmesg
