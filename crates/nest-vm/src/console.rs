//! Finding kernel trouble in a guest's serial console log.

/// What kind of problem a console line reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueKind {
    /// `Kernel panic - not syncing`.
    Panic,
    /// `BUG:` (NULL dereference, soft lockup, sleeping in atomic, ...).
    Bug,
    /// `Oops:`.
    Oops,
    /// `WARNING:` (a WARN_ON fired).
    Warning,
    /// sched_ext's watchdog saw a runnable task not run.
    SchedExtStall,
    /// sched_ext disabled the BPF scheduler because of an error.
    SchedExtError,
    /// RCU stall or hung task reports.
    Stall,
}

/// One problem found in the console log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleIssue {
    pub kind: IssueKind,
    /// 1-based line number in the log.
    pub line_number: usize,
    pub line: String,
}

/// Every problem line in `log`, in order.
pub fn scan_console(log: &str) -> Vec<ConsoleIssue> {
    log.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            classify(line).map(|kind| ConsoleIssue {
                kind,
                line_number: i + 1,
                line: line.trim_end().to_string(),
            })
        })
        .collect()
}

/// The kind of problem `line` reports, if any.
pub fn classify(line: &str) -> Option<IssueKind> {
    if line.contains("Kernel panic") {
        Some(IssueKind::Panic)
    } else if line.contains("runnable task stall") {
        Some(IssueKind::SchedExtStall)
    } else if is_sched_ext_error(line) {
        Some(IssueKind::SchedExtError)
    } else if line.contains("BUG:") {
        Some(IssueKind::Bug)
    } else if line.contains("Oops") {
        Some(IssueKind::Oops)
    } else if line.contains("WARNING:") {
        Some(IssueKind::Warning)
    } else if line.contains("detected stalls on CPUs") || line.contains("blocked for more than") {
        Some(IssueKind::Stall)
    } else {
        None
    }
}

/// `sched_ext: BPF scheduler "x" disabled (<reason>)` with a reason other
/// than an orderly unregistration or sysrq.
fn is_sched_ext_error(line: &str) -> bool {
    let Some(rest) = line.split("sched_ext:").nth(1) else {
        return false;
    };
    let Some(reason) = rest.split(" disabled (").nth(1) else {
        return false;
    };
    !(reason.starts_with("unregistered") || reason.starts_with("disabled by sysrq"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(log: &str) -> Vec<IssueKind> {
        scan_console(log).into_iter().map(|i| i.kind).collect()
    }

    #[test]
    fn clean_boot_has_no_issues() {
        let log = "[    0.000000] Linux version 7.2.13+deb14-amd64\n\
                   [    1.2] sched_ext: BPF scheduler \"bpfland\" enabled\n\
                   [    9.9] sched_ext: BPF scheduler \"bpfland\" disabled (unregistered from user space)\n";
        assert!(scan_console(log).is_empty());
    }

    #[test]
    fn finds_kernel_errors() {
        let log = "ok\n\
                   [ 3.1] BUG: kernel NULL pointer dereference, address: 0000000000000000\n\
                   [ 3.1] Oops: 0000 [#1] PREEMPT SMP NOPTI\n\
                   [ 3.2] WARNING: CPU: 1 PID: 7 at kernel/sched/ext.c:100 foo+0x1/0x2\n\
                   [ 3.3] Kernel panic - not syncing: Fatal exception\n";
        assert_eq!(
            kinds(log),
            [
                IssueKind::Bug,
                IssueKind::Oops,
                IssueKind::Warning,
                IssueKind::Panic
            ]
        );
        assert_eq!(scan_console(log)[0].line_number, 2);
    }

    #[test]
    fn finds_sched_ext_ejections() {
        let log = "[ 40.0] sched_ext: BPF scheduler \"nest\" disabled (runtime error)\n\
                   [ 40.0] sched_ext: nest: runnable task stall (kworker/0:1[9] failed to run for 30.1s)\n\
                   [ 41.0] sched_ext: BPF scheduler \"nest\" disabled (scx_bpf_error)\n";
        assert_eq!(
            kinds(log),
            [
                IssueKind::SchedExtError,
                IssueKind::SchedExtStall,
                IssueKind::SchedExtError
            ]
        );
    }

    #[test]
    fn finds_stalls() {
        let log = "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\n\
                   INFO: task sh:1 blocked for more than 120 seconds.\n";
        assert_eq!(kinds(log), [IssueKind::Stall, IssueKind::Stall]);
    }
}
