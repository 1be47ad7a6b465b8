//! A thread that moves itself between CPU subsets (single CPUs, each half,
//! all) and checks that it only ever runs where it is allowed.
//!
//! CPU hotplug is tolerated: a subset whose CPUs are all offline cannot be
//! set (skipped), and when the CPU of a single-CPU subset goes offline the
//! kernel widens the thread's affinity and moves it (counted, not an error).

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::{cpus, spin_for};

/// The subsets to cycle through: every single CPU, both halves, all.
fn subsets(all: &[usize]) -> Vec<Vec<usize>> {
    let mut sets: Vec<Vec<usize>> = all.iter().map(|&cpu| vec![cpu]).collect();
    let (low, high) = all.split_at(all.len() / 2);
    sets.extend(
        [low.to_vec(), high.to_vec(), all.to_vec()]
            .into_iter()
            .filter(|s| !s.is_empty()),
    );
    sets
}

/// What happened to one move.
enum Move {
    Done,
    /// No CPU of the subset was online.
    Offline,
    /// The kernel widened the affinity: its CPU went offline meanwhile.
    Broken,
}

/// Move onto `set`, spin a little, and check where we ran.
fn move_to(set: &[usize]) -> Result<Move> {
    if let Err(err) = cpus::try_set_allowed(set) {
        if err.raw_os_error() == Some(libc::EINVAL) {
            return Ok(Move::Offline);
        }
        bail!("sched_setaffinity({set:?}) failed: {err}");
    }
    spin_for(Duration::from_millis(1));
    let cpu = cpus::current()?;
    if set.contains(&cpu) {
        return Ok(Move::Done);
    }
    if cpus::allowed()? != set {
        return Ok(Move::Broken);
    }
    bail!("affinity violated: running on CPU {cpu}, allowed {set:?}");
}

pub fn run(until: Instant) -> Result<String> {
    let all = cpus::allowed()?;
    let sets = subsets(&all);
    let (mut changes, mut offline, mut broken) = (0u64, 0u64, 0u64);
    'outer: loop {
        for set in &sets {
            if Instant::now() >= until {
                break 'outer;
            }
            match move_to(set)? {
                Move::Done => changes += 1,
                Move::Offline => offline += 1,
                Move::Broken => broken += 1,
            }
        }
    }
    cpus::set_allowed(&all)?;
    Ok(format!(
        "affinity: changes={changes} subsets={} offline={offline} broken_by_hotplug={broken}",
        sets.len()
    ))
}
