//! Boot a sched_ext Debian kernel under QEMU (TCG, no KVM needed) with a
//! chosen CPU topology, run one shell command in it as root and collect
//! its status, output and the kernel console.
//!
//! The guest's root is the host's `/`, read-only over 9p; see docs/guides/guest-vm.md.
//!
//! ```no_run
//! let spec = nest_vm::VmSpec::with_topology(2, 4, 2);
//! let outcome = nest_vm::run(&spec, "nproc")?;
//! assert!(outcome.success());
//! # anyhow::Ok(())
//! ```

mod console;
mod cpio;
mod initramfs;
mod kernel;
mod qemu;
mod runner;
mod spec;

pub use console::{ConsoleIssue, IssueKind, classify, scan_console};
pub use initramfs::build as build_initramfs;
pub use kernel::{GuestKernel, cache_dir, default_kernel_dir, linux_510_kernel_dir};
pub use qemu::{BootFiles, find_qemu, kernel_cmdline, qemu_args};
pub use runner::{VmOutcome, output_dir, run, shell_join, shell_quote};
pub use spec::{DEFAULT_CPU_MODEL, GuestClock, MAX_CPUS, MAX_ICOUNT_SHIFT, VmSpec};
