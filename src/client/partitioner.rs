//! Choosing a partition: Kafka's default partitioner, so that a key lands
//! in the partition a Kafka client would choose.
//!
//! With a key, the partition is `(murmur2(key) & 0x7fffffff) % partitions`
//! (murmur2 with seed `0x9747b28c`). Without a key, records go
//! round-robin. A fixed partition (`-p`) overrides both.

/// Kafka's murmur2 hash (the Java client's `Utils.murmur2`).
pub fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    const SEED: u32 = 0x9747_b28c;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// Chooses partitions: by key hash, else round-robin, unless fixed.
#[derive(Debug, Clone)]
pub struct Partitioner {
    partitions: u32,
    fixed: Option<u32>,
    next: u32,
}

impl Partitioner {
    /// A partitioner over `partitions` partitions, or always `fixed`.
    pub fn new(partitions: u32, fixed: Option<u32>) -> Partitioner {
        assert!(partitions > 0, "a topic has partitions");
        Partitioner {
            partitions,
            fixed,
            next: 0,
        }
    }

    /// The partition of a record with this key.
    pub fn partition(&mut self, key: Option<&[u8]>) -> u32 {
        if let Some(p) = self.fixed {
            return p;
        }
        match key {
            Some(key) => (murmur2(key) & 0x7fff_ffff) % self.partitions,
            None => {
                let p = self.next;
                self.next = (self.next + 1) % self.partitions;
                p
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafka() {
        // Vectors from Kafka's UtilsTest.testMurmur2.
        let cases: [(&[u8], i32); 5] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(
                murmur2(input) as i32,
                expected,
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }
}
