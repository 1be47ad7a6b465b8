#!/bin/bash
# In the guest: several workloads under each scheduler, interleaved rounds, guest-time wall clock.
set -u
OUT=${OUT:-$NEST_OUT}
ROUNDS=${ROUNDS:-3}
PBIN=${PBIN:-/work/prof/bin}
PEERS=${PEERS:-/var/cache/nest/peers/bin}
SCHEDS=${SCHEDS:-"default scx_nest.h2"}
sysctl -qw kernel.bpf_stats_enabled=1
sysfs=/sys/kernel/sched_ext
declare -A W
W[hb_pipe]="hackbench -p -g 4 -l 200"
W[hb_sock]="hackbench -g 4 -l 200"
W[perf_msg]="perf bench sched messaging -g 4 -l 200"
W[perf_pipe]="perf bench sched pipe -l 50000"
W[ng_switch]="stress-ng --switch 16 --switch-ops 200000 --temp-path /tmp"
WORKS=${WORKS:-"hb_pipe hb_sock perf_msg perf_pipe ng_switch"}
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
	echo "exit $1 $? state $(cat $sysfs/state) seq $(cat $sysfs/enable_seq)"
}
snap() {
	bpftool prog show -j > $OUT/$1.prog.json 2>/dev/null
	cat /proc/stat > $OUT/$1.stat
}
for r in $(seq 1 $ROUNDS); do
	for s in $SCHEDS; do
		start $s
		seq0=$(cat $sysfs/enable_seq)
		for w in $WORKS; do
			snap r$r-$s-$w-before
			t0=$(date +%s%N)
			${W[$w]} > $OUT/r$r-$s-$w.out 2>&1
			st=$?
			t1=$(date +%s%N)
			snap r$r-$s-$w-after
			echo "RESULT round=$r sched=$s work=$w exit=$st ms=$(((t1 - t0) / 1000000)) state=$(cat $sysfs/state) seq=$(cat $sysfs/enable_seq) seq0=$seq0"
		done
		stop $s
	done
done
echo done
