//! The per-table location map, as plain data with an injected clock.
//!
//! Keys are partition keys compared as byte strings; an empty start is −∞
//! and an empty end is +∞. Invariant: entries never overlap — inserting a
//! master answer first removes every entry that intersects the span it
//! covers. The key space may have holes (non-covered ranges, and 1.17+
//! boundary conventions), which are remembered as `NonCovered` entries so a
//! write into a gap fails fast without asking the master each time.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A replica's Raft role as the master last reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// The Raft leader.
    Leader,
    /// A voting follower.
    Follower,
    /// A non-voting learner (catching up).
    Learner,
    /// Not taking part in the Raft configuration.
    NonParticipant,
    /// The master did not say.
    Unknown,
}

impl Role {
    /// Maps `consensus.RaftPeerPB.Role`.
    pub(crate) fn from_i32(v: i32) -> Role {
        match v {
            0 => Role::Follower,
            1 => Role::Leader,
            2 => Role::Learner,
            3 => Role::NonParticipant,
            _ => Role::Unknown,
        }
    }
}

/// One replica of a tablet.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Replica {
    /// The tablet server's permanent uuid.
    pub ts_uuid: String,
    /// `host:port` to connect to.
    pub addr: String,
    /// The tablet server's location label, if any.
    pub location: Option<String>,
    /// Its Raft role.
    pub role: Role,
}

/// A tablet and where its replicas are.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteTablet {
    /// The tablet id.
    pub tablet_id: String,
    /// Inclusive start partition key (empty = −∞).
    pub partition_key_start: Vec<u8>,
    /// Exclusive end partition key (empty = +∞).
    pub partition_key_end: Vec<u8>,
    /// Where its replicas are.
    pub replicas: Vec<Replica>,
}

impl Replica {
    /// A replica on the tablet server `ts_uuid` at `addr` (no location).
    pub fn new(ts_uuid: impl Into<String>, addr: impl Into<String>, role: Role) -> Self {
        Replica {
            ts_uuid: ts_uuid.into(),
            addr: addr.into(),
            location: None,
            role,
        }
    }
}

impl RemoteTablet {
    /// The tablet `tablet_id` covering partition keys `[start, end)` (empty =
    /// unbounded), with its replicas.
    pub fn new(
        tablet_id: impl Into<String>,
        partition_key_start: Vec<u8>,
        partition_key_end: Vec<u8>,
        replicas: Vec<Replica>,
    ) -> Self {
        RemoteTablet {
            tablet_id: tablet_id.into(),
            partition_key_start,
            partition_key_end,
            replicas,
        }
    }

    /// The replica reported as leader, if any.
    pub fn leader(&self) -> Option<&Replica> {
        self.replicas.iter().find(|r| r.role == Role::Leader)
    }

    /// Whether `key` falls in this tablet's partition.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.partition_key_start.as_slice() && end_after(&self.partition_key_end, key)
    }
}

fn end_after(end: &[u8], key: &[u8]) -> bool {
    end.is_empty() || key < end
}

#[derive(Debug, Clone)]
enum Entry {
    Tablet {
        tablet: Arc<RemoteTablet>,
        expires: Instant,
    },
    NonCovered {
        end: Vec<u8>,
        expires: Instant,
    },
}

impl Entry {
    fn end(&self) -> &[u8] {
        match self {
            Entry::Tablet { tablet, .. } => &tablet.partition_key_end,
            Entry::NonCovered { end, .. } => end,
        }
    }

    fn expires(&self) -> Instant {
        match self {
            Entry::Tablet { expires, .. } | Entry::NonCovered { expires, .. } => *expires,
        }
    }
}

/// The result of a cache lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// A fresh tablet covers the key.
    Tablet(Arc<RemoteTablet>),
    /// The key is in a gap no tablet covers; the gap ends at `end`
    /// (empty = +∞).
    NonCovered {
        /// Where the gap ends.
        end: Vec<u8>,
    },
    /// Unknown or stale: ask the master.
    Miss,
}

/// Locations of one table's tablets.
#[derive(Debug, Default)]
pub struct TableLocations {
    /// start key → entry; entries never overlap.
    entries: BTreeMap<Vec<u8>, Entry>,
}

impl TableLocations {
    /// Looks up the entry covering `key` that is still fresh at `now`.
    pub fn lookup(&self, key: &[u8], now: Instant) -> Lookup {
        let Some((_, entry)) = self
            .entries
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()
        else {
            return Lookup::Miss;
        };
        if entry.expires() <= now || !end_after(entry.end(), key) {
            return Lookup::Miss;
        }
        match entry {
            Entry::Tablet { tablet, .. } => Lookup::Tablet(tablet.clone()),
            Entry::NonCovered { end, .. } => Lookup::NonCovered { end: end.clone() },
        }
    }

