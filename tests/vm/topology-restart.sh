#!/usr/bin/env bash
# Guest side of the topology restart test: a CPU offline when scx_nest
# loads has no LLC, core or socket in its tables, so when it comes online
# scx_nest must restart itself (SCX_ECODE_ACT_RESTART) and then schedule
# on it. Prints key=value facts for the host to judge.
#
# Usage: topology-restart.sh CPU
set -u
# shellcheck source=tests/vm/lib.sh
. "$(dirname "$0")/lib.sh"
cpu=$1
bin=${NEST_BIN:-target/debug}
log=/tmp/scx_nest.log
online=/sys/devices/system/cpu/cpu$cpu/online

echo 0 >"$online"
fact cpus_online_at_load "$(cat /sys/devices/system/cpu/online)"
"$bin/scx_nest" >"$log" 2>&1 &
sched=$!
wait_enabled $sched
fact enables_before "$(enable_seq)"
echo 1 >"$online"
# The restart: the old instance exits, the new one loads (seconds here).
for _ in $(seq 1 600); do
	grep -q restarting "$log" && [ "$(state)" = enabled ] && break
	kill -0 $sched 2>/dev/null || break
	sleep 0.1
done
wait_enabled $sched
fact restarts "$(grep -c restarting "$log")"
fact enables_after "$(enable_seq)"
fact state_after_online "$(state)"
# A task pinned to the CPU runs there under scx_nest.
taskset -c "$cpu" sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i + 1)); done; echo done' >/tmp/pinned.out
fact pinned_run "$(cat /tmp/pinned.out)"
# /proc/self/sched is grep's own: "ext.enabled : 1" under sched_ext.
fact pinned_on_scx "$(taskset -c "$cpu" grep -c 'ext.enabled *: *1' /proc/self/sched)"
stop_scheduler $sched
sed 's/^/scx_nest: /' "$log"
echo "--- dmesg"
dmesg
