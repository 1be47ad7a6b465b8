//! Judging guest runs of scx_nest.
//!
//! The guest scripts under `tests/vm/` only report facts, one `key=value`
//! per line, followed by the guest's dmesg after a `--- dmesg` line. The
//! verdicts live here, on the host, where they are unit-tested against
//! good and bad reports.

use std::path::PathBuf;

use nest_vm::{VmOutcome, VmSpec, scan_console};

pub mod compare;
pub mod placement;
pub mod sched;
pub mod strategies;
pub mod trace;

/// The repository's root (guest scripts are run from there).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}

/// The debug binaries the guest scripts run.
const GUEST_BINARIES: [&str; 3] = ["nest", "scx_nest", "nest-load"];

/// The directory of the debug binaries the guest runs, after checking
/// that they were built.
pub fn bin_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
        .join("debug");
    for bin in GUEST_BINARIES {
        assert!(
            dir.join(bin).exists(),
            "{} is missing: run `cargo build -p nest -p scx_nest -p nest-load` first",
            dir.join(bin).display()
        );
    }
    dir
}

/// Boot a guest shaped by `spec`, run `command` (called `name` in the
/// log), print how long it took, and fail the test, with everything the
/// guest printed, unless the command exited 0.
pub fn run_ok(spec: &VmSpec, name: &str, command: &str) -> VmOutcome {
    let outcome =
        nest_vm::run(spec, command).unwrap_or_else(|e| panic!("cannot run the guest: {e:#}"));
    eprintln!(
        "guest {name}: boot {:.1?}, total {:.1?}, status {:?}",
        outcome.boot_time.unwrap_or_default(),
        outcome.elapsed,
        outcome.exit_status
    );
    assert!(
        outcome.success(),
        "{}\nstdout:\n{}\nstderr:\n{}\nconsole:\n{}",
        outcome.failure().unwrap_or_default(),
        outcome.stdout,
        outcome.stderr,
        outcome.console_log
    );
    outcome
}

/// What a guest script reported.
#[derive(Debug, Default)]
pub struct Report {
    facts: Vec<(String, String)>,
    /// Lines that are not facts (program output), in order.
    pub output: Vec<String>,
    /// The guest's kernel log.
    pub dmesg: String,
}

impl Report {
    pub fn parse(stdout: &str) -> Self {
        let mut report = Report::default();
        let mut lines = stdout.lines();
        for line in lines.by_ref() {
            if line == "--- dmesg" {
                break;
            }
            match line.split_once('=') {
                Some((key, value)) if is_key(key) => {
                    report.facts.push((key.to_string(), value.to_string()))
                }
                _ => report.output.push(line.to_string()),
            }
        }
        report.dmesg = lines.collect::<Vec<_>>().join("\n");
        report
    }

