#!/usr/bin/env bash
# Guest side of the scx_nest robustness test. CPUs go offline and online
# over and over, from before scx_nest attaches until the loads end, while
# scx_nest schedules a mixed load plus: nice 19 and nice -20 tasks, a
# SCHED_FIFO hog and a SCHED_RR ping-pong (RT class, not sched_ext, but
# they must coexist), many short-lived forks, and tasks hopping between CPU
# subsets. Prints key=value facts for the host to judge (crates/vm-tests);
# never judges by itself.
#
# Usage: robustness.sh SECONDS SCX_NEST_ARGS...
set -u
# shellcheck source=tests/vm/lib.sh
. "$(dirname "$0")/lib.sh"
seconds=$1
shift
bin=${NEST_BIN:-target/debug}
log=/tmp/scx_nest.log

enables() { dmesg | grep -c 'BPF scheduler "nest[^"]*" enabled'; }

rm -f /tmp/hotplug.stop /tmp/hotplug.pause /tmp/hotplug.counts
# Single CPUs of both sockets and a whole core (2 3), including the low
# CPUs where the nests start.
hotplug_loop "1" "2 3" "5" "6 7" "4" "1 5" 2>/tmp/hotplug.err &
hotplug=$!

# Hotplug while the BPF program loads, so that the kernel asks for a restart
# (its hotplug sequence number moved) and scx_nest restarts itself when a
# CPU offline at its load comes online; then a pause, every CPU online, so
# that the last restart can attach, after which hotplug resumes for the
# whole load. Attached for good: enabled, and still enabled with no new
# restart two seconds later (the deadline only catches hangs).
"$bin/scx_nest" "$@" >"$log" 2>&1 &
sched=$!
sleep 3
touch /tmp/hotplug.pause
all=$(cat /sys/devices/system/cpu/possible)
while [ "$(cat /sys/devices/system/cpu/online)" != "$all" ]; do sleep 0.1; done
for _ in $(seq 1 300); do
	kill -0 $sched 2>/dev/null || break
	restarts=$(grep -c restarting "$log")
	if [ "$(state)" = enabled ]; then
		sleep 2
		[ "$(state)" = enabled ] && [ "$(grep -c restarting "$log")" = "$restarts" ] && break
	else
		sleep 1
	fi
done
rm -f /tmp/hotplug.pause
fact state_after_attach "$(cat $sysfs/state)"
fact ops "$(cat $sysfs/root/ops 2>/dev/null || echo none)"
fact restarts_before_load "$(grep -c 'restarting' $log)"
fact enables_before_load "$(enables)"
fact enable_seq_before_load "$(enable_seq)"

# The loads. Each prints one summary line; statuses are collected below.
run_load() {
	local name=$1
	shift
	"$@" >/tmp/load.$name 2>&1 &
	eval "pid_$name=$!"
	names="${names:-} $name"
}
run_load mixed "$bin/nest-load" mixed --seconds "$seconds"
run_load nice19 nice -n 19 "$bin/nest-load" hogs --threads 2 --seconds "$seconds"
run_load nice_20 nice -n -20 "$bin/nest-load" churn --seconds "$seconds"
run_load forks1 "$bin/nest-load" churn --seconds "$seconds" --work-us 0
run_load forks2 "$bin/nest-load" churn --seconds "$seconds" --work-us 20
run_load affinity "$bin/nest-load" affinity --seconds "$seconds"
# The real-time loads report their own policy before they start: asked
# from here, the answer raced with their end (on 6.12, where real-time
# tasks are not throttled, this shell waited out a 12 s load).
with_policy='chrt -p $$; exec "$@"'
run_load fifo chrt -f 10 sh -c "$with_policy" sh "$bin/nest-load" hogs --threads 1 --seconds "$seconds"
run_load rr chrt -r 5 sh -c "$with_policy" sh "$bin/nest-load" pingpong --seconds "$seconds"

while kill -0 "$pid_mixed" 2>/dev/null; do
	fact sample "$(cat $sysfs/state)"
	sleep 1
done
status=0
for name in $names; do
	eval "wait \$pid_$name"
	rc=$?
	fact load_status "$name:$rc"
	[ $rc = 0 ] || status=$rc
	sed "s/^/load $name: /" /tmp/load.$name
done
fact load_exit $status
fact fifo_policy "$(grep -m 1 'scheduling policy' /tmp/load.fifo)"
fact rr_policy "$(grep -m 1 'scheduling policy' /tmp/load.rr)"
fact state_after_load "$(cat $sysfs/state)"
fact restarts_total "$(grep -c 'restarting' $log)"
fact enables_after_load "$(enables)"
fact enable_seq_after_load "$(enable_seq)"

touch /tmp/hotplug.stop
wait $hotplug
read -r off on errors </tmp/hotplug.counts
fact hotplug_offline "$off"
fact hotplug_online "$on"
fact hotplug_errors "$errors"
sed 's/^/hotplug: /' /tmp/hotplug.err
fact cpus_online "$(cat /sys/devices/system/cpu/online)"
fact hotplug_seq "$(cat $sysfs/hotplug_seq)"

stop_scheduler $sched
fact state_after_exit "$(cat $sysfs/state)"
sed 's/^/scx_nest: /' "$log"
echo "--- dmesg"
dmesg
