//! cpufreq governors: switched for the cells that ask for one, and put
//! back as they were when the bench ends, however it ends.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The real CPUs directory; the functions here take it as `cpus` so that
/// tests can give them a fake tree.
pub const CPUS: &str = "/sys/devices/system/cpu";

/// Does this machine have cpufreq (guests under QEMU do not)?
pub fn cpufreq_present(cpus: &Path) -> bool {
    cpus.join("cpu0/cpufreq").exists()
}

/// Every CPU's governor as found; restored when dropped.
pub struct Governors {
    saved: Vec<(PathBuf, String)>,
}

impl Governors {
    pub fn save(cpus: &Path) -> Result<Self> {
        let mut saved = Vec::new();
        let entries =
            std::fs::read_dir(cpus).with_context(|| format!("cannot list {}", cpus.display()))?;
        for entry in entries {
            let path = entry?.path().join("cpufreq/scaling_governor");
            if let Ok(governor) = std::fs::read_to_string(&path) {
                saved.push((path, governor.trim().to_string()));
            }
        }
        Ok(Self { saved })
    }

    /// The governors every CPU offers.
    pub fn available(cpus: &Path) -> Vec<String> {
        std::fs::read_to_string(cpus.join("cpu0/cpufreq/scaling_available_governors"))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake `/sys/devices/system/cpu` with these CPUs' governors, and the
    /// entries beside the CPUs that have no governor of their own.
    fn fake_cpus(governors: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (cpu, governor) in governors.iter().enumerate() {
            let cpufreq = dir.path().join(format!("cpu{cpu}/cpufreq"));
            std::fs::create_dir_all(&cpufreq).unwrap();
            std::fs::write(cpufreq.join("scaling_governor"), format!("{governor}\n")).unwrap();
            std::fs::write(
                cpufreq.join("scaling_available_governors"),
                "performance powersave schedutil\n",
            )
            .unwrap();
        }
        std::fs::create_dir_all(dir.path().join("cpufreq/policy0")).unwrap();
        std::fs::create_dir_all(dir.path().join("cpuidle")).unwrap();
        std::fs::write(dir.path().join("online"), "0-2\n").unwrap();
        dir
    }

    fn governors(cpus: &Path, n: usize) -> Vec<String> {
        (0..n)
            .map(|cpu| {
                let path = cpus.join(format!("cpu{cpu}/cpufreq/scaling_governor"));
                std::fs::read_to_string(path).unwrap().trim().to_string()
            })
            .collect()
    }

    #[test]
    fn every_cpu_is_switched_and_gets_its_own_governor_back() {
        let dir = fake_cpus(&["schedutil", "powersave", "schedutil"]);
        let cpus = dir.path();
        assert!(cpufreq_present(cpus));
        assert_eq!(
            Governors::available(cpus),
            ["performance", "powersave", "schedutil"]
        );
        let saved = Governors::save(cpus).unwrap();
        assert_eq!(saved.saved.len(), 3, "one governor per CPU, nothing else");
        saved.set("performance").unwrap();
        assert_eq!(governors(cpus, 3), ["performance"; 3]);
        drop(saved);
        assert_eq!(governors(cpus, 3), ["schedutil", "powersave", "schedutil"]);
    }

    #[test]
    fn a_machine_without_cpufreq_has_no_governors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cpu0")).unwrap();
        assert!(!cpufreq_present(dir.path()));
        assert!(Governors::available(dir.path()).is_empty());
        assert!(Governors::save(dir.path()).unwrap().saved.is_empty());
        let missing = dir.path().join("nothing");
        let err = Governors::save(&missing).err().unwrap().to_string();
        assert!(err.contains("cannot list"), "{err}");
    }
}
