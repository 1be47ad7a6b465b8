//! Suites as data: which workloads run under which schedulers.
//!
//! A suite is a TOML file (or one of the built-in ones, themselves TOML
//! files under `suites/`):
//!
//! ```toml
//! [[scheduler]]
//! name = "default"                 # built-in: no sched_ext scheduler
//! [[scheduler]]
//! name = "nest-slocal"
//! command = ["scx_nest", "--policy", "slocal"]
//!
//! [[workload]]
//! name = "chain"                   # built-in: a nest-load family
//! [[workload]]
//! name = "hackbench"
//! command = ["hackbench", "-g", "{cpus}", "-l", "200"]
//! metric = "Time:"                 # the number after this text, not wall time
//! ```
//!
//! An entry without `command` names a built-in (see [`BUILTIN_WORKLOADS`],
//! [`BUILTIN_SCHEDULERS`]); errors give the file, line and what was
//! expected.

use std::ops::Range;
use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::Spanned;

/// The built-in suites: name, TOML text.
pub const BUILTIN_SUITES: [(&str, &str); 2] = [
    ("quick", include_str!("suites/quick.toml")),
    ("default", include_str!("suites/default.toml")),
];

/// A scheduler as the bench runs it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scheduler {
    pub name: String,
    /// The sched_ext scheduler's command line; empty for the kernel's
    /// default scheduler.
    pub command: Vec<String>,
    /// What `/sys/kernel/sched_ext/root/ops` starts with while it is
    /// attached (`nest` for scx_nest).
    pub ops: String,
}

impl Scheduler {
    /// The kernel's own scheduler: nothing to attach.
    pub fn is_default(&self) -> bool {
        self.command.is_empty()
    }
}

/// What a workload's run is judged by.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// The text the number follows in the workload's output (`Time:` for
    /// hackbench); `None` for wall time.
    pub after: Option<String>,
    pub unit: String,
    pub higher_is_better: bool,
}

impl Metric {
    pub fn wall_time() -> Self {
        Self {
            after: None,
            unit: "s".into(),
            higher_is_better: false,
        }
    }
}

/// A workload as the bench runs it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub name: String,
    /// `{cpus}` and `{2cpus}` are replaced by the number of online CPUs
    /// and twice that when it runs.
    pub command: Vec<String>,
    pub metric: Metric,
    /// Skipped, with a note, when its program is not installed.
    pub optional: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Suite {
    pub name: String,
    pub schedulers: Vec<Scheduler>,
    pub workloads: Vec<Workload>,
}

/// A built-in workload: name, command, metric text, unit, higher is
/// better, optional, what it is.
type BuiltinWorkload = (
    &'static str,
    &'static [&'static str],
    Option<&'static str>,
    &'static str,
    bool,
    bool,
    &'static str,
);

/// The nest-load families and hackbench, sized for a real machine.
pub const BUILTIN_WORKLOADS: [BuiltinWorkload; 6] = [
    (
        "chain",
        &["nest-load", "churn", "--count", "2000", "--work-us", "200"],
        None,
        "s",
        false,
        false,
        "fork/wait chain, like a configure script (wall time)",
    ),
    (
        "pipe",
        &["nest-load", "pingpong", "--seconds", "5"],
        Some("round_trips="),
        "round trips",
        true,
        false,
        "two processes bouncing a byte through pipes (round trips in 5 s)",
    ),
    (
        "batch",
        &["nest-load", "batch", "--work-ms", "500"],
        None,
        "s",
        false,
        false,
        "one thread per CPU, 500 ms of work each (wall time)",
    ),
    (
        "overload",
        &[
            "nest-load",
            "batch",
            "--tasks",
            "{2cpus}",
            "--work-ms",
            "250",
        ],
        None,
        "s",
        false,
        false,
        "two threads per CPU, 250 ms of work each (wall time)",
    ),
    (
        "single",
        &["nest-load", "batch", "--tasks", "1", "--work-ms", "1000"],
        None,
        "s",
        false,
        false,
        "one thread, 1 s of work (wall time)",
    ),
    (
        "hackbench",
        &["hackbench", "-g", "{cpus}", "-l", "200"],
        Some("Time:"),
        "s",
        false,
        true,
        "rt-tests hackbench, its own Time: (skipped if not installed)",
    ),
];

