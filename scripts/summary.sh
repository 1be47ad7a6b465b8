#!/usr/bin/env bash
# The main job's summary (scripts/run.sh): what the simulation and the guest
# showed, in a few lines.
#
# Usage: summary.sh RUNS_CSV GUEST_OUTPUT
#   RUNS_CSV      `nest sim --csv DIR`'s DIR/runs.csv (one row per run)
#   GUEST_OUTPUT  what scripts/guest-demo.sh printed
set -euo pipefail
runs=${1:?usage: summary.sh RUNS_CSV GUEST_OUTPUT}
guest=${2:?usage: summary.sh RUNS_CSV GUEST_OUTPUT}

# Means over seeds of Nest and Linux under each governor, Nest against Linux.
awk -F, '
	NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
	{
		key = $col["policy"] SUBSEP $col["governor"]
		time[key] += $col["completion_ms"]; energy[key] += $col["energy_j"]
		cpus[key] += $col["mean_cpus_used"]; n[key]++
		machine = $col["machine"]; workload = $col["workload"]
		if (!($col["governor"] in seen)) { seen[$col["governor"]]; order[++governors] = $col["governor"] }
	}
	END {
		printf "simulation (%s, %s workload, mean of the seeds), Nest against Linux\n", machine, workload
		printf "(time and energy: change with Nest; CPUs busy: Nest vs Linux):\n"
		for (i = 1; i <= governors; i++) {
			g = order[i]
			l = "linux" SUBSEP g; s = "nest" SUBSEP g
			if (!(l in n) || !(s in n)) continue
			printf "  %-12s time %+6.1f%% (%.0f vs %.0f ms), energy %+6.1f%% (%.1f vs %.1f J), CPUs busy %.2f vs %.2f\n",
				g, 100 * (time[s] / n[s] / (time[l] / n[l]) - 1), time[s] / n[s], time[l] / n[l],
				100 * (energy[s] / n[s] / (energy[l] / n[l]) - 1), energy[s] / n[s], energy[l] / n[l],
				cpus[s] / n[s], cpus[l] / n[l]
		}
	}' "$runs"

# guest-demo.sh prints one "CPUs doing >= 5% of the work" line per scheduler.
mapfile -t spread < <(grep -o 'CPUs doing >= 5% of the work: .*' "$guest" || true)
echo "real kernel in the emulated 2x4x2 guest, a fork/wait chain (where work runs, not how fast):"
if [ "${#spread[@]}" -ne 2 ]; then
	echo "  the guest did not report both runs: see $guest" >&2
	exit 1
fi
for i in 0 1; do
	name=$([ "$i" = 0 ] && echo "default scheduler" || echo "scx_nest")
	line=${spread[i]#CPUs doing >= 5% of the work: }
	printf '  %-18s %s CPUs did >= 5%% of the work (%s)\n' "$name:" "${line%% (*}" "$(echo "${line#* (}" | tr -d '()' | xargs)"
done
