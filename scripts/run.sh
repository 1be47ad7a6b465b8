#!/usr/bin/env bash
# The main job on built-in defaults, from a fresh Debian 12 machine:
#   1. set up (packages, Rust, the guest kernel) and build everything;
#   2. check the simulator's models against published measurements (nest sim
#      calibrate), then simulate Linux's placement and Nest on a Xeon Gold
#      5218 model running a configure-like workload, under three frequency
#      governors, over the model's assumption ranges (--sensitivity);
#   3. run a real configure script (zlib's, from its Debian source package)
#      under the default scheduler and under scx_nest in a 2-socket x
#      4-core x 2-thread sched_ext guest, three boots with the order
#      alternating, traced, and measure where its process tree ran
#      (scripts/bench/configure.sh);
#   4. print a short summary of both.
# Results also go to out/ (the simulation as CSV, the guest's traces and
# figures in out/guest-configure).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "setup (system packages, Rust toolchain)"
scripts/setup.sh
# shellcheck source=/dev/null
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

step "guest kernel with sched_ext"
scripts/guest-kernel.sh | tail -n 1

step "build (release)"
cargo build --release -p nest -p scx_nest -p nest-load
mkdir -p out

step "simulator calibration: published hardware and default-scheduler behaviour (nest sim calibrate)"
target/release/nest sim calibrate

step "simulation: Linux vs Nest, configure-like workload, Xeon Gold 5218, over the model's assumptions (nest sim --sensitivity)"
target/release/nest sim --sensitivity --csv out/sim

step "real kernel: zlib's ./configure under the default scheduler and scx_nest, 2x4x2 QEMU guest, 3 rounds, traced"
echo "(software emulation: compare where tasks run, not how fast)"
NEST_BIN=target/release scripts/bench/configure.sh --package zlib --runs 3 \
	--out out/guest-configure | tee out/guest-configure.txt

step "summary (details above; the simulation in out/sim/, the guest in out/guest-configure/)"
scripts/summary.sh out/sim out/guest-configure.txt
