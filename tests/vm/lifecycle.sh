#!/usr/bin/env bash
# Guest side of the scx_nest lifecycle test. Starts the scheduler, runs a
# workload while sampling /sys/kernel/sched_ext/state (as often as the
# machine allows: the verdict does not count samples), records the state
# and enable_seq before and after the load, stops the scheduler with
# SIGINT, and prints what it saw as key=value facts for the host to judge
# (crates/vm-tests). Never judges by itself.
#
# Usage: lifecycle.sh SECONDS SCX_NEST_ARGS...
set -u
# shellcheck source=tests/vm/lib.sh
. "$(dirname "$0")/lib.sh"
seconds=$1
shift
bin=${NEST_BIN:-target/debug}
log=/tmp/scx_nest.log


"$bin/scx_nest" "$@" >"$log" 2>&1 &
sched=$!

wait_enabled $sched
fact kernel "$(uname -r)"
fact state_after_attach "$(cat $sysfs/state)"
fact ops "$(cat $sysfs/root/ops 2>/dev/null || echo none)"
fact verified_insns "$(verified_insns $sched)"
fact enable_seq_before_load "$(enable_seq)"

"$bin/nest-load" mixed --seconds "$seconds" >/tmp/load.out 2>&1 &
load=$!
while kill -0 $load 2>/dev/null; do
	fact sample "$(cat $sysfs/state)"
	sleep 1
done
wait $load
fact load_exit $?
fact state_after_load "$(cat $sysfs/state)"
fact enable_seq_after_load "$(enable_seq)"
sed 's/^/load: /' /tmp/load.out

stop_scheduler $sched
fact state_after_exit "$(cat $sysfs/state)"
sed 's/^/scx_nest: /' "$log"
echo "--- dmesg"
dmesg
