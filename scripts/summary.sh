#!/usr/bin/env bash
# The main job's summary (scripts/run.sh): what the simulation and the guest
# showed, in a few lines.
#
# Usage: summary.sh SIM_DIR GUEST_OUTPUT
#   SIM_DIR       `nest sim --sensitivity --csv DIR`'s DIR: runs.csv (the
#                 central model's runs) and sensitivity.csv (each gain over
#                 the model's assumption ranges)
#   GUEST_OUTPUT  what scripts/bench/configure.sh printed
set -euo pipefail
sim=${1:?usage: summary.sh SIM_DIR GUEST_OUTPUT}
guest=${2:?usage: summary.sh SIM_DIR GUEST_OUTPUT}

# Nest's improvement over Linux under each governor (median [low, high]
# over the assumption variants), and the CPUs each kept busy (central
# model, mean over seeds).
awk -F, '
	FNR == 1 { for (i = 1; i <= NF; i++) col[FILENAME, $i] = i; next }
	function c(name) { return $col[FILENAME, name] }
	FILENAME ~ /runs.csv$/ {
		key = c("policy") SUBSEP c("governor")
		cpus[key] += c("mean_cpus_used"); n[key]++
		machine = c("machine"); workload = c("workload")
		seeds[c("seed")]
		next
	}
	c("policy") == "nest" && c("against") == "linux" {
		g = c("governor")
		if (!(g in seen)) { seen[g]; order[++governors] = g }
		gain[g, c("metric")] = sprintf("%+.1f%% [%+.1f, %+.1f]", 100 * c("median"), 100 * c("low"), 100 * c("high"))
	}
	END {
		for (s in seeds) nseeds++
		printf "simulation (%s, %s workload, %d seeds), Nest'"'"'s improvement over Linux\n", machine, workload, nseeds
		printf "(+ = better; median [low, high] over the model'"'"'s assumption ranges, nest sim --sensitivity):\n"
		for (i = 1; i <= governors; i++) {
			g = order[i]
			l = "linux" SUBSEP g; s = "nest" SUBSEP g
			printf "  %-12s time %s, energy %s, CPUs busy %.2f vs %.2f\n",
				g, gain[g, "time"], gain[g, "energy"], cpus[s] / n[s], cpus[l] / n[l]
		}
	}' "$sim/runs.csv" "$sim/sensitivity.csv"

# configure.sh ends with the means over its runs: "figure default nest",
# each "mean [lowest, highest]".
figure() { grep -E "^$1 " "$guest" | sed -E "s/^$1 +//"; }
cpus=$(figure cpus_per_interval)
sockets=$(figure sockets_per_interval)
runs=$(grep -o '^(runs: .*)' "$guest" || true)
if [ -z "$cpus" ] || [ -z "$sockets" ]; then
	echo "the guest's configure runs did not finish: see $guest" >&2
	exit 1
fi
# "mean [lo, hi]" of the default scheduler (1) or scx_nest (2).
column() { echo "$1" | awk -v c="$2" '{ print $(3 * c - 2), $(3 * c - 1), $(3 * c) }'; }
echo "real kernel in the emulated 2x4x2 guest, zlib's ./configure, its process"
echo "tree per 100 ms (where work runs, not how fast; mean [lowest, highest run]):"
printf '  %-18s %-26s %s\n' "" "CPUs" "sockets"
printf '  %-18s %-26s %s\n' "default scheduler:" "$(column "$cpus" 1)" "$(column "$sockets" 1)"
printf '  %-18s %-26s %s\n' "scx_nest:" "$(column "$cpus" 2)" "$(column "$sockets" 2)"
echo "  $runs"
