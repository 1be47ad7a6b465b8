//! Energy from RAPL, through the kernel's powercap tree
//! (`/sys/class/powercap`, Documentation/power/powercap/powercap.rst): the
//! CPU packages' `energy_uj` counters, read around each run's workload.
//!
//! Only the top-level zones `intel-rapl:N` named `package-*` are counted
//! (AMD's driver uses the same names). Their subzones `intel-rapl:N:M`
//! (core, uncore, dram) are parts of a package or not the CPU's; the
//! `intel-rapl-mmio:N` zones show a package's counter a second time, and
//! `psys` is the whole platform.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The real powercap tree; [`Rapl::find`] takes it as an argument so that
/// tests can give it a fake one.
pub const POWERCAP: &str = "/sys/class/powercap";

/// One package domain.
struct Domain {
    /// `package-0`.
    name: String,
    /// Its zone directory (`intel-rapl:0`).
    dir: PathBuf,
    /// Where its counter wraps to 0, µJ (`max_energy_range_uj`).
    range_uj: Option<u64>,
}

/// The package domains of a machine; none in a guest or without RAPL.
pub struct Rapl {
    domains: Vec<Domain>,
}

/// The counters at the start of a measurement.
pub struct Meter<'a> {
    rapl: &'a Rapl,
    start_uj: Vec<u64>,
}

fn read_u64(path: &Path) -> Result<u64> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        let hint = if err.kind() == std::io::ErrorKind::PermissionDenied {
            " (only root may read RAPL counters)"
        } else {
            ""
        };
        anyhow::anyhow!("cannot read {}: {err}{hint}", path.display())
    })?;
    text.trim()
        .parse()
        .with_context(|| format!("{}: not a number: {:?}", path.display(), text.trim()))
}

impl Rapl {
    /// The package domains under `powercap`, in zone order.
    pub fn find(powercap: &Path) -> Self {
        let entries = std::fs::read_dir(powercap).into_iter().flatten().flatten();
        let mut zones: Vec<(u32, Domain)> = entries
            .filter_map(|entry| {
                let file = entry.file_name();
                // `intel-rapl:N` only: subzones have a second `:M`.
                let zone = file.to_str()?.strip_prefix("intel-rapl:")?.parse().ok()?;
                let dir = entry.path();
                let name = std::fs::read_to_string(dir.join("name")).ok()?;
                let name = name.trim().to_string();
                let range_uj = read_u64(&dir.join("max_energy_range_uj")).ok();
                name.starts_with("package").then_some((
                    zone,
                    Domain {
                        name,
                        dir,
                        range_uj,
                    },
                ))
            })
            .collect();
        zones.sort_by_key(|(zone, _)| *zone);
        Self {
            domains: zones.into_iter().map(|(_, domain)| domain).collect(),
        }
    }

    /// The domains' names (`package-0`, ...).
    pub fn names(&self) -> Vec<String> {
        self.domains.iter().map(|d| d.name.clone()).collect()
    }

    /// Every domain's counter now, µJ, or which one cannot be read and why.
    pub fn read(&self) -> Result<Vec<u64>> {
        self.domains
            .iter()
            .map(|d| read_u64(&d.dir.join("energy_uj")))
            .collect()
    }

    /// Does it measure anything: domains whose counters can be read?
    pub fn measures(&self) -> bool {
        !self.domains.is_empty() && self.read().is_ok()
    }

    /// Start measuring; `None` without domains or readable counters.
    pub fn start(&self) -> Option<Meter<'_>> {
        if self.domains.is_empty() {
            return None;
        }
        let start_uj = self.read().ok()?;
        Some(Meter {
            rapl: self,
            start_uj,
        })
    }
}

