//! Booting a guest, running one command in it and collecting the outcome.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::console::{ConsoleIssue, scan_console};
use crate::initramfs;
use crate::kernel::GuestKernel;
use crate::qemu::{BootFiles, find_qemu, qemu_args};
use crate::spec::VmSpec;

const POLL: Duration = Duration::from_millis(50);

/// What came back from a guest run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmOutcome {
    /// Exit status of the command; `None` if it never finished (timeout,
    /// panic, init failure).
    pub exit_status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The guest's serial console (kernel log and init messages).
    pub console_log: String,
    /// Time from starting QEMU until the command started, if it did.
    pub boot_time: Option<Duration>,
    /// Time from starting QEMU until it exited or was killed.
    pub elapsed: Duration,
    /// The deadline passed and QEMU was killed.
    pub timed_out: bool,
    /// QEMU's own stderr (warnings, errors).
    pub qemu_log: String,
}

impl VmOutcome {
    /// The command ran to completion with status 0.
    pub fn success(&self) -> bool {
        !self.timed_out && self.exit_status == Some(0)
    }

    /// Kernel problems reported on the console.
    pub fn console_issues(&self) -> Vec<ConsoleIssue> {
        scan_console(&self.console_log)
    }

    /// A one-line explanation when the run failed, `None` on success.
    pub fn failure(&self) -> Option<String> {
        if self.timed_out {
            return Some(format!(
                "guest timed out after {:.1} s and was killed",
                self.elapsed.as_secs_f64()
            ));
        }
        match self.exit_status {
            Some(0) => None,
            Some(code) => Some(format!("guest command exited with status {code}")),
            None => Some(format!(
                "guest ended without a command status ({})",
                self.end_reason()
            )),
        }
    }

    fn end_reason(&self) -> String {
        let issues = self.console_issues();
        if let Some(issue) = issues.iter().find(|i| i.kind == crate::IssueKind::Panic) {
            return issue.line.trim().to_string();
        }
        match self
            .console_log
            .lines()
            .rev()
            .find(|l| l.contains("nest-init: error"))
        {
            Some(line) => line.trim().to_string(),
            None => "see the console log".to_string(),
        }
    }
}

/// Boots the guest described by `spec`, runs `command` with `/bin/sh` as
/// root and powers off. Errors are problems setting the guest up; a guest
/// that fails or hangs is reported in the outcome.
pub fn run(spec: &VmSpec, command: &str) -> Result<VmOutcome> {
    spec.validate()?;
    let kernel = GuestKernel::locate(&spec.kernel_dir)?;
    let qemu = find_qemu()?;
    let initramfs = initramfs::build(&kernel)?;
    let work = tempfile::Builder::new()
        .prefix("nest-vm-")
        .tempdir()
        .context("cannot create a temporary directory for the guest run")?;
    let output_dir = spec.output_dir.as_deref().map(output_dir).transpose()?;
    let workdir = workdir(spec);
    let files = BootFiles {
        workdir_share: hidden_in_guest(&workdir).then(|| workdir.clone()),
        vmlinuz: kernel.vmlinuz.clone(),
        initramfs,
        share_dir: work.path().join("share"),
        console_log: work.path().join("console.log"),
        output_dir,
    };
    prepare_share(&files, &kernel, &workdir, command)?;
    let qemu_log = work.path().join("qemu.log");
    let mut cmd = Command::new(&qemu);
    cmd.args(qemu_args(spec, &files));
    let (timed_out, boot_time, elapsed) =
        supervise(cmd, &qemu_log, &files.share_dir, spec.timeout)?;
    collect(&files, &qemu_log, timed_out, boot_time, elapsed)
}

/// Creates the output directory if missing and returns its canonical
/// absolute path: the guest mounts it at that same path.
pub fn output_dir(dir: &Path) -> Result<PathBuf> {
    fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the guest output directory {}", dir.display()))?;
    let real = dir.canonicalize().with_context(|| {
        format!(
            "cannot resolve the guest output directory {}",
            dir.display()
        )
    })?;
    if !real.is_dir() {
        bail!(
            "the guest output directory {} is not a directory",
            dir.display()
        );
    }
    for system in ["/", "/proc", "/sys", "/dev", "/run/nest"] {
        if real == Path::new(system) || (system != "/" && real.starts_with(system)) {
            bail!(
                "the guest output directory {} would hide the guest's {system}; use a directory of its own",
                real.display()
            );
        }
    }
    Ok(real)
}

/// The directory the command starts in: the spec's, or ours.
fn workdir(spec: &VmSpec) -> PathBuf {
    let dir = match &spec.workdir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
    };
    dir.canonicalize().unwrap_or(dir)
}

/// Is `dir` under a directory the guest mounts its own tmpfs on, so that
/// the host root shared with the guest does not show it?
pub fn hidden_in_guest(dir: &Path) -> bool {
    ["/tmp", "/run", "/boot"]
        .iter()
        .any(|top| dir.starts_with(top))
}

