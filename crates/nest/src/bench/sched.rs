//! One sched_ext scheduler's life around a run: start it, wait until the
//! kernel says it is attached, check after the run that it stayed (no
//! ejection, no re-attach), stop it and check the kernel went back to its
//! default scheduler. What `/sys/kernel/sched_ext` says is read by
//! [`crate::run::Status`].

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::process::{Child, Waited, describe};
use super::suite::Scheduler;
use crate::run::{SYSFS, Status};

/// A scheduler that stops takes this long at most (a deadline that only
/// catches hangs: under emulation switching every task back took more than
/// 60 s once, see tests/vm/lib.sh).
const STOP_GRACE: Duration = Duration::from_secs(180);
/// How long the kernel may stay "disabling" after the scheduler exited.
const DISABLE_WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

pub fn status() -> Status {
    Status::read(Path::new(SYSFS))
}

/// Is the scheduler whose ops start with `ops` attached?
fn attached(status: &Status, ops: &str) -> bool {
    status.state.as_deref() == Some("enabled")
        && status.ops.as_deref().is_some_and(|o| o.starts_with(ops))
}

/// Has the attach that started when `enable_seq` was `seq_before`
/// finished? The kernel counts an enable only after the state says
/// "enabled" (seen in the guest: enabled with the old count, then +1), so
/// the count taken as the run's reference must have moved first.
fn attach_finished(now: &Status, ops: &str, seq_before: Option<&str>) -> bool {
    attached(now, ops) && (seq_before.is_none() || now.enable_seq.as_deref() != seq_before)
}

/// What keeps sched_ext cells from running here, if anything: no
/// sched_ext in the kernel, not root, or a scheduler already attached.
pub fn refusal(is_root: bool, sysfs_exists: bool, status: &Status) -> Option<String> {
    if !sysfs_exists {
        return Some(format!(
            "this kernel has no sched_ext ({SYSFS} is missing): sched_ext schedulers need \
             Linux 6.12 or later with CONFIG_SCHED_CLASS_EXT=y (run only `--schedulers default`, \
             or use `nest vm run`)"
        ));
    }
    if !is_root {
        return Some("attaching sched_ext schedulers needs root: run nest bench as root".into());
    }
    match status.state.as_deref() {
        Some("disabled") => None,
        state => Some(format!(
            "another sched_ext scheduler is attached (state {}, ops {}): stop it first, \
             so that the default scheduler is the default",
            state.unwrap_or("unknown"),
            status.ops.as_deref().unwrap_or("unknown")
        )),
    }
}

/// A running sched_ext scheduler.
pub struct Attached {
    child: Child,
    pub log: PathBuf,
    ops: String,
    enable_seq: Option<String>,
    /// Lines of the kernel log before it started: an ejection's reason is
    /// looked for after them, not in an earlier run's messages.
    pub kernel_log_from: usize,
}

/// Start `scheduler` and wait (up to `deadline`, a hang catcher) until
/// the kernel says it is attached. The error says why it did not attach.
pub fn attach(
    scheduler: &Scheduler,
    log: PathBuf,
    deadline: Duration,
    stop: &AtomicBool,
) -> Result<Attached> {
    let seq_before = status().enable_seq;
    let kernel_log_from = dmesg().lines().count();
    let mut child = Child::spawn(&scheduler.command, &log, None)?;
    let until = Instant::now() + deadline;
    loop {
        let now = status();
        if attach_finished(&now, &scheduler.ops, seq_before.as_deref()) {
            return Ok(Attached {
                child,
                log,
                ops: scheduler.ops.clone(),
                enable_seq: now.enable_seq,
                kernel_log_from,
            });
        }
        match child.wait_until((Instant::now() + POLL).min(until), stop) {
            Waited::Exited(status, _) => {
                bail!(
                    "exited with {} before attaching: {}",
                    describe(status),
                    last_lines(&read(&log), 3)
                )
            }
            Waited::Interrupted => {
                // It may attach any moment: a clean detach, not SIGKILL.
                child.stop(libc::SIGINT, STOP_GRACE);
                bail!("interrupted while attaching")
            }
            Waited::TimedOut if Instant::now() >= until => {
                child.stop(libc::SIGINT, STOP_GRACE);
                bail!(
                    "not attached after {deadline:?} (state {}, ops {}): {}",
                    now.state.as_deref().unwrap_or("unknown"),
                    now.ops.as_deref().unwrap_or("none"),
                    last_lines(&read(&log), 3)
                );
            }
            Waited::TimedOut => {}
        }
    }
}

impl Attached {
    /// Is it still the attached scheduler, attached since [`attach`]?
    /// `None` if so, else what the kernel says now.
    pub fn still_attached(&mut self) -> Option<String> {
        let now = status();
        let same_seq = now.enable_seq == self.enable_seq;
        if attached(&now, &self.ops) && same_seq && self.child.exited().is_none() {
            return None;
        }
        Some(format!(
            "state {}, enable_seq {} -> {}",
            now.state.as_deref().unwrap_or("unknown"),
            self.enable_seq.as_deref().unwrap_or("none"),
            now.enable_seq.as_deref().unwrap_or("none")
        ))
    }

