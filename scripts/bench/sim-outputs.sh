#!/usr/bin/env bash
# Checksums of every output of a fixed set of simulator runs, to check that
# an engine change (e.g. for speed) leaves results byte-identical: run it
# with the binary before and after the change and diff the two files.
#
# Usage: scripts/bench/sim-outputs.sh NEST_BINARY OUT.sha
#   e.g. scripts/bench/sim-outputs.sh /tmp/nest-before before.sha
#        scripts/bench/sim-outputs.sh target/release/nest after.sha
#        diff before.sha after.sha && echo identical
#
# Covers every built-in machine and workload family, the rt-app workloads
# in workloads/, all policies and governors, two seeds, the JSON, CSV,
# per-task and timeline outputs and the recorded traces; some engine knobs
# and the linux-5.10 model;
# and runs that end early (a deadlock, fractional rt-app durations).
# Writes about 5 GB of temporary files (removed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { sed -n '2,9s/^# \{0,1\}//p' "$0"; exit 2; }
bin=$(realpath "$1")
sha=$(realpath -m "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out
mkdir -p "$out" "$tmp/w"

# Runs that end before their last task: a deadlock, and rt-app durations
# that do not fall on a tick or frequency step.
cat >"$tmp/w/deadlock.json" <<'EOF'
{ "tasks": {
  "producer": { "instance": 1, "loop": 30, "run": 300, "send": "q" },
  "consumer": { "instance": 3, "loop": 30, "recv": "q", "run": 2000 },
  "spinner": { "instance": 40, "loop": 20, "run": 3000, "sleep": 100 }
} }
EOF
for d in 0.0101 0.0123457 0.1234567 0.5000003; do
	cat >"$tmp/w/duration-$d.json" <<EOF
{ "global": { "duration": $d },
  "tasks": {
  "worker": { "instance": 60, "loop": -1, "run": [1500, 2500], "barrier": "b" },
  "sleeper": { "instance": 7, "loop": -1, "run": 700, "sleep": [50, 900] }
} }
EOF
done

all_policies=linux,nest,nest-nospin,s-local,s-move
all_governors=powersave,performance,schedutil,schedutil-hint
i=0
run() { # MACHINE WORKLOAD [OPTIONS...]: one directory of outputs
	i=$((i + 1))
	local d=$out/$i m=$1 w=$2
	shift 2
	mkdir -p "$d"
	echo "$m $w $*" >"$d/what"
	"$bin" sim -q -m "$m" -w "$w" -s 2 -f json --csv "$d" \
		--trace-dir "$d/traces" "$@" >"$d/out.json" 2>"$d/stderr"
}

machines="xeon-gold-5218-2s xeon-gold-6130-2s xeon-gold-6130-4s xeon-e7-8870-v4-4s test-guest-2s"
for m in $machines machines/test-guest-2s.json; do
	for w in configure sleepers barrier hackbench configure:steps=300 \
		barrier:phases=200,run_us=2000 workloads/*.json; do
		run "$m" "$w" -p $all_policies -g $all_governors
	done
done
for extra in --no-load-balance "--tick-hz 1000" "--tick-hz 100 --s-max 8ms --p-remove 12ms"; do
	for w in configure barrier hackbench workloads/pipe-pairs.json; do
		# shellcheck disable=SC2086 # $extra is several options
		run xeon-e7-8870-v4-4s "$w" -p linux,nest,s-move -g powersave,schedutil $extra
	done
done
# The linux-5.10 model (its fork, wakeup and load-balancing rules, and its
# wakeup preemption) under every policy: Nest's runs must not depend on it.
for m in xeon-e7-8870-v4-4s test-guest-2s; do
	for w in configure barrier hackbench workloads/pipe-pairs.json; do
		run "$m" "$w" --kernel linux-5.10 -p $all_policies -g powersave,schedutil
	done
done
for w in "$tmp"/w/*.json; do
	for m in xeon-e7-8870-v4-4s xeon-gold-5218-2s test-guest-2s; do
		for tick in 250 1000; do
			run "$m" "$w" --tick-hz $tick -p $all_policies -g $all_governors
			sed -i "s|$tmp/w/||" "$out/$i/what"
		done
	done
done
"$bin" sim -q -m xeon-e7-8870-v4-4s -w configure -s 3 >"$out/table.txt"
"$bin" sim -q --sweep -s 1 >"$out/sweep.txt"

# Paths of temporary workloads appear in the outputs: make them stable.
grep -rl "$tmp/w/" "$out" | xargs -r sed -i "s|$tmp/w/|w/|g"
(cd "$out" && find . -type f | sort | xargs sha256sum) >"$sha"
echo "$(wc -l <"$sha") files summed into $sha"
