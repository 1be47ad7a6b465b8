#!/usr/bin/env bash
# Guest side of scripts/bench/sched-cost.sh: the same load under each
# configuration, printing "config=NAME" then scx_nest's prog-stats lines.
set -euo pipefail
bin=$1
seconds=$2

run() {
	local name=$1
	shift
	echo "config=$name"
	"$bin/scx_nest" --prog-stats "$@" >/tmp/sched.out 2>/tmp/sched.err &
	local sched=$!
	for _ in $(seq 1 300); do
		[ "$(cat /sys/kernel/sched_ext/state)" = enabled ] && break
		sleep 0.1
	done
	"$bin/nest-load" churn --seconds "$seconds" &
	local churn=$!
	"$bin/nest-load" pingpong --seconds "$seconds"
	wait $churn
	kill -INT $sched
	wait $sched
	cat /tmp/sched.out
}

run builtin --policy builtin
run nest-nospin --disable warm-spin
run nest-blind --disable warm-spin,whole-cores
run nest
