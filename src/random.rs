//! A small seedable pseudo-random sequence (Marsaglia's xorshift64), for
//! retry jitter and for tests that throw random bytes at decoders. Not for
//! anything that must be unpredictable.

/// Xorshift64: a state that must never be zero.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A sequence from `seed` (zero is replaced, since it would stay zero).
    pub fn new(seed: u64) -> XorShift {
        XorShift(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next value.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_follow_their_seed_and_never_stick_at_zero() {
        let (mut a, mut b) = (XorShift::new(7), XorShift::new(7));
        let first: Vec<u64> = (0..100).map(|_| a.next()).collect();
        assert_eq!(first, (0..100).map(|_| b.next()).collect::<Vec<_>>());
        assert_eq!(
            first[0],
            7 ^ (7 << 13)
                ^ ((7 ^ (7 << 13)) >> 7)
                ^ (((7 ^ (7 << 13)) ^ ((7 ^ (7 << 13)) >> 7)) << 17)
        );
        let mut zero = XorShift::new(0);
        assert!((0..100).all(|_| zero.next() != 0));
        let distinct: std::collections::BTreeSet<u64> = first.iter().copied().collect();
        assert_eq!(distinct.len(), 100);
    }
}
