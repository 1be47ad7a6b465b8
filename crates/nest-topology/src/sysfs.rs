//! The machine's CPU topology, read from sysfs.
//!
//! For every `cpuN` under `<root>/sys/devices/system/cpu`: the socket is
//! `topology/physical_package_id`, the physical core is the lowest CPU of
//! `topology/thread_siblings_list`, the last-level cache is the lowest CPU of
//! `shared_cpu_list` of the highest-level `cache/index*` (level 3 where
//! present), and the NUMA node is the `node*/cpulist` of
//! `<root>/sys/devices/system/node` that holds the CPU (node 0 without NUMA
//! information). Cores, caches and sockets are renumbered densely from 0 in
//! CPU order. An offline CPU (no `topology/` directory) gets a core and cache
//! of its own on socket 0.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::{Cpu, CpuPlace, Topology};

/// Read the topology of the machine whose filesystem root is `root`
/// (`Path::new("/")` for this machine; a fake tree in tests).
pub fn read_sysfs_topology(root: &Path) -> anyhow::Result<Topology> {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let cpus = list_numbered(&cpu_dir, "cpu")
        .with_context(|| format!("cannot list CPUs in {}", cpu_dir.display()))?;
    if cpus.is_empty() {
        bail!("no cpuN directories in {}", cpu_dir.display());
    }
    let nodes = read_nodes(&root.join("sys/devices/system/node"))?;
    let raw: Vec<RawPlace> = cpus
        .iter()
        .map(|&cpu| read_cpu(&cpu_dir.join(format!("cpu{cpu}")), cpu))
        .collect::<anyhow::Result<_>>()?;
    Ok(densify(&cpus, &raw, &nodes))
}

/// Parse a kernel CPU list such as `0-3,8,10-11`.
pub fn parse_cpu_list(text: &str) -> anyhow::Result<Vec<Cpu>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let lo: Cpu = lo
            .parse()
            .with_context(|| format!("bad CPU list \"{text}\""))?;
        let hi: Cpu = hi
            .parse()
            .with_context(|| format!("bad CPU list \"{text}\""))?;
        cpus.extend(lo..=hi);
    }
    Ok(cpus)
}

/// Keys identifying a CPU's core, cache and package before renumbering.
struct RawPlace {
    core: Option<Cpu>,
    llc: Option<Cpu>,
    package: u32,
}

fn read_cpu(dir: &Path, cpu: Cpu) -> anyhow::Result<RawPlace> {
    let topo = dir.join("topology");
    if !topo.is_dir() {
        return Ok(RawPlace {
            core: None,
            llc: None,
            package: 0,
        });
    }
    let package = read_trimmed(&topo.join("physical_package_id"))?
        .parse()
        .with_context(|| format!("bad physical_package_id of cpu{cpu}"))?;
    let siblings = parse_cpu_list(&read_trimmed(&topo.join("thread_siblings_list"))?)?;
    Ok(RawPlace {
        core: Some(siblings.into_iter().min().unwrap_or(cpu)),
        llc: read_llc(&dir.join("cache"))?,
        package,
    })
}

/// Lowest CPU sharing the highest-level cache, if the CPU lists caches.
fn read_llc(cache: &Path) -> anyhow::Result<Option<Cpu>> {
    let Ok(indices) = list_numbered(cache, "index") else {
        return Ok(None);
    };
    let mut best: Option<(u32, Cpu)> = None;
    for i in indices {
        let dir = cache.join(format!("index{i}"));
        let (Ok(level), Ok(shared)) = (
            read_trimmed(&dir.join("level")),
            read_trimmed(&dir.join("shared_cpu_list")),
        ) else {
            continue;
        };
        let level: u32 = level.parse().unwrap_or(0);
        let first = parse_cpu_list(&shared)?.into_iter().min();
        if let Some(first) = first
            && best.is_none_or(|(l, _)| level > l)
        {
            best = Some((level, first));
        }
    }
    Ok(best.map(|(_, cpu)| cpu))
}

/// CPU -> NUMA node, from `node*/cpulist`.
fn read_nodes(dir: &Path) -> anyhow::Result<BTreeMap<Cpu, u32>> {
    let mut map = BTreeMap::new();
    let Ok(nodes) = list_numbered(dir, "node") else {
        return Ok(map);
    };
    for node in nodes {
        let list = read_trimmed(&dir.join(format!("node{node}/cpulist")))?;
        for cpu in parse_cpu_list(&list)? {
            map.insert(cpu, node);
        }
    }
    Ok(map)
}

fn densify(cpus: &[Cpu], raw: &[RawPlace], nodes: &BTreeMap<Cpu, u32>) -> Topology {
    let mut packages: Vec<u32> = raw.iter().map(|r| r.package).collect();
    packages.sort_unstable();
    packages.dedup();
    let mut cores = Renumber::default();
    let mut llcs = Renumber::default();
    let mut places: Vec<CpuPlace> = cpus
        .iter()
        .zip(raw)
        .map(|(&cpu, r)| {
            let socket = packages.binary_search(&r.package).unwrap_or(0) as u32;
            CpuPlace {
                cpu,
                core: cores.id(r.core.map_or((1, cpu), |c| (0, c))),
                llc: llcs.id(r.llc.map_or((1, cpu, socket), |c| (0, c, socket))),
                socket,
                node: nodes.get(&cpu).copied().unwrap_or(0),
            }
        })
        .collect();
    fill_gaps(&mut places, &mut cores, &mut llcs);
    Topology { cpus: places }
}

/// [`Topology`] is indexed by CPU number: give missing numbers a place.
fn fill_gaps(
    places: &mut Vec<CpuPlace>,
    cores: &mut Renumber<(u8, Cpu)>,
    llcs: &mut Renumber<(u8, Cpu, u32)>,
) {
    let max = places.iter().map(|p| p.cpu).max().unwrap_or(0);
    for cpu in 0..=max {
        if !places.iter().any(|p| p.cpu == cpu) {
            places.push(CpuPlace {
                cpu,
                core: cores.id((2, cpu)),
                llc: llcs.id((2, cpu, 0)),
                socket: 0,
                node: 0,
            });
        }
    }
    places.sort_by_key(|p| p.cpu);
}

/// Dense ids in order of first appearance.
struct Renumber<K> {
    seen: Vec<K>,
}

impl<K> Default for Renumber<K> {
    fn default() -> Self {
        Self { seen: Vec::new() }
    }
}

impl<K: PartialEq> Renumber<K> {
    fn id(&mut self, key: K) -> u32 {
        match self.seen.iter().position(|k| *k == key) {
            Some(i) => i as u32,
            None => {
                self.seen.push(key);
                self.seen.len() as u32 - 1
            }
        }
    }
}

/// Numbers N of the entries `<prefix>N` of `dir`, sorted.
fn list_numbered(dir: &Path, prefix: &str) -> std::io::Result<Vec<u32>> {
    let mut out: Vec<u32> = fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name();
            name.to_str()?.strip_prefix(prefix)?.parse().ok()
        })
        .collect();
    out.sort_unstable();
    Ok(out)
}

fn read_trimmed(path: &PathBuf) -> anyhow::Result<String> {
    Ok(fs::read_to_string(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .trim()
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<Cpu>::new());
        assert!(parse_cpu_list("0-x").is_err());
    }
}
