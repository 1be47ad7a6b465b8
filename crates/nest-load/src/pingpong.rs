//! Two processes bouncing one byte through a pair of pipes.

use std::time::Instant;

use anyhow::{Result, bail};

use crate::process;

fn pipe() -> Result<[libc::c_int; 2]> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        bail!("pipe failed: {}", std::io::Error::last_os_error());
    }
    Ok(fds)
}

fn read_byte(fd: libc::c_int) -> isize {
    let mut byte = 0u8;
    // SAFETY: reads at most one byte into `byte`.
    unsafe { libc::read(fd, (&mut byte as *mut u8).cast(), 1) }
}

fn write_byte(fd: libc::c_int) -> isize {
    let byte = 1u8;
    // SAFETY: writes one byte from `byte`.
    unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) }
}

fn close(fd: libc::c_int) {
    // SAFETY: closing a descriptor we own.
    unsafe { libc::close(fd) };
}

/// The child: echo every byte back until the parent closes its end.
fn echo(from_parent: libc::c_int, to_parent: libc::c_int) -> i32 {
    while read_byte(from_parent) == 1 {
        if write_byte(to_parent) != 1 {
            return 1;
        }
    }
    0
}

pub fn run(until: Instant) -> Result<String> {
    let [down_read, down_write] = pipe()?;
    let [up_read, up_write] = pipe()?;
    let pid = process::fork(|| {
        close(down_write);
        close(up_read);
        echo(down_read, up_write)
    })?;
    close(down_read);
    close(up_write);
    let mut round_trips = 0u64;
    let mut result = Ok(());
    while Instant::now() < until {
        if write_byte(down_write) != 1 || read_byte(up_read) != 1 {
            result = Err(anyhow::anyhow!("ping-pong partner stopped answering"));
            break;
        }
        round_trips += 1;
    }
    close(down_write);
    close(up_read);
    result?;
    process::wait_ok(pid)?;
    Ok(format!("pingpong: round_trips={round_trips}"))
}
