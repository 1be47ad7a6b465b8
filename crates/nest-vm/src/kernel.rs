//! The cached guest kernel made by `scripts/guest-kernel.sh`.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Files of one cached kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestKernel {
    /// The cache directory of this kernel.
    pub dir: PathBuf,
    /// Kernel image.
    pub vmlinuz: PathBuf,
    /// Kernel config (copied to `/boot/config-$(uname -r)` in the guest).
    pub config: PathBuf,
    /// Module tree (`/usr/lib/modules/<release>`) with `modules.dep`.
    pub modules: PathBuf,
    /// `uname -r` of the kernel.
    pub release: String,
}

/// The cache directory: `$NEST_CACHE`, else `/var/cache/nest`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("NEST_CACHE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/nest"))
}

/// The guest kernel used unless one is named: `$NEST_GUEST_KERNEL` (a
/// kernel directory, for running a suite on another kernel), else the one
/// `scripts/guest-kernel.sh` linked as `current`.
pub fn default_kernel_dir() -> PathBuf {
    std::env::var_os("NEST_GUEST_KERNEL")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("kernel").join("current"))
}

/// Where `scripts/guest-kernel.sh --linux-5.10` caches Debian 11's kernel,
/// the reference for the simulator's `linux-5.10` model (no sched_ext).
pub fn linux_510_kernel_dir() -> PathBuf {
    cache_dir().join("kernel-5.10").join("current")
}

impl GuestKernel {
    /// Checks that `dir` holds a complete cached kernel.
    pub fn locate(dir: &Path) -> Result<Self> {
        let hint = "run scripts/guest-kernel.sh (or `nest vm kernel`) to fetch one";
        if !dir.is_dir() {
            bail!(
                "guest kernel directory {} does not exist: {hint}",
                dir.display()
            );
        }
        let kernel = Self {
            dir: dir.to_path_buf(),
            vmlinuz: dir.join("vmlinuz"),
            config: dir.join("config"),
            modules: dir.join("modules"),
            release: read_release(dir)?,
        };
        for file in [
            &kernel.vmlinuz,
            &kernel.config,
            &kernel.modules.join("modules.dep"),
        ] {
            if !file.is_file() {
                bail!(
                    "guest kernel in {} is incomplete ({} missing): {hint}",
                    dir.display(),
                    file.display()
                );
            }
        }
        Ok(kernel)
    }

    /// Whether the kernel config enables sched_ext.
    pub fn has_sched_ext(&self) -> Result<bool> {
        let config = fs::read_to_string(&self.config)
            .with_context(|| format!("cannot read {}", self.config.display()))?;
        Ok(config
            .lines()
            .any(|l| l.trim() == "CONFIG_SCHED_CLASS_EXT=y"))
    }
}

fn read_release(dir: &Path) -> Result<String> {
    let path = dir.join("release");
    let text = fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {}: the guest kernel cache is incomplete; run scripts/guest-kernel.sh",
            path.display()
        )
    })?;
    Ok(text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_dir_says_what_to_do() {
        let err = GuestKernel::locate(Path::new("/nonexistent/kernel")).unwrap_err();
        assert!(err.to_string().contains("scripts/guest-kernel.sh"), "{err}");
    }

    #[test]
    fn incomplete_dir_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("release"), "7.2.13+deb14-amd64\n").unwrap();
        let err = GuestKernel::locate(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("vmlinuz missing") && err.contains("guest-kernel.sh"),
            "{err}"
        );
    }
}
