#!/usr/bin/env bash
# Guest side of the scheduler-quality test (crates/vm-tests/tests/sched.rs).
# Runs the same phases under the kernel's default scheduler
# (facts prefixed default_) and then under `scx_nest OPTIONS` (prefixed
# nest_), and reports facts and traces for the host to judge:
#   1. weights: three pairs of CPU hogs, each pair pinned to one CPU: nice 0
#      vs nice 10 (CPU 1), nice 0 vs nice 0 (CPU 2), a cgroup with
#      cpu.weight 100 vs one with 400 (CPU 3); CPU time (ns, from
#      /proc/PID/schedstat) each got over WEIGHT_S seconds after a warm-up;
#   2. 32 hogs (nest-load hogs) for 5 s, recorded into OUT/NAME-hogs.nest.jsonl;
#      how long that took and the CPU time scx_nest's own process used meanwhile;
#   3. hackbench (rt-tests), 3 runs: the time each reports;
#   4. cyclictest (SCHED_OTHER: no -p) beside a CPU hog on the same CPU,
#      recorded into OUT/NAME-cyclic.nest.jsonl; its own summary line; a
#      second round (NAME-cyclic2) after the starvation phase for Nest and
#      after scx_nest exits for the default, and a third (NAME-cyclic3) for
#      the default and then for Nest attached once more (facts prefixed
#      nest3_): default, nest, nest, default, default, nest.
# Under scx_nest also: state and enable_seq before and after, exit status;
# and, last, a SCHED_IDLE hog pinned beside 8 nice -20 hogs for STARVE_S
# seconds (default 40) after a 15 s warm-up, sampled every 2 s: the
# longest it went without running (nest_starve_longest_wait_s). By weights
# alone it waits longer and longer, past sched_ext's 30 s watchdog (the
# default scheduler starves it too, without a watchdog).
#
# Usage: sched.sh OUTDIR [SCX_NEST_OPTIONS...]
set -u
# shellcheck source=tests/vm/lib.sh
. "$(dirname "$0")/lib.sh"
out=${1:?usage: sched.sh OUTDIR [SCX_NEST_OPTIONS...]}
shift
bin=${NEST_BIN:-target/debug}
weight_s=${WEIGHT_S:-4}
starve_s=${STARVE_S:-40}
cg=/sys/fs/cgroup
# Nanoseconds task PID has run (first field of /proc/PID/schedstat).
ran_ns() { awk '{ print $1 }' "/proc/$1/schedstat" 2>/dev/null || echo missing; }
spin='while :; do :; done'

# The cgroups of the weight phase: cpu controller enabled in the root.
setup_cgroups() {
	mountpoint -q $cg || mount -t cgroup2 cgroup2 $cg
	echo +cpu >$cg/cgroup.subtree_control 2>/dev/null
	fact cgroup_controllers "$(cat $cg/cgroup.subtree_control)"
	for w in 100 400; do
		mkdir -p $cg/nest-w$w
		echo $w >$cg/nest-w$w/cpu.weight
		fact cgroup_w${w}_weight "$(cat $cg/nest-w$w/cpu.weight 2>/dev/null || echo missing)"
	done
}

weights() {
	local name=$1 pids=() i before=() after=()
	taskset -c 1 sh -c "$spin" & pids+=($!)
	taskset -c 1 nice -n 10 sh -c "$spin" & pids+=($!)
	taskset -c 2 sh -c "$spin" & pids+=($!)
	taskset -c 2 sh -c "$spin" & pids+=($!)
	for w in 100 400; do
		sh -c "echo \$\$ >$cg/nest-w$w/cgroup.procs && exec taskset -c 3 sh -c '$spin'" &
		pids+=($!)
	done
	sleep 1
	for i in "${!pids[@]}"; do before[i]=$(ran_ns "${pids[i]}"); done
	sleep "$weight_s"
	for i in "${!pids[@]}"; do after[i]=$(ran_ns "${pids[i]}"); done
	fact "${name}_cgroup_of_w400" "$(cat "/proc/${pids[5]}/cgroup")"
	fact "${name}_policy_of_nice10" "$(awk '{ print $41 }' "/proc/${pids[1]}/stat")"
	kill "${pids[@]}"
	wait "${pids[@]}" 2>/dev/null
	local keys=(nice0 nice10 same_a same_b cg100 cg400)
	for i in "${!pids[@]}"; do
		fact "${name}_ns_${keys[i]}" $((after[i] - before[i]))
	done
}

