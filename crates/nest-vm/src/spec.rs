//! What guest to boot: topology, memory, deadline and kernel.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};

use crate::kernel::default_kernel_dir;

/// Largest vCPU count accepted; QEMU's `pc` machine stops at 255 and TCG
/// on a small host is hopeless long before that.
pub const MAX_CPUS: u32 = 255;

/// QEMU CPU model: every feature TCG emulates, with an Intel vendor so the
/// guest reads SMT siblings and shared caches from CPUID leaves 4 and 0xB.
pub const DEFAULT_CPU_MODEL: &str = "max,vendor=GenuineIntel";

/// The clock a guest's time follows (docs/guides/guest-vm.md, "Guest timing").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GuestClock {
    /// QEMU's default: the guest's clocks follow the host's. Under TCG a
    /// guest instruction is 10-50 times slower than on hardware, so its
    /// timers (slices, P_remove, ticks) cover that much less work.
    #[default]
    Host,
    /// QEMU's instruction counter (`-icount shift=N,sleep=off`): guest
    /// time advances 2^N ns per guest instruction, and jumps over idle
    /// time, whatever the host does. Every vCPU's instructions drive the
    /// one clock, so one spinning vCPU stretches the others' time.
    Icount {
        /// log2 of the guest nanoseconds per instruction, 0..=10.
        shift: u8,
    },
}

/// Largest `-icount shift` QEMU accepts.
pub const MAX_ICOUNT_SHIFT: u8 = 10;

impl GuestClock {
    /// QEMU's `-icount` value, if any.
    pub fn icount_arg(self) -> Option<String> {
        match self {
            GuestClock::Host => None,
            GuestClock::Icount { shift } => Some(format!("shift={shift},sleep=off")),
        }
    }
}

/// `host`, `icount` (shift 0) or `icount:N`, as `--guest-clock` takes it.
impl std::fmt::Display for GuestClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GuestClock::Host => f.write_str("host"),
            GuestClock::Icount { shift } => write!(f, "icount:{shift}"),
        }
    }
}

impl std::str::FromStr for GuestClock {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let shift = match s {
            "host" => return Ok(GuestClock::Host),
            "icount" => Some("0"),
            _ => s.strip_prefix("icount:"),
        };
        let bad = || {
            format!(
                "invalid guest clock '{s}': expected host, icount (2^0 ns per instruction) \
                 or icount:N with N in 0..={MAX_ICOUNT_SHIFT}"
            )
        };
        match shift.map(str::parse::<u8>) {
            Some(Ok(shift)) if shift <= MAX_ICOUNT_SHIFT => Ok(GuestClock::Icount { shift }),
            _ => Err(bad()),
        }
    }
}

/// A guest to boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmSpec {
    /// CPU packages.
    pub sockets: u32,
    /// Cores in each socket.
    pub cores_per_socket: u32,
    /// SMT threads in each core.
    pub threads_per_core: u32,
    /// One NUMA node per socket, memory split evenly between them.
    pub numa: bool,
    /// Guest memory in MiB (the total over all nodes).
    pub memory_mb: u32,
    /// Wall-clock limit for the whole run, boot included. A guest still
    /// running then is killed and reported as timed out.
    pub timeout: Duration,
    /// Cached kernel made by `scripts/guest-kernel.sh`.
    pub kernel_dir: PathBuf,
    /// Directory the command starts in, if the guest can see it
    /// (default: the host's current directory).
    pub workdir: Option<PathBuf>,
    /// Host directory the guest can write, shared read-write and mounted
    /// in the guest at the same absolute path (after the guest's tmpfs
    /// mounts, so a directory under /tmp works too). Created if missing;
    /// the guest command finds its path in `$NEST_OUT`.
    pub output_dir: Option<PathBuf>,
    /// Extra kernel command-line arguments.
    pub extra_cmdline: Vec<String>,
    /// QEMU `-cpu` model (see [`DEFAULT_CPU_MODEL`]).
    pub cpu_model: String,
    /// One host thread per vCPU. Faster only with idle host cores, and
    /// QEMU 7.2 then races with kernel code patching (see `qemu::TCG`).
    pub multi_threaded_tcg: bool,
    /// What the guest's time follows (default: the host's clock).
    pub guest_clock: GuestClock,
}

impl Default for VmSpec {
    fn default() -> Self {
        Self {
            sockets: 1,
            cores_per_socket: 4,
            threads_per_core: 1,
            numa: false,
            memory_mb: 1024,
            timeout: Duration::from_secs(300),
            kernel_dir: default_kernel_dir(),
            workdir: None,
            output_dir: None,
            extra_cmdline: Vec::new(),
            cpu_model: DEFAULT_CPU_MODEL.to_string(),
            multi_threaded_tcg: false,
            guest_clock: GuestClock::Host,
        }
    }
}

impl VmSpec {
    /// A spec with this topology and defaults for the rest.
    pub fn with_topology(sockets: u32, cores_per_socket: u32, threads_per_core: u32) -> Self {
        Self {
            sockets,
            cores_per_socket,
            threads_per_core,
            ..Self::default()
        }
    }

