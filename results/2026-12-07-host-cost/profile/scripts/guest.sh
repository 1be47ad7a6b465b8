#!/bin/bash
# In the guest: a workload under each scheduler, with BPF prog stats, interrupts, counters.
# Run from the repository root in the guest (nest vm run ... -- path/to/this).
# env: OUT, ROUNDS, SCHEDS (names: default | a file in $PBIN | a peer in $PEERS), WORK, PERF=1, ARGS_<name>
set -u
OUT=${OUT:-$NEST_OUT}
ROUNDS=${ROUNDS:-3}
PBIN=${PBIN:-/work/prof/bin}
PEERS=${PEERS:-/var/cache/nest/peers/bin}
SCHEDS=${SCHEDS:-"default scx_nest.base"}
WORK=${WORK:-"hackbench -p -g 4 -l 200"}
sysctl -qw kernel.bpf_stats_enabled=1
sysfs=/sys/kernel/sched_ext
start() {
	local args
	[ "$1" = default ] && return 0
	args=$(eval echo "\${ARGS_${1//[.-]/_}:-}")
	if [ -x "$PBIN/$1" ]; then "$PBIN/$1" $args >/tmp/$1.log 2>&1 &
	else "$PEERS/$1" $args >/tmp/$1.log 2>&1 & fi
	pid=$!
	for _ in $(seq 1 900); do [ "$(cat $sysfs/state)" = enabled ] && break; sleep 0.1; done
	sleep 1
}
stop() {
	[ "$1" = default ] && return 0
	kill -INT $pid; wait $pid
	echo "exit $1 $? state $(cat $sysfs/state)"
}
snap() {
	bpftool prog show -j > $OUT/$1.prog.json 2>/dev/null
	bpftool map dump name counters -j > $OUT/$1.counters.json 2>$OUT/$1.counters.err
	cat /proc/interrupts > $OUT/$1.irq
	cat /proc/stat > $OUT/$1.stat
}
for r in $(seq 1 $ROUNDS); do
	for s in $SCHEDS; do
		start $s
		snap r$r-$s-before
		t0=$(date +%s%N)
		if [ "${PERF:-0}" = 1 ] && [ $r = 1 ]; then
			perf record -q -a -g -e cpu-clock -F 99 -o /tmp/perf.data -- $WORK > $OUT/r$r-$s.out 2>&1
			perf report -i /tmp/perf.data --stdio --no-children --sort sym --percent-limit 0.5 -g none > $OUT/r$r-$s.perf.txt 2>&1
		else
			$WORK > $OUT/r$r-$s.out 2>&1
		fi
		t1=$(date +%s%N)
		snap r$r-$s-after
		echo "round $r $s wall_ms $(((t1 - t0) / 1000000)) $(grep -h Time: $OUT/r$r-$s.out)"
		if [ "${CYCLIC:-0}" = 1 ]; then
			taskset -c 5 sh -c 'while :; do :; done' & hog=$!
			cyclictest -q -m -t 1 -a 5 -i 2000 -l 1500 -h 30000 > $OUT/r$r-$s.cyclic 2>&1
			kill $hog; wait $hog 2>/dev/null
		fi
		stop $s
	done
done
echo done
