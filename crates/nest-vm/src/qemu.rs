//! The QEMU command line (pure, so it can be unit tested).

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::spec::VmSpec;

/// Single-threaded TCG: with one host thread per vCPU (MTTCG), QEMU 7.2
/// races with the kernel's int3-based code patching (static keys, e.g.
/// "sched_clock: Marking stable" or enabling a sched_ext scheduler), and
/// about one boot in three of a 16-vCPU guest died with `Oops: int3`.
/// `VmSpec::multi_threaded_tcg` brings MTTCG back, at that risk.
pub const TCG: &str = "tcg,thread=single";

/// Files a boot needs on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootFiles {
    pub vmlinuz: PathBuf,
    pub initramfs: PathBuf,
    /// Writable share the guest mounts at /run/nest.
    pub share_dir: PathBuf,
    /// Where the serial console goes.
    pub console_log: PathBuf,
    /// Host directory shared read-write as `mount_tag=output` (absolute;
    /// the guest mounts it at the same path).
    pub output_dir: Option<PathBuf>,
    /// The command's working directory, shared read-only as
    /// `mount_tag=workdir` when the guest's own mounts (tmpfs on /tmp, /run,
    /// /boot) would hide it in the host root.
    pub workdir_share: Option<PathBuf>,
}

/// 9p mount tag of [`BootFiles::output_dir`].
pub const OUTPUT_TAG: &str = "output";

/// 9p mount tag of [`BootFiles::workdir_share`].
pub const WORKDIR_TAG: &str = "workdir";