    /// Total vCPUs (0 if a factor is 0; saturates instead of overflowing).
    pub fn cpus(&self) -> u32 {
        self.sockets
            .saturating_mul(self.cores_per_socket)
            .saturating_mul(self.threads_per_core)
    }

    /// Memory of each NUMA node in MiB (one entry per socket).
    pub fn node_memory_mb(&self) -> Vec<u32> {
        let base = self.memory_mb / self.sockets.max(1);
        let mut nodes = vec![base; self.sockets as usize];
        if let Some(last) = nodes.last_mut() {
            *last += self.memory_mb - base * self.sockets;
        }
        nodes
    }

    /// Refuses specs QEMU would reject or that make no sense.
    pub fn validate(&self) -> Result<()> {
        let fields = [
            ("sockets", self.sockets),
            ("cores per socket", self.cores_per_socket),
            ("threads per core", self.threads_per_core),
        ];
        for (name, value) in fields {
            if value == 0 {
                bail!("invalid VM topology: {name} is 0; every topology count must be at least 1");
            }
        }
        if self.cpus() > MAX_CPUS {
            bail!(
                "invalid VM topology: {} sockets x {} cores x {} threads = {} vCPUs, more than {MAX_CPUS}",
                self.sockets,
                self.cores_per_socket,
                self.threads_per_core,
                self.cpus()
            );
        }
        self.validate_memory()?;
        if self.multi_threaded_tcg && self.guest_clock != GuestClock::Host {
            bail!(
                "invalid VM clock: --guest-clock {} needs single-threaded TCG (QEMU counts \
                 instructions on one thread); drop --mttcg",
                self.guest_clock
            );
        }
        if self.timeout.is_zero() {
            bail!("invalid VM timeout: 0 s; give the guest time to boot (5-15 s) plus the command");
        }
        Ok(())
    }

    fn validate_memory(&self) -> Result<()> {
        const MIN_NODE_MB: u32 = 128;
        let nodes = if self.numa { self.sockets } else { 1 };
        if self.memory_mb < MIN_NODE_MB * nodes {
            bail!(
                "invalid VM memory: {} MiB for {nodes} NUMA node(s); give at least {MIN_NODE_MB} MiB per node",
                self.memory_mb
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        VmSpec::default().validate().unwrap();
    }

    #[test]
    fn counts_cpus() {
        assert_eq!(VmSpec::with_topology(2, 4, 2).cpus(), 16);
    }

    #[test]
    fn refuses_zero_counts() {
        for spec in [
            VmSpec::with_topology(0, 4, 1),
            VmSpec::with_topology(1, 0, 1),
            VmSpec::with_topology(1, 4, 0),
        ] {
            let err = spec.validate().unwrap_err().to_string();
            assert!(err.contains("is 0"), "{err}");
        }
    }

    #[test]
    fn refuses_too_many_cpus() {
        let err = VmSpec::with_topology(16, 16, 2).validate().unwrap_err();
        assert!(err.to_string().contains("512 vCPUs"), "{err}");
    }

    #[test]
    fn refuses_too_little_memory_per_node() {
        let spec = VmSpec {
            numa: true,
            memory_mb: 200,
            ..VmSpec::with_topology(2, 1, 1)
        };
        assert!(spec.validate().is_err());
        assert!(
            VmSpec {
                numa: false,
                ..spec
            }
            .validate()
            .is_ok()
        );
    }

    #[test]
    fn refuses_zero_timeout() {
        let spec = VmSpec {
            timeout: Duration::ZERO,
            ..VmSpec::default()
        };
        assert!(spec.validate().is_err());
    }

    #[test]
    fn guest_clock_reads_what_it_prints_and_refuses_the_rest() {
        for text in ["host", "icount:0", "icount:3", "icount:10"] {
            let clock: GuestClock = text.parse().unwrap();
            assert_eq!(clock.to_string(), text);
        }
        assert_eq!("icount".parse(), Ok(GuestClock::Icount { shift: 0 }));
        assert_eq!(GuestClock::Host.icount_arg(), None);
        assert_eq!(
            GuestClock::Icount { shift: 2 }.icount_arg().as_deref(),
            Some("shift=2,sleep=off")
        );
        for bad in [
            "",
            "icount:11",
            "icount:-1",
            "icount:auto",
            "guest",
            "icount:",
        ] {
            let err = bad.parse::<GuestClock>().unwrap_err();
            assert!(err.contains("expected host, icount"), "{bad}: {err}");
        }
    }

    #[test]
    fn icount_refuses_multi_threaded_tcg() {
        let spec = VmSpec {
            multi_threaded_tcg: true,
            guest_clock: GuestClock::Icount { shift: 0 },
            ..VmSpec::default()
        };
        let err = spec.validate().unwrap_err().to_string();
        assert!(err.contains("--mttcg"), "{err}");
    }

    #[test]
    fn splits_memory_over_nodes() {
        let spec = VmSpec {
            memory_mb: 1025,
            ..VmSpec::with_topology(2, 1, 1)
        };
        assert_eq!(spec.node_memory_mb(), vec![512, 513]);
    }
}
