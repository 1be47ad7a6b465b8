//! A fixed amount of CPU work, timed: the same binary timed natively and in
//! an emulated guest gives the emulation's slowdown, by which the guest's
//! scripts scale the scheduler's time constants for placement measurements
//! (`tests/vm/lib.sh`, `emulation_slowdown`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};

/// Time `iterations` steps of a xorshift generator `repeats` times and
/// report the fastest: the machine's speed when nothing interferes.
pub fn run(iterations: u64, repeats: u32) -> Result<String> {
    ensure!(iterations > 0, "--iterations must be positive");
    ensure!(repeats > 0, "--repeats must be positive");
    let best = (0..repeats)
        .map(|_| time(iterations))
        .min()
        .unwrap_or_default();
    Ok(format!(
        "calibrate: iterations={iterations} best_ns={}",
        best.as_nanos()
    ))
}

fn time(iterations: u64) -> Duration {
    let start = Instant::now();
    black_box(work(black_box(iterations)));
    start.elapsed()
}

/// The work: a data dependency from each step to the next, so neither the
/// compiler nor the CPU can skip or overlap it.
fn work(iterations: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_the_work_and_its_time() {
        let line = run(1000, 2).unwrap();
        assert!(
            line.starts_with("calibrate: iterations=1000 best_ns="),
            "{line}"
        );
        let ns: u64 = line.rsplit('=').next().unwrap().parse().unwrap();
        assert!(ns > 0);
    }

    #[test]
    fn refuses_no_work() {
        assert!(run(0, 1).is_err());
        assert!(run(1, 0).is_err());
    }
}
