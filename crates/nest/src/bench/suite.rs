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
//! An entry without `command` names a built-in (`suites/builtin.toml`,
//! `nest bench --list`), whose other fields it may override; errors give
//! the file, line and what was expected.

use std::ops::Range;
use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::Spanned;

/// The built-in suites: name, TOML text.
pub const BUILTIN_SUITES: [(&str, &str); 7] = [
    ("quick", include_str!("suites/quick.toml")),
    ("default", include_str!("suites/default.toml")),
    ("guest", include_str!("suites/guest.toml")),
    ("paper", include_str!("suites/paper.toml")),
    ("paper-guest", include_str!("suites/paper-guest.toml")),
    ("peers", include_str!("suites/peers.toml")),
    ("peers-guest", include_str!("suites/peers-guest.toml")),
];

/// The built-in schedulers and workloads, as TOML entries with commands.
const BUILTIN: &str = include_str!("suites/builtin.toml");

/// The one scheduler without a command: the kernel's own.
const DEFAULT_SCHEDULER: &str = "default";

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
    /// The workload is started through this command (`nest run --` for a
    /// scheduler in partial mode, which schedules only tasks that opted in).
    #[serde(default)]
    pub run_with: Vec<String>,
}

impl Scheduler {
    /// The kernel's own scheduler: nothing to attach.
    pub fn is_default(&self) -> bool {
        self.command.is_empty()
    }
}

/// How the numbers after a metric's text combine when it occurs more than
/// once (cyclictest prints a line per thread).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Combine {
    /// The last one (a summary line printed last).
    #[default]
    Last,
    Mean,
    Max,
    Min,
    Sum,
}

