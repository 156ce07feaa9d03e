//! Partition-key encoding: primary/range key encoding, murmur2 hash buckets
//! and partition schemas (hash dimensions, ranges, per-range hash schemas).
//!
//! - `key` — order-preserving key encoding
//!   (docs/kudu-protocol.md#key-encoding).
//! - `murmur` — MurmurHash64A
//!   (docs/kudu-protocol.md#hash-buckets-and-partition-keys).
//! - `schema` — [`PartitionSchema`] (routing a row to its partition key)
//!   and [`Partition`] (one tablet's key range, both boundary conventions
//!   of docs/kudu-protocol.md#tablet-boundaries).

pub(crate) mod bounds;
pub(crate) mod builder;
pub(crate) mod key;
pub(crate) mod murmur;
pub(crate) mod ranges;
pub(crate) mod schema;

pub use bounds::{BoundaryConvention, Partition};
pub use builder::PartitionSchemaBuilder;
pub use ranges::RangePartition;
pub use schema::{HashDimension, PartitionSchema, RangeWithHashSchema};

#[cfg(test)]
pub(crate) mod testutil {
    //! Helpers for property tests.

    /// Tiny deterministic PRNG for property tests (splitmix64).
    pub(crate) struct Rng(pub u64);
    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        pub(crate) fn bytes(&mut self, max_len: usize) -> Vec<u8> {
            let len = (self.next() % (max_len as u64 + 1)) as usize;
            // Bias towards 0x00 and 0x01 to exercise escaping.
            (0..len).map(|_| (self.next() % 4) as u8).collect()
        }
    }
}
