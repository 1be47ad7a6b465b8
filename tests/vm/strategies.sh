#!/usr/bin/env bash
# Guest side of the S_local / S_move placement test. Records, with
# `nest trace record`, a fork/wait chain under `scx_nest --policy slocal`
# (OUTDIR/slocal.nest.jsonl) and a parent that keeps running while its children
# run under `scx_nest --policy smove --debug-smove-at-min` (every CPU counts
# as at its minimum frequency: guests have no cpufreq), into
# OUTDIR/smove.nest.jsonl. Prints key=value facts; the host reads the traces.
#
# Usage: strategies.sh OUTDIR CHILDREN
set -u
# shellcheck source=tests/vm/lib.sh
. "$(dirname "$0")/lib.sh"
out=${1:?usage: strategies.sh OUTDIR CHILDREN}
children=${2:?usage: strategies.sh OUTDIR CHILDREN}
bin=${NEST_BIN:-target/debug}

# record NAME SCX_NEST_OPTIONS... -- NEST_LOAD_ARGS...
record() {
	local name=$1 opts=()
	shift
	while [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	shift
	"$bin/scx_nest" "${opts[@]}" >"/tmp/$name.log" 2>&1 &
	local sched=$!
	wait_enabled $sched
	fact "${name}_state" "$(cat $sysfs/state)"
	"$bin/nest" trace record --buffer-kb 8192 --out "$out/$name.nest.jsonl" \
		-- "$bin/nest-load" "$@" >"/tmp/record-$name.out" 2>&1
	fact "${name}_record_exit" $?
	fact "${name}_state_after" "$(cat $sysfs/state)"
	stop_scheduler $sched
	sed "s/^/$name: /" "/tmp/record-$name.out" "/tmp/$name.log"
}

record slocal --policy slocal -- churn --count "$children" --work-us 300
record smove --policy smove --debug-smove-at-min --stats 30s -- \
	churn --count "$children" --work-us 300 --overlap
echo "--- dmesg"
dmesg
