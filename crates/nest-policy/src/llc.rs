//! The last-level caches (LLCs) as the scheduler's queues see them: one
//! queue per LLC, numbered densely, and for each LLC the order in which its
//! CPUs look at the other queues (`nest_config.llc_order`).

use crate::ConfigError;

/// Largest number of LLCs (`NEST_MAX_LLCS`).
pub const MAX_LLCS: usize = crate::ffi::NEST_MAX_LLCS as usize;

/// The LLCs of a machine, indexed densely in the order of their ids.
#[derive(Debug, PartialEq, Eq)]
pub struct LlcLayout {
    ids: Vec<usize>,
    nodes: Vec<usize>,
    nr_cpus: Vec<u32>,
}

impl LlcLayout {
    /// The layout of CPUs given as `(llc id, NUMA node)` pairs, one per CPU.
    pub fn new(cpus: impl IntoIterator<Item = (usize, usize)>) -> Result<Self, ConfigError> {
        let mut by_id = std::collections::BTreeMap::<usize, (usize, u32)>::new();
        for (llc, node) in cpus {
            by_id.entry(llc).or_insert((node, 0)).1 += 1;
        }
        if by_id.len() > MAX_LLCS {
            return Err(ConfigError(format!(
                "this machine has {} last-level caches; Nest supports up to {MAX_LLCS}",
                by_id.len()
            )));
        }
        Ok(Self {
            ids: by_id.keys().copied().collect(),
            nodes: by_id.values().map(|&(node, _)| node).collect(),
            nr_cpus: by_id.values().map(|&(_, n)| n).collect(),
        })
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The dense index of the LLC with kernel id `llc_id` (0 if unknown).
    pub fn index_of(&self, llc_id: usize) -> u32 {
        self.ids.iter().position(|&id| id == llc_id).unwrap_or(0) as u32
    }

    /// Number of CPUs of each LLC, by index.
    pub fn nr_cpus(&self) -> &[u32] {
        &self.nr_cpus
    }

    /// For each LLC, every LLC in the order its CPUs look at the queues:
    /// itself, the LLCs of its NUMA node, then the others, each group by
    /// distance in index (so neighbours come first).
    pub fn orders(&self) -> Vec<Vec<u32>> {
        (0..self.len())
            .map(|own| {
                let mut order: Vec<usize> = (0..self.len()).collect();
                order.sort_by_key(|&llc| {
                    (
                        llc != own,
                        self.nodes[llc] != self.nodes[own],
                        llc.abs_diff(own),
                    )
                });
                order.into_iter().map(|llc| llc as u32).collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llcs_are_indexed_densely_and_ordered_by_node_then_distance() {
        let llcs = LlcLayout::new([(3, 0), (3, 0), (7, 0), (9, 1), (12, 1)]).unwrap();
        assert_eq!(llcs.len(), 4);
        assert_eq!(llcs.index_of(9), 2);
        assert_eq!(llcs.nr_cpus(), &[2, 1, 1, 1]);
        let orders = llcs.orders();
        assert_eq!(orders[0], vec![0, 1, 2, 3]);
        assert_eq!(orders[1], vec![1, 0, 2, 3]);
        assert_eq!(orders[2], vec![2, 3, 1, 0]);
    }

    #[test]
    fn too_many_llcs_are_refused() {
        let err = LlcLayout::new((0..=MAX_LLCS).map(|llc| (llc, 0))).unwrap_err();
        assert!(err.to_string().contains("last-level caches"), "{err}");
    }
}
