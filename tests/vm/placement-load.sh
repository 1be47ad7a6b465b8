#!/usr/bin/env bash
# The three workloads of the placement test (crates/vm-tests/tests/
# placement.rs), one after the other, so that compare.sh records them in
# one trace per scheduler; the host finds each one as a nest-load process
# started by this script, in this order:
#   1. a serial fork/wait chain (like a configure script): 500 children of
#      300 us each (enough 100 ms intervals that one move of the chain does
#      not decide its CPUs per 100 ms);
#   2. as many CPU-bound threads as CPUs, each needing 300 ms of CPU time;
#   3. an overload: three times as many such threads, 100 ms each.
# The pauses keep one workload's tail out of the next one's window.
#
# Usage: placement-load.sh CPUS
set -eu
cpus=${1:?usage: placement-load.sh CPUS}
bin=${NEST_BIN:-target/debug}
"$bin/nest-load" churn --count 500 --work-us 300
sleep 0.3
"$bin/nest-load" batch --tasks "$cpus" --work-ms 300
sleep 0.3
"$bin/nest-load" batch --tasks $((3 * cpus)) --work-ms 100
