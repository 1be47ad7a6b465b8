#!/usr/bin/env bash
# Guest side of the partial-mode and migration-disabled stress test
# (crates/vm-tests/tests/partial.rs, issue 10). Reports facts and a trace:
#   1. partial mode: `scx_nest --partial OPTIONS`; fair-class CPU hogs
#      pinned one per CPU on CPUs 0..N/2-1 (at most HOG_S seconds each);
#      with them running, `nest run -- nest-load churn` (a SCHED_EXT
#      fork/wait chain) recorded into OUT/partial.nest.jsonl; the hogs' policy
#      (0: SCHED_OTHER) and the chain's (7: SCHED_EXT) are reported;
#   2. a stress with migration-disabled sections under full-mode
#      `scx_nest OPTIONS` for STRESS_S seconds (default 60): stress-ng's
#      seccomp (filters run with migration disabled), switch, race-sched,
#      affinity and yield stressors plus `nest-load affinity`, on a kernel
#      booted with preempt=full so that tasks are preempted inside those
#      sections; sched_ext's state sampled every second, its enable_seq
#      and event counters before and after, the loads' exit statuses,
#      scx_nest's statistics every 5 s.
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

# 2. Migration-disabled stress, full mode, with statistics (the
# starvation guard's count: tasks that waited over a second).
attach_scx_nest stress --stats 5s "$@"
fact stress_events_before "$(events)"
stress-ng --temp-path /tmp --seccomp 2 --switch 2 --race-sched 2 --affinity 2 --yield 2 \
	--timeout "${stress_s}s" --metrics-brief >/tmp/stress.out 2>&1 &
stress=$!
"$bin/nest-load" affinity --seconds "$stress_s" >/tmp/affinity.out 2>&1 &
affinity=$!
for _ in $(seq 1 "$stress_s"); do
	sleep 1
	fact stress_sample "$(state)"
done
wait $stress
fact stress_ng_exit $?
wait $affinity
fact stress_affinity_exit $?
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
