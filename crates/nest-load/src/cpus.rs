//! The CPUs a thread may run on, and moving it between them.

use std::mem::{size_of, zeroed};

use anyhow::{Result, bail};

/// CPUs the calling thread may run on, in increasing order.
pub fn allowed() -> Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    // SAFETY: pid 0 is the calling thread; the size matches the set.
    if unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        bail!(
            "sched_getaffinity failed: {}",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: CPU_ISSET only reads the set.
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect();
    if cpus.is_empty() {
        bail!("this thread may run on no CPU");
    }
    Ok(cpus)
}

/// Restrict the calling thread to `cpus`.
pub fn set_allowed(cpus: &[usize]) -> Result<()> {
    try_set_allowed(cpus)
        .map_err(|err| anyhow::anyhow!("sched_setaffinity({cpus:?}) failed: {err}"))
}

/// Restrict the calling thread to `cpus`, returning the system's error
/// (EINVAL when none of `cpus` is online).
pub fn try_set_allowed(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    for &cpu in cpus {
        // SAFETY: CPU_SET writes inside the set for cpu < CPU_SETSIZE.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; the size matches the set.
    if unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The CPU the calling thread is running on.
pub fn current() -> Result<usize> {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    if cpu < 0 {
        bail!("sched_getcpu failed: {}", std::io::Error::last_os_error());
    }
    Ok(cpu as usize)
}