impl Combine {
    /// `values` combined; `None` when there are none.
    pub fn apply(self, values: &[f64]) -> Option<f64> {
        let last = *values.last()?;
        Some(match self {
            Combine::Last => last,
            Combine::Mean => values.iter().sum::<f64>() / values.len() as f64,
            Combine::Max => values.iter().copied().fold(f64::MIN, f64::max),
            Combine::Min => values.iter().copied().fold(f64::MAX, f64::min),
            Combine::Sum => values.iter().sum(),
        })
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
    #[serde(default)]
    pub combine: Combine,
}

impl Metric {
    pub fn wall_time() -> Self {
        Self {
            after: None,
            unit: "s".into(),
            higher_is_better: false,
            combine: Combine::Last,
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
    /// A Debian source package: every run works in a fresh copy of its
    /// unpacked tree (fetched once into the cache, see `source.rs`).
    #[serde(default)]
    pub source: Option<String>,
    /// Run before every run (warm-up, measured, traced) in its working
    /// directory, not timed: `./configure` before `make`.
    #[serde(default)]
    pub setup: Vec<String>,
    /// How to get its program where it is missing (`apt-get install
    /// rt-tests`): what `--dry-run` tells.
    #[serde(default)]
    pub install: Option<String>,
}

/// A suite's own method (`[method]`): what its command-line options
/// default to.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteMethod {
    pub warmup: Option<usize>,
    pub runs: Option<u16>,
    pub power_runs: Option<u16>,
    #[serde(default)]
    pub governors: Vec<String>,
    /// `SCHEDULER[/GOVERNOR]`.
    pub baseline: Option<String>,
    pub center: Option<super::stats::Center>,
    /// One traced run of each cell after the measured ones (`--trace`).
    #[serde(default)]
    pub trace: bool,
    /// `--timeout`: a workload's deadline (`900s`).
    #[serde(default, deserialize_with = "duration")]
    pub timeout: Option<std::time::Duration>,
}

/// A duration with its unit (`900s`), as on the command line.
fn duration<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<std::time::Duration>, D::Error> {
    let text = String::deserialize(deserializer)?;
    nest_policy::parse_duration(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

#[derive(Clone, Debug, PartialEq)]
pub struct Suite {
    pub name: String,
    pub schedulers: Vec<Scheduler>,
    /// Where the suite's `installed` entry stands among its schedulers:
    /// every installed `scx_*` peer goes there.
    pub installed_at: Option<usize>,
    pub workloads: Vec<Workload>,
    pub method: SuiteMethod,
}

/// The scheduler entry standing for every installed `scx_*` peer.
pub const INSTALLED: &str = "installed";

/// The built-in entries, with what each is.
fn builtin_file() -> SuiteFile {
    toml::from_str(BUILTIN).expect("the built-in suites/builtin.toml parses")
}

/// A built-in entry resolves as a suite's would (each has a command).
fn builtin<T>(result: Result<T, String>) -> T {
    result.expect("the built-in suites/builtin.toml resolves")
}

pub fn builtin_workload(name: &str) -> Option<Workload> {
    let entry = builtin_file()
        .workloads
        .into_iter()
        .find(|w| *w.name.get_ref() == name)?;
    Some(builtin(resolve_workload(
        "builtin.toml",
        BUILTIN,
        entry,
        false,
    )))
}

pub fn builtin_scheduler(name: &str) -> Option<Scheduler> {
    if name == DEFAULT_SCHEDULER {
        return Some(Scheduler {
            name: name.into(),
            command: Vec::new(),
            ops: String::new(),
            run_with: Vec::new(),
        });
    }
    let entry = builtin_file()
        .schedulers
        .into_iter()
        .find(|s| *s.name.get_ref() == name)?;
    Some(builtin(resolve_scheduler("builtin.toml", BUILTIN, entry)))
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
        run_with: Vec::new(),
    }
}

/// The built-in schedulers and workloads: name, what it is, how it runs.
pub fn builtins() -> (Vec<[String; 3]>, Vec<[String; 3]>) {
    let file = builtin_file();
    let mut schedulers = vec![[
        DEFAULT_SCHEDULER.to_string(),
        "the kernel's own scheduler, nothing attached".to_string(),
        String::new(),
    ]];
    schedulers.extend(file.schedulers.iter().map(|s| {
        let mut how = format!("$ {}", s.command.as_deref().unwrap_or_default().join(" "));
        if !s.run_with.is_empty() {
            how.push_str(&format!(
                "; workloads run as `{} CMD`",
                s.run_with.join(" ")
            ));
        }
        [
            s.name.get_ref().clone(),
            s.about.clone().unwrap_or_default(),
            how,
        ]
    }));
    let workloads = file
        .workloads
        .iter()
        .map(|w| {
            let mut how = format!("$ {}", w.command.as_deref().unwrap_or_default().join(" "));
            if let Some(package) = &w.source {
                how.push_str(&format!("  (in a fresh copy of Debian's {package} source"));
                if let Some(setup) = &w.setup {
                    how.push_str(&format!(", after an untimed `{}`", setup.join(" ")));
                }
                how.push(')');
            }
            [
                w.name.get_ref().clone(),
                w.about.clone().unwrap_or_default(),
                how,
            ]
        })
        .collect();
    (schedulers, workloads)
}

fn names<T>(items: &[T], name: impl Fn(&T) -> &str) -> String {
    items.iter().map(name).collect::<Vec<_>>().join(", ")
}

pub fn valid_workload_names() -> String {
    names(&builtins().1, |w| &w[0])
}

pub fn valid_scheduler_names() -> String {
    names(&builtins().0, |s| &s[0])
}

pub fn valid_suite_names() -> String {
    names(&BUILTIN_SUITES, |s| s.0)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    #[serde(default)]
    method: SuiteMethod,
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
    #[serde(default)]
    run_with: Vec<String>,
    /// What it is, for `nest bench --list`.
    about: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadEntry {
    name: Spanned<String>,
    command: Option<Vec<String>>,
    metric: Option<String>,
    unit: Option<String>,
    higher_is_better: Option<bool>,
    combine: Option<Combine>,
    #[serde(default)]
    optional: bool,
    source: Option<String>,
    setup: Option<Vec<String>>,
    install: Option<String>,
    /// What it is, for `nest bench --list`.
    about: Option<String>,
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
    let installed_at = parsed
        .schedulers
        .iter()
        .position(|s| s.name.get_ref() == INSTALLED && s.command.is_none());
    let schedulers = parsed
        .schedulers
        .into_iter()
        .filter(|s| s.name.get_ref() != INSTALLED || s.command.is_some())
        .map(|entry| resolve_scheduler(file, text, entry))
        .collect::<Result<Vec<_>, _>>()?;
    let workloads = parsed
        .workloads
        .into_iter()
        .map(|entry| resolve_workload(file, text, entry, true))
        .collect::<Result<Vec<_>, _>>()?;
    if (schedulers.is_empty() && installed_at.is_none()) || workloads.is_empty() {
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
        installed_at,
        workloads,
        method: parsed.method,
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

/// Is `name` a Debian source package name (policy 5.6.1: lower-case
/// letters, digits, `+ - .`, at least two, starting alphanumeric)?
fn is_package_name(name: &str) -> bool {
    name.len() >= 2
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
}

/// The entry's command lists that must not be empty when given.
fn check_commands(entry_commands: &[(&str, Option<&Vec<String>>)]) -> Result<(), String> {
    match entry_commands
        .iter()
        .find(|(_, command)| command.is_some_and(|c| c.is_empty()))
    {
        Some((field, _)) => Err(format!("`{field}` is empty")),
        None => Ok(()),
    }
}

fn resolve_scheduler(file: &str, text: &str, entry: SchedulerEntry) -> Result<Scheduler, String> {
    let span = entry.name.span();
    let name = entry.name.get_ref().clone();
    let at = |message: &str| located(file, text, span.clone(), message);
    check_commands(&[("command", entry.command.as_ref())]).map_err(|e| at(&e))?;
    let mut scheduler = match entry.command {
        Some(command) => scheduler_for_command(&name, command),
        None => builtin_scheduler(&name).ok_or_else(|| {
            at(&format!(
                "unknown scheduler '{name}' (give it a `command`, or use a built-in one: {})",
                valid_scheduler_names()
            ))
        })?,
    };
    if let Some(ops) = entry.ops {
        scheduler.ops = ops;
    }
    if !entry.run_with.is_empty() {
        scheduler.run_with = entry.run_with;
    }
    Ok(scheduler)
}

/// The workload `entry` describes; `from_builtins`: an entry named like a
/// built-in starts from it (false for the built-ins themselves).
fn resolve_workload(
    file: &str,
    text: &str,
    entry: WorkloadEntry,
    from_builtins: bool,
) -> Result<Workload, String> {
    let span = entry.name.span();
    let name = entry.name.get_ref().clone();
    let at = |message: &str| located(file, text, span.clone(), message);
    check_commands(&[
        ("command", entry.command.as_ref()),
        ("setup", entry.setup.as_ref()),
    ])
    .map_err(|e| at(&e))?;
    if let Some(package) = entry.source.as_deref().filter(|p| !is_package_name(p)) {
        return Err(at(&format!(
            "`source` '{package}' is not a Debian source package name \
             (lower-case letters, digits, + - .)"
        )));
    }
    // A built-in's name starts from the built-in (its metric, source,
    // setup), whatever the entry changes; any other name needs a command.
    let builtin = from_builtins.then(|| builtin_workload(&name)).flatten();
    let start = match (builtin, &entry.command) {
        (Some(builtin), _) => builtin,
        (None, Some(_)) => Workload {
            name,
            command: Vec::new(),
            metric: Metric::wall_time(),
            optional: false,
            source: None,
            setup: Vec::new(),
            install: None,
        },
        (None, None) => {
            return Err(at(&format!(
                "unknown workload '{name}' (give it a `command`, or use a built-in one: {})",
                valid_workload_names()
            )));
        }
    };
    Ok(with_entry(start, &entry))
}

/// `workload` with what the entry sets (its command, metric, source, ...).
fn with_entry(mut workload: Workload, entry: &WorkloadEntry) -> Workload {
    if let Some(command) = &entry.command {
        workload.command = command.clone();
    }
    if let Some(after) = &entry.metric {
        workload.metric = Metric {
            after: Some(after.clone()),
            unit: String::new(),
            higher_is_better: false,
            combine: Combine::Last,
        };
    }
    if let Some(unit) = &entry.unit {
        workload.metric.unit = unit.clone();
    }
    if let Some(higher) = entry.higher_is_better {
        workload.metric.higher_is_better = higher;
    }
    if let Some(combine) = entry.combine {
        workload.metric.combine = combine;
    }
    workload.optional |= entry.optional;
    if let Some(source) = &entry.source {
        workload.source = Some(source.clone());
    }
    if let Some(setup) = &entry.setup {
        workload.setup = setup.clone();
    }
    if let Some(install) = &entry.install {
        workload.install = Some(install.clone());
    }
    workload
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
            err.contains("chain, pipe, batch, overload, single, configure-hello, configure-bc"),
            "{err}"
        );
        let err = parse("s", "s.toml", &GOOD.replace("\"default\"", "\"cfs\"")).unwrap_err();
        assert!(
            err.starts_with("s.toml:3: unknown scheduler 'cfs'"),
            "{err}"
        );
        assert!(
            err.contains("default, scx_nest, nest-nospin, smove, nest-partial"),
            "{err}"
        );
    }

    #[test]
    fn every_builtin_entry_resolves_with_its_command() {
        let (schedulers, workloads) = builtins();
        for [name, ..] in &workloads {
            let workload = builtin_workload(name).unwrap();
            assert!(!workload.command.is_empty(), "{name}");
        }
        for [name, ..] in &schedulers {
            builtin_scheduler(name).unwrap();
        }
        let partial = builtin_scheduler("nest-partial").unwrap();
        assert_eq!(partial.ops, "nest");
        assert_eq!(partial.run_with, ["nest", "run", "--"]);
        let make = builtin_workload("make-hello").unwrap();
        assert_eq!(
            (make.source.as_deref(), &make.setup[..]),
            (Some("hello"), &["./configure".to_string()][..])
        );
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
            err.contains("unknown suite 'quik'") && err.contains("quick, default, guest"),
            "{err}"
        );
    }

    #[test]
    fn the_paper_suite_carries_the_papers_method() {
        let paper = load("paper").unwrap();
        let m = &paper.method;
        assert_eq!(
            (m.warmup, m.runs, m.power_runs),
            (Some(2), Some(10), Some(30))
        );
        assert_eq!(m.governors, ["schedutil", "performance"]);
        assert_eq!(m.baseline.as_deref(), Some("default/schedutil"));
        let names: Vec<&str> = paper.schedulers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["default", "scx_nest", "nest-nospin", "smove"]);
        assert_eq!(
            paper.schedulers[2].command,
            ["scx_nest", "--disable", "warm-spin"]
        );
        assert_eq!(
            paper.schedulers[3].command,
            ["scx_nest", "--policy", "smove"]
        );
        let guest = load("paper-guest").unwrap();
        assert_eq!(
            guest.method.timeout,
            Some(std::time::Duration::from_secs(1800))
        );
        let bare = "[method]\ntimeout = \"900\"\n[[scheduler]]\nname = \"default\"\n\
                    [[workload]]\nname = \"chain\"\n";
        let err = parse("s", "s.toml", bare).unwrap_err();
        assert!(
            err.starts_with("s.toml:2: ") && err.contains("unit"),
            "{err}"
        );
        let peers = load("peers").unwrap();
        assert_eq!(peers.installed_at, Some(2), "the peers go after scx_nest");
        assert_eq!(
            peers.method.center,
            Some(super::super::stats::Center::Median)
        );
    }

    #[test]
    fn an_entry_named_like_a_builtin_starts_from_it() {
        let text = "[[scheduler]]\nname = \"default\"\n[[workload]]\nname = \"hackbench-pipes\"\n\
                    command = [\"hackbench\", \"-p\", \"-g\", \"4\"]\n";
        let suite = parse("s", "s.toml", text).unwrap();
        let w = &suite.workloads[0];
        assert_eq!(w.command, ["hackbench", "-p", "-g", "4"]);
        assert_eq!(
            w.metric.after.as_deref(),
            Some("Time:"),
            "the built-in's metric"
        );
        assert_eq!(w.install.as_deref(), Some("apt-get install rt-tests"));
        let zstd = &load("paper-guest").unwrap().workloads[4];
        assert_eq!(zstd.name, "zstd-19");
        assert_eq!(zstd.setup[3], "2", "a smaller input");
        assert_eq!(zstd.command[4], "-19", "the built-in's command");
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
