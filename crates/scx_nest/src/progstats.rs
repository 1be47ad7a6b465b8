//! The kernel's run-time statistics of scx_nest's BPF programs: how many
//! times each callback ran and how long it took in all (`--prog-stats`).
//! This is what a scheduling decision costs, measured by the kernel itself.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use anyhow::{Result, bail};
use libbpf_rs::libbpf_sys;

/// Keeps the kernel's BPF run-time accounting on while it lives.
pub struct RunTimeStats {
    _enabled: OwnedFd,
}

impl RunTimeStats {
    pub fn enable() -> Result<Self> {
        // SAFETY: bpf_enable_stats has no memory preconditions; it returns
        // a new file descriptor or a negative error.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        if fd < 0 {
            bail!(
                "cannot enable BPF run-time statistics: {}",
                std::io::Error::from_raw_os_error(-fd)
            );
        }
        // SAFETY: fd is a new descriptor that nothing else owns.
        Ok(Self {
            _enabled: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }
}

/// One program's totals.
pub struct ProgStat {
    pub name: String,
    pub runs: u64,
    pub run_time_ns: u64,
}

fn prog_stat(name: &str, fd: std::os::fd::BorrowedFd<'_>) -> Result<ProgStat> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a bpf_prog_info of `len` bytes; the kernel fills it.
    let ret = unsafe {
        libbpf_sys::bpf_obj_get_info_by_fd(
            fd.as_raw_fd(),
            (&mut info as *mut libbpf_sys::bpf_prog_info).cast(),
            &mut len,
        )
    };
    if ret != 0 {
        bail!("cannot read the statistics of BPF program {name}");
    }
    Ok(ProgStat {
        name: name.to_string(),
        runs: info.run_cnt,
        run_time_ns: info.run_time_ns,
    })
}

/// The statistics of every program of `object` that ran.
pub fn read(object: &libbpf_rs::Object) -> Vec<ProgStat> {
    object
        .progs()
        .filter_map(|prog| {
            let name = prog.name().to_string_lossy().into_owned();
            prog_stat(&name, prog.as_fd()).ok()
        })
        .filter(|stat| stat.runs > 0)
        .collect()
}

/// Print one `prog-stats:` line per program, for people and scripts.
pub fn print(stats: &[ProgStat]) {
    for s in stats {
        println!(
            "prog-stats: {:<24} runs={:<10} total_ns={:<14} ns_per_run={:.0}",
            s.name,
            s.runs,
            s.run_time_ns,
            s.run_time_ns as f64 / s.runs.max(1) as f64
        );
    }
}
