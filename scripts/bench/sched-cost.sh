#!/usr/bin/env bash
# Benchmark: what one scheduling decision of scx_nest costs, against the
# minimal baseline (scx_nest --policy builtin: sched_ext's default idle
# selection, same queues), measured by the kernel's BPF run-time statistics
# in one guest run. Prints ns per callback run and the ratios to builtin,
# for Nest with and without warm spinning (spinning vCPUs share the one
# emulation thread, which inflates every other vCPU's times) and for the
# published, SMT-blind placement (--disable whole-cores) without spinning.
#
# Usage: scripts/bench/sched-cost.sh [SECONDS_PER_POLICY]   (default 8)
# The guest is emulated (TCG): absolute times are inflated, compare ratios.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-8}

cargo build --release -p nest -p scx_nest -p nest-load
target/release/nest vm run --sockets 2 --cores 2 --threads 2 --numa --timeout 600s -- \
	scripts/bench/sched-cost-guest.sh target/release "$seconds" | tee /tmp/sched-cost.out |
	grep -v -e '^prog-stats:' -e '^config=' || true

awk '
	/^config=/ { config = substr($1, 8) }
	/^prog-stats:/ {
		split($3, r, "="); split($4, t, "=")
		if (r[2] > 0) per_run[config, $2] = t[2] / r[2]
		progs[$2] = 1
	}
	function ratio(x, base) { return base > 0 ? sprintf("%.2f", x / base) : "-" }
	END {
		printf "\nns per run (ratio to builtin)\n%-22s %12s %20s %20s %20s\n", "callback", "builtin", "nest, no spin", "SMT-blind, no spin", "nest"
		for (p in progs) {
			b = per_run["builtin", p]; s = per_run["nest-nospin", p]
			o = per_run["nest-blind", p]; n = per_run["nest", p]
			printf "%-22s %12.0f %12.0f (%5s) %12.0f (%5s) %12.0f (%5s)\n", p, b, s, ratio(s, b), o, ratio(o, b), n, ratio(n, b)
		}
	}' /tmp/sched-cost.out