    /// The first value reported for `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.facts
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value reported for `key`, in order.
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.facts
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn is_key(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// How many console lines after a problem's line a report carries: the
/// stalled CPUs and tasks of an RCU stall, the error of an ejection, the
/// first frames of a backtrace. CI keeps no guest files, so these lines
/// are all a failed run leaves to go on.
const PROBLEM_CONTEXT_LINES: usize = 12;

/// Kernel warnings that a kernel of the test matrix prints with any
/// sched_ext scheduler attached, not only scx_nest: (kernel series, text
/// of the `WARNING:` line, what it is). They are printed, not failed.
const KNOWN_KERNEL_WARNINGS: [(&str, &str, &str); 1] = [(
    "6.12.",
    "sub_running_bw",
    "6.12's deadline-server bandwidth accounting underflows when CPUs go \
     offline with a sched_ext scheduler attached: seen with scx_bpfland 1.1.4 \
     too, never under the default scheduler (same hotplug loop)",
)];

/// Kernel problems in a log (BUG, WARNING, Oops, panics, stalls), each
/// `Kind: line` followed by the indented lines after it; a known kernel
/// warning ([`KNOWN_KERNEL_WARNINGS`]) is printed instead.
pub fn kernel_problems(log: &str) -> Vec<String> {
    let lines: Vec<&str> = log.lines().collect();
    scan_console(log)
        .into_iter()
        .filter_map(|issue| {
            let after: Vec<&str> = lines
                .iter()
                .skip(issue.line_number)
                .take(PROBLEM_CONTEXT_LINES)
                .map(|line| line.trim_end())
                .collect();
            let problem = format!("{:?}: {}", issue.kind, issue.line.trim());
            let context: String = after.iter().map(|l| format!("\n    {l}")).collect();
            if let Some(why) = known_kernel_warning(&issue.line, &after) {
                eprintln!("known kernel warning, not a failure ({why}): {problem}");
                return None;
            }
            Some(format!("{problem}{context}"))
        })
        .collect()
}

/// What a known kernel warning is, if `line` (and the kernel release in
/// the lines `after` it) is one.
fn known_kernel_warning(line: &str, after: &[&str]) -> Option<&'static str> {
    KNOWN_KERNEL_WARNINGS
        .iter()
        .find(|(series, text, _)| {
            line.contains("WARNING:")
                && line.contains(text)
                && after.iter().any(|l| l.contains(&format!(" {series}")))
        })
        .map(|(_, _, why)| *why)
}

/// Everything wrong with a lifecycle run (tests/vm/lifecycle.sh): the
/// scheduler must attach under our name, stay enabled through the whole
/// load (every state sample, however many the machine's speed allowed, and
/// the state after the load said enabled, and sched_ext's enable_seq did
/// not move: no ejection and re-attach in between), leave on SIGINT with
/// status 0, and the kernel must not complain. An empty list means the run
/// passed.
pub fn lifecycle_problems(report: &Report) -> Vec<String> {
    let mut problems = Vec::new();
    let mut expect = |what: &str, ok: bool, got: String| {
        if !ok {
            problems.push(format!("{what} (got {got})"));
        }
    };
    let fact = |key: &str| report.get(key).unwrap_or("nothing").to_string();

    expect(
        "sched_ext enabled after attaching",
        report.get("state_after_attach") == Some("enabled"),
        fact("state_after_attach"),
    );
    expect(
        "the attached ops are scx_nest's",
        report.get("ops").is_some_and(|ops| ops.starts_with("nest")),
        fact("ops"),
    );
    let samples: Vec<&str> = report.all("sample").collect();
    let seq_before = report.get("enable_seq_before_load");
    expect(
        "sched_ext enabled during the whole load",
        samples.iter().all(|s| *s == "enabled")
            && report.get("state_after_load") == Some("enabled")
            && seq_before.is_some_and(|seq| seq.parse::<u64>().is_ok())
            && seq_before == report.get("enable_seq_after_load"),
        format!(
            "samples [{}], state after the load {}, enable_seq {} -> {}",
            samples.join(","),
            fact("state_after_load"),
            fact("enable_seq_before_load"),
            fact("enable_seq_after_load")
        ),
    );
    expect(
        "the load exits with status 0",
        report.get("load_exit") == Some("0"),
        fact("load_exit"),
    );
    expect(
        "scx_nest exits with status 0 after SIGINT",
        report.get("sched_exit") == Some("0"),
        fact("sched_exit"),
    );
    expect(
        "sched_ext disabled after scx_nest exits",
        report.get("state_after_exit") == Some("disabled"),
        fact("state_after_exit"),
    );
    for problem in kernel_problems(&report.dmesg) {
        problems.push(format!("kernel log: {problem}"));
    }
    problems
}

/// Everything wrong with the statistics of a run started with `--stats`:
/// the monitor must have printed at least one whole sample (its first and
/// last group lines) from the running scheduler. Counted in samples, not
/// in time: the monitor waits for the stats server, however long that takes.
pub fn stats_problems(report: &Report) -> Vec<String> {
    let printed = |group: &str| stats_lines(report).any(|line| line.starts_with(group));
    ["nest ", "perf "]
        .iter()
        .filter(|group| !printed(group))
        .map(|group| format!("--stats printed no '{}' line", group.trim_end()))
        .collect()
}

/// The lines `--stats` printed, from their group name on (`nest  ...`).
fn stats_lines(report: &Report) -> impl Iterator<Item = &str> {
    report
        .output
        .iter()
        .filter_map(|line| line.strip_prefix("scx_nest: [scx_nest] "))
}

/// The sum of counter `name` (e.g. `exit_demoted`) over the samples that
/// `--stats` printed (each sample counts what happened since the last).
pub fn stat_total(report: &Report, name: &str) -> u64 {
    let key = format!("{name}=");
    stats_lines(report)
        .flat_map(|line| line.split_whitespace())
        .filter_map(|field| field.strip_prefix(&key)?.parse::<u64>().ok())
        .sum()
}

/// Everything wrong with the policy's view of task exits in a run of a
/// load whose tasks fork and exit (`nest-load mixed`), started with
/// `--stats`: some CPU left the primary nest when its task exited. None
/// would mean ops.stopping() never recognised a task's final switch
/// (`task_dead()` in the BPF host), and exit demotion and fork reuse had
/// silently stopped. Measured before 8c06f44 (exits taken at PF_EXITING):
/// 39 and 42 in two lifecycle runs.
pub fn exit_problems(report: &Report) -> Vec<String> {
    if stat_total(report, "exit_demoted") > 0 {
        return Vec::new();
    }
    vec!["no exit demotion in any --stats sample: the policy saw no task exit".into()]
}

/// The most instructions the kernel's verifier may process to load all of
/// scx_nest's programs (`verified_insns`, summed over its program file
/// descriptors by tests/vm/lifecycle.sh). Each kernel's verifier counts
/// differently: 146,320 on Debian's 7.2 and 7.3, 253,282 on 6.18 and
/// 292,195 on 6.12 (docs/design/scheduler.md, "Verification cost").
/// With the nest scan inlined at each call site instead of verified once
/// (a global BPF function, see crates/scx_nest/src/bpf/platform.bpf.h), it
/// was 539,595 on 7.3: 70 s to load in an emulated guest, against 6.5 s.
/// The budget catches that on every kernel of the matrix; a single
/// program may not exceed a million.
pub const VERIFIED_INSNS_BUDGET: u64 = 400_000;

/// Everything wrong with the cost of loading scx_nest: the `verified_insns`
/// fact is missing, or over [`VERIFIED_INSNS_BUDGET`].
pub fn verifier_problems(report: &Report) -> Vec<String> {
    match report.get("verified_insns").map(str::parse::<u64>) {
        Some(Ok(n)) if n > 0 && n <= VERIFIED_INSNS_BUDGET => Vec::new(),
        Some(Ok(n)) => vec![format!(
            "the verifier processed {n} instructions to load scx_nest (budget \
             {VERIFIED_INSNS_BUDGET}): a policy function the verifier used to \
             check once is now checked at each call site?"
        )],
        _ => vec![format!(
            "no verified_insns fact ({:?})",
            report.get("verified_insns")
        )],
    }
}

/// Each program's verifier instruction count from scx_nest's
/// `--prog-stats` lines (`prog-stats: NAME ... verified_insns=N`).
pub fn program_insns(report: &Report) -> Vec<(String, u64)> {
    report
        .output
        .iter()
        .filter_map(|line| line.split_once("prog-stats: ").map(|(_, rest)| rest))
        .filter_map(|rest| {
            let name = rest.split_whitespace().next()?;
            let insns = rest
                .split_whitespace()
                .find_map(|field| field.strip_prefix("verified_insns="))?;
            Some((name.to_string(), insns.parse().ok()?))
        })
        .collect()
}

/// Everything wrong with a robustness run (tests/vm/robustness.sh): the
/// lifecycle verdict, plus: every load exited 0; at least `min_transitions`
/// CPUs went offline and as many came back, without a failed write; and
/// the kernel never ejected (or asked to
/// restart) the scheduler once the loads started. Restarts while it was
/// being loaded are allowed: that is what the kernel asks for when CPUs
/// change during loading.
pub fn robustness_problems(report: &Report, min_transitions: u64) -> Vec<String> {
    let mut problems = lifecycle_problems(report);
    let mut expect = |what: &str, ok: bool, got: String| {
        if !ok {
            problems.push(format!("{what} (got {got})"));
        }
    };
    let fact = |key: &str| report.get(key).unwrap_or("nothing").to_string();
    let number = |key: &str| report.get(key).and_then(|v| v.parse::<u64>().ok());

    let statuses: Vec<&str> = report.all("load_status").collect();
    expect(
        "every load exits with status 0",
        !statuses.is_empty() && statuses.iter().all(|s| s.ends_with(":0")),
        statuses.join(","),
    );
    let offline = number("hotplug_offline").unwrap_or(0);
    expect(
        "enough CPUs taken offline",
        offline >= min_transitions,
        fact("hotplug_offline"),
    );
    expect(
        "every offline CPU brought back online",
        number("hotplug_online") == Some(offline),
        fact("hotplug_online"),
    );
    expect(
        "no failed hotplug write",
        report.get("hotplug_errors") == Some("0"),
        fact("hotplug_errors"),
    );
    expect(
        "the loads started with scx_nest attached once, not restarting",
        report.get("enables_before_load").is_some()
            && report.get("enables_before_load") == report.get("enables_after_load")
            && report.get("restarts_before_load") == report.get("restarts_total"),
        format!(
            "enables {} -> {}, restarts {} -> {}",
            fact("enables_before_load"),
            fact("enables_after_load"),
            fact("restarts_before_load"),
            fact("restarts_total")
        ),
    );
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
state_after_attach=enabled
ops=nest_0.1.0_x86_64
enable_seq_before_load=1
sample=enabled
sample=enabled
load_exit=0
state_after_load=enabled
enable_seq_after_load=1
load: hogs: threads=2
sched_exit=0
state_after_exit=disabled
scx_nest: EXIT: unregistered from user space
--- dmesg
[    1.0] sched_ext: BPF scheduler \"nest\" enabled
[    9.0] sched_ext: BPF scheduler \"nest\" disabled (unregistered from user space)";

    #[test]
    fn a_known_kernel_warning_is_not_a_problem_on_its_kernel_only() {
        let warning = |release: &str| {
            format!(
                "[   29.2] WARNING: CPU: 4 PID: 27 at kernel/sched/deadline.c:265 sub_running_bw+0x49/0x5e\n\
                 [   29.2] Modules linked in:\n\
                 [   29.2] CPU: 4 UID: 0 PID: 27 Comm: migration/4 Not tainted {release} #1\n"
            )
        };
        assert_eq!(
            kernel_problems(&warning("6.12.117-nest")),
            Vec::<String>::new()
        );
        assert_eq!(kernel_problems(&warning("7.3.4+deb13-amd64")).len(), 1);
        let other = "[ 1.0] WARNING: CPU: 1 PID: 2 at kernel/sched/ext.c:100 f+0x1\n[ 1.0] CPU: 1 Not tainted 6.12.117-nest #1\n";
        assert_eq!(kernel_problems(other).len(), 1);
    }

    #[test]
    fn loading_cost_is_judged_against_the_budget() {
        let cost = |n: &str| verifier_problems(&Report::parse(&format!("verified_insns={n}\n")));
        assert!(cost("79670").is_empty());
        assert_eq!(cost("539595").len(), 1);
        assert!(cost("539595")[0].contains("539595 instructions"));
        assert_eq!(cost("0").len(), 1, "no program counted");
        assert_eq!(cost("").len(), 1);
        assert_eq!(verifier_problems(&Report::parse("ops=nest\n")).len(), 1);
    }

    #[test]
    fn a_kernel_problem_carries_the_lines_after_it() {
        let log = "[1.0] boot\n[2.0] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\n[2.0] rcu: \t5-...!: (1 GPs behind)\n[2.1] task:stress-ng";
        let problems = kernel_problems(log);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].starts_with("Stall: [2.0] rcu: INFO"));
        assert!(problems[0].contains("\n    [2.0] rcu: \t5-...!"));
        assert!(problems[0].ends_with("\n    [2.1] task:stress-ng"));
        assert!(!problems[0].contains("boot"));
    }

    #[test]
    fn a_clean_run_passes() {
        let report = Report::parse(GOOD);
        assert_eq!(report.get("ops"), Some("nest_0.1.0_x86_64"));
        assert_eq!(report.all("sample").count(), 2);
        assert!(report.output.iter().any(|l| l.starts_with("load: hogs")));
        assert!(report.dmesg.contains("enabled"));
        assert_eq!(lifecycle_problems(&report), Vec::<String>::new());
    }

    #[test]
    fn an_ejected_scheduler_fails() {
        let ejected = GOOD
            .replacen("sample=enabled", "sample=disabled", 1)
            .replace("sched_exit=0", "sched_exit=1")
            .replace(
                "[    9.0] sched_ext: BPF scheduler \"nest\" disabled (unregistered from user space)",
                "[    5.0] sched_ext: BPF scheduler \"nest\" disabled (runtime error)\n\
                 [    5.0] sched_ext: nest: runnable task stall (nest-load[123] failed to run for 2.1s)",
            );
        let problems = lifecycle_problems(&Report::parse(&ejected));
        assert!(
            problems.iter().any(|p| p.contains("during the whole load")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("status 0 after SIGINT")),
            "{problems:?}"
        );
        assert!(problems.iter().any(|p| p.contains("stall")), "{problems:?}");
    }

    #[test]
    fn an_ejection_between_samples_fails_and_few_samples_do_not() {
        let no_samples = GOOD.replace("sample=enabled\n", "");
        assert_eq!(
            lifecycle_problems(&Report::parse(&no_samples)),
            Vec::<String>::new()
        );
        for ejected in [
            no_samples.replace("state_after_load=enabled", "state_after_load=disabled"),
            no_samples.replace("enable_seq_after_load=1", "enable_seq_after_load=2"),
        ] {
            let problems = lifecycle_problems(&Report::parse(&ejected));
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(
                problems[0].contains("during the whole load"),
                "{problems:?}"
            );
        }
    }

    #[test]
    fn stats_need_a_whole_sample() {
        let sample = "scx_nest: [scx_nest] nest  primary_cpus=4 reserve_cpus=0\n\
                      scx_nest: [scx_nest] place attached=1 prev=0\n\
                      scx_nest: [scx_nest] perf  util: requests=24 cpus=4\n";
        assert_eq!(stats_problems(&Report::parse(sample)), Vec::<String>::new());
        let cut = sample.replace("[scx_nest] perf", "[scx_nest] per");
        assert_eq!(
            stats_problems(&Report::parse(&cut)),
            vec!["--stats printed no 'perf' line"]
        );
        assert_eq!(stats_problems(&Report::parse(GOOD)).len(), 2);
    }

    #[test]
    fn stat_totals_add_up_the_samples() {
        let report = Report::parse(
            "scx_nest: [scx_nest] nest  primary_cpus=4 compacted=1 exit_demoted=1 reserve_full=0\n\
             scx_nest: [scx_nest] place attached=4 prev=1\n\
             other: exit_demoted=100\n\
             scx_nest: [scx_nest] nest  primary_cpus=2 compacted=40 exit_demoted=15\n",
        );
        assert_eq!(stat_total(&report, "exit_demoted"), 16);
        assert_eq!(stat_total(&report, "demoted"), 0);
        assert!(exit_problems(&report).is_empty());
        let none = Report::parse("scx_nest: [scx_nest] nest  primary_cpus=4 exit_demoted=0\n");
        assert_eq!(exit_problems(&none).len(), 1);
    }

    #[test]
    fn missing_facts_fail() {
        let problems = lifecycle_problems(&Report::parse(""));
        assert!(problems.len() >= 6, "{problems:?}");
    }

    const ROBUST_EXTRA: &str = "\
load_status=mixed:0
load_status=fifo:0
hotplug_offline=40
hotplug_online=40
hotplug_errors=0
restarts_before_load=1
enables_before_load=2
restarts_total=1
enables_after_load=2
";

    fn robust(extra: &str) -> Report {
        Report::parse(&GOOD.replacen("ops=", &format!("{extra}ops="), 1))
    }

    #[test]
    fn a_clean_robustness_run_passes() {
        let report = robust(ROBUST_EXTRA);
        assert_eq!(robustness_problems(&report, 10), Vec::<String>::new());
    }

    #[test]
    fn a_failed_load_or_missing_hotplug_fails() {
        let bad = ROBUST_EXTRA
            .replace("fifo:0", "fifo:1")
            .replace("hotplug_online=40", "hotplug_online=39");
        let problems = robustness_problems(&robust(&bad), 10);
        assert_eq!(problems.len(), 2, "{problems:?}");
        let problems = robustness_problems(&robust(ROBUST_EXTRA), 41);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("offline"), "{problems:?}");
    }

    #[test]
    fn a_restart_during_the_load_fails() {
        let restarted = ROBUST_EXTRA
            .replace("restarts_total=1", "restarts_total=2")
            .replace("enables_after_load=2", "enables_after_load=3");
        let problems = robustness_problems(&robust(&restarted), 10);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("not restarting"), "{problems:?}");
    }

    #[test]
    fn kernel_warnings_fail() {
        let warned = format!("{GOOD}\n[    3.0] WARNING: CPU: 1 PID: 7 at kernel/sched/ext.c:123");
        let problems = lifecycle_problems(&Report::parse(&warned));
        assert_eq!(problems.len(), 1, "{problems:?}");
    }
}