/// The built-in schedulers: name, command, ops prefix.
pub const BUILTIN_SCHEDULERS: [(&str, &[&str], &str); 2] =
    [("default", &[], ""), ("scx_nest", &["scx_nest"], "nest")];

pub fn builtin_workload(name: &str) -> Option<Workload> {
    BUILTIN_WORKLOADS.iter().find(|w| w.0 == name).map(
        |&(name, command, after, unit, higher_is_better, optional, _)| Workload {
            name: name.into(),
            command: command.iter().map(|s| s.to_string()).collect(),
            metric: Metric {
                after: after.map(str::to_string),
                unit: unit.into(),
                higher_is_better,
            },
            optional,
        },
    )
}

pub fn builtin_scheduler(name: &str) -> Option<Scheduler> {
    BUILTIN_SCHEDULERS
        .iter()
        .find(|s| s.0 == name)
        .map(|&(name, command, ops)| Scheduler {
            name: name.into(),
            command: command.iter().map(|s| s.to_string()).collect(),
            ops: ops.into(),
        })
}

/// A scheduler for a command line: its ops name is the program's name
/// without `scx_` (`scx_bpfland` attaches as `bpfland`).
pub fn scheduler_for_command(name: &str, command: Vec<String>) -> Scheduler {
    let program = command.first().map(String::as_str).unwrap_or_default();
    let base = program.rsplit('/').next().unwrap_or(program);
    Scheduler {
        name: name.into(),
        ops: base.strip_prefix("scx_").unwrap_or(base).into(),
        command,
    }
}

fn names<T>(items: &[T], name: impl Fn(&T) -> &str) -> String {
    items.iter().map(name).collect::<Vec<_>>().join(", ")
}

pub fn valid_workload_names() -> String {
    names(&BUILTIN_WORKLOADS, |w| w.0)
}

pub fn valid_scheduler_names() -> String {
    names(&BUILTIN_SCHEDULERS, |s| s.0)
}

pub fn valid_suite_names() -> String {
    names(&BUILTIN_SUITES, |s| s.0)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    #[serde(default, rename = "scheduler")]
    schedulers: Vec<SchedulerEntry>,
    #[serde(default, rename = "workload")]
    workloads: Vec<WorkloadEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SchedulerEntry {
    name: Spanned<String>,
    command: Option<Vec<String>>,
    ops: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadEntry {
    name: Spanned<String>,
    command: Option<Vec<String>>,
    metric: Option<String>,
    unit: Option<String>,
    higher_is_better: Option<bool>,
    #[serde(default)]
    optional: bool,
}

/// `file:line: message` for the text at `span` of `text`.
fn located(file: &str, text: &str, span: Range<usize>, message: &str) -> String {
    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
    format!("{file}:{line}: {message}")
}

/// Read a suite from TOML `text` (called `file` in errors, and `name`).
pub fn parse(name: &str, file: &str, text: &str) -> Result<Suite, String> {
    let parsed: SuiteFile = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        let message = e.message().trim_end();
        match line {
            Some(line) => format!("{file}:{line}: {message}"),
            None => format!("{file}: {message}"),
        }
    })?;
    let schedulers = parsed
        .schedulers
        .into_iter()
        .map(|entry| resolve_scheduler(file, text, entry))
        .collect::<Result<Vec<_>, _>>()?;
    let workloads = parsed
        .workloads
        .into_iter()
        .map(|entry| resolve_workload(file, text, entry))
        .collect::<Result<Vec<_>, _>>()?;
    if schedulers.is_empty() || workloads.is_empty() {
        return Err(format!(
            "{file}: a suite needs at least one [[scheduler]] and one [[workload]]"
        ));
    }
    check_unique(
        file,
        schedulers.iter().map(|s| s.name.as_str()),
        "scheduler",
    )?;
    check_unique(file, workloads.iter().map(|w| w.name.as_str()), "workload")?;
    Ok(Suite {
        name: name.into(),
        schedulers,
        workloads,
    })
}

