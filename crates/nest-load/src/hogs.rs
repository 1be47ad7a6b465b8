//! CPU-bound threads.

use std::thread;
use std::time::Instant;

use anyhow::Result;

/// Spin `threads` threads until `until`; report the work done.
pub fn run(until: Instant, threads: usize) -> Result<String> {
    let spins: u64 = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let mut n = 0u64;
                    while Instant::now() < until {
                        for _ in 0..1000 {
                            std::hint::spin_loop();
                        }
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0)).sum()
    });
    Ok(format!("hogs: threads={threads} spin_blocks={spins}"))
}
