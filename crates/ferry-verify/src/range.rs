//! Primary-key ranges and cutting them: the key space is cut at the key
//! bounds the tablet servers' `SplitKeyRange` proposes (chunks of about a
//! given size of data), so ranges hold similar amounts of data whatever the
//! two tables' partitioning.

use crate::reader::Reader;
use crate::VerifyError;

/// `[lower, upper)` of encoded primary keys; an empty bound is unbounded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct KeyRange {
    pub lower: Vec<u8>,
    pub upper: Vec<u8>,
}

impl KeyRange {
    /// The whole key space.
    pub(crate) fn all() -> KeyRange {
        KeyRange {
            lower: Vec::new(),
            upper: Vec::new(),
        }
    }

    /// Whether `key` is strictly inside (a cut there makes two non-empty
    /// ranges).
    fn cuts(&self, key: &[u8]) -> bool {
        key > self.lower.as_slice() && (self.upper.is_empty() || key < self.upper.as_slice())
    }

    /// This range cut at the `points` inside it, in key order.
    pub(crate) fn cut(&self, points: impl IntoIterator<Item = Vec<u8>>) -> Vec<KeyRange> {
        let mut points: Vec<Vec<u8>> = points.into_iter().filter(|p| self.cuts(p)).collect();
        points.sort_unstable();
        points.dedup();
        let mut ranges = Vec::with_capacity(points.len() + 1);
        let mut lower = self.lower.clone();
        for p in points {
            ranges.push(KeyRange {
                lower: std::mem::replace(&mut lower, p.clone()),
                upper: p,
            });
        }
        ranges.push(KeyRange {
            lower,
            upper: self.upper.clone(),
        });
        ranges
    }
}

/// Keys inside `range` at which `reader`'s tablets cut it into chunks of
/// about `chunk_bytes` (of the `projection`'s data). Empty when the
/// servers cannot cut (data only in memory, a single rowset).
pub(crate) async fn cut_points(
    reader: &Reader,
    projection: &[String],
    range: &KeyRange,
    chunk_bytes: u64,
) -> Result<Vec<Vec<u8>>, VerifyError> {
    let spec = reader
        .spec(projection, range)
        .split_size_bytes(chunk_bytes.max(1));
    let splits = reader.tablets(&spec).await?;
    // Each tablet cuts its own rows; hash partitions overlap in key space,
    // so the union of all tablets' bounds cuts the key space into ranges of
    // about `chunk_bytes` each.
    let mut points = Vec::new();
    for split in &splits {
        points.extend(split.lower_bound_key().map(<[u8]>::to_vec));
        points.extend(split.upper_bound_key().map(<[u8]>::to_vec));
    }
    points.retain(|p| range.cuts(p));
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(lower: &[u8], upper: &[u8]) -> KeyRange {
        KeyRange {
            lower: lower.to_vec(),
            upper: upper.to_vec(),
        }
    }

    #[test]
    fn cuts_only_inside_sorted_and_once() {
        let points = vec![
            b"m".to_vec(),
            b"c".to_vec(),
            b"m".to_vec(),
            b"a".to_vec(),
            b"z".to_vec(),
        ];
        assert_eq!(
            r(b"a", b"x").cut(points.clone()),
            [r(b"a", b"c"), r(b"c", b"m"), r(b"m", b"x")]
        );
        assert_eq!(
            KeyRange::all().cut(points),
            [
                r(b"", b"a"),
                r(b"a", b"c"),
                r(b"c", b"m"),
                r(b"m", b"z"),
                r(b"z", b"")
            ]
        );
        assert_eq!(r(b"a", b"b").cut(Vec::new()), [r(b"a", b"b")]);
    }
}
