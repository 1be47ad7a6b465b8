//! scx_nest's command line, from the built binary: everything here is
//! decided before the scheduler is loaded, so it needs neither root nor
//! sched_ext.

use std::process::{Command, Output};

fn scx_nest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scx_nest"))
        .args(args)
        .output()
        .expect("cannot run scx_nest")
}

#[test]
fn version_names_the_git_revision() {
    for flag in ["-V", "--version"] {
        let output = scx_nest(&[flag]);
        assert!(output.status.success());
        let text = String::from_utf8_lossy(&output.stdout);
        let prefix = format!("scx_nest {} (git ", env!("CARGO_PKG_VERSION"));
        assert!(text.starts_with(&prefix) && text.ends_with(")\n"), "{text}");
    }
}

#[test]
fn bad_values_are_usage_errors_that_say_what_is_valid() {
    for (args, valid) in [
        (&["--slice", "8"][..], "ns, us, ms or s"),
        (&["--p-remove", "2ticks"], "the published 2 ticks are 8ms"),
        (
            &["--stats", "often"],
            "write seconds (1, 0.5) or a number and a unit",
        ),
        (&["--monitor", "0.0001"], "at least 1ms"),
        (&["--slice", "2s"], "between 100us and 1s"),
        (
            &["--policy", "eevdf"],
            "[possible values: nest, builtin, slocal, smove, spread]",
        ),
        (&["--disable", "spin"], "valid: attach, reserve,"),
        (&["--watchdog", "1s"], "twice the starvation guard's wait"),
    ] {
        let output = scx_nest(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(err.contains(valid), "{args:?}: {err}");
        assert!(!err.contains('\x1b'), "colour codes into a pipe: {err:?}");
    }
}

#[test]
fn a_closed_pipe_ends_quietly() {
    use std::process::Stdio;
    // The reader is gone before scx_nest writes (it closes its end at
    // once): scx_nest must end with status 0 and say nothing. Before the
    // fix it said "Broken pipe" and exited 1.
    let mut child = Command::new(env!("CARGO_BIN_EXE_scx_nest"))
        .arg("--help-stats")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run scx_nest");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("scx_nest did not finish");
    assert!(output.status.success(), "{:?}", output.status);
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn help_man_prints_a_section_8_page_with_every_option_and_the_exit_status() {
    let output = scx_nest(&["--help-man"]);
    assert!(output.status.success());
    let page = String::from_utf8_lossy(&output.stdout);
    assert!(page.contains(".TH scx_nest 8"), "{page}");
    for option in ["\\-\\-monitor", "\\-\\-p\\-remove", "\\-\\-disable"] {
        assert!(page.contains(option), "{option} missing: {page}");
    }
    assert!(page.contains("the kernel ejected the scheduler"), "{page}");
}