fn check_unique<'a>(
    file: &str,
    names: impl Iterator<Item = &'a str>,
    what: &str,
) -> Result<(), String> {
    let mut seen = Vec::new();
    for name in names {
        if seen.contains(&name) {
            return Err(format!("{file}: two {what}s are called '{name}'"));
        }
        seen.push(name);
    }
    Ok(())
}

fn resolve_scheduler(file: &str, text: &str, entry: SchedulerEntry) -> Result<Scheduler, String> {
    let span = entry.name.span();
    let name = entry.name.into_inner();
    let mut scheduler = match entry.command {
        Some(command) if command.is_empty() => {
            return Err(located(file, text, span, "`command` is empty"));
        }
        Some(command) => scheduler_for_command(&name, command),
        None => builtin_scheduler(&name).ok_or_else(|| {
            let message = format!(
                "unknown scheduler '{name}' (give it a `command`, or use a built-in one: {})",
                valid_scheduler_names()
            );
            located(file, text, span.clone(), &message)
        })?,
    };
    scheduler.name = name;
    if let Some(ops) = entry.ops {
        scheduler.ops = ops;
    }
    Ok(scheduler)
}

fn resolve_workload(file: &str, text: &str, entry: WorkloadEntry) -> Result<Workload, String> {
    let span = entry.name.span();
    let name = entry.name.into_inner();
    let mut workload = match entry.command {
        Some(command) if command.is_empty() => {
            return Err(located(file, text, span, "`command` is empty"));
        }
        Some(command) => Workload {
            name: name.clone(),
            command,
            metric: Metric::wall_time(),
            optional: false,
        },
        None => builtin_workload(&name).ok_or_else(|| {
            let message = format!(
                "unknown workload '{name}' (give it a `command`, or use a built-in one: {})",
                valid_workload_names()
            );
            located(file, text, span.clone(), &message)
        })?,
    };
    if let Some(after) = entry.metric {
        workload.metric = Metric {
            after: Some(after),
            unit: String::new(),
            higher_is_better: false,
        };
    }
    if let Some(unit) = entry.unit {
        workload.metric.unit = unit;
    }
    if let Some(higher) = entry.higher_is_better {
        workload.metric.higher_is_better = higher;
    }
    workload.optional |= entry.optional;
    Ok(workload)
}