impl Meter<'_> {
    /// The energy of every package since the start, J; `None` when a
    /// counter cannot be read, or wrapped around without a known range. A
    /// counter is taken to wrap at most once (its range lasts minutes at
    /// full power: 262 kJ is 22 min at 200 W).
    pub fn joules(&self) -> Option<f64> {
        let now = self.rapl.read().ok()?;
        let mut total_uj = 0u64;
        for ((domain, start), end) in self.rapl.domains.iter().zip(&self.start_uj).zip(now) {
            total_uj += if end >= *start {
                end - start
            } else {
                domain.range_uj?.checked_sub(*start)? + end
            };
        }
        Some(total_uj as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zone directory with these files.
    fn zone(root: &Path, dir: &str, files: &[(&str, &str)]) {
        let dir = root.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, text) in files {
            std::fs::write(dir.join(file), format!("{text}\n")).unwrap();
        }
    }

    fn package(root: &Path, dir: &str, name: &str, energy_uj: u64) {
        let energy = energy_uj.to_string();
        let files = [
            ("name", name),
            ("energy_uj", energy.as_str()),
            ("max_energy_range_uj", "262143328850"),
        ];
        zone(root, dir, &files);
    }

    fn set_energy(root: &Path, dir: &str, energy_uj: u64) {
        std::fs::write(root.join(dir).join("energy_uj"), energy_uj.to_string()).unwrap();
    }

    /// Two sockets, as a real /sys/class/powercap lists them.
    fn two_sockets() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        zone(root, "intel-rapl", &[("enabled", "1")]);
        package(root, "intel-rapl:1", "package-1", 2_000_000);
        package(root, "intel-rapl:0", "package-0", 1_000_000);
        package(root, "intel-rapl:0:0", "core", 500_000);
        package(root, "intel-rapl:0:1", "dram", 300_000);
        package(root, "intel-rapl:2", "psys", 9_000_000);
        zone(root, "intel-rapl-mmio", &[("enabled", "1")]);
        package(root, "intel-rapl-mmio:0", "package-0", 1_000_000);
        tmp
    }

    #[test]
    fn only_the_top_level_package_zones_are_domains() {
        let tmp = two_sockets();
        assert_eq!(Rapl::find(tmp.path()).names(), ["package-0", "package-1"]);
    }

    #[test]
    fn energy_is_the_sum_of_the_packages_increments() {
        let tmp = two_sockets();
        let rapl = Rapl::find(tmp.path());
        let meter = rapl.start().unwrap();
        set_energy(tmp.path(), "intel-rapl:0", 3_500_000);
        set_energy(tmp.path(), "intel-rapl:1", 2_250_000);
        set_energy(tmp.path(), "intel-rapl:0:0", 99_000_000);
        set_energy(tmp.path(), "intel-rapl:2", 99_000_000);
        assert_eq!(meter.joules(), Some(2.75));
    }

    #[test]
    fn a_counter_that_wrapped_around_counts_once_through_its_range() {
        let tmp = tempfile::tempdir().unwrap();
        package(tmp.path(), "intel-rapl:0", "package-0", 262_143_000_000);
        let rapl = Rapl::find(tmp.path());
        let meter = rapl.start().unwrap();
        set_energy(tmp.path(), "intel-rapl:0", 500_000);
        // 328_850 µJ up to the range, then 500_000 from 0.
        assert_eq!(meter.joules(), Some(0.82885));
        // Without a known range a wrap cannot be undone.
        std::fs::remove_file(tmp.path().join("intel-rapl:0/max_energy_range_uj")).unwrap();
        let rapl = Rapl::find(tmp.path());
        set_energy(tmp.path(), "intel-rapl:0", 262_143_000_000);
        let meter = rapl.start().unwrap();
        set_energy(tmp.path(), "intel-rapl:0", 500_000);
        assert_eq!(meter.joules(), None);
    }

    #[test]
    fn unreadable_counters_give_no_energy_and_say_why() {
        let tmp = two_sockets();
        let rapl = Rapl::find(tmp.path());
        let meter = rapl.start().unwrap();
        std::fs::remove_file(tmp.path().join("intel-rapl:1/energy_uj")).unwrap();
        assert_eq!(meter.joules(), None, "gone after the start");
        assert!(rapl.start().is_none(), "gone before the start");
        let err = format!("{:#}", rapl.read().unwrap_err());
        assert!(err.contains("intel-rapl:1/energy_uj"), "{err}");
        set_energy(tmp.path(), "intel-rapl:1", 0);
        std::fs::write(tmp.path().join("intel-rapl:0/energy_uj"), "n/a").unwrap();
        let err = format!("{:#}", rapl.read().unwrap_err());
        assert!(err.contains("not a number"), "{err}");
        // No powercap tree at all (a guest): nothing to measure, no error.
        let none = Rapl::find(&tmp.path().join("absent"));
        assert!(none.names().is_empty());
        assert!(none.read().unwrap().is_empty());
        assert!(none.start().is_none());
    }
}
