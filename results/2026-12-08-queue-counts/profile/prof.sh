#!/bin/bash
# In the guest, from the repository root: guest.sh (see README.md) for the
# pipe ping-pong and stress-ng's switch stressor, each in a folder of $NEST_OUT.
set -u
G=${G:-results/2026-12-07-host-cost/profile/scripts/guest.sh}
base=$NEST_OUT
for w in "perf bench sched pipe -l 20000" "stress-ng --switch 16 --switch-ops 50000 --temp-path /tmp"; do
	tag=$(echo $w | awk '{print $1"-"$NF}' | tr -c 'a-z0-9\n-' '_')
	mkdir -p $base/$tag
	OUT=$base/$tag WORK="$w" ROUNDS=${ROUNDS:-1} PERF=${PERF:-0} $G
done
