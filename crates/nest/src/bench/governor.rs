//! cpufreq governors: switched for the cells that ask for one, and put
//! back as they were when the bench ends, however it ends.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

const CPUS: &str = "/sys/devices/system/cpu";

/// Does this machine have cpufreq (guests under QEMU do not)?
pub fn cpufreq_present() -> bool {
    Path::new(CPUS).join("cpu0/cpufreq").exists()
}

/// Every CPU's governor as found; restored when dropped.
pub struct Governors {
    saved: Vec<(PathBuf, String)>,
}

impl Governors {
    pub fn save() -> Result<Self> {
        let mut saved = Vec::new();
        for entry in std::fs::read_dir(CPUS)? {
            let path = entry?.path().join("cpufreq/scaling_governor");
            if let Ok(governor) = std::fs::read_to_string(&path) {
                saved.push((path, governor.trim().to_string()));
            }
        }
        Ok(Self { saved })
    }

    /// The governors every CPU offers.
    pub fn available() -> Vec<String> {
        std::fs::read_to_string(Path::new(CPUS).join("cpu0/cpufreq/scaling_available_governors"))
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect()
    }

    /// Put every CPU on `governor`.
    pub fn set(&self, governor: &str) -> Result<()> {
        for (path, _) in &self.saved {
            std::fs::write(path, governor)
                .with_context(|| format!("cannot set {governor} in {}", path.display()))?;
        }
        Ok(())
    }
}

impl Drop for Governors {
    fn drop(&mut self) {
        for (path, governor) in &self.saved {
            if let Err(err) = std::fs::write(path, governor) {
                eprintln!(
                    "nest bench: cannot restore {governor} in {}: {err}",
                    path.display()
                );
            }
        }
    }
}
