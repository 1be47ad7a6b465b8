//! cpufreq governors: switched for the cells that ask for one, with the
//! driver mode each needs, and put back as they were when the bench ends,
//! however it ends (a failed run, an error, Ctrl-C).
//!
//! `intel_pstate` and `amd-pstate` have operating modes
//! (Documentation/admin-guide/pm/intel_pstate.rst and amd-pstate.rst): in
//! `active` mode the driver chooses frequencies itself and offers only its
//! own `performance` and `powersave` policies; in `passive` (and, for
//! amd-pstate, `guided`) mode it serves the generic governors, schedutil
//! among them. A governor the current mode does not offer needs a switch of
//! the driver's `status`, which recreates every policy (governor, limits,
//! energy-performance preference back to their defaults): so the limits
//! and preferences are saved and restored too.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The real CPUs directory; everything here takes it as an argument so
/// that tests can give a fake tree.
pub const CPUS: &str = "/sys/devices/system/cpu";

/// The kernel's generic governors (drivers/cpufreq/cpufreq_*.c and
/// kernel/sched/cpufreq_schedutil.c), served by drivers in passive mode.
const GENERIC: [&str; 6] = [
    "conservative",
    "ondemand",
    "performance",
    "powersave",
    "schedutil",
    "userspace",
];

/// A cpufreq driver with operating modes.
struct ModalDriver {
    /// How the documentation names it.
    name: &'static str,
    /// Its mode file, relative to the CPUs directory.
    status: &'static str,
    /// The modes in which it serves the generic governors.
    generic_modes: &'static [&'static str],
}

/// The policies an active-mode driver implements itself.
const ACTIVE_POLICIES: [&str; 2] = ["performance", "powersave"];

const MODAL_DRIVERS: [ModalDriver; 2] = [
    ModalDriver {
        name: "intel_pstate",
        status: "intel_pstate/status",
        generic_modes: &["passive"],
    },
    ModalDriver {
        name: "amd-pstate",
        status: "amd_pstate/status",
        generic_modes: &["passive", "guided"],
    },
];

/// Does this machine have cpufreq (guests under QEMU do not)?
pub fn cpufreq_present(cpus: &Path) -> bool {
    cpus.join("cpu0/cpufreq").exists()
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn write(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value)
        .with_context(|| format!("cannot write {value} to {}", path.display()))
}

/// A governor as asked for: `schedutil`, or `performance@passive` to pin
/// the driver's mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    pub governor: String,
    /// The driver mode its runs need; `None` for drivers without modes.
    pub mode: Option<String>,
}

impl Setting {
    /// `schedutil (intel_pstate passive)`.
    pub fn describe(&self, cpus: &Path) -> String {
        match (&self.mode, modal_driver(cpus)) {
            (Some(mode), Some(driver)) => format!("{} ({} {mode})", self.governor, driver.name),
            _ => self.governor.clone(),
        }
    }
}

fn modal_driver(cpus: &Path) -> Option<&'static ModalDriver> {
    MODAL_DRIVERS.iter().find(|d| cpus.join(d.status).exists())
}

/// The cpufreq driver's name (cpu0's `scaling_driver`) and its mode.
pub fn driver(cpus: &Path) -> (Option<String>, Option<String>) {
    let name = read(&cpus.join("cpu0/cpufreq/scaling_driver"));
    let mode = modal_driver(cpus).and_then(|d| read(&cpus.join(d.status)));
    (name, mode)
}

