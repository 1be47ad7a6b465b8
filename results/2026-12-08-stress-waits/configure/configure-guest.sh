#!/bin/bash
cd /work/main; bin=target/release; . tests/vm/lib.sh
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
start_scx_nest --disable warm-spin --trace-placements; echo state $(state)
for r in 1 2; do
rm -rf /tmp/src; cp -a /var/cache/nest/src/hello /tmp/src
$bin/nest trace record --buffer-kb 24576 --out $NEST_OUT/conf$r.nest.jsonl -- sh -c 'cd /tmp/src && exec ./configure' > $NEST_OUT/conf$r.log 2>&1
done
echo state $(state)
kill -INT $sched; wait
