#!/usr/bin/env bash
# Guest side of the nest bench test. Runs `nest bench --suite quick`
# (results in OUTDIR/quick), a suite whose schedulers fail to attach or get
# ejected mid-run (OUTDIR/failing), the partial-mode variant
# (OUTDIR/partial), and the refusals: not root, another
# scheduler attached. Prints key=value facts and the bench's table; the
# host reads the result files and judges.
#
# Usage: bench.sh OUTDIR
set -u
# shellcheck source=tests/vm/lib.sh
. "$(dirname "$0")/lib.sh"
out=${1:?usage: bench.sh OUTDIR}
bin=${NEST_BIN:-target/debug}

start=$SECONDS
"$bin/nest" bench --suite quick --warmup 1 --runs 2 -o "$out/quick" 2>"$out/quick.progress"
fact quick_exit $?
fact quick_seconds $((SECONDS - start))
fact state_after_quick "$(cat $sysfs/state)"

# scx_nest with an unknown option exits before attaching; with the stall
# debug option the kernel's watchdog ejects it while nest-load runs. Each
# cell also gets a traced run (--trace): only the default one has a trace.
cat >/tmp/failing.toml <<'TOML'
[[scheduler]]
name = "default"

[[scheduler]]
name = "bad-flag"
command = ["scx_nest", "--no-such-flag"]

[[scheduler]]
name = "starving"
command = ["scx_nest", "--watchdog", "2s", "--debug-stall-comm", "nest-load"]

[[workload]]
name = "pipe"
command = ["nest-load", "pingpong", "--seconds", "0.3"]
metric = "round_trips="
higher_is_better = true
TOML
"$bin/nest" bench --suite /tmp/failing.toml --warmup 0 --runs 1 --trace -o "$out/failing" \
	2>"$out/failing.progress"
fact failing_exit $?
fact state_after_failing "$(cat $sysfs/state)"

# Partial mode: scx_nest --partial with the workload started by `nest run`,
# which puts it in SCHED_EXT (policy 7; field 41 of /proc/PID/stat) where
# the default scheduler's cell runs it as SCHED_OTHER (0); nest-load, found
# beside nest and not on PATH, must reach `nest run` as a path.
cat >/tmp/partial.toml <<'TOML'
[[scheduler]]
name = "default"

[[scheduler]]
name = "nest-partial"

[[workload]]
name = "policy"
command = ["awk", "{ print \"policy=\" $41 }", "/proc/self/stat"]

[[workload]]
name = "chain"
command = ["nest-load", "churn", "--count", "10", "--work-us", "200"]
TOML
"$bin/nest" bench --suite /tmp/partial.toml --warmup 0 --runs 1 -o "$out/partial" \
	2>"$out/partial.progress"
fact partial_exit $?
fact state_after_partial "$(cat $sysfs/state)"

attempt nonroot setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$bin/nest" bench --suite quick -o /tmp/nonroot
"$bin/scx_nest" >/tmp/other.log 2>&1 &
other=$!
wait_enabled $other
seq=$(enable_seq)
attempt other_attached "$bin/nest" bench --suite quick -o /tmp/other
fact other_unchanged "$([ "$(cat $sysfs/state)" = enabled ] && [ "$(enable_seq)" = "$seq" ] && echo yes || echo no)"
stop_scheduler $other other_exit
fact other_results_written "$([ -e /tmp/other/results.json ] && echo yes || echo no)"
echo "--- dmesg"
dmesg
