//! The tablet location cache: partition key → tablet and replicas, with
//! non-covered ranges remembered and entries invalidated on routing errors.
