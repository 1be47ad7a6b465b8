//! `nest bench` from the built binary, with the default scheduler only
//! (no sched_ext needed): exit statuses, result files, a failing command,
//! Ctrl-C. The sched_ext side runs in a guest (crates/vm-tests/tests/bench.rs).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn nest_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nest"))
        .arg("bench")
        .args(args)
        .output()
        .expect("cannot run nest")
}

/// `nest bench` with `NEST_CACHE` set to `cache`.
fn nest_bench_with_cache(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_CACHE", cache)
        .arg("bench")
        .args(args)
        .output()
        .expect("cannot run nest")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn results(dir: &Path) -> serde_json::Value {
    let json = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
    serde_json::from_str(&json).expect("valid JSON")
}

#[test]
fn bad_input_is_a_usage_error_that_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let typo = dir.path().join("suite.toml");
    std::fs::write(
        &typo,
        "[[scheduler]]\nname = \"default\"\n\n[[workload]]\nname = \"chain\"\nmetrc = \"x\"\n",
    )
    .unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["--suite", "quick", "--workloads", "chian", "-o", out],
            "unknown workload 'chian': valid are the suite's (chain, pipe)",
        ),
        (
            &["--suite", "quick", "--schedulers", "nest", "-o", out],
            "unknown scheduler 'nest'",
        ),
        (
            &["--suite", typo.to_str().unwrap(), "-o", out],
            ":6: unknown field `metrc`, expected one of",
        ),
        (&["--timeout", "300", "-o", out], "no unit"),
    ];
    for (args, message) in cases {
        let output = nest_bench(args);
        let err = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: {err}");
    }
    assert!(!Path::new(out).exists(), "nothing was written");
}

#[test]
fn a_command_under_the_default_scheduler_gives_a_table_and_result_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = nest_bench(&[
        "--schedulers",
        "default",
        "--warmup",
        "1",
        "--runs",
        "3",
        "-o",
        out.to_str().unwrap(),
        "--",
        "/bin/sh",
        "-c",
        "echo hello",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("sh ") && l.contains(" default ") && l.contains(" 3/3 ")),
        "{stdout}"
    );
    assert!(
        text(&output.stderr).contains("[cell 1/1, run 3/3, ETA "),
        "{}",
        text(&output.stderr)
    );
    let results = results(&out);
    assert_eq!(results["runs"].as_array().unwrap().len(), 4);
    assert!(out.join("results.csv").exists() && out.join("report.html").exists());
    let log = std::fs::read_to_string(out.join("logs/sh-default-r3.log")).unwrap();
    assert_eq!(log, "hello\n");

    let json = out.join("results.json");
    let json = json.to_str().unwrap();
    let compare = nest_bench(&["compare", json, json]);
    assert_eq!(compare.status.code(), Some(0), "{}", text(&compare.stderr));
    let table = text(&compare.stdout);
    let row = table.lines().nth(1).unwrap_or_default();
    assert!(
        row.starts_with("sh / default") && row.contains("1.000"),
        "{table}"
    );
    let missing = nest_bench(&["compare", json, "/nonexistent/results.json"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("cannot read /nonexistent/results.json"));
}

#[test]
fn a_failing_command_is_failed_never_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = nest_bench(&[
        "--schedulers",
        "default",
        "--warmup",
        "0",
        "--runs",
        "2",
        "-o",
        out.to_str().unwrap(),
        "--",
        "/bin/sh",
        "-c",
        "echo broken >&2; exit 3",
    ]);
    // 3: the runs were made and some FAILED (1 would be: could not run).
    assert_eq!(output.status.code(), Some(3));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("0/2  FAILED"), "{stdout}");
    assert!(
        stdout.contains("FAILED sh / default, run 1: workload exited with status 3: broken"),
        "{stdout}"
    );
    let results = results(&out);
    for run in results["runs"].as_array().unwrap() {
        assert_eq!(run["status"], "FAILED");
        assert_eq!(run["metric"], serde_json::Value::Null);
    }
}

