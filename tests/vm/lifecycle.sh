#!/usr/bin/env bash
# Guest side of the scx_nest lifecycle test. Starts the scheduler, runs a
# workload while sampling /sys/kernel/sched_ext/state, stops the scheduler
# with SIGINT, and prints what it saw as key=value facts for the host to
# judge (crates/vm-tests). Never judges by itself.
#
# Usage: lifecycle.sh SECONDS SCX_NEST_ARGS...
set -u
seconds=$1
shift
bin=${NEST_BIN:-target/debug}
sysfs=/sys/kernel/sched_ext
log=/tmp/scx_nest.log

fact() { printf '%s=%s\n' "$1" "$2"; }

"$bin/scx_nest" "$@" >"$log" 2>&1 &
sched=$!

# Loading BPF under software emulation takes a few seconds.
for _ in $(seq 1 300); do
	[ "$(cat $sysfs/state)" = enabled ] && break
	kill -0 $sched 2>/dev/null || break
	sleep 0.1
done
fact state_after_attach "$(cat $sysfs/state)"
fact ops "$(cat $sysfs/root/ops 2>/dev/null || echo none)"

"$bin/nest-load" mixed --seconds "$seconds" >/tmp/load.out 2>&1 &
load=$!
while kill -0 $load 2>/dev/null; do
	fact sample "$(cat $sysfs/state)"
	sleep 1
done
wait $load
fact load_exit $?
sed 's/^/load: /' /tmp/load.out

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
fact state_after_exit "$(cat $sysfs/state)"
sed 's/^/scx_nest: /' "$log"
echo "--- dmesg"
dmesg
