//! A set of CPUs (the kernel's `struct cpumask`), for task affinity.

use nest_trace::Cpu;

/// CPUs as bits, 64 to a word.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuSet {
    words: Vec<u64>,
}

impl CpuSet {
    /// The set of `cpus`.
    pub fn of(cpus: &[Cpu]) -> Self {
        let len = cpus.iter().max().map_or(0, |&c| c as usize / 64 + 1);
        let mut words = vec![0; len];
        for &c in cpus {
            words[c as usize / 64] |= 1 << (c % 64);
        }
        Self { words }
    }

    /// No CPU, with room for CPUs below `nr_cpus` without growing.
    pub fn empty(nr_cpus: usize) -> Self {
        Self {
            words: vec![0; nr_cpus.div_ceil(64)],
        }
    }

    /// Adds `cpu` (`cpumask_set_cpu()`).
    pub fn insert(&mut self, cpu: Cpu) {
        let word = cpu as usize / 64;
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << (cpu % 64);
    }

    /// Keeps the CPUs for which `keep` says so, visiting them ascending.
    pub fn retain(&mut self, mut keep: impl FnMut(Cpu) -> bool) {
        for (i, word) in self.words.iter_mut().enumerate() {
            let mut bits = *word;
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                if !keep((i * 64) as Cpu + b) {
                    *word &= !(1 << b);
                }
            }
        }
    }

    pub fn contains(&self, cpu: Cpu) -> bool {
        self.words
            .get(cpu as usize / 64)
            .is_some_and(|w| w & (1 << (cpu % 64)) != 0)
    }

    /// Number of CPUs (`cpumask_weight()`).
    pub fn weight(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }

    /// The CPUs, ascending.
    pub fn iter(&self) -> impl Iterator<Item = Cpu> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            (0..64)
                .filter(move |b| w & (1 << b) != 0)
                .map(move |b| (i * 64 + b) as Cpu)
        })
    }

    /// The only CPU of a one-CPU set.
    pub fn single(&self) -> Option<Cpu> {
        (self.weight() == 1).then(|| self.iter().next()).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::CpuSet;

    #[test]
    fn members_weight_and_order() {
        let s = CpuSet::of(&[70, 3, 64]);
        assert!(s.contains(3) && s.contains(64) && s.contains(70));
        assert!(!s.contains(4) && !s.contains(200));
        assert_eq!(s.weight(), 3);
        assert_eq!(s.iter().collect::<Vec<_>>(), [3, 64, 70]);
        assert_eq!((s.single(), CpuSet::of(&[5]).single()), (None, Some(5)));
    }

    #[test]
    fn insert_and_retain() {
        let mut s = CpuSet::empty(4);
        for c in [2, 130, 1] {
            s.insert(c);
        }
        let mut seen = Vec::new();
        s.retain(|c| {
            seen.push(c);
            c != 2
        });
        assert_eq!(seen, [1, 2, 130]);
        assert_eq!(s.iter().collect::<Vec<_>>(), [1, 130]);
    }
}