/// Writes the command, its environment and the kernel config where the
/// guest's init expects them.
fn prepare_share(
    files: &BootFiles,
    kernel: &GuestKernel,
    workdir: &Path,
    command: &str,
) -> Result<()> {
    let share = &files.share_dir;
    fs::create_dir(share).with_context(|| format!("cannot create {}", share.display()))?;
    fs::write(share.join("command.sh"), format!("{command}\n"))?;
    fs::copy(&kernel.config, share.join("kconfig"))
        .with_context(|| format!("cannot copy {}", kernel.config.display()))?;
    let path = std::env::var("PATH").unwrap_or_default();
    let mut env = format!(
        "NEST_WORKDIR={}\nNEST_PATH={}\n",
        shell_quote(&workdir.display().to_string()),
        shell_quote(&format!(
            "{path}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        ))
    );
    if let Some(dir) = &files.output_dir {
        env.push_str(&format!(
            "NEST_OUT={}\n",
            shell_quote(&dir.display().to_string())
        ));
    }
    if files.workdir_share.is_some() {
        env.push_str("NEST_WORKDIR_SHARED=1\n");
    }
    fs::write(share.join("env"), env)?;
    Ok(())
}

/// Kills QEMU if the runner returns early or panics.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Runs QEMU until it exits or the deadline passes. Returns (timed out,
/// boot time, elapsed).
fn supervise(
    mut cmd: Command,
    log: &Path,
    share: &Path,
    timeout: Duration,
) -> Result<(bool, Option<Duration>, Duration)> {
    let log_file = File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let start = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .spawn()
        .context("cannot start qemu-system-x86_64: run scripts/setup.sh")?;
    let mut child = KillOnDrop(child);
    let mut boot_time = None;
    loop {
        if boot_time.is_none() && share.join("ready").exists() {
            boot_time = Some(start.elapsed());
        }
        if child.0.try_wait()?.is_some() {
            return Ok((false, boot_time, start.elapsed()));
        }
        if start.elapsed() >= timeout {
            child.0.kill().context("cannot kill the timed-out guest")?;
            child.0.wait()?;
            return Ok((true, boot_time, start.elapsed()));
        }
        sleep(POLL);
    }
}

fn collect(
    files: &BootFiles,
    qemu_log: &Path,
    timed_out: bool,
    boot_time: Option<Duration>,
    elapsed: Duration,
) -> Result<VmOutcome> {
    let share = &files.share_dir;
    let outcome = VmOutcome {
        exit_status: if timed_out {
            None
        } else {
            read_status(&share.join("status"))
        },
        stdout: read_lossy(&share.join("stdout")),
        stderr: read_lossy(&share.join("stderr")),
        console_log: read_lossy(&files.console_log),
        boot_time,
        elapsed,
        timed_out,
        qemu_log: read_lossy(qemu_log),
    };
    if outcome.console_log.is_empty() && !timed_out {
        bail!(
            "QEMU failed before the guest started:\n{}",
            outcome.qemu_log.trim()
        );
    }
    Ok(outcome)
}

fn read_status(path: &Path) -> Option<i32> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn read_lossy(path: &Path) -> String {
    fs::read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

/// Quotes `word` for a POSIX shell.
pub fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Joins `args` into one shell command line, quoting as needed.
pub fn shell_join<S: AsRef<str>>(args: &[S]) -> String {
    args.iter()
        .map(|a| shell_quote(a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_for_the_shell() {
        assert_eq!(shell_quote("echo"), "echo");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(
            shell_join(&["sh", "-c", "echo hi; exit 7"]),
            "sh -c 'echo hi; exit 7'"
        );
    }

    fn outcome() -> VmOutcome {
        VmOutcome {
            exit_status: Some(0),
            stdout: String::new(),
            stderr: String::new(),
            console_log: "boot\n".into(),
            boot_time: None,
            elapsed: Duration::from_secs(3),
            timed_out: false,
            qemu_log: String::new(),
        }
    }

    #[test]
    fn directories_under_guest_tmpfs_mounts_are_hidden() {
        assert!(hidden_in_guest(Path::new("/tmp/clone")));
        assert!(hidden_in_guest(Path::new("/run/user/0/x")));
        assert!(hidden_in_guest(Path::new("/boot")));
        assert!(!hidden_in_guest(Path::new("/work/main")));
        assert!(!hidden_in_guest(Path::new("/tmpfoo")));
    }

    #[test]
    fn output_dir_is_created_and_made_absolute() {
        let tmp = tempfile::tempdir().unwrap();
        let wanted = tmp.path().join("a/b");
        let got = output_dir(&wanted).unwrap();
        assert!(got.is_absolute() && got.is_dir(), "{}", got.display());
        assert_eq!(got, wanted.canonicalize().unwrap());
    }

    #[test]
    fn output_dir_that_cannot_be_created_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        fs::write(&file, "x").unwrap();
        let err = format!("{:#}", output_dir(&file.join("sub")).unwrap_err());
        assert!(
            err.contains("cannot create the guest output directory"),
            "{err}"
        );
        let err = format!("{:#}", output_dir(Path::new("/proc/self")).unwrap_err());
        assert!(err.contains("would hide"), "{err}");
    }

    #[test]
    fn timeout_is_never_success() {
        let timed_out = VmOutcome {
            timed_out: true,
            exit_status: None,
            ..outcome()
        };
        assert!(outcome().success());
        assert!(!timed_out.success());
        assert!(timed_out.failure().unwrap().contains("timed out"));
    }

    #[test]
    fn missing_status_explains_panic() {
        let panicked = VmOutcome {
            exit_status: None,
            console_log: "x\n[1.0] Kernel panic - not syncing: VFS\n".into(),
            ..outcome()
        };
        assert!(panicked.failure().unwrap().contains("Kernel panic"));
    }
}
