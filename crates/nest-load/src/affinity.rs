//! A thread that moves itself between CPU subsets (single CPUs, each half,
//! all) and checks that it only ever runs where it is allowed.

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

pub fn run(until: Instant) -> Result<String> {
    let all = cpus::allowed()?;
    let sets = subsets(&all);
    let mut changes = 0u64;
    'outer: loop {
        for set in &sets {
            if Instant::now() >= until {
                break 'outer;
            }
            cpus::set_allowed(set)?;
            spin_for(Duration::from_millis(1));
            let cpu = cpus::current()?;
            if !set.contains(&cpu) {
                bail!("affinity violated: running on CPU {cpu}, allowed {set:?}");
            }
            changes += 1;
        }
    }
    cpus::set_allowed(&all)?;
    Ok(format!(
        "affinity: changes={changes} subsets={}",
        sets.len()
    ))
}
