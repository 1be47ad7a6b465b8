#!/usr/bin/env bash
# Guest side of the partial-mode and migration-disabled stress test
# (crates/vm-tests/tests/partial.rs). Reports facts and a trace:
#   1. partial mode: `scx_nest --partial OPTIONS`; fair-class CPU hogs
#      pinned one per CPU on CPUs 0..N/2-1 (at most HOG_S seconds each);
#      with them running, `nest run -- nest-load churn` (a SCHED_EXT
#      fork/wait chain) recorded into OUT/partial.nest.jsonl; the hogs' policy
#      (0: SCHED_OTHER) and the chain's (7: SCHED_EXT) are reported;
#   2. a mixed stress under full-mode `scx_nest OPTIONS` for STRESS_S
#      seconds (default 60): stress-ng's seccomp (filters run with
#      migration disabled), switch, race-sched, affinity and yield
#      stressors plus `nest-load affinity`, on a kernel booted with
#      preempt=full so that tasks are preempted inside those sections;
#      beside them two periodic SCHED_FIFO threads (cyclictest), CPUs going
#      offline and online in a loop, and stress-ng's processes moved
#      between two cgroups of different cpu.weight every half second;
#      sched_ext's state sampled every second, its enable_seq and event
#      counters before and after, the loads' exit statuses, the hotplug
#      and move counts, scx_nest's statistics every 5 s; stress-ng
#      recorded into OUT/stress.nest.jsonl (its exit status in the
#      trace's meta).
#
# Usage: partial.sh OUTDIR [SCX_NEST_OPTIONS...]
set -u
# shellcheck source=tests/vm/lib.sh
. "$(dirname "$0")/lib.sh"
out=${1:?usage: partial.sh OUTDIR [SCX_NEST_OPTIONS...]}
shift
bin=${NEST_BIN:-target/debug}
stress_s=${STRESS_S:-60}
hog_s=${HOG_S:-60}
events() { cat $sysfs/root/events 2>/dev/null | tr -s ' \n' ' ' || echo none; }
spin='while :; do :; done'

mkdir -p "$out"
cpus=$(nproc)
fact cpus "$cpus"
fact preempt "$(cat /sys/kernel/debug/sched/preempt 2>/dev/null || echo unknown)"
fact root_files "$(ls $sysfs/root 2>/dev/null | tr '\n' ' ')"

# 1. Partial mode.
attach_scx_nest partial --partial "$@"
fact partial_switch_all "$(cat $sysfs/switch_all 2>/dev/null || echo missing)"
hogs=()
for cpu in $(seq 0 $((cpus / 2 - 1))); do
	timeout "$hog_s" taskset -c "$cpu" sh -c "$spin" &
	hogs+=($!)
done
fact hog_cpus "0-$((cpus / 2 - 1))"
sleep 1
fact hog_policy "$(awk '{ print $41 }' "/proc/${hogs[0]}/stat")"
"$bin/nest" trace record --buffer-kb 8192 --out "$out/partial.nest.jsonl" -- \
	"$bin/nest" run -- sh -c 'awk "{ print \"chain_policy=\" \$41 }" /proc/$$/stat
		exec '"$bin"'/nest-load churn --count 100 --work-us 300' >/tmp/record-partial.out 2>&1
fact partial_record_exit $?
grep '^chain_policy=' /tmp/record-partial.out
grep -v '^chain_policy=' /tmp/record-partial.out | sed 's/^/record partial: /'
kill "${hogs[@]}" 2>/dev/null
wait "${hogs[@]}" 2>/dev/null
detach_scx_nest partial

# Move stress-ng's processes (its workers too) between two cgroups of
# different weight every half second until /tmp/moves.stop exists; the
# count of moves to /tmp/moves.count.
cgroup_moves() {
	local root=/sys/fs/cgroup moves=0 side=a pid
	echo +cpu >$root/cgroup.subtree_control
	mkdir -p $root/nest-a $root/nest-b
	echo 50 >$root/nest-a/cpu.weight
	echo 400 >$root/nest-b/cpu.weight
	while [ ! -e /tmp/moves.stop ]; do
		for pid in $(pgrep stress-ng); do
			echo "$pid" >$root/nest-$side/cgroup.procs 2>/dev/null && moves=$((moves + 1))
		done
		if [ $side = a ]; then side=b; else side=a; fi
		sleep 0.5
	done
	echo $moves >/tmp/moves.count
}

# 2. Mixed stress, full mode, with statistics (the starvation guard's
# count: tasks that waited over a second).
attach_scx_nest stress --stats 5s "$@"
fact stress_events_before "$(events)"
# Recorded, so that the host can see how long each task waited (the
# wake-flags probe is left out: it would trap every wake-up).
"$bin/nest" trace record --no-wake-flags --buffer-kb 16384 --out "$out/stress.nest.jsonl" -- \
	stress-ng --temp-path /tmp --seccomp 2 --switch 2 --race-sched 2 --affinity 2 --yield 2 \
	--timeout "${stress_s}s" --metrics-brief >/tmp/stress.out 2>&1 &
stress=$!
"$bin/nest-load" affinity --seconds "$stress_s" >/tmp/affinity.out 2>&1 &
affinity=$!
# Real-time tasks that wake every millisecond. Not a CPU-bound one: before
# the kernel's deadline server for sched_ext (6.19), an RT task that keeps
# a CPU starves the sched_ext tasks that can only run there (per-CPU
# kernel threads) until the watchdog ejects any BPF scheduler; the
# robustness test runs such a hog for less than the watchdog's timeout.
cyclictest --quiet --mlockall --priority 80 --threads 2 --interval 1000 \
	--duration "$stress_s" >/tmp/rt.out 2>&1 &
rt=$!
rm -f /tmp/hotplug.stop /tmp/hotplug.pause /tmp/moves.stop
# Single CPUs and whole cores of both sockets.
hotplug_loop "1" "2 3" "9" "6 7" "12" "1 13" 2>/tmp/hotplug.err &
hotplug=$!
cgroup_moves 2>/tmp/moves.err &
moves=$!
sleep 0.5
# Its measuring threads are real-time; its main thread is not.
fact stress_rt_policy "$(for thread in /proc/"$(pgrep -n -x cyclictest)"/task/*; do
	chrt -p "${thread##*/}"
done 2>&1 | grep -m 1 SCHED_FIFO || echo none)"
for _ in $(seq 1 "$stress_s"); do
	sleep 1
	fact stress_sample "$(state)"
done
wait $stress
fact stress_record_exit $?
for load in affinity rt; do
	eval "wait \$$load"
	fact "stress_${load}_exit" $?
done
touch /tmp/hotplug.stop /tmp/moves.stop
wait $hotplug $moves
read -r off on errors </tmp/hotplug.counts
fact stress_hotplug "$off $on $errors"
fact stress_cgroup_moves "$(cat /tmp/moves.count)"
fact stress_cpus_online "$(cat /sys/devices/system/cpu/online)"
sed 's/^/hotplug: /' /tmp/hotplug.err
sed 's/^/cgroup moves: /' /tmp/moves.err | head -n 5
fact stress_events_after "$(events)"
detach_scx_nest stress
sed 's/^/stress-ng: /' /tmp/stress.out | tail -n 12
sed 's/^/affinity: /' /tmp/affinity.out
sed 's/^/scx_nest: /' /tmp/scx_nest.log | tail -n 400
# The whole log (with the kernel's dump if the scheduler was ejected),
# which the host prints when a check fails.
cp /tmp/scx_nest.log "$out/scx_nest.log"
echo "--- dmesg"
dmesg
