//! Compressible input for compression workloads (`zstd -T`): the same
//! bytes on every machine, half of them repeats of earlier text and half
//! new literals, as zstd's own benchmark data ("compressible noise",
//! programs/datagen.c in its source) is made. Not a real file: the point
//! is an input of a chosen size that every run and every machine share.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};

/// xorshift64*: deterministic and fast; nothing here needs more.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `lo..=hi`.
    fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
}

/// How far back a repeat may reach: zstd level 3's window.
const WINDOW: usize = 1 << 21;

/// `len` bytes: alternately a literal run (letters, digits and
/// punctuation, some more frequent than others) and a repeat of
/// earlier bytes at a random distance within the window.
pub fn generate(len: usize, seed: u64) -> Vec<u8> {
    const ALPHABET: &[u8] = b"eeettaaoinshrdlu  \n\tcmfwypvbgkqjxz0123456789{}();=_-,.";
    let mut rng = Rng(seed | 1);
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let copy = out.len() > 64 && rng.next().is_multiple_of(2);
        if copy {
            let distance = rng.between(1, out.len().min(WINDOW));
            let run = rng.between(4, 64).min(len - out.len());
            let from = out.len() - distance;
            for i in 0..run {
                out.push(out[from + i]);
            }
        } else {
            let run = rng.between(1, 32).min(len - out.len());
            for _ in 0..run {
                out.push(ALPHABET[rng.between(0, ALPHABET.len() - 1)]);
            }
        }
    }
    out
}

/// Write `mib` MiB of it to `path`.
pub fn run(mib: usize, path: &Path) -> Result<String> {
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = BufWriter::new(file);
    const CHUNK: usize = 1 << 20;
    for i in 0..mib {
        out.write_all(&generate(CHUNK, 0x9e37_79b9_7f4a_7c15 ^ i as u64))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    out.flush()?;
    Ok(format!("data: wrote {mib} MiB to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_bytes_every_time_and_about_half_repeated() {
        let a = generate(1 << 16, 7);
        assert_eq!(a.len(), 1 << 16);
        assert_eq!(a, generate(1 << 16, 7));
        assert_ne!(a, generate(1 << 16, 8));
        // Repeats make 4-byte sequences recur far more than in noise.
        let mut seen = std::collections::HashSet::new();
        let distinct = a.windows(4).filter(|w| seen.insert(w.to_vec())).count();
        assert!(
            distinct < a.len() * 3 / 4,
            "{distinct} distinct of {}",
            a.len()
        );
    }
}