/// The governors cpu0 offers now.
pub fn available(cpus: &Path) -> Vec<String> {
    read(&cpus.join("cpu0/cpufreq/scaling_available_governors"))
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// What `spec` (`GOVERNOR[@MODE]`) needs on this machine: the governor
/// and the driver mode its runs switch to. Without `@MODE`, the current
/// mode if it offers the governor, else the mode that does (passive for a
/// generic governor, active for the driver's own policies). A governor no
/// mode offers is an error listing the valid ones.
pub fn setting(cpus: &Path, spec: &str) -> Result<Setting, String> {
    let (governor, asked_mode) = match spec.split_once('@') {
        Some((g, m)) => (g.to_string(), Some(m.to_string())),
        None => (spec.to_string(), None),
    };
    let offered_now = available(cpus);
    let Some(driver) = modal_driver(cpus) else {
        if let Some(mode) = asked_mode {
            return Err(format!(
                "governor '{spec}': this cpufreq driver has no modes (not {mode}); \
                 give the governor alone"
            ));
        }
        if !offered_now.contains(&governor) {
            return Err(format!(
                "governor '{governor}' is not available here; valid: {}",
                offered_now.join(", ")
            ));
        }
        return Ok(Setting {
            governor,
            mode: None,
        });
    };
    let now = read(&cpus.join(driver.status)).unwrap_or_default();
    let offers = |mode: &str| {
        if driver.generic_modes.contains(&mode) {
            GENERIC.contains(&governor.as_str())
        } else {
            mode == "active" && ACTIVE_POLICIES.contains(&governor.as_str())
        }
    };
    let mode = match asked_mode {
        Some(mode) if offers(&mode) => mode,
        Some(mode) => {
            return Err(format!(
                "governor '{spec}': {} in {mode} mode does not offer {governor} \
                 (active: {}; {}: {})",
                driver.name,
                ACTIVE_POLICIES.join(", "),
                driver.generic_modes.join(", "),
                GENERIC.join(", ")
            ));
        }
        None if offers(&now) || offered_now.contains(&governor) => now,
        None if ACTIVE_POLICIES.contains(&governor.as_str()) => "active".to_string(),
        None if GENERIC.contains(&governor.as_str()) => driver.generic_modes[0].to_string(),
        None => {
            return Err(format!(
                "governor '{governor}' is not available here; valid: {} (active), {} ({})",
                ACTIVE_POLICIES.join(", "),
                GENERIC.join(", "),
                driver.generic_modes.join(", ")
            ));
        }
    };
    Ok(Setting {
        governor,
        mode: Some(mode),
    })
}

/// One CPU's policy as found.
#[derive(Clone, Debug, PartialEq)]
struct CpuPolicy {
    /// Its `cpufreq` directory.
    dir: PathBuf,
    governor: String,
    min_khz: Option<String>,
    max_khz: Option<String>,
    /// `energy_performance_preference` (HWP / EPP drivers).
    epp: Option<String>,
}

impl CpuPolicy {
    fn read(dir: PathBuf) -> Option<Self> {
        Some(Self {
            governor: read(&dir.join("scaling_governor"))?,
            min_khz: read(&dir.join("scaling_min_freq")),
            max_khz: read(&dir.join("scaling_max_freq")),
            epp: read(&dir.join("energy_performance_preference")),
            dir,
        })
    }
}

/// The machine's cpufreq state as found: driver mode and every CPU's
/// governor, limits and preference; restored when dropped.
pub struct Saved {
    cpus: PathBuf,
    mode: Option<(PathBuf, String)>,
    policies: Vec<CpuPolicy>,
}

/// Every CPU's policy, in CPU directory order.
fn policies(cpus: &Path) -> Result<Vec<CpuPolicy>> {
    let entries =
        std::fs::read_dir(cpus).with_context(|| format!("cannot list {}", cpus.display()))?;
    let mut policies: Vec<CpuPolicy> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.strip_prefix("cpu")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| CpuPolicy::read(e.path().join("cpufreq")))
        .collect();
    policies.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(policies)
}

impl Saved {
    pub fn save(cpus: &Path) -> Result<Self> {
        let policies = policies(cpus)?;
        let mode = modal_driver(cpus).and_then(|d| {
            let path = cpus.join(d.status);
            Some((path.clone(), read(&path)?))
        });
        Ok(Self {
            cpus: cpus.to_path_buf(),
            mode,
            policies,
        })
    }

    /// Put the driver in the setting's mode (if it has modes and is not
    /// in it) and every CPU on its governor.
    pub fn apply(&self, setting: &Setting) -> Result<()> {
        if let (Some(wanted), Some((status, _))) = (&setting.mode, &self.mode)
            && read(status).as_deref() != Some(wanted.as_str())
        {
            write(status, wanted)?;
        }
        for policy in &self.policies {
            let path = policy.dir.join("scaling_governor");
            if read(&path).as_deref() != Some(setting.governor.as_str()) {
                write(&path, &setting.governor).with_context(|| {
                    format!(
                        "governor {} not set (offered: {})",
                        setting.governor,
                        available(&self.cpus).join(", ")
                    )
                })?;
            }
        }
        Ok(())
    }

