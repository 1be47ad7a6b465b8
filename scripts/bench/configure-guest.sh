#!/usr/bin/env bash
# Guest side of scripts/bench/configure.sh: copies the configure source
# tree to the guest's tmpfs and records `./configure` with `nest trace
# record` under the default scheduler and under scx_nest (order alternating
# with the run number), into OUTDIR/{default,nest}-RUN.nest.jsonl. Prints facts.
#
# Usage: configure-guest.sh OUTDIR SRC RUN BIN SCX_ARGS
set -u
# shellcheck source=tests/vm/lib.sh
. "$(dirname "$0")/../../tests/vm/lib.sh"
out=$1 src=$2 run=$3 bin=$4 scx_args=$5

record() {
	local name=$1 start
	rm -rf /tmp/src
	cp -a "$src" /tmp/src
	start=$(now_ms)
	"$bin/nest" trace record --buffer-kb 24576 --out "$out/$name-$run.nest.jsonl" \
		-- sh -c 'cd /tmp/src && exec ./configure' >"/tmp/configure-$name.log" 2>&1
	fact "${name}_record_exit" $?
	fact "${name}_seconds" $((($(now_ms) - start) / 1000))
	tail -n 3 "/tmp/configure-$name.log" | sed "s/^/$name: /"
}

record_nest() {
	local sched
	# shellcheck disable=SC2086 # word splitting of the options wanted
	"$bin/scx_nest" $scx_args >/tmp/scx_nest.log 2>&1 &
	sched=$!
	wait_enabled $sched
	fact nest_state_before "$(cat $sysfs/state)"
	fact nest_enable_seq_before "$(cat $sysfs/enable_seq)"
	record nest
	fact nest_state_after "$(cat $sysfs/state)"
	fact nest_enable_seq_after "$(cat $sysfs/enable_seq)"
	stop_scheduler $sched nest_sched_exit
	tail -n 5 /tmp/scx_nest.log | sed 's/^/scx_nest: /'
}

fact cpus "$(nproc)"
if [ $((run % 2)) = 1 ]; then
	record default
	record_nest
else
	record_nest
	record default
fi
dmesg | grep -E 'sched_ext|BUG|WARNING' | tail -n 5
