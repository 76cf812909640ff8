//! The cleaner's key → latest offset map (Kafka's dedupe buffer): a
//! fixed table of slots, allocated once, that never grows.
//!
//! A key is held by its hash, the first 128 bits of its SHA-256: two keys
//! whose hashes agree would pass for one and lose the older one's latest
//! record, so the hash must make that as unlikely as a disk error, and a
//! producer must not be able to make it happen on purpose (SHA-256 is
//! collision resistant; Kafka uses MD5). A slot is 24 bytes: the hash and
//! the offset. Slots are probed linearly, and the table counts as full at
//! 90% of them (Kafka's `log.cleaner.io.buffer.load.factor`), where probe
//! runs stay short.

use ring::digest;

/// Bytes of one slot.
pub const SLOT_BYTES: usize = 24;

/// The share of slots the map fills before it is full, in tenths.
const LOAD_TENTHS: usize = 9;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    hash: [u64; 2],
    /// The offset plus one; 0: empty.
    offset: u64,
}

/// A bounded map from key (by hash) to the latest offset put.
#[derive(Debug)]
pub struct OffsetMap {
    slots: Vec<Slot>,
    len: usize,
    max_len: usize,
}

impl OffsetMap {
    /// A map in `bytes` of memory (at least two slots).
    pub fn with_memory(bytes: usize) -> OffsetMap {
        // At least one slot stays empty: a probe always ends.
        let n = (bytes / SLOT_BYTES).max(2);
        OffsetMap {
            slots: vec![Slot::default(); n],
            len: 0,
            max_len: (n * LOAD_TENTHS / 10).clamp(1, n - 1),
        }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keys it can hold.
    pub fn capacity(&self) -> usize {
        self.max_len
    }

    /// Bytes of memory its slots take.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * SLOT_BYTES
    }

    /// Forgets every key.
    pub fn clear(&mut self) {
        if self.len > 0 {
            self.slots.fill(Slot::default());
            self.len = 0;
        }
    }

    /// Puts `key` at `offset` (later puts of a key win): false, and nothing
    /// put, when the key is new and the map is full.
    pub fn put(&mut self, key: &[u8], offset: u64) -> bool {
        let hash = hash(key);
        let i = self.find(hash);
        let slot = &mut self.slots[i];
        if slot.offset == 0 {
            if self.len == self.max_len {
                return false;
            }
            self.len += 1;
            slot.hash = hash;
        }
        slot.offset = offset + 1;
        true
    }

    /// The latest offset put for `key`.
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        let slot = self.slots[self.find(hash(key))];
        slot.offset.checked_sub(1)
    }

    /// The slot holding `hash`, or the empty one where it would go (the
    /// table is never full: there is always an empty slot).
    fn find(&self, hash: [u64; 2]) -> usize {
        let n = self.slots.len();
        let mut i = (hash[0] % n as u64) as usize;
        loop {
            let slot = &self.slots[i];
            if slot.offset == 0 || slot.hash == hash {
                return i;
            }
            i = (i + 1) % n;
        }
    }
}

/// The first 128 bits of the key's SHA-256.
fn hash(key: &[u8]) -> [u64; 2] {
    let d = digest::digest(&digest::SHA256, key);
    let b = d.as_ref();
    [
        u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
        u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_put_of_a_key_wins() {
        let mut map = OffsetMap::with_memory(100 * SLOT_BYTES);
        assert!(map.put(b"a", 1));
        assert!(map.put(b"b", 2));
        assert!(map.put(b"a", 3));
        assert_eq!(map.get(b"a"), Some(3));
        assert_eq!(map.get(b"b"), Some(2));
        assert_eq!(map.get(b"c"), None);
        assert_eq!(map.len(), 2);
        assert!(map.put(b"", 0), "an empty key is a key");
        assert_eq!(map.get(b""), Some(0));
        map.clear();
        assert!(map.is_empty());
        assert_eq!(map.get(b"a"), None);
    }

    #[test]
    fn a_full_map_refuses_new_keys_and_still_takes_known_ones() {
        let mut map = OffsetMap::with_memory(10 * SLOT_BYTES);
        assert_eq!(map.capacity(), 9);
        for i in 0..9u32 {
            assert!(map.put(&i.to_be_bytes(), u64::from(i)), "{i}");
        }
        assert!(!map.put(b"new", 100), "full");
        assert_eq!(map.get(b"new"), None);
        assert!(map.put(&3u32.to_be_bytes(), 200), "a known key");
        assert_eq!(map.get(&3u32.to_be_bytes()), Some(200));
        assert_eq!(map.memory_bytes(), 10 * SLOT_BYTES);
    }

    #[test]
    fn a_map_of_no_memory_still_holds_one_key() {
        let mut map = OffsetMap::with_memory(0);
        assert!(map.put(b"k", 5));
        assert!(!map.put(b"j", 6));
        assert_eq!(map.get(b"k"), Some(5));
    }
}