starvation() {
	local pids=() idle last now waited=0 longest=0
	for _ in 1 2 3 4 5 6 7 8; do
		taskset -c 6 nice -n -20 sh -c "$spin" &
		pids+=($!)
	done
	taskset -c 6 chrt --idle 0 sh -c "$spin" &
	idle=$!
	sleep 15
	last=$(ran_ns $idle)
	for _ in $(seq 1 $((starve_s / 2))); do
		sleep 2
		now=$(ran_ns $idle)
		if [ "$now" = "$last" ]; then waited=$((waited + 2)); else waited=0; fi
		[ $waited -gt $longest ] && longest=$waited
		last=$now
	done
	fact nest_starve_longest_wait_s $longest
	kill "${pids[@]}" $idle
	wait "${pids[@]}" $idle 2>/dev/null
}

record() {
	local name=$1
	shift
	"$bin/nest" trace record --buffer-kb 8192 --out "$out/$name.nest.jsonl" -- "$@" \
		>"/tmp/record-$name.out" 2>&1
	fact "${name//-/_}_record_exit" $?
	sed "s/^/record $name: /" "/tmp/record-$name.out"
}

# CPU time (ms) of the attached scx_nest's process, all threads; 0 with
# none attached.
sched_cpu_ms() {
	if [ -n "${sched:-}" ] && [ -r "/proc/$sched/stat" ]; then
		# Fields 14 and 15: utime and stime, in clock ticks.
		awk -v hz="$(getconf CLK_TCK)" '{ printf "%d\n", ($14 + $15) * 1000 / hz }' \
			"/proc/$sched/stat"
	else
		echo 0
	fi
}

phases() {
	local name=$1 cpu_ms start
	weights "$name"
	cpu_ms=$(sched_cpu_ms) start=$(now_ms)
	record "$name-hogs" "$bin/nest-load" hogs --threads 32 --seconds 5
	fact "${name}_hogs_sched_cpu_ms" "$(($(sched_cpu_ms) - cpu_ms))"
	fact "${name}_hogs_ms" "$(($(now_ms) - start))"
	for _ in 1 2 3; do
		hackbench -g 2 -f 5 -l 200 >/tmp/hackbench.out 2>&1
		fact "${name}_hackbench_exit" $?
		fact "${name}_hackbench_s" "$(awk '/^Time:/ { print $2 }' /tmp/hackbench.out)"
	done
	cyclic "$name-cyclic"
}

# cyclictest pinned beside a CPU hog on CPU 5, recorded as NAME.
cyclic() {
	record "$1" sh -c "taskset -c 5 sh -c '$spin' & hog=\$!
		cyclictest -q -m -t 1 -a 5 -i 2000 -l 1500 >/tmp/cyclic.out 2>&1
		status=\$?; kill \$hog; cat /tmp/cyclic.out; exit \$status"
}

fact cpus "$(nproc)"
mkdir -p "$out"
setup_cgroups
fact default_state "$(state)"
phases default

attach_scx_nest nest "$@"
fact nest_scx_args "$*"
phases nest
starvation
cyclic nest-cyclic2
detach_scx_nest nest
cyclic default-cyclic2
cyclic default-cyclic3
attach_scx_nest nest3 "$@"
cyclic nest-cyclic3
detach_scx_nest nest3
sed 's/^/scx_nest: /' /tmp/scx_nest.log | tail -n 40
ls -l "$out"
echo "--- dmesg"
dmesg
