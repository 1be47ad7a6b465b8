//! A batch of CPU-bound tasks, each needing a fixed amount of CPU time:
//! the completion time of the batch depends on how well the scheduler
//! spreads the tasks over the CPUs (every CPU busy, none shared needlessly).

use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

/// CPU time consumed so far by the calling thread.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out pointer; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Spin until the calling thread has used `work` of CPU time.
fn spin_cpu_time(work: Duration) {
    let until = thread_cpu_time() + work;
    while thread_cpu_time() < until {
        for _ in 0..1000 {
            std::hint::spin_loop();
        }
    }
}

/// Start `tasks` threads at once, each running until it used `work` of CPU
/// time (not wall time: a task that waits for a CPU finishes later), and
/// report when the last one finished.
pub fn run(tasks: usize, work: Duration) -> Result<String> {
    if tasks == 0 {
        bail!("--tasks must be at least 1");
    }
    let start = Instant::now();
    let finished: Vec<Duration> = thread::scope(|s| {
        let workers: Vec<_> = (0..tasks)
            .map(|_| {
                s.spawn(move || {
                    spin_cpu_time(work);
                    start.elapsed()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_default())
            .collect()
    });
    let first = finished.iter().min().copied().unwrap_or_default();
    let last = finished.iter().max().copied().unwrap_or_default();
    Ok(format!(
        "batch: tasks={tasks} work_ms={} first_done_ms={} elapsed_ms={}",
        work.as_millis(),
        first.as_millis(),
        last.as_millis()
    ))
}