    /// Everything back as saved: the mode first (switching it recreates
    /// the policies), then each CPU's governor, limits and preference.
    /// Returns what could not be restored.
    pub fn restore(&self) -> Vec<String> {
        let mut errors = Vec::new();
        let mut put = |path: &Path, value: &str| {
            if read(path).as_deref() != Some(value)
                && let Err(err) = write(path, value)
            {
                errors.push(format!("{err:#}"));
            }
        };
        if let Some((status, mode)) = &self.mode {
            put(status, mode);
        }
        for p in &self.policies {
            put(&p.dir.join("scaling_governor"), &p.governor);
            // Both limits twice: a new minimum above the current maximum
            // (or the reverse) is only accepted once the other moved.
            for _ in 0..2 {
                if let Some(max) = &p.max_khz {
                    put(&p.dir.join("scaling_max_freq"), max);
                }
                if let Some(min) = &p.min_khz {
                    put(&p.dir.join("scaling_min_freq"), min);
                }
            }
            if let Some(epp) = &p.epp {
                put(&p.dir.join("energy_performance_preference"), epp);
            }
        }
        errors.sort();
        errors.dedup();
        errors
    }
}

impl Drop for Saved {
    fn drop(&mut self) {
        for err in self.restore() {
            eprintln!("nest bench: cpufreq not restored: {err}");
        }
    }
}

/// A bench's governors: what each (as asked, `schedutil` or
/// `performance@passive`) needs, and the machine's state, restored when
/// dropped.
pub struct Governors {
    saved: Saved,
    settings: Vec<(String, Setting)>,
}

impl Governors {
    pub fn save(cpus: &Path, settings: Vec<(String, Setting)>) -> Result<Self> {
        Ok(Self {
            saved: Saved::save(cpus)?,
            settings,
        })
    }

    /// Switch to the governor asked for as `spec`.
    pub fn set(&self, spec: &str) -> Result<()> {
        let (_, setting) = self
            .settings
            .iter()
            .find(|(s, _)| s == spec)
            .with_context(|| format!("governor {spec} was not planned"))?;
        self.saved.apply(setting)
    }
}

