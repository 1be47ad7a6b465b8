//! Forking children that run a closure and exit, and reaping them.

use anyhow::{Result, bail};

/// Fork a child that runs `child` and exits with its status. The child must
/// only do async-signal-safe work if the parent has other threads.
pub fn fork(child: impl FnOnce() -> i32) -> Result<libc::pid_t> {
    // SAFETY: fork has no preconditions; the child only runs `child` and
    // leaves with _exit, never returning into the parent's stack.
    match unsafe { libc::fork() } {
        -1 => bail!("fork failed: {}", std::io::Error::last_os_error()),
        0 => {
            let status = child();
            // SAFETY: _exit ends the child without running the parent's
            // atexit handlers or destructors.
            unsafe { libc::_exit(status) }
        }
        pid => Ok(pid),
    }
}

/// Wait for child `pid` and fail unless it exited with status 0.
pub fn wait_ok(pid: libc::pid_t) -> Result<()> {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid out pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            bail!("waitpid({pid}) failed: {err}");
        }
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("child {pid} did not exit cleanly (wait status {status:#x})");
    }
    Ok(())
}
