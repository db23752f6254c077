//! A small seeded pseudo-random generator for the lab's payloads and
//! generated files: SplitMix64 to spread the seed, xorshift64* for the
//! stream (Vigna, "An experimental exploration of Marsaglia's xorshift
//! generators, scrambled", 2016). Not cryptographic; fast and reproducible:
//! the same seed gives the same bytes on every machine.

/// A seeded xorshift64* generator.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

/// SplitMix64's finalizer: spreads nearby seeds far apart.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A 64-bit FNV-1a hash of `bytes` (to derive seeds from names).
pub fn hash_name(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Rng {
    /// A generator whose whole output is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        let state = mix(seed);
        Rng {
            // xorshift must never hold zero.
            state: if state == 0 {
                0x2545_f491_4f6c_dd1d
            } else {
                state
            },
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Multiply-shift: unbiased enough for payload shaping.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A value in `lo..=hi` (`lo` when `hi < lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below(hi - lo + 1)
    }

    /// A float in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// An index in `0..n` skewed towards small values, roughly Zipf(1):
    /// log-uniform over `1..=n`, so index 0 is drawn about as often as all
    /// of `n/2..n` together (how words and labels recur in real documents).
    pub fn zipf(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        let v = (n as f64).powf(self.unit());
        (v as usize).saturating_sub(1).min(n - 1)
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next_u64().to_le_bytes();
        let n = rest.len();
        rest.copy_from_slice(&last[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let (x, y, z): (Vec<u64>, Vec<u64>, Vec<u64>) = (
            (0..16).map(|_| a.next_u64()).collect(),
            (0..16).map(|_| b.next_u64()).collect(),
            (0..16).map(|_| c.next_u64()).collect(),
        );
        assert_eq!(x, y);
        assert_ne!(x, z);
    }

    #[test]
    fn ranges_hold() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            assert!(r.below(10) < 10);
            let v = r.range(5, 9);
            assert!((5..=9).contains(&v));
            assert!(r.zipf(100) < 100);
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.range(3, 1), 3);
        assert_eq!(r.zipf(0), 0);
    }

    #[test]
    fn fill_covers_odd_lengths_and_looks_random() {
        let mut r = Rng::new(3);
        let mut buf = vec![0u8; 1 << 16];
        r.fill(&mut buf[..13]);
        assert!(buf[..13].iter().any(|b| *b != 0));
        r.fill(&mut buf);
        let mut counts = [0u32; 256];
        for b in &buf {
            counts[*b as usize] += 1;
        }
        // 256 expected per value; a stuck generator would be far off.
        assert!(counts.iter().all(|c| (150..400).contains(c)), "{counts:?}");
    }
}