/// The cpufreq state in one line: `intel_pstate (status active), governor
/// powersave on 4 CPUs, 800000-4000000 kHz, EPP balance_performance`.
pub fn describe(cpus: &Path) -> String {
    if !cpufreq_present(cpus) {
        return "no cpufreq".into();
    }
    let (name, mode) = driver(cpus);
    let mut s = name.unwrap_or_else(|| "unknown driver".into());
    if let Some(mode) = mode {
        s.push_str(&format!(" (status {mode})"));
    }
    let Ok(policies) = policies(cpus) else {
        return s;
    };
    let counted = |value: &dyn Fn(&CpuPolicy) -> Option<String>| {
        let mut values: Vec<(String, usize)> = Vec::new();
        for v in policies.iter().filter_map(value) {
            match values.iter_mut().find(|(x, _)| *x == v) {
                Some((_, n)) => *n += 1,
                None => values.push((v, 1)),
            }
        }
        values
            .iter()
            .map(|(v, n)| format!("{v} on {n} CPU{}", if *n == 1 { "" } else { "s" }))
            .collect::<Vec<_>>()
            .join(", ")
    };
    s.push_str(&format!(
        ", governor {}",
        counted(&|p| Some(p.governor.clone()))
    ));
    let limits = counted(&|p| {
        Some(format!(
            "{}-{} kHz",
            p.min_khz.as_deref()?,
            p.max_khz.as_deref()?
        ))
    });
    if !limits.is_empty() {
        s.push_str(&format!(", limits {limits}"));
    }
    let epp = counted(&|p| p.epp.clone());
    if !epp.is_empty() {
        s.push_str(&format!(", EPP {epp}"));
    }
    s
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A fake `/sys/devices/system/cpu` of `n` CPUs under `driver`
    /// (`intel_pstate`, `amd-pstate-epp`, `acpi-cpufreq`, ...), with its
    /// mode file when it has one, the governors its mode offers, limits
    /// and (for the EPP drivers) a preference; and the entries beside the
    /// CPUs that have no policy of their own.
    pub fn fake_cpus(
        driver: &str,
        mode: Option<&str>,
        governor: &str,
        n: usize,
    ) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let offered = match mode {
            Some("active") => "performance powersave",
            _ => "conservative ondemand userspace powersave performance schedutil",
        };
        for cpu in 0..n {
            let cpufreq = dir.path().join(format!("cpu{cpu}/cpufreq"));
            std::fs::create_dir_all(&cpufreq).unwrap();
            let file = |name: &str, value: &str| {
                std::fs::write(cpufreq.join(name), format!("{value}\n")).unwrap()
            };
            file("scaling_driver", driver);
            file("scaling_governor", governor);
            file("scaling_available_governors", offered);
            file("scaling_min_freq", "800000");
            file("scaling_max_freq", "3900000");
            if driver.contains("pstate") {
                file("energy_performance_preference", "balance_performance");
            }
        }
        if let Some(mode) = mode {
            let status = if driver.starts_with("amd") {
                "amd_pstate"
            } else {
                "intel_pstate"
            };
            std::fs::create_dir_all(dir.path().join(status)).unwrap();
            std::fs::write(dir.path().join(status).join("status"), format!("{mode}\n")).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("cpufreq/policy0")).unwrap();
        std::fs::create_dir_all(dir.path().join("cpuidle")).unwrap();
        std::fs::write(dir.path().join("online"), format!("0-{}\n", n - 1)).unwrap();
        dir
    }

    pub fn file(cpus: &Path, path: &str) -> String {
        read(&cpus.join(path)).unwrap()
    }

    fn governors(cpus: &Path, n: usize) -> Vec<String> {
        (0..n)
            .map(|cpu| file(cpus, &format!("cpu{cpu}/cpufreq/scaling_governor")))
            .collect()
    }

    fn setting_of(cpus: &Path, spec: &str) -> Setting {
        setting(cpus, spec).unwrap()
    }

    #[test]
    fn intel_pstate_goes_passive_for_schedutil_and_back_to_active() {
        let dir = fake_cpus("intel_pstate", Some("active"), "powersave", 3);
        let cpus = dir.path();
        let schedutil = setting_of(cpus, "schedutil");
        assert_eq!(schedutil.mode.as_deref(), Some("passive"));
        assert_eq!(schedutil.describe(cpus), "schedutil (intel_pstate passive)");
        let performance = setting_of(cpus, "performance");
        assert_eq!(performance.mode.as_deref(), Some("active"), "offered as is");
        let saved = Saved::save(cpus).unwrap();
        saved.apply(&schedutil).unwrap();
        assert_eq!(file(cpus, "intel_pstate/status"), "passive");
        assert_eq!(governors(cpus, 3), ["schedutil"; 3]);
        // The kernel resets policies on a switch: as it would.
        std::fs::write(cpus.join("cpu1/cpufreq/scaling_max_freq"), "2000000").unwrap();
        std::fs::write(
            cpus.join("cpu1/cpufreq/energy_performance_preference"),
            "performance",
        )
        .unwrap();
        saved.apply(&performance).unwrap();
        assert_eq!(file(cpus, "intel_pstate/status"), "active");
        assert_eq!(governors(cpus, 3), ["performance"; 3]);
        drop(saved);
        assert_eq!(file(cpus, "intel_pstate/status"), "active");
        assert_eq!(governors(cpus, 3), ["powersave"; 3]);
        assert_eq!(file(cpus, "cpu1/cpufreq/scaling_max_freq"), "3900000");
        assert_eq!(
            file(cpus, "cpu1/cpufreq/energy_performance_preference"),
            "balance_performance"
        );
    }

    #[test]
    fn a_passive_intel_pstate_stays_passive_unless_asked() {
        let dir = fake_cpus("intel_cpufreq", Some("passive"), "schedutil", 2);
        let cpus = dir.path();
        assert_eq!(
            setting_of(cpus, "performance").mode.as_deref(),
            Some("passive")
        );
        let active = setting_of(cpus, "performance@active");
        let saved = Saved::save(cpus).unwrap();
        saved.apply(&active).unwrap();
        assert_eq!(file(cpus, "intel_pstate/status"), "active");
        drop(saved);
        assert_eq!(file(cpus, "intel_pstate/status"), "passive");
        assert_eq!(governors(cpus, 2), ["schedutil"; 2]);
        let err = setting(cpus, "schedutil@active").unwrap_err();
        assert!(
            err.contains("in active mode does not offer schedutil"),
            "{err}"
        );
    }

    #[test]
    fn amd_pstate_modes_switch_and_restore() {
        let dir = fake_cpus("amd-pstate-epp", Some("active"), "powersave", 2);
        let cpus = dir.path();
        let schedutil = setting_of(cpus, "schedutil");
        assert_eq!(schedutil.describe(cpus), "schedutil (amd-pstate passive)");
        let guided = setting_of(cpus, "schedutil@guided");
        let saved = Saved::save(cpus).unwrap();
        saved.apply(&schedutil).unwrap();
        assert_eq!(file(cpus, "amd_pstate/status"), "passive");
        saved.apply(&guided).unwrap();
        assert_eq!(file(cpus, "amd_pstate/status"), "guided");
        drop(saved);
        assert_eq!(file(cpus, "amd_pstate/status"), "active");
        assert_eq!(governors(cpus, 2), ["powersave"; 2]);
        // Guided serves the generic governors: schedutil stays there.
        let dir = fake_cpus("amd-pstate", Some("guided"), "ondemand", 1);
        assert_eq!(
            setting_of(dir.path(), "schedutil").mode.as_deref(),
            Some("guided")
        );
    }

    #[test]
    fn drivers_without_modes_offer_what_they_list() {
        let dir = fake_cpus("acpi-cpufreq", None, "ondemand", 2);
        let cpus = dir.path();
        let schedutil = setting_of(cpus, "schedutil");
        assert_eq!(schedutil.mode, None);
        assert_eq!(schedutil.describe(cpus), "schedutil");
        let err = setting(cpus, "schedutil@passive").unwrap_err();
        assert!(err.contains("has no modes"), "{err}");
        let err = setting(cpus, "turbo").unwrap_err();
        assert!(
            err.contains("'turbo' is not available here; valid: conservative"),
            "{err}"
        );
        let saved = Saved::save(cpus).unwrap();
        saved.apply(&schedutil).unwrap();
        drop(saved);
        assert_eq!(governors(cpus, 2), ["ondemand"; 2]);
    }

    /// A switch that fails half way (the third CPU refuses its governor,
    /// after the driver went passive and two CPUs were switched): the run
    /// fails, and everything goes back.
    #[test]
    fn a_switch_failing_half_way_is_undone() {
        let dir = fake_cpus("intel_pstate", Some("active"), "powersave", 4);
        let cpus = dir.path();
        // Readable, but no write gets through, even as root.
        let refusing = cpus.join("cpu2/cpufreq/scaling_governor");
        std::fs::remove_file(&refusing).unwrap();
        std::os::unix::fs::symlink("/proc/version", &refusing).unwrap();
        let saved = Saved::save(cpus).unwrap();
        let err = saved.apply(&setting_of(cpus, "schedutil")).unwrap_err();
        assert!(
            format!("{err:#}").contains("governor schedutil not set"),
            "{err:#}"
        );
        assert_eq!(file(cpus, "intel_pstate/status"), "passive", "half way");
        assert_eq!(file(cpus, "cpu1/cpufreq/scaling_governor"), "schedutil");
        assert_eq!(
            file(cpus, "cpu3/cpufreq/scaling_governor"),
            "powersave",
            "not reached"
        );
        assert_eq!(saved.restore(), Vec::<String>::new());
        assert_eq!(file(cpus, "intel_pstate/status"), "active");
        for cpu in [0, 1, 3] {
            let path = format!("cpu{cpu}/cpufreq/scaling_governor");
            assert_eq!(file(cpus, &path), "powersave");
        }
    }

    /// What cannot be put back is said, and the rest still is.
    #[test]
    fn a_restore_that_cannot_write_names_the_file() {
        let dir = fake_cpus("intel_pstate", Some("active"), "powersave", 2);
        let cpus = dir.path();
        let saved = Saved::save(cpus).unwrap();
        saved.apply(&setting_of(cpus, "schedutil")).unwrap();
        let max = cpus.join("cpu0/cpufreq/scaling_max_freq");
        std::fs::remove_file(&max).unwrap();
        std::os::unix::fs::symlink("/proc/version", &max).unwrap();
        let errors = saved.restore();
        assert!(
            errors.len() == 1 && errors[0].contains("cpu0/cpufreq/scaling_max_freq"),
            "{errors:?}"
        );
        assert_eq!(file(cpus, "intel_pstate/status"), "active");
        assert_eq!(governors(cpus, 2), ["powersave"; 2]);
    }

    #[test]
    fn the_state_reads_in_one_line() {
        let dir = fake_cpus("intel_pstate", Some("active"), "powersave", 2);
        let cpus = dir.path();
        std::fs::write(cpus.join("cpu1/cpufreq/scaling_governor"), "performance").unwrap();
        assert_eq!(
            describe(cpus),
            "intel_pstate (status active), governor powersave on 1 CPU, performance on 1 CPU, \
             limits 800000-3900000 kHz on 2 CPUs, EPP balance_performance on 2 CPUs"
        );
        let none = tempfile::tempdir().unwrap();
        assert_eq!(describe(none.path()), "no cpufreq");
    }

    #[test]
    fn a_machine_without_cpufreq_has_no_governors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cpu0")).unwrap();
        assert!(!cpufreq_present(dir.path()));
        assert!(available(dir.path()).is_empty());
        assert!(Saved::save(dir.path()).unwrap().policies.is_empty());
        let missing = dir.path().join("nothing");
        let err = Saved::save(&missing).err().unwrap().to_string();
        assert!(err.contains("cannot list"), "{err}");
    }
}
