//! MurmurHash2, 64-bit "MurmurHash64A" variant
//! (docs/kudu-protocol.md#hash-buckets-and-partition-keys): the hash Kudu uses
//! to put rows into hash buckets. Every server uses it regardless of
//! `HashBucketSchemaPB.hash_algorithm`.

const M: u64 = 0xc6a4_a793_5bd1_e995;
const R: u32 = 47;

/// Hashes `data` with `seed`, exactly as Kudu does (all arithmetic wraps;
/// 8-byte blocks are read little-endian).
pub(crate) fn murmur2_64(data: &[u8], seed: u64) -> u64 {
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut word = [0u8; 8];
        word.copy_from_slice(block);
        let mut k = u64::from_le_bytes(word);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        // The tail bytes form a little-endian partial word.
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kudu_test_vectors() {
        assert_eq!(murmur2_64(b"ab", 0), 7_115_271_465_109_541_368);
        assert_eq!(murmur2_64(b"abcdefg", 0), 2_601_573_339_036_254_301);
        assert_eq!(
            murmur2_64(b"quick brown fox", 42),
            3_575_930_248_840_144_026
        );
    }

    #[test]
    fn computed_vector_from_the_spec() {
        // docs/kudu-protocol.md#range-specific-hash-schemas: INT32 key 42
        // encodes to 80 00 00 2a.
        assert_eq!(
            murmur2_64(&[0x80, 0, 0, 0x2a], 0),
            6_734_496_925_126_476_136
        );
    }
}
