//! Partition-key encoding: primary/range key encoding, murmur2 hash buckets
//! and partition schemas (hash dimensions, ranges, per-range hash schemas).
