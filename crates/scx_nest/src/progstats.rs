//! The kernel's run-time statistics of scx_nest's BPF programs: how many
//! times each callback ran and how long it took in all (`--prog-stats`).
//! This is what a scheduling decision costs, measured by the kernel itself;
//! beside it, how many instructions the verifier processed to load each
//! program, which differs between kernels.

use std::os::fd::{AsFd, FromRawFd, OwnedFd};

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

/// One program's totals, and what loading it cost the verifier.
pub struct ProgStat {
    pub name: String,
    pub runs: u64,
    pub run_time_ns: u64,
    pub verified_insns: u32,
}

/// The statistics of every program of `object`, from the kernel's
/// program information (libbpf-rs' query of all loaded programs, kept to
/// `object`'s by id; the names are libbpf's, which the kernel truncates).
pub fn read(object: &libbpf_rs::Object) -> Vec<ProgStat> {
    let names: Vec<(u32, String)> = object
        .progs()
        .filter_map(|prog| {
            let id = libbpf_rs::Program::id_from_fd(prog.as_fd()).ok()?;
            Some((id, prog.name().to_string_lossy().into_owned()))
        })
        .collect();
    libbpf_rs::query::ProgInfoIter::default()
        .filter_map(|info| {
            let (_, name) = names.iter().find(|(id, _)| *id == info.id)?;
            Some(ProgStat {
                name: name.clone(),
                runs: info.run_cnt,
                run_time_ns: info.run_time_ns,
                verified_insns: info.verified_insns,
            })
        })
        .collect()
}

/// Print one `prog-stats:` line per program, for people and scripts.
pub fn print(stats: &[ProgStat]) {
    for s in stats {
        println!(
            "prog-stats: {:<24} runs={:<10} total_ns={:<14} ns_per_run={:<8.0} verified_insns={}",
            s.name,
            s.runs,
            s.run_time_ns,
            s.run_time_ns as f64 / s.runs.max(1) as f64,
            s.verified_insns
        );
    }
}
