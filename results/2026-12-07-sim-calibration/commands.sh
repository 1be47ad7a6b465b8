#!/usr/bin/env bash
# The figures of README.md's simulation summary and of docs/sim.md's "What
# the built-in models show", before and after the calibrated models.
# BEFORE and AFTER are `nest` binaries built (cargo build --release -p nest)
# at the commits named in README.md of this folder.
set -euo pipefail
BEFORE=${BEFORE:?path to the nest binary before}
AFTER=${AFTER:?path to the nest binary after}
OUT=${OUT:-.}
MACHINES="xeon-gold-5218-2s xeon-gold-6130-2s xeon-gold-6130-4s xeon-e7-8870-v4-4s"
WORKLOADS="configure sleepers barrier hackbench"

# The main job's simulation (scripts/run.sh), defaults.
"$BEFORE" sim -q > "$OUT/before-default.txt"
"$AFTER" sim -q > "$OUT/after-default.txt"
"$AFTER" sim --sensitivity -q > "$OUT/after-default-sensitivity.txt"

# The calibration suite, and the same comparisons on the models before.
"$AFTER" sim calibrate > "$OUT/after-calibrate.txt"
for m in xeon-gold-5218-2s xeon-gold-6130-2s; do
	"$BEFORE" sim -q -m $m -w configure:steps=1000 -p linux --kernel linux-5.10 \
		-g schedutil-hint,performance -s 3 > "$OUT/before-configure-5.9-$m.txt"
done
"$BEFORE" sim -q -m xeon-e7-8870-v4-4s -w configure -p linux --kernel linux-5.10 \
	-g schedutil-hint,performance -s 3 > "$OUT/before-configure-5.9-xeon-e7-8870-v4-4s.txt"
for m in xeon-e7-8870-v4-4s xeon-gold-5218-2s; do
	"$BEFORE" sim -q -m $m -w sleepers -p linux --kernel linux-5.10 \
		-g schedutil-hint,performance -s 3 > "$OUT/before-sleepers-5.9-$m.txt"
done

# Nest against Linux on every built-in server model and workload family,
# three governors, 3 seeds: before (one model), after (over the assumption
# ranges; the central model is the `central` column).
for m in $MACHINES; do
	for w in $WORKLOADS; do
		"$BEFORE" sim -q -m $m -w $w -p linux,nest -g powersave,performance,schedutil \
			-s 3 --csv "$OUT/before-$m-$w" > /dev/null
		"$AFTER" sim --sensitivity -q -m $m -w $w -p linux,nest \
			-g powersave,performance,schedutil -s 3 --csv "$OUT/after-$m-$w" \
			> "$OUT/after-$m-$w.txt"
		rm -f "$OUT"/before-$m-$w/{tasks,timeline}.csv "$OUT"/after-$m-$w/{tasks,timeline}.csv
	done
done
