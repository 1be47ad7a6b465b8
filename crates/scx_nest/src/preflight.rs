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
    if let Some(release) = read_trimmed("/proc/sys/kernel/osrelease")
        && let Some(refusal) = too_old(&release)
    {
        bail!(refusal);
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

/// The oldest kernel scx_nest runs on: sched_ext's first upstream release.
/// Older kernels that carry sched_ext out of tree have another interface.
const OLDEST_KERNEL: (u32, u32) = (6, 12);

/// Why a kernel of `release` (`uname -r`) is too old for scx_nest; None
/// when it is recent enough, or when the release does not start with
/// `MAJOR.MINOR` (then the checks that follow decide).
fn too_old(release: &str) -> Option<String> {
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().ok());
    let version = (numbers.next()??, numbers.next()??);
    (version < OLDEST_KERNEL).then(|| {
        format!(
            "this kernel ({release}) is older than Linux {}.{}, the first with sched_ext's \
             interface as scx_nest uses it; run it on {}.{} or later",
            OLDEST_KERNEL.0, OLDEST_KERNEL.1, OLDEST_KERNEL.0, OLDEST_KERNEL.1
        )
    })
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn kernel_release() -> String {
    read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown release".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_before_6_12_are_refused_by_their_release() {
        for old in [
            "6.11.0-arch1",
            "6.6.30-cachyos",
            "5.10.0-32-amd64",
            "4.19.0",
        ] {
            let refusal = too_old(old).unwrap_or_else(|| panic!("{old} taken"));
            assert!(
                refusal.contains(old) && refusal.contains("older than Linux 6.12"),
                "{refusal}"
            );
        }
        for new in [
            "6.12.0",
            "6.12.48+deb13-amd64",
            "6.18.44-fc-v1272",
            "7.3.4+deb13-amd64",
        ] {
            assert_eq!(too_old(new), None, "{new}");
        }
        // Not a release we can read: left to the checks that follow.
        for odd in ["", "unknown", "6", "linux-6.1"] {
            assert_eq!(too_old(odd), None, "{odd:?}");
        }
    }
}
