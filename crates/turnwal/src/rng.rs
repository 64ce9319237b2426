//! The one seeded random number generator every workload, test and crash
//! lab shares: a 64-bit xorshift (shifts 13, 7, 17), deterministic from its
//! seed and free of dependencies, so a seed always reproduces the same run.
//!
//! ```
//! use turnwal::rng::Rng;
//!
//! let mut a = Rng::new(42);
//! let mut b = Rng::new(42);
//! let draws: Vec<u64> = (0..4).map(|_| a.below(10)).collect();
//! assert_eq!(draws, (0..4).map(|_| b.below(10)).collect::<Vec<_>>());
//! assert!(draws.iter().all(|&d| d < 10));
//! assert!((5..=9).contains(&a.range(5, 9)));
//! ```

/// A small deterministic xorshift generator (not for anything that needs
/// unpredictability).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value, 0 included): the crash lab's
    /// seeding, which its workloads and recorded counts depend on.
    pub fn new(seed: u64) -> Rng {
        Rng::from_state(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1)
    }

    /// A generator whose state is `state` as it is, for callers that map
    /// their seeds themselves (and must keep the sequences they always
    /// had). A zero state yields zeros forever.
    pub fn from_state(state: u64) -> Rng {
        Rng(state)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A value in `lo..=hi` (`lo <= hi`, and not the whole `u64` range).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// A fair coin: the low bit of the next value.
    pub fn coin(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }
}