    /// Records a `GetTableLocations` answer for a lookup that started at
    /// `requested`. `tablets` must be sorted by start key (the master sends
    /// them so); `exhausted` is true when the master returned fewer tablets
    /// than asked for, so nothing follows the last one.
    pub fn insert(
        &mut self,
        requested: &[u8],
        tablets: Vec<RemoteTablet>,
        exhausted: bool,
        ttl: Duration,
        now: Instant,
    ) {
        let expires = now + ttl;
        if tablets.is_empty() {
            // Nothing at or after the key, and (per the master's rule of
            // returning the tablet before a gap) nothing before it either.
            self.remove_span(&[], &[]);
            self.entries.insert(
                Vec::new(),
                Entry::NonCovered {
                    end: Vec::new(),
                    expires,
                },
            );
            return;
        }
        let first_start = tablets[0].partition_key_start.clone();
        let last_end = tablets[tablets.len() - 1].partition_key_end.clone();
        // The span this answer speaks for.
        let span_start: Vec<u8> = if requested < first_start.as_slice() {
            Vec::new()
        } else {
            first_start.clone()
        };
        let span_end: Vec<u8> = if exhausted {
            Vec::new()
        } else {
            last_end.clone()
        };
        self.remove_span(&span_start, &span_end);
        if span_start.as_slice() < first_start.as_slice() {
            self.entries.insert(
                span_start,
                Entry::NonCovered {
                    end: first_start.clone(),
                    expires,
                },
            );
        }
        let mut prev_end: Option<Vec<u8>> = None;
        for tablet in tablets {
            if let Some(end) = prev_end.take() {
                if !end.is_empty() && end < tablet.partition_key_start {
                    self.entries.insert(
                        end,
                        Entry::NonCovered {
                            end: tablet.partition_key_start.clone(),
                            expires,
                        },
                    );
                }
            }
            prev_end = Some(tablet.partition_key_end.clone());
            self.entries.insert(
                tablet.partition_key_start.clone(),
                Entry::Tablet {
                    tablet: Arc::new(tablet),
                    expires,
                },
            );
        }
        if exhausted && !last_end.is_empty() {
            self.entries.insert(
                last_end,
                Entry::NonCovered {
                    end: Vec::new(),
                    expires,
                },
            );
        }
    }

    /// Drops the entry of `tablet_id` (after TABLET_NOT_FOUND, NOT_THE_LEADER
    /// or a network error) so the next lookup asks the master.
    pub fn invalidate_tablet(&mut self, tablet_id: &str) {
        self.entries.retain(|_, e| match e {
            Entry::Tablet { tablet, .. } => tablet.tablet_id != tablet_id,
            Entry::NonCovered { .. } => true,
        });
    }

    /// Forgets everything (e.g. after a range partition was added).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Number of entries (tablets and gaps).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes entries intersecting [start, end) (empty end = +∞).
    fn remove_span(&mut self, start: &[u8], end: &[u8]) {
        let doomed: Vec<Vec<u8>> = self
            .entries
            .iter()
            .filter(|(s, e)| {
                let starts_before_end = end.is_empty() || s.as_slice() < end;
                let ends_after_start = e.end().is_empty() || e.end() > start;
                starts_before_end && ends_after_start
            })
            .map(|(s, _)| s.clone())
            .collect();
        for k in doomed {
            self.entries.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tablet(id: &str, start: &[u8], end: &[u8]) -> RemoteTablet {
        RemoteTablet {
            tablet_id: id.into(),
            partition_key_start: start.to_vec(),
            partition_key_end: end.to_vec(),
            replicas: vec![Replica {
                ts_uuid: "ts".into(),
                addr: "127.0.0.1:7050".into(),
                location: None,
                role: Role::Leader,
            }],
        }
    }

    fn id(l: Lookup) -> String {
        match l {
            Lookup::Tablet(t) => t.tablet_id.clone(),
            Lookup::NonCovered { .. } => "gap".into(),
            Lookup::Miss => "miss".into(),
        }
    }

    const TTL: Duration = Duration::from_secs(60);

    #[test]
    fn hits_gaps_and_misses() {
        let now = Instant::now();
        let mut c = TableLocations::default();
        // Tablets [b, d) and [f, h); asked from key "a"; master had no more.
        c.insert(
            b"a",
            vec![tablet("1", b"b", b"d"), tablet("2", b"f", b"h")],
            true,
            TTL,
            now,
        );
        assert_eq!(id(c.lookup(b"a", now)), "gap");
        assert_eq!(id(c.lookup(b"b", now)), "1");
        assert_eq!(id(c.lookup(b"c", now)), "1");
        assert_eq!(id(c.lookup(b"d", now)), "gap");
        assert_eq!(id(c.lookup(b"g", now)), "2");
        assert_eq!(id(c.lookup(b"h", now)), "gap");
        assert_eq!(id(c.lookup(b"zzz", now)), "gap");
        assert_eq!(id(c.lookup(b"c", now + TTL)), "miss", "expired");
    }

    #[test]
    fn partial_answers_leave_the_rest_unknown() {
        let now = Instant::now();
        let mut c = TableLocations::default();
        c.insert(b"", vec![tablet("1", b"", b"m")], false, TTL, now);
        assert_eq!(id(c.lookup(b"a", now)), "1");
        assert_eq!(id(c.lookup(b"m", now)), "miss");
    }

    #[test]
    fn new_answers_replace_overlapping_entries() {
        let now = Instant::now();
        let mut c = TableLocations::default();
        c.insert(b"", vec![tablet("old", b"", b"")], true, TTL, now);
        // The tablet was split into two.
        c.insert(
            b"",
            vec![tablet("x", b"", b"m"), tablet("y", b"m", b"")],
            true,
            TTL,
            now,
        );
        assert_eq!(id(c.lookup(b"a", now)), "x");
        assert_eq!(id(c.lookup(b"q", now)), "y");
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn invalidation_forces_a_lookup() {
        let now = Instant::now();
        let mut c = TableLocations::default();
        c.insert(
            b"",
            vec![tablet("1", b"", b"m"), tablet("2", b"m", b"")],
            true,
            TTL,
            now,
        );
        c.invalidate_tablet("1");
        assert_eq!(id(c.lookup(b"a", now)), "miss");
        assert_eq!(id(c.lookup(b"n", now)), "2");
    }

    #[test]
    fn empty_answer_marks_everything_uncovered() {
        let now = Instant::now();
        let mut c = TableLocations::default();
        c.insert(b"k", vec![], true, TTL, now);
        assert_eq!(c.lookup(b"a", now), Lookup::NonCovered { end: vec![] });
    }
}
