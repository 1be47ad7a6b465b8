#!/bin/bash
cd /work/main
bin=target/release
. tests/vm/lib.sh
ctxt() { awk '/^ctxt/ {print $2}' /proc/stat; }
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
[ "${SCHED:-nest}" = nest ] && start_scx_nest --disable warm-spin
echo state $(state)
s=${S:-20}
c0=$(ctxt); t0=$(now_ms)
cyclictest --quiet --mlockall --priority 80 --threads 2 --interval 1000 --duration $s >/tmp/rt.out 2>&1 &
$bin/nest trace record --no-wake-flags --buffer-kb 32768 --out $NEST_OUT/stress.nest.jsonl -- stress-ng --temp-path /tmp --seccomp 2 --switch 2 --race-sched 2 --affinity 2 --yield 2 --timeout ${s}s --metrics-brief > $NEST_OUT/record.out 2>&1
echo record_exit $?
c1=$(ctxt); t1=$(now_ms)
echo ctxt $((c1-c0)) ms $((t1-t0)) 
echo state $(state)
[ -n "${sched:-}" ] && { kill -INT $sched; wait $sched; }
