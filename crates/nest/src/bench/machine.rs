//! The machine the results were measured on, stored with them.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::energy::Rapl;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cpus: usize,
    pub sockets: usize,
    pub cores: usize,
    pub kernel: String,
    /// cpu0's cpufreq governor when the bench started, or "none (no cpufreq)".
    pub governor: String,
    /// "on", "off" or "unknown".
    pub turbo: String,
    /// What runs the machine: "none" (bare metal), "kvm", "qemu" (software
    /// emulation), ... as `systemd-detect-virt` names them.
    pub virtualization: String,
    /// Under software emulation times measure placement, not speed.
    pub emulated: bool,
    /// The RAPL package domains whose energy is measured (`package-0`,
    /// ...); empty without RAPL (and in results from before it).
    #[serde(default)]
    pub rapl: Vec<String>,
}

impl Machine {
    /// The label results carry when they were measured under emulation.
    pub fn label(&self) -> Option<&'static str> {
        self.emulated
            .then_some("under emulation: times measure placement, not speed")
    }

    pub fn describe(&self) -> String {
        format!(
            "{} ({} CPUs: {} sockets, {} cores), kernel {}, governor {}, turbo {}, \
             virtualization {}, RAPL {}",
            self.cpu_model,
            self.cpus,
            self.sockets,
            self.cores,
            self.kernel,
            self.governor,
            self.turbo,
            self.virtualization,
            if self.rapl.is_empty() {
                "none".to_string()
            } else {
                self.rapl.join(", ")
            }
        )
    }
}

fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The first `key : value` line of /proc/cpuinfo text with this key.
fn cpuinfo_field<'a>(cpuinfo: &'a str, key: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// What runs this machine. `systemd-detect-virt --vm` where installed
/// (only virtual machines: a container says nothing about speed, and its
/// environment leaks into QEMU guests started from it); else the CPU's
/// `hypervisor` flag with kvm-clock (a KVM guest) or QEMU's DMI vendor or
/// CPU model (QEMU without KVM: software emulation).
fn virtualization(cpuinfo: &str) -> String {
    let detect = std::process::Command::new("systemd-detect-virt")
        .arg("--vm")
        .output();
    if let Ok(out) = detect {
        let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !name.is_empty() {
            return name;
        }
    }
    let flags = cpuinfo_field(cpuinfo, "flags").unwrap_or_default();
    let clocks = read_trimmed("/sys/devices/system/clocksource/clocksource0/available_clocksource")
        .unwrap_or_default();
    let vendor = read_trimmed("/sys/class/dmi/id/sys_vendor").unwrap_or_default();
    classify(
        flags,
        &clocks,
        &vendor,
        cpuinfo_field(cpuinfo, "model name").unwrap_or_default(),
    )
}

/// Name the virtualization from the CPU flags, the clock sources, the DMI
/// vendor and the CPU model.
fn classify(flags: &str, clocks: &str, vendor: &str, model: &str) -> String {
    let hypervisor = flags.split_whitespace().any(|f| f == "hypervisor");
    let name = if !hypervisor {
        "none"
    } else if clocks.contains("kvm-clock") {
        "kvm"
    } else if vendor.contains("QEMU") || model.contains("QEMU") {
        "qemu"
    } else {
        "unknown hypervisor"
    };
    name.to_string()
}

fn turbo() -> String {
    if let Some(no_turbo) = read_trimmed("/sys/devices/system/cpu/intel_pstate/no_turbo") {
        return if no_turbo == "0" { "on" } else { "off" }.into();
    }
    match read_trimmed("/sys/devices/system/cpu/cpufreq/boost").as_deref() {
        Some("1") => "on".into(),
        Some("0") => "off".into(),
        _ => "unknown".into(),
    }
}

/// Describe this machine, whose RAPL domains are `rapl`.
pub fn describe(rapl: &Rapl) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let topology = nest_topology::sysfs::read_sysfs_topology(Path::new("/")).ok();
    let count = |f: fn(&nest_topology::CpuPlace) -> u32| {
        topology.as_ref().map_or(0, |t| {
            let mut ids: Vec<u32> = t.cpus.iter().map(f).collect();
            ids.sort_unstable();
            ids.dedup();
            ids.len()
        })
    };
    let virtualization = virtualization(&cpuinfo);
    Machine {
        cpu_model: cpuinfo_field(&cpuinfo, "model name")
            .unwrap_or("unknown CPU")
            .to_string(),
        cpus: topology.as_ref().map_or(0, |t| t.nr_cpus()),
        sockets: count(|p| p.socket),
        cores: count(|p| p.core),
        kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default(),
        governor: read_trimmed("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
            .unwrap_or_else(|| "none (no cpufreq)".into()),
        turbo: turbo(),
        emulated: virtualization == "qemu",
        virtualization,
        rapl: rapl.names(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emulation_is_told_from_kvm_and_bare_metal() {
        let qemu = classify(
            "fpu sse hypervisor",
            "tsc acpi_pm",
            "QEMU",
            "QEMU Virtual CPU",
        );
        assert_eq!(qemu, "qemu");
        assert_eq!(
            classify("fpu hypervisor", "kvm-clock tsc", "QEMU", "Intel"),
            "kvm"
        );
        assert_eq!(
            classify("fpu sse", "tsc hpet", "Dell Inc.", "Intel Xeon"),
            "none"
        );
        let m = Machine {
            emulated: true,
            ..Machine::default()
        };
        assert!(m.label().unwrap().contains("placement, not speed"));
        assert_eq!(Machine::default().label(), None);
    }

    #[test]
    fn cpuinfo_fields_are_read_by_key() {
        let text = "processor\t: 0\nmodel name\t: AMD EPYC 7702\nflags\t\t: fpu hypervisor\n";
        assert_eq!(cpuinfo_field(text, "model name"), Some("AMD EPYC 7702"));
        assert_eq!(cpuinfo_field(text, "flags"), Some("fpu hypervisor"));
        assert_eq!(cpuinfo_field(text, "bogomips"), None);
    }
}
