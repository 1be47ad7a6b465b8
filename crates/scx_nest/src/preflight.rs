//! Checks made before anything is loaded, so that a scheduler that cannot
//! run says why and leaves the system as it was.

use std::path::Path;

use anyhow::{Result, bail};

const SCHED_EXT: &str = "/sys/kernel/sched_ext";

/// Refuse to start unless we are root on a kernel with sched_ext and no
/// other sched_ext scheduler is attached, and, for S_move (`needs_timers`),
/// the kernel offers BPF timers.
pub fn check(needs_timers: bool) -> Result<()> {
    if needs_timers && read_trimmed("/sys/kernel/realtime").as_deref() == Some("1") {
        bail!(
            "--policy smove needs BPF timers for its deferred moves, and this kernel ({}) \
             is PREEMPT_RT, where the BPF verifier refuses bpf_timer; use another --policy",
            kernel_release()
        );
    }
    if !Path::new(SCHED_EXT).exists() {
        bail!(
            "this kernel ({}) has no sched_ext: {SCHED_EXT} is missing. \
             scx_nest needs Linux 6.12 or later built with CONFIG_SCHED_CLASS_EXT=y; \
             on this project's machines run it in the test guest (`nest vm run -- scx_nest`)",
            kernel_release()
        );
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("scx_nest must run as root: it loads BPF programs and replaces the scheduler");
    }
    let state = read_trimmed(&format!("{SCHED_EXT}/state"));
    if state.as_deref() != Some("disabled") {
        let ops =
            read_trimmed(&format!("{SCHED_EXT}/root/ops")).unwrap_or_else(|| "unknown".into());
        bail!(
            "another sched_ext scheduler is attached ({ops}, state {}): stop it first",
            state.unwrap_or_else(|| "unknown".into())
        );
    }
    Ok(())
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn kernel_release() -> String {
    read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown release".into())
}
