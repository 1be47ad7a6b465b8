#!/bin/bash
# In the guest, from the repository root: guest.sh (see README.md) for one
# workload ($WORK, default the pipe ping-pong), in $NEST_OUT/w.
set -u
base=$NEST_OUT
w=${WORK:-"perf bench sched pipe -l 20000"}
mkdir -p $base/w
OUT=$base/w WORK="$w" ROUNDS=${ROUNDS:-1} PERF=0 ${G:-results/2026-12-07-host-cost/profile/scripts/guest.sh}