    /// Stop it (SIGINT; SIGKILL after a generous grace) and wait until the
    /// kernel is back on its default scheduler. Returns how it exited, and
    /// an error if sched_ext did not return to "disabled".
    pub fn detach(mut self) -> Result<String> {
        let (exit, killed) = self.child.stop(libc::SIGINT, STOP_GRACE);
        let how = if killed {
            format!("{} (SIGKILL after {STOP_GRACE:?})", describe(exit))
        } else {
            describe(exit)
        };
        let until = Instant::now() + DISABLE_WAIT;
        loop {
            let state = status().state.unwrap_or_else(|| "unknown".into());
            if state == "disabled" {
                return Ok(how);
            }
            if Instant::now() >= until {
                bail!(
                    "sched_ext still {state} {DISABLE_WAIT:?} after the scheduler exited ({how})"
                );
            }
            std::thread::sleep(POLL);
        }
    }
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The last `n` non-empty lines of `text`, joined by " | ".
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let tail = &lines[lines.len().saturating_sub(n)..];
    if tail.is_empty() {
        "no output".into()
    } else {
        tail.join(" | ")
    }
}

/// Why a scheduler was ejected: the kernel's last "disabled (reason)"
/// line with the sched_ext lines after it, and what the scheduler said
/// about its exit (scx schedulers print `EXIT: ...`).
pub fn ejection_reason(scheduler_log: &str, dmesg: &str) -> String {
    let lines: Vec<&str> = dmesg.lines().collect();
    let kernel = lines
        .iter()
        .rposition(|l| l.contains("BPF scheduler") && l.contains("disabled ("))
        .map(|i| {
            let detail: Vec<&str> = lines[i..]
                .iter()
                .filter(|l| l.contains("sched_ext:"))
                .take(2)
                .map(|l| l.split_once("sched_ext:").map_or(*l, |(_, r)| r).trim())
                .collect();
            format!("kernel: {}", detail.join("; "))
        });
    let said: Vec<&str> = scheduler_log
        .lines()
        .map(str::trim)
        // Not the event counters scx schedulers dump (`SCX_EV_..._EXITING`).
        .filter(|l| !l.starts_with("SCX_EV_"))
        .filter(|l| {
            l.contains("EXIT:") || l.contains("stall") || l.to_lowercase().contains("error")
        })
        .take(2)
        .collect();
    let scheduler = (!said.is_empty()).then(|| format!("scheduler: {}", said.join(" | ")));
    match (kernel, scheduler) {
        (Some(k), Some(s)) => format!("{k}; {s}"),
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => "no reason found in dmesg or the scheduler's output".into(),
    }
}

/// The kernel log from line `from` on (all of it if it has fewer lines:
/// the ring buffer wrapped).
pub fn dmesg_since(from: usize) -> String {
    let log = dmesg();
    let lines: Vec<&str> = log.lines().collect();
    let from = if from < lines.len() { from } else { 0 };
    lines[from..].join("\n")
}

/// The kernel log, for an ejection's reason.
pub fn dmesg() -> String {
    std::process::Command::new("dmesg")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: &str, ops: &str) -> Status {
        Status {
            state: Some(state.into()),
            ops: Some(ops.into()),
            ..Status::default()
        }
    }

    #[test]
    fn attached_means_enabled_under_the_expected_ops() {
        assert!(attached(&status("enabled", "nest_0.1.0"), "nest"));
        assert!(!attached(&status("enabled", "bpfland_1"), "nest"));
        assert!(!attached(&status("enabling", "nest"), "nest"));
    }

    #[test]
    fn an_attach_is_finished_once_the_kernel_counted_it() {
        let seq = |state: &str, seq: &str| Status {
            enable_seq: Some(seq.into()),
            ..status(state, "nest_0.1.0")
        };
        assert!(!attach_finished(&seq("enabled", "3"), "nest", Some("3")));
        assert!(attach_finished(&seq("enabled", "4"), "nest", Some("3")));
        assert!(!attach_finished(&seq("enabling", "4"), "nest", Some("3")));
        let no_counter = status("enabled", "nest_0.1.0");
        assert!(attach_finished(&no_counter, "nest", None));
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let off = status("disabled", "");
        assert_eq!(refusal(true, true, &off), None);
        assert!(refusal(true, false, &off).unwrap().contains("no sched_ext"));
        assert!(refusal(false, true, &off).unwrap().contains("needs root"));
        let other = refusal(true, true, &status("enabled", "bpfland_1.0")).unwrap();
        assert!(
            other.contains("another sched_ext scheduler is attached"),
            "{other}"
        );
        assert!(other.contains("bpfland_1.0"), "{other}");
    }

    #[test]
    fn the_ejection_reason_comes_from_the_kernel_and_the_scheduler() {
        let dmesg = "\
[    1.0] sched_ext: BPF scheduler \"nest_0.1\" enabled
[    5.0] sched_ext: BPF scheduler \"nest_0.1\" disabled (runtime error)
[    5.0] sched_ext: nest_0.1: runnable task stall (nest-load[123] failed to run for 2.1s)
[    5.1] random: other line";
        let log =
            "stats...\nEXIT: runtime error (runnable task stall)\nSCX_EV_ENQ_SKIP_EXITING: 0\n";
        let reason = ejection_reason(log, dmesg);
        assert_eq!(
            reason,
            "kernel: BPF scheduler \"nest_0.1\" disabled (runtime error); \
             nest_0.1: runnable task stall (nest-load[123] failed to run for 2.1s); \
             scheduler: EXIT: runtime error (runnable task stall)"
        );
        assert!(ejection_reason("", "").starts_with("no reason found"));
    }

    #[test]
    fn last_lines_skip_blank_lines() {
        assert_eq!(last_lines("a\n\nb\nc\n\n", 2), "b | c");
        assert_eq!(last_lines("", 2), "no output");
    }
}