/// The suite `spec` names: a built-in suite's name or a TOML file.
pub fn load(spec: &str) -> Result<Suite, String> {
    if let Some((name, text)) = BUILTIN_SUITES.iter().find(|s| s.0 == spec) {
        return parse(name, &format!("built-in suite {name}"), text);
    }
    let path = Path::new(spec);
    if !path.exists() && !spec.contains('/') && !spec.ends_with(".toml") {
        return Err(format!(
            "unknown suite '{spec}': give a TOML file or a built-in suite: {}",
            valid_suite_names()
        ));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read suite file {spec}: {e}"))?;
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    parse(stem.as_deref().unwrap_or(spec), spec, &text)
}

/// Keep only the items called by `wanted` (comma-separated), in that
/// order; an unknown name is an error listing the valid ones.
pub fn select<T: Clone>(
    items: &[T],
    wanted: &str,
    name: impl Fn(&T) -> &str,
    what: &str,
) -> Result<Vec<T>, String> {
    wanted
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(|w| {
            items
                .iter()
                .find(|item| name(item) == w)
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "unknown {what} '{w}' in this suite; valid: {}",
                        names(items, &name)
                    )
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[scheduler]]
name = "default"
[[scheduler]]
name = "nest-slocal"
command = ["scx_nest", "--policy", "slocal"]
[[scheduler]]
name = "bpfland"
command = ["/usr/bin/scx_bpfland"]

[[workload]]
name = "chain"
[[workload]]
name = "hb"
command = ["hackbench", "-l", "10"]
metric = "Time:"
unit = "s"
"#;

    #[test]
    fn a_good_suite_resolves_builtins_and_commands() {
        let suite = parse("s", "s.toml", GOOD).unwrap();
        let names: Vec<&str> = suite.schedulers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["default", "nest-slocal", "bpfland"]);
        assert!(suite.schedulers[0].is_default());
        assert_eq!(suite.schedulers[1].ops, "nest");
        assert_eq!(
            suite.schedulers[1].command,
            ["scx_nest", "--policy", "slocal"]
        );
        assert_eq!(suite.schedulers[2].ops, "bpfland");
        assert_eq!(suite.workloads[0].command[0], "nest-load");
        assert_eq!(suite.workloads[0].metric, Metric::wall_time());
        assert_eq!(suite.workloads[1].metric.after.as_deref(), Some("Time:"));
        assert!(!suite.workloads[1].metric.higher_is_better);
    }

    #[test]
    fn a_typo_is_reported_with_file_line_and_what_was_expected() {
        let typo = GOOD.replace("command = [\"hackbench\"", "comand = [\"hackbench\"");
        let err = parse("s", "s.toml", &typo).unwrap_err();
        assert!(err.starts_with("s.toml:15: "), "{err}");
        assert!(err.contains("comand"), "{err}");
        assert!(err.contains("expected one of"), "{err}");
        let syntax = GOOD.replace("name = \"chain\"", "name = chain");
        let err = parse("s", "s.toml", &syntax).unwrap_err();
        assert!(err.starts_with("s.toml:12: "), "{err}");
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let err = parse("s", "s.toml", &GOOD.replace("\"chain\"", "\"chian\"")).unwrap_err();
        assert!(
            err.starts_with("s.toml:12: unknown workload 'chian'"),
            "{err}"
        );
        assert!(
            err.contains("chain, pipe, batch, overload, single, hackbench"),
            "{err}"
        );
        let err = parse("s", "s.toml", &GOOD.replace("\"default\"", "\"cfs\"")).unwrap_err();
        assert!(
            err.starts_with("s.toml:3: unknown scheduler 'cfs'"),
            "{err}"
        );
        assert!(err.contains("default, scx_nest"), "{err}");
    }

    #[test]
    fn builtin_suites_parse_and_unknown_suites_are_named() {
        for (name, _) in BUILTIN_SUITES {
            let suite = load(name).unwrap();
            assert_eq!(suite.schedulers[0].name, "default", "{name}");
        }
        let quick = load("quick").unwrap();
        assert_eq!(quick.workloads.len(), 2);
        let err = load("quik").unwrap_err();
        assert!(
            err.contains("unknown suite 'quik'") && err.contains("quick, default"),
            "{err}"
        );
    }

    #[test]
    fn selection_keeps_the_order_asked_and_refuses_unknown_names() {
        let suite = parse("s", "s.toml", GOOD).unwrap();
        let picked = select(
            &suite.schedulers,
            "bpfland,default",
            |s| &s.name,
            "scheduler",
        )
        .unwrap();
        let names: Vec<&str> = picked.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["bpfland", "default"]);
        let err = select(&suite.schedulers, "default,nest", |s| &s.name, "scheduler").unwrap_err();
        assert_eq!(
            err,
            "unknown scheduler 'nest' in this suite; valid: default, nest-slocal, bpfland"
        );
    }

    #[test]
    fn empty_suites_and_duplicates_are_refused() {
        assert!(
            parse("s", "s.toml", "")
                .unwrap_err()
                .contains("at least one")
        );
        let twice = format!("{GOOD}\n[[workload]]\nname = \"chain\"\n");
        assert!(
            parse("s", "s.toml", &twice)
                .unwrap_err()
                .contains("two workloads")
        );
    }
}
