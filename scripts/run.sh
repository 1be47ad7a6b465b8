#!/usr/bin/env bash
# The main job on built-in defaults, from a fresh Debian 12 machine:
#   1. set up (packages, Rust, the guest kernel) and build everything;
#   2. check the simulator's models against published measurements (nest sim
#      calibrate), then simulate Linux's placement and Nest on a Xeon Gold
#      5218 model running a configure-like workload, under three frequency
#      governors, over the model's assumption ranges (--sensitivity);
#   3. boot a 2-socket x 4-core x 2-thread sched_ext guest and run the same
#      kind of workload under the default scheduler and under scx_nest,
#      with scx_nest's live statistics.
#   4. print a short summary of both.
# Results also go to out/ (the simulation as CSV, the guest's output).
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

step "real kernel: default scheduler vs scx_nest in a 2x4x2 QEMU guest"
echo "(software emulation: compare where tasks run, not how fast)"
target/release/nest vm run --sockets 2 --cores 4 --threads 2 --numa --timeout 600s -- \
	scripts/guest-demo.sh target/release | tee out/guest-demo.txt

step "summary (details above; the simulation in out/sim/, the guest in out/guest-demo.txt)"
scripts/summary.sh out/sim out/guest-demo.txt
