//! Child processes of the bench: each in its own process group (so that
//! the terminal's Ctrl-C reaches only `nest bench`, which then stops them
//! in order), output to a log file, and the exact time it exited noted by
//! a waiting thread (polling would blur wall times).

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// How often waits look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

pub struct Child {
    pid: libc::pid_t,
    pub started: Instant,
    done: Receiver<(std::io::Result<ExitStatus>, Instant)>,
    exit: Option<(ExitStatus, Instant)>,
}

/// How a wait ended.
#[derive(Debug)]
pub enum Waited {
    Exited(ExitStatus, Instant),
    TimedOut,
    Interrupted,
}

/// Where `scripts/peers.sh` installs the scx project's schedulers
/// (`cargo install --root $NEST_CACHE/peers`).
pub fn peers_dir() -> PathBuf {
    crate::source::cache_dir().join("peers/bin")
}

/// Where programs are looked for, in order: beside this `nest` binary
/// (scx_nest, nest-load), on `PATH`, then in [`peers_dir`].
fn program_dirs() -> impl Iterator<Item = PathBuf> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.to_path_buf()));
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>());
    beside.into_iter().chain(on_path).chain([peers_dir()])
}

/// Where `program` is: itself if it has a `/`, else in the first of
/// [`program_dirs`] that has it.
pub fn resolve(program: &str) -> Option<PathBuf> {
    resolve_in(program, None)
}

