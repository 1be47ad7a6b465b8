//! Fork/wait churn: a parent that forks one short-lived child at a time,
//! waits for it, and does a little work of its own between children, like
//! the shell running a configure script.

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::{process, spin_for};

/// When a churn stops.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    At(Instant),
    After(u64),
}

impl Stop {
    fn reached(self, forks: u64) -> bool {
        match self {
            Stop::At(until) => Instant::now() >= until,
            Stop::After(count) => forks >= count,
        }
    }
}

/// Fork children that each spin for `work` until `stop`. Serially, the
/// parent waits for each child and spins half as long between children;
/// with `overlap` it keeps running (spinning as long as a child) while its
/// children run, and waits for them all at the end: a waker that keeps
/// running, the case where placing wakees on the waker's CPU goes wrong.
pub fn run(stop: Stop, work: Duration, overlap: bool) -> Result<String> {
    let start = Instant::now();
    let mut forks = 0u64;
    let mut running = Vec::new();
    while !stop.reached(forks) {
        let pid = process::fork(|| {
            spin_for(work);
            0
        })?;
        if overlap {
            running.push(pid);
            spin_for(work);
        } else {
            process::wait_ok(pid)?;
            spin_for(work / 2);
        }
        forks += 1;
    }
    for pid in running {
        process::wait_ok(pid)?;
    }
    Ok(format!(
        "churn: forks={forks} work_us={} overlap={overlap} elapsed_ms={}",
        work.as_micros(),
        start.elapsed().as_millis()
    ))
}
