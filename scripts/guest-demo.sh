#!/usr/bin/env bash
# Runs in the guest (see scripts/run.sh): a configure-like fork/wait chain
# under the default scheduler, then under scx_nest with its statistics.
# For each run it prints the CPUs that did at least 5% of the work, read
# from /proc/stat (scripts/summary.sh quotes these two lines).
set -euo pipefail
bin=${1:-target/release}
load=("$bin/nest-load" churn --count 300 --work-us 500)

# Busy jiffies per CPU, one "cpuN busy" line each.
busy() { awk '/^cpu[0-9]/ { print $1, $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

# Run the load and report which CPUs did its work.
measure() {
	busy >/tmp/before
	"${load[@]}"
	busy >/tmp/after
	join /tmp/before /tmp/after | awk '
		{ d[$1] = $3 - $2; total += $3 - $2 }
		END {
			for (c in d) if (total > 0 && d[c] >= 0.05 * total) { n++; used = used " " c }
			printf "CPUs doing >= 5%% of the work: %d (%s )\n", n, used
		}'
}

echo "--- default scheduler"
measure

# Warm spinning is switched off here: under emulation all vCPUs share one
# host thread, so a spinning vCPU slows the others down; its effect on
# frequency is what the simulation above shows.
echo "--- scx_nest (warm spinning off in the emulated guest)"
"$bin/scx_nest" --disable warm-spin --stats 1s &
sched=$!
for _ in $(seq 1 300); do
	[ "$(cat /sys/kernel/sched_ext/state)" = enabled ] && break
	sleep 0.1
done
measure
kill -INT $sched
wait $sched