/// Where `program` is for a command run in `dir`: a path with a `/`
/// (`./configure`) is taken from `dir` (or the current directory),
/// anything else as [`resolve`].
pub fn resolve_in(program: &str, dir: Option<&Path>) -> Option<PathBuf> {
    if program.contains('/') {
        let path = dir.map_or_else(|| PathBuf::from(program), |d| d.join(program));
        return Some(path).filter(|p| p.exists());
    }
    program_dirs()
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// `command` with its program as the path [`resolve_in`] finds (kept as
/// it is when not found): wrappers that search only `PATH` (`nest run`,
/// `nest trace record`) then run what the bench found beside `nest`.
pub fn with_program_path(mut command: Vec<String>, dir: Option<&Path>) -> Vec<String> {
    if let Some(path) = command.first().and_then(|p| resolve_in(p, dir)) {
        command[0] = path.display().to_string();
    }
    command
}

/// The names of the executables starting with `prefix` in any of
/// [`program_dirs`], sorted, each once.
pub fn programs_starting_with(prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = program_dirs()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            let executable = entry
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
            (name.starts_with(prefix) && executable).then_some(name)
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

impl Child {
    /// Start `command` with stdout and stderr going to `log`, in `dir`
    /// (where a relative program such as `./configure` is found) or in
    /// the current directory.
    pub fn spawn(command: &[String], log: &Path, dir: Option<&Path>) -> Result<Self> {
        let (program, args) = command.split_first().context("empty command")?;
        let path =
            resolve_in(program, dir).with_context(|| format!("cannot find program '{program}'"))?;
        let out = File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
        let mut command = Command::new(&path);
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        let mut child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot run {}", path.display()))?;
        let started = Instant::now();
        let pid = child.id() as libc::pid_t;
        let (tx, done) = channel();
        std::thread::spawn(move || {
            let status = child.wait();
            let _ = tx.send((status, Instant::now()));
        });
        Ok(Self {
            pid,
            started,
            done,
            exit: None,
        })
    }

    /// The exit status, if it has exited by now.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.wait_for(Duration::ZERO);
        self.exit.map(|(status, _)| status)
    }

    fn wait_for(&mut self, timeout: Duration) {
        if self.exit.is_some() {
            return;
        }
        match self.done.recv_timeout(timeout) {
            Ok((status, at)) => {
                // A failed wait() is not an exit we can time: count it as
                // killed by SIGKILL, a failure.
                let status = status.unwrap_or_else(|_| ExitStatus::from_raw(libc::SIGKILL));
                self.exit = Some((status, at));
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                self.exit = Some((ExitStatus::from_raw(libc::SIGKILL), Instant::now()));
            }
        }
    }

    /// Wait until it exits, `deadline` passes or `stop` is set.
    pub fn wait_until(&mut self, deadline: Instant, stop: &AtomicBool) -> Waited {
        loop {
            if let Some((status, at)) = self.exit {
                return Waited::Exited(status, at);
            }
            if stop.load(Ordering::Relaxed) {
                return Waited::Interrupted;
            }
            let now = Instant::now();
            if now >= deadline {
                return Waited::TimedOut;
            }
            self.wait_for(POLL.min(deadline - now));
        }
    }

    /// Send `signal` to its whole process group.
    pub fn signal(&self, signal: libc::c_int) {
        if self.exit.is_none() {
            // SAFETY: kill() with a negative pid signals that process group.
            unsafe { libc::kill(-self.pid, signal) };
        }
    }

    /// Send `signal`, wait up to `grace` for the exit, then SIGKILL.
    /// Returns the exit status and whether SIGKILL was needed.
    pub fn stop(&mut self, signal: libc::c_int, grace: Duration) -> (ExitStatus, bool) {
        self.signal(signal);
        let never = AtomicBool::new(false);
        if let Waited::Exited(status, _) = self.wait_until(Instant::now() + grace, &never) {
            return (status, false);
        }
        self.signal(libc::SIGKILL);
        match self.wait_until(Instant::now() + Duration::from_secs(10), &never) {
            Waited::Exited(status, _) => (status, true),
            _ => (ExitStatus::from_raw(libc::SIGKILL), true),
        }
    }
}

impl Drop for Child {
    /// Never leave a child running behind us.
    fn drop(&mut self) {
        if self.exited().is_none() {
            self.signal(libc::SIGKILL);
        }
    }
}

/// A status as people read it: "status 1", "killed by signal 9".
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => format!("{status}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        ["/bin/sh", "-c", script].map(String::from).to_vec()
    }

    #[test]
    fn output_goes_to_the_log_and_the_status_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out.log");
        let mut child =
            Child::spawn(&sh("echo Time: 1.5; echo oops >&2; exit 3"), &log, None).unwrap();
        let never = AtomicBool::new(false);
        let waited = child.wait_until(Instant::now() + Duration::from_secs(60), &never);
        let Waited::Exited(status, _) = waited else {
            panic!("{waited:?}")
        };
        assert_eq!(describe(status), "status 3");
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "Time: 1.5\noops\n");
    }

    #[test]
    fn a_stop_flag_interrupts_and_stop_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Child::spawn(&sh("sleep 600 & wait"), &dir.path().join("l"), None).unwrap();
        let stop = AtomicBool::new(true);
        let waited = child.wait_until(Instant::now() + Duration::from_secs(60), &stop);
        assert!(matches!(waited, Waited::Interrupted), "{waited:?}");
        let (status, killed) = child.stop(libc::SIGTERM, Duration::from_secs(60));
        assert_eq!(describe(status), "killed by signal 15");
        assert!(!killed);
    }

    #[test]
    fn a_relative_program_is_found_and_run_in_its_directory() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("configure");
        std::fs::write(&script, "#!/bin/sh\npwd\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = dir.path().join("l");
        let command = ["./configure".to_string()];
        let mut child = Child::spawn(&command, &log, Some(dir.path())).unwrap();
        let never = AtomicBool::new(false);
        let waited = child.wait_until(Instant::now() + Duration::from_secs(60), &never);
        assert!(
            matches!(waited, Waited::Exited(s, _) if s.success()),
            "{waited:?}"
        );
        let pwd = std::fs::read_to_string(&log).unwrap();
        assert_eq!(Path::new(pwd.trim()), dir.path().canonicalize().unwrap());
    }

    #[test]
    fn wrapped_programs_get_the_path_the_bench_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("configure"), "").unwrap();
        let command = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let sh = with_program_path(command(&["sh", "-c", "true"]), None);
        assert!(sh[0].starts_with('/') && sh[0].ends_with("/sh"), "{sh:?}");
        assert_eq!(sh[1..], ["-c", "true"]);
        let configure = with_program_path(command(&["./configure"]), Some(dir.path()));
        assert_eq!(Path::new(&configure[0]), dir.path().join("./configure"));
        let missing = with_program_path(command(&["no-such-program-xyz"]), None);
        assert_eq!(missing, ["no-such-program-xyz"]);
    }

    #[test]
    fn a_missing_program_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = Child::spawn(
            &["no-such-program-xyz".to_string()],
            &dir.path().join("l"),
            None,
        );
        let err = format!("{:#}", err.err().unwrap());
        assert!(
            err.contains("cannot find program 'no-such-program-xyz'"),
            "{err}"
        );
    }
}