/// Finds `qemu-system-x86_64` (`$NEST_QEMU` overrides the search).
pub fn find_qemu() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("NEST_QEMU") {
        return Ok(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join("qemu-system-x86_64");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!("qemu-system-x86_64 not found on PATH: run scripts/setup.sh (installs qemu-system-x86)")
}

/// RCU's CPU stall timeout in the guest, in seconds (the kernel's default
/// is 21). Single-threaded TCG runs every vCPU in turn on one host thread,
/// each for up to 100 ms (QEMU's `TCG_KICK_PERIOD`,
/// accel/tcg/tcg-accel-ops-rr.h), so a guest CPU of a busy 16-vCPU guest
/// runs a sixteenth of the time at best, less when the host is busy too: a
/// loaded CI run saw a stall report 5 s into a stress at 82 ms per
/// context switch, and sched_ext ejects any BPF scheduler on an RCU stall
/// (`scx_rcu_cpu_stall()`, kernel/sched/ext.c). Stalls are still reported,
/// and judged, at three times the hardware timeout. sched_ext's own
/// watchdog (30 s) still catches a task the scheduler leaves waiting.
pub const RCU_STALL_TIMEOUT_S: u32 = 60;

/// The soft-lockup detector's threshold in the guest, in seconds (the
/// kernel's default `watchdog_thresh` is 10: a soft lockup is reported
/// after twice that). For the same reason as the RCU timeout, and three
/// times the hardware value as there: sched_ext ejects any BPF scheduler
/// once a CPU has not rescheduled for three quarters of the soft-lockup
/// time (`scx_softlockup()`, kernel/sched/ext.c), and a clean CI run lost
/// scx_nest that way, 15 s into a stress, with the CPU
/// waiting for other vCPUs to answer an IPI (`smp_call_function_many_cond()`).
pub const WATCHDOG_THRESH_S: u32 = 30;

/// The kernel command line.
pub fn kernel_cmdline(spec: &VmSpec) -> String {
    let rcu_stall = format!("rcupdate.rcu_cpu_stall_timeout={RCU_STALL_TIMEOUT_S}");
    let watchdog = format!("watchdog_thresh={WATCHDOG_THRESH_S}");
    let mut args = vec![
        "console=ttyS0",
        "panic=-1",
        "rdinit=/init",
        &rcu_stall,
        &watchdog,
    ];
    args.extend(spec.extra_cmdline.iter().map(String::as_str));
    args.join(" ")
}

/// Arguments for `qemu-system-x86_64` (without the program name).
pub fn qemu_args(spec: &VmSpec, files: &BootFiles) -> Vec<String> {
    let mut args = strings(&[
        "-nodefaults",
        "-no-reboot",
        "-display",
        "none",
        "-monitor",
        "none",
    ]);
    args.extend(strings(&[
        "-machine",
        "pc",
        "-accel",
        if spec.multi_threaded_tcg {
            "tcg,thread=multi"
        } else {
            TCG
        },
        "-cpu",
        &spec.cpu_model,
    ]));
    if let Some(icount) = spec.guest_clock.icount_arg() {
        args.extend(["-icount".into(), icount]);
    }
    args.extend(topology_args(spec));
    args.extend(memory_args(spec));
    args.extend([
        "-kernel".into(),
        path_arg(&files.vmlinuz),
        "-initrd".into(),
        path_arg(&files.initramfs),
        "-append".into(),
        kernel_cmdline(spec),
        "-serial".into(),
        format!("file:{}", path_arg(&files.console_log)),
    ]);
    args.extend(share_args("hostroot", Path::new("/"), true));
    args.extend(share_args("results", &files.share_dir, false));
    if let Some(dir) = &files.output_dir {
        args.extend(share_args(OUTPUT_TAG, dir, false));
    }
    if let Some(dir) = &files.workdir_share {
        args.extend(share_args(WORKDIR_TAG, dir, true));
    }
    args.extend(strings(&["-device", "virtio-rng-pci"]));
    args
}

fn topology_args(spec: &VmSpec) -> Vec<String> {
    let smp = format!(
        "cpus={},sockets={},cores={},threads={}",
        spec.cpus(),
        spec.sockets,
        spec.cores_per_socket,
        spec.threads_per_core
    );
    vec!["-smp".into(), smp]
}

fn memory_args(spec: &VmSpec) -> Vec<String> {
    let mut args = vec!["-m".into(), format!("{}M", spec.memory_mb)];
    if !spec.numa {
        return args;
    }
    for (node, mb) in spec.node_memory_mb().into_iter().enumerate() {
        args.extend([
            "-object".into(),
            format!("memory-backend-ram,id=mem{node},size={mb}M"),
            "-numa".into(),
            format!("node,nodeid={node},memdev=mem{node}"),
            "-numa".into(),
            format!("cpu,node-id={node},socket-id={node}"),
        ]);
    }
    args
}

fn share_args(tag: &str, path: &Path, readonly: bool) -> Vec<String> {
    let mut opts = format!(
        "local,path={},mount_tag={tag},security_model=none,multidevs=remap",
        path_arg(path)
    );
    if readonly {
        opts.push_str(",readonly=on");
    }
    vec!["-virtfs".into(), opts]
}

/// QEMU option values escape commas by doubling them.
fn path_arg(path: &Path) -> String {
    path.display().to_string().replace(',', ",,")
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> BootFiles {
        BootFiles {
            vmlinuz: "/k/vmlinuz".into(),
            initramfs: "/c/i.cpio".into(),
            share_dir: "/tmp/x,y/share".into(),
            console_log: "/tmp/x/console.log".into(),
            output_dir: None,
            workdir_share: None,
        }
    }

    fn value_of<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
        args.windows(2)
            .filter(|w| w[0] == flag)
            .map(|w| w[1].as_str())
            .collect()
    }

    #[test]
    fn smp_matches_topology() {
        let args = qemu_args(&VmSpec::with_topology(2, 4, 2), &files());
        assert_eq!(
            value_of(&args, "-smp"),
            ["cpus=16,sockets=2,cores=4,threads=2"]
        );
    }

    #[test]
    fn numa_gives_one_node_per_socket() {
        let spec = VmSpec {
            numa: true,
            memory_mb: 2048,
            ..VmSpec::with_topology(2, 4, 2)
        };
        let args = qemu_args(&spec, &files());
        assert_eq!(
            value_of(&args, "-object"),
            [
                "memory-backend-ram,id=mem0,size=1024M",
                "memory-backend-ram,id=mem1,size=1024M"
            ]
        );
        assert_eq!(
            value_of(&args, "-numa"),
            [
                "node,nodeid=0,memdev=mem0",
                "cpu,node-id=0,socket-id=0",
                "node,nodeid=1,memdev=mem1",
                "cpu,node-id=1,socket-id=1"
            ]
        );
        assert_eq!(value_of(&args, "-m"), ["2048M"]);
    }

    #[test]
    fn no_numa_objects_without_numa() {
        let args = qemu_args(&VmSpec::with_topology(2, 1, 1), &files());
        assert!(value_of(&args, "-numa").is_empty());
    }

    #[test]
    fn boots_tcg_without_devices_or_reboot() {
        let args = qemu_args(&VmSpec::default(), &files());
        for flag in ["-nodefaults", "-no-reboot"] {
            assert!(args.iter().any(|a| a == flag), "{flag}");
        }
        assert_eq!(value_of(&args, "-accel"), ["tcg,thread=single"]);
        assert_eq!(value_of(&args, "-serial"), ["file:/tmp/x/console.log"]);
        assert!(value_of(&args, "-icount").is_empty());
    }

    #[test]
    fn icount_clock_counts_instructions_on_single_threaded_tcg() {
        let spec = VmSpec {
            guest_clock: crate::spec::GuestClock::Icount { shift: 0 },
            ..VmSpec::default()
        };
        let args = qemu_args(&spec, &files());
        assert_eq!(value_of(&args, "-accel"), ["tcg,thread=single"]);
        assert_eq!(value_of(&args, "-icount"), ["shift=0,sleep=off"]);
    }

    #[test]
    fn shares_host_root_readonly_and_results_writable() {
        let args = qemu_args(&VmSpec::default(), &files());
        let shares = value_of(&args, "-virtfs");
        assert_eq!(
            shares,
            [
                "local,path=/,mount_tag=hostroot,security_model=none,multidevs=remap,readonly=on",
                "local,path=/tmp/x,,y/share,mount_tag=results,security_model=none,multidevs=remap"
            ]
        );
    }

    #[test]
    fn output_dir_is_a_third_writable_share() {
        let files = BootFiles {
            output_dir: Some("/tmp/out,1".into()),
            ..files()
        };
        let args = qemu_args(&VmSpec::default(), &files);
        let shares = value_of(&args, "-virtfs");
        assert_eq!(shares.len(), 3, "{shares:?}");
        assert_eq!(
            shares[2],
            "local,path=/tmp/out,,1,mount_tag=output,security_model=none,multidevs=remap"
        );
    }

    #[test]
    fn cmdline_has_console_panic_and_extras() {
        let spec = VmSpec {
            extra_cmdline: vec!["loglevel=4".into()],
            ..VmSpec::default()
        };
        assert_eq!(
            kernel_cmdline(&spec),
            "console=ttyS0 panic=-1 rdinit=/init rcupdate.rcu_cpu_stall_timeout=60 \
             watchdog_thresh=30 loglevel=4"
        );
    }
}
