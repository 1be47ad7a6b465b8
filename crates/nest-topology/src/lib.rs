//! Where each CPU of a machine sits: its core, last-level cache, socket and
//! NUMA node ([`Topology`]), built as Linux numbers a regular server or read
//! from sysfs ([`sysfs`]). The lowest layer of the project: the policy, the
//! scheduler, the simulator and the trace tools all describe machines with
//! it, and it depends on nothing of theirs.

use serde::{Deserialize, Serialize};

pub mod sysfs;

pub use sysfs::{parse_cpu_list, read_sysfs_topology};

/// A CPU number as the kernel numbers them.
pub type Cpu = u32;

/// Where one logical CPU sits in the machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuPlace {
    pub cpu: Cpu,
    /// Physical core; SMT siblings share it. Unique across the machine.
    pub core: u32,
    /// Last-level cache domain. Unique across the machine.
    pub llc: u32,
    pub socket: u32,
    /// NUMA node.
    pub node: u32,
}

/// The CPUs of a machine, indexed by CPU number.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub cpus: Vec<CpuPlace>,
}

impl Topology {
    /// A regular machine: `sockets x cores_per_socket x threads_per_core`,
    /// numbered the way Linux numbers most x86 servers (all first threads of
    /// every core of every socket, then the second threads), one LLC and one
    /// NUMA node per socket.
    pub fn regular(sockets: u32, cores_per_socket: u32, threads_per_core: u32) -> Self {
        let cores = sockets * cores_per_socket;
        let cpus = (0..threads_per_core)
            .flat_map(|thread| {
                (0..cores).map(move |core| {
                    let socket = core / cores_per_socket;
                    CpuPlace {
                        cpu: thread * cores + core,
                        core,
                        llc: socket,
                        socket,
                        node: socket,
                    }
                })
            })
            .collect();
        Self { cpus }
    }

    /// As [`Topology::regular`], numbered the way QEMU numbers a guest's
    /// CPUs: a core's threads next to each other, socket after socket.
    pub fn siblings_adjacent(sockets: u32, cores_per_socket: u32, threads_per_core: u32) -> Self {
        let per_socket = cores_per_socket * threads_per_core;
        let cpus = (0..sockets * per_socket)
            .map(|cpu| {
                let socket = cpu / per_socket;
                CpuPlace {
                    cpu,
                    core: cpu / threads_per_core,
                    llc: socket,
                    socket,
                    node: socket,
                }
            })
            .collect();
        Self { cpus }
    }

    /// `n` CPUs, each its own core, all in one socket, LLC and NUMA node:
    /// the topology assumed when a trace comes without one.
    pub fn flat(n: u32) -> Self {
        let cpus = (0..n)
            .map(|cpu| CpuPlace {
                cpu,
                core: cpu,
                llc: 0,
                socket: 0,
                node: 0,
            })
            .collect();
        Self { cpus }
    }

    pub fn nr_cpus(&self) -> usize {
        self.cpus.len()
    }

    pub fn place(&self, cpu: Cpu) -> Option<&CpuPlace> {
        self.cpus.get(cpu as usize)
    }

    pub fn nr_sockets(&self) -> usize {
        self.cpus
            .iter()
            .map(|c| c.socket)
            .max()
            .map_or(0, |m| m as usize + 1)
    }

    /// Where `cpu` sits, whatever the numbering: its socket, the rank of
    /// its core among the socket's cores and its rank among the core's
    /// threads (both in ascending numbers).
    fn position(&self, cpu: Cpu) -> Option<(u32, usize, usize)> {
        let p = self.place(cpu)?;
        let mut cores: Vec<u32> = self
            .cpus
            .iter()
            .filter(|c| c.socket == p.socket)
            .map(|c| c.core)
            .collect();
        cores.sort_unstable();
        cores.dedup();
        let core = cores.binary_search(&p.core).ok()?;
        let thread = self
            .cpus
            .iter()
            .filter(|c| c.core == p.core && c.cpu < cpu)
            .count();
        Some((p.socket, core, thread))
    }

    /// The CPU of `other` at the place `cpu` has here (same socket, core
    /// rank and thread rank): e.g. a guest numbering SMT siblings next to
    /// each other (0, 1) against a model numbering them a socket apart (0,
    /// 8). `None` when `other` has no such place.
    pub fn same_place_in(&self, cpu: Cpu, other: &Topology) -> Option<Cpu> {
        let pos = self.position(cpu)?;
        other
            .cpus
            .iter()
            .map(|c| c.cpu)
            .find(|&c| other.position(c) == Some(pos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_is_found_across_numberings() {
        let model = Topology::regular(2, 4, 2);
        let guest = Topology::siblings_adjacent(2, 4, 2);
        let to_model = |c| guest.same_place_in(c, &model);
        assert_eq!(
            [0, 1, 4, 5, 9, 15].map(to_model),
            [0, 8, 2, 10, 12, 15].map(Some)
        );
        assert_eq!(model.same_place_in(8, &guest), Some(1));
        assert_eq!(guest.same_place_in(3, &Topology::regular(1, 2, 1)), None);
        assert_eq!(guest.same_place_in(16, &model), None);
    }

    #[test]
    fn regular_topology_numbers_smt_siblings_last() {
        let topo = Topology::regular(2, 4, 2);
        assert_eq!(topo.nr_cpus(), 16);
        assert_eq!(topo.nr_sockets(), 2);
        // CPU 0 and CPU 8 are the two threads of core 0 on socket 0.
        assert_eq!(topo.place(0).unwrap().core, topo.place(8).unwrap().core);
        assert_eq!(topo.place(4).unwrap().socket, 1);
        assert_eq!(topo.place(12).unwrap().socket, 1);
        assert!(topo.place(16).is_none());
    }
}
