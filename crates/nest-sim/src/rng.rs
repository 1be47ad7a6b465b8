//! A small seeded PRNG (SplitMix64) owned by the simulator, so results never
//! depend on an external crate's algorithm or on process state.

/// SplitMix64 (Steele, Lea, Flood 2014): 64-bit state, full period.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x6a09_e667_f3bc_c909)
    }

    /// A stream derived from this seed and `salt` (e.g. a task id).
    pub fn derive(seed: u64, salt: u64) -> Self {
        let mut r = Self::new(seed.wrapping_add(salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`: the top 53 bits, as many as an f64 holds.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[lo, hi]` (inclusive).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(Rng::new(8).next_u64(), a[0]);
        let mut r = Rng::new(1);
        assert!((0..100).all(|_| (3..=5).contains(&r.range(3, 5))));
        let units: Vec<f64> = (0..1000).map(|_| r.unit()).collect();
        assert!(units.iter().all(|u| (0.0..1.0).contains(u)));
        // Spread over the interval, not stuck in a corner of it.
        assert!(units.iter().any(|&u| u < 0.1) && units.iter().any(|&u| u > 0.9));
    }
}
