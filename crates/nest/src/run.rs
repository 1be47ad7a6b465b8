//! `nest run -- CMD ARGS...`: run one command, and everything it starts,
//! under scx_nest, leaving every other task alone.
//!
//! scx_nest in partial mode (`scx_nest --partial`) schedules only tasks
//! whose policy is `SCHED_EXT`; children inherit the policy. So `nest run`
//! checks that scx_nest is the attached sched_ext scheduler, switches
//! itself to `SCHED_EXT` and execs the command.
//!
//! What is attached is read from `/sys/kernel/sched_ext`: `state`
//! (`enabled` while a scheduler runs), `root/ops` (its name, `nest...` for
//! scx_nest) and `switch_all` (1 in full mode, where every task is already
//! scheduled by it). In full mode the command is still run, in `SCHED_EXT`
//! (so it stays with Nest if scx_nest is restarted in partial mode), and a
//! note says that the opt-in changes nothing while the mode lasts.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::{Result, bail};
use clap::Args;

/// The policy number of sched_ext tasks (`SCHED_EXT` in linux/sched.h).
const SCHED_EXT: libc::c_int = 7;
pub const SYSFS: &str = "/sys/kernel/sched_ext";

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The command to run under scx_nest, and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

/// How the attached scx_nest schedules tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Only `SCHED_EXT` tasks: what `nest run` is for.
    Partial,
    /// Every task (or the kernel did not say).
    Full,
}

/// What `/sys/kernel/sched_ext` says; `None` for a missing file.
#[derive(Debug, Default)]
pub struct Status {
    pub state: Option<String>,
    pub ops: Option<String>,
    pub switch_all: Option<String>,
    /// How many times a BPF scheduler was enabled since boot: unchanged
    /// across a run means no ejection and re-attach in between.
    pub enable_seq: Option<String>,
}

impl Status {
    pub fn read(dir: &Path) -> Self {
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .ok()
                .map(|s| s.trim().to_string())
        };
        Self {
            state: read("state"),
            ops: read("root/ops"),
            switch_all: read("switch_all"),
            enable_seq: read("enable_seq"),
        }
    }
}

/// Is scx_nest attached, and in which mode? The error says what to do.
pub fn judge(status: &Status) -> Result<Mode> {
    let state = status.state.as_deref().unwrap_or("unknown");
    if state != "enabled" {
        bail!(
            "no sched_ext scheduler is attached (state: {state}): \
             start `scx_nest --partial` first"
        );
    }
    let ops = status.ops.as_deref().unwrap_or("unknown");
    if !ops.starts_with("nest") {
        bail!(
            "the attached sched_ext scheduler is '{ops}', not scx_nest: \
             stop it and start `scx_nest --partial`"
        );
    }
    Ok(match status.switch_all.as_deref() {
        Some("0") => Mode::Partial,
        _ => Mode::Full,
    })
}

/// Put the calling thread (before exec: the whole process) into SCHED_EXT.
fn enter_sched_ext() -> Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; param is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, SCHED_EXT, &param) } != 0 {
        let err = std::io::Error::last_os_error();
        bail!("cannot switch to the SCHED_EXT policy: {err} (does this kernel have sched_ext?)");
    }
    Ok(())
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let dir = Path::new(SYSFS);
    if !dir.exists() {
        bail!(
            "this kernel has no sched_ext ({SYSFS} is missing): `nest run` needs \
             Linux 6.12 or later with CONFIG_SCHED_CLASS_EXT=y and `scx_nest --partial` running"
        );
    }
    if judge(&Status::read(dir))? == Mode::Full {
        eprintln!(
            "nest run: note: scx_nest runs in full mode and already schedules every task; \
             running the command anyway (start `scx_nest --partial` to schedule only opted-in commands)"
        );
    }
    enter_sched_ext()?;
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("no command given"))?;
    let err = Command::new(program).args(rest).exec();
    eprintln!(
        "nest: error: cannot run {}: {err}",
        program.to_string_lossy()
    );
    // The shells' conventions: 127 not found, 126 found but not runnable.
    Ok(ExitCode::from(match err.kind() {
        std::io::ErrorKind::NotFound => 127,
        _ => 126,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: &str, ops: &str, switch_all: &str) -> Status {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Status {
            state: some(state),
            ops: some(ops),
            switch_all: some(switch_all),
            enable_seq: None,
        }
    }

    #[test]
    fn partial_scx_nest_is_what_nest_run_wants() {
        let mode = judge(&status("enabled", "nest_0.1.0_x86_64", "0")).unwrap();
        assert_eq!(mode, Mode::Partial);
    }

    #[test]
    fn full_mode_or_an_unknown_mode_is_full() {
        let full = judge(&status("enabled", "nest", "1")).unwrap();
        assert_eq!(full, Mode::Full);
        let unknown = judge(&status("enabled", "nest", "")).unwrap();
        assert_eq!(unknown, Mode::Full);
    }

    #[test]
    fn no_scheduler_is_refused_with_what_to_do() {
        let err = judge(&status("disabled", "", "0")).unwrap_err().to_string();
        assert!(err.contains("no sched_ext scheduler is attached"), "{err}");
        assert!(err.contains("scx_nest --partial"), "{err}");
    }

    #[test]
    fn another_scheduler_is_refused() {
        let err = judge(&status("enabled", "bpfland_1.0", "0"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("'bpfland_1.0', not scx_nest"), "{err}");
    }
}