#[test]
fn sigint_stops_the_workload_and_keeps_the_finished_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let pids = dir.path().join("pids");
    // Each run appends its pid; the first is quick, the others sleep: the
    // second round is interrupted while its workload sleeps.
    let script = format!(
        "echo $$ >> {0}; if [ $(wc -l < {0}) -gt 1 ]; then sleep 600; fi",
        pids.display()
    );
    let child = Command::new(env!("CARGO_BIN_EXE_nest"))
        .args([
            "bench",
            "--schedulers",
            "default",
            "--warmup",
            "0",
            "--runs",
            "3",
            "-o",
        ])
        .arg(&out)
        .args(["--", "/bin/sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    let sleeper: i32 = loop {
        assert!(Instant::now() < until, "the second run never started");
        let written = std::fs::read_to_string(&pids).unwrap_or_default();
        if let Some(second) = written.lines().nth(1) {
            break second.trim().parse().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: signals the nest bench we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("INTERRUPTED"));
    let results = results(&out);
    assert_eq!(results["interrupted"], true);
    assert_eq!(
        results["runs"].as_array().unwrap().len(),
        1,
        "only the finished run"
    );
    // SAFETY: signal 0 only checks whether the process exists.
    let alive = unsafe { libc::kill(sleeper, 0) } == 0;
    assert!(!alive, "the interrupted workload was stopped");
}

/// A suite of one workload on source package `package`: `setup` then
/// `command`, under the default scheduler.
fn source_suite(dir: &Path, package: &str, setup: &str, command: &str) -> String {
    let suite = dir.join("suite.toml");
    std::fs::write(
        &suite,
        format!(
            "[[scheduler]]\nname = \"default\"\n\n[[workload]]\nname = \"w\"\n\
             source = \"{package}\"\nsetup = {setup}\ncommand = {command}\n"
        ),
    )
    .unwrap();
    suite.display().to_string()
}

#[test]
fn a_source_workload_runs_each_time_in_a_fresh_copy_after_its_setup() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let tree = cache.join("src/fakepkg");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join(".complete"), "").unwrap();
    std::fs::write(tree.join("configure"), "#!/bin/sh\necho ok > configured\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        tree.join("configure"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    // Fails if setup did not run in this copy, or a run saw an earlier
    // run's files.
    let check = "test -f configured && ! test -f ran && touch ran && pwd";
    let suite = source_suite(
        dir.path(),
        "fakepkg",
        "[\"./configure\"]",
        &format!("[\"/bin/sh\", \"-c\", \"{check}\"]"),
    );
    let out = dir.path().join("out");
    let output = nest_bench_with_cache(
        &cache,
        &[
            "--suite",
            &suite,
            "--warmup",
            "1",
            "--runs",
            "2",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let results = results(&out);
    let runs = results["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert!(runs.iter().all(|r| r["status"] == "OK"), "{runs:?}");
    let pwd = std::fs::read_to_string(out.join("logs/w-default-r2.log")).unwrap();
    assert!(
        !Path::new(pwd.trim()).exists(),
        "the run's copy {pwd} is removed"
    );
    assert!(!tree.join("configured").exists() && !tree.join("ran").exists());

    // A setup that fails is the run's failure, with its output.
    let suite = source_suite(dir.path(), "fakepkg", "[\"./nope\"]", "[\"true\"]");
    let output = nest_bench_with_cache(&cache, &["--suite", &suite, "-o", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("w: cannot find program './nope' (in "),
        "{}",
        text(&output.stderr)
    );
    let suite = source_suite(
        dir.path(),
        "fakepkg",
        "[\"/bin/sh\", \"-c\", \"echo no compiler >&2; exit 1\"]",
        "[\"true\"]",
    );
    let output = nest_bench_with_cache(
        &cache,
        &[
            "--suite",
            &suite,
            "--warmup",
            "0",
            "--runs",
            "1",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(3), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains(
            "setup `/bin/sh -c echo no compiler >&2; exit 1` exited with status 1: no compiler"
        ),
        "{}",
        text(&output.stdout)
    );
}

/// GNU hello's real configure script and build, from Debian's source
/// package (fetched into the cache by nest bench itself if missing: needs
/// the Debian mirror the first time, and root to write /var/cache/nest).
/// Run by scripts/test.sh's root step.
#[test]
#[ignore = "fetches a Debian source package and builds it: scripts/test.sh runs it"]
fn gnu_hello_configures_and_builds_under_the_default_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = nest_bench(&[
        "--schedulers",
        "default",
        "--workloads",
        "configure-hello,make-hello",
        "--warmup",
        "0",
        "--runs",
        "1",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    for workload in ["configure-hello", "make-hello"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(workload) && l.contains(" 1/1 ")),
            "{stdout}"
        );
    }
    let configure =
        std::fs::read_to_string(out.join("logs/configure-hello-default-r1.log")).unwrap();
    assert!(
        configure.contains("config.status: creating Makefile"),
        "{configure}"
    );
    let make = std::fs::read_to_string(out.join("logs/make-hello-default-r1.log")).unwrap();
    assert!(make.contains("-o hello"), "{make}");
}

#[test]
fn installed_sched_ext_schedulers_are_found_on_path_and_in_the_peers_directory() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let executable = |path: &Path| {
        std::fs::write(path, "#!/bin/sh\nexit 1\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    executable(&dir.path().join("scx_fake"));
    std::fs::write(dir.path().join("scx_notexecutable"), "").unwrap();
    let cache = dir.path().join("cache");
    let peers = cache.join("peers/bin");
    std::fs::create_dir_all(&peers).unwrap();
    executable(&peers.join("scx_peer"));
    let path = format!("{}:/usr/bin:/bin", dir.path().display());
    let with_path = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_nest"))
            .env("PATH", &path)
            .env("NEST_CACHE", &cache)
            .arg("bench")
            .args(args)
            .output()
            .unwrap()
    };
    let list = with_path(&["--list"]);
    let stdout = text(&list.stdout);
    let expected = format!(
        "into {}):\n  scx_fake         {}\n  scx_peer         {}\n",
        peers.display(),
        dir.path().join("scx_fake").display(),
        peers.join("scx_peer").display()
    );
    assert!(stdout.contains(&expected), "{stdout}");
    // `installed` expands to scx_fake and scx_peer; scx_fake is then
    // named twice.
    let twice = with_path(&[
        "--schedulers",
        "default,installed,scx_fake",
        "-o",
        "/nonexistent",
    ]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(
        text(&twice.stderr).contains("--schedulers names 'scx_fake' twice"),
        "{}",
        text(&twice.stderr)
    );
    // The peers suite puts them after scx_nest.
    let plan = with_path(&["--suite", "peers", "--dry-run"]);
    let stdout = text(&plan.stdout);
    let order: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix(char::is_numeric)?.split_once(". "))
        .map(|(_, cell)| cell)
        .take(4)
        .collect();
    assert_eq!(
        order,
        [
            "hackbench-pipes / default",
            "hackbench-pipes / scx_nest",
            "hackbench-pipes / scx_fake",
            "hackbench-pipes / scx_peer"
        ],
        "{stdout}"
    );
}

/// A fake `/sys/devices/system/cpu` of `n` CPUs under intel_pstate in
/// active mode (powersave, its limits and preference), as the kernel
/// shows it.
fn fake_intel_pstate(dir: &Path, n: usize) {
    for cpu in 0..n {
        let cpufreq = dir.join(format!("cpu{cpu}/cpufreq"));
        std::fs::create_dir_all(&cpufreq).unwrap();
        for (file, value) in [
            ("scaling_driver", "intel_pstate"),
            ("scaling_governor", "powersave"),
            ("scaling_available_governors", "performance powersave"),
            ("scaling_min_freq", "800000"),
            ("scaling_max_freq", "3900000"),
            ("energy_performance_preference", "balance_performance"),
        ] {
            std::fs::write(cpufreq.join(file), format!("{value}\n")).unwrap();
        }
    }
    std::fs::create_dir_all(dir.join("intel_pstate")).unwrap();
    std::fs::write(dir.join("intel_pstate/status"), "active\n").unwrap();
}

/// Every file of a tree with its contents, to compare before and after.
fn snapshot(dir: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let contents = std::fs::read_to_string(&path).unwrap_or_default();
                files.push((path.display().to_string(), contents.trim().to_string()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn the_paper_suites_dry_run_prints_the_plan_and_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let cpus = dir.path().join("cpu");
    fake_intel_pstate(&cpus, 4);
    let before = snapshot(&cpus);
    let cache = dir.path().join("empty-cache");
    let output = nest_bench_with_cache(
        &cache,
        &[
            "--suite",
            "paper",
            "--dry-run",
            "--cpufreq-root",
            cpus.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let plan = text(&output.stdout);
    for expected in [
        "method: 2 warm-up + 10 measured runs per cell",
        "30 measured runs per cell for it",
        "over the baseline default / schedutil's",
        "  now: intel_pstate (status active), governor powersave on 4 CPUs",
        "  schedutil        schedutil (intel_pstate passive): switched from active for its runs, restored after",
        "  performance      performance (intel_pstate active): the driver's mode as it is",
        "  smove            ",
        "  nest-nospin      ",
        "MISSING: the Debian source python3.11 is not in ",
        "`nest bench fetch python3.11`",
        "cells: 120 = 15 workload(s) x 4 scheduler(s) x 2 governor(s)",
        "   1. configure-zlib / default / schedutil\n",
        "   2. configure-zlib / scx_nest / schedutil\n",
        " 120. hackbench-sockets / smove / performance\n",
    ] {
        assert!(plan.contains(expected), "no {expected:?} in:\n{plan}");
    }
    assert_eq!(snapshot(&cpus), before, "a dry run changes nothing");
    assert!(!cache.exists(), "nor fetches anything");

    // A program that is not here is named with how to get it.
    let suite = dir.path().join("s.toml");
    std::fs::write(
        &suite,
        "[[scheduler]]\nname = \"default\"\n[[workload]]\nname = \"w\"\n\
         command = [\"no-such-bench\"]\ninstall = \"apt-get install no-such\"\n",
    )
    .unwrap();
    let output = nest_bench(&["--suite", suite.to_str().unwrap(), "--dry-run"]);
    let plan = text(&output.stdout);
    assert!(
        plan.contains("MISSING: no-such-bench is not installed: apt-get install no-such"),
        "{plan}"
    );
}

/// `nest bench` with a fake cpufreq tree.
fn bench_on(cpus: &Path, out: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nest"));
    command
        .args(["bench", "--schedulers", "default", "--cpufreq-root"])
        .arg(cpus)
        .arg("-o")
        .arg(out)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Each run sees the driver mode and governor its cell needs; after a
/// failed run (the workload fails under performance) everything is back,
/// and the results say so.
#[test]
fn governors_switch_the_driver_mode_per_cell_and_restore_it_after_a_failed_run() {
    let dir = tempfile::tempdir().unwrap();
    let cpus = dir.path().join("cpu");
    fake_intel_pstate(&cpus, 2);
    let before = snapshot(&cpus);
    let out = dir.path().join("out");
    let script = format!(
        "echo $(cat {0}/intel_pstate/status) $(cat {0}/cpu1/cpufreq/scaling_governor); \
         grep -q performance {0}/cpu0/cpufreq/scaling_governor && exit 3; true",
        cpus.display()
    );
    let output = bench_on(
        &cpus,
        &out,
        &[
            "--governors",
            "performance,schedutil",
            "--warmup",
            "0",
            "--runs",
            "2",
            "--",
            "/bin/sh",
            "-c",
            &script,
        ],
    )
    .output()
    .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "a run failed: {stderr}");
    assert_eq!(snapshot(&cpus), before, "everything restored");
    let log = |name: &str| std::fs::read_to_string(out.join("logs").join(name)).unwrap();
    assert_eq!(log("sh-default-schedutil-r2.log"), "passive schedutil\n");
    assert_eq!(log("sh-default-performance-r1.log"), "active performance\n");
    assert!(
        stderr
            .contains("cpufreq before: intel_pstate (status active), governor powersave on 2 CPUs")
            && stderr.contains(
                "cpufreq after: intel_pstate (status active), governor powersave on 2 CPUs"
            ),
        "{stderr}"
    );
    let results = results(&out);
    assert_eq!(results["method"]["baseline"]["governor"], "schedutil");
    let notes: Vec<&str> = results["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes.contains(&"governor schedutil: schedutil (intel_pstate passive)"),
        "{notes:?}"
    );
    assert!(
        !notes.iter().any(|n| n.contains("NOT restored")),
        "{notes:?}"
    );
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("improvement over default / schedutil"),
        "{stdout}"
    );
}

/// The third CPU refuses its governor after the driver went passive:
/// the run fails with the reason and the machine is put back.
#[test]
fn a_governor_switch_failing_half_way_fails_the_run_and_is_undone() {
    let dir = tempfile::tempdir().unwrap();
    let cpus = dir.path().join("cpu");
    fake_intel_pstate(&cpus, 4);
    // Readable, but no write gets through, even as root.
    let refusing = cpus.join("cpu2/cpufreq/scaling_governor");
    std::fs::remove_file(&refusing).unwrap();
    std::os::unix::fs::symlink("/proc/version", &refusing).unwrap();
    let before = snapshot(&cpus);
    let out = dir.path().join("out");
    let output = bench_on(
        &cpus,
        &out,
        &[
            "--governors",
            "schedutil",
            "--warmup",
            "0",
            "--runs",
            "1",
            "--",
            "true",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", text(&output.stderr));
    assert_eq!(snapshot(&cpus), before, "everything restored");
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("FAILED true / default / schedutil, run 1: governor schedutil not set"),
        "{stdout}"
    );
}

/// Ctrl-C while a workload runs under schedutil: the driver goes back to
/// active and every CPU to powersave.
#[test]
fn sigint_restores_the_driver_mode_and_governors() {
    let dir = tempfile::tempdir().unwrap();
    let cpus = dir.path().join("cpu");
    fake_intel_pstate(&cpus, 2);
    let before = snapshot(&cpus);
    let out = dir.path().join("out");
    let started = dir.path().join("started");
    let script = format!("touch {}; sleep 600", started.display());
    let child = bench_on(
        &cpus,
        &out,
        &[
            "--governor",
            "schedutil",
            "--warmup",
            "0",
            "--",
            "/bin/sh",
            "-c",
            &script,
        ],
    )
    .spawn()
    .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while !started.exists() {
        assert!(Instant::now() < until, "the run never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = std::fs::read_to_string(cpus.join("intel_pstate/status")).unwrap();
    assert_eq!(status.trim(), "passive", "switched for the run");
    // SAFETY: signals the nest bench we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", text(&output.stderr));
    assert_eq!(snapshot(&cpus), before, "everything restored");
}
