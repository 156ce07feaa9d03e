//! [`StateKey`]: the name of one object in a [`super::StateStore`].
//!
//! Keys are `/`-separated like object-store paths, without a leading slash.
//! They are validated once, on construction, with the rules of
//! `object_store::path::Path` (no empty, `.` or `..` segments, no control
//! characters) plus a ban on the characters object_store percent-encodes
//! (`\ { } ^ % ` [ ] " < > ~ # | * ?`), so a key reads back from a listing
//! exactly as it was written, on every backend.

use std::fmt;

/// A validated object name: `segment/segment/...`, possibly empty (the root).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateKey(String);

/// Why a string is not a valid [`StateKey`] or segment.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid object key '{key}': {reason}")]
pub struct InvalidKey {
    /// The rejected key or segment.
    pub key: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl StateKey {
    /// The root: the empty key, a prefix of every key.
    pub fn root() -> Self {
        StateKey(String::new())
    }

    /// Parses `a/b/c`. The empty string is the root; leading, trailing or
    /// doubled slashes are rejected rather than silently dropped.
    pub fn parse(key: &str) -> Result<Self, InvalidKey> {
        if key.is_empty() {
            return Ok(Self::root());
        }
        for segment in key.split('/') {
            check_segment(segment).map_err(|reason| InvalidKey {
                key: key.to_string(),
                reason,
            })?;
        }
        Ok(StateKey(key.to_string()))
    }

    /// This key with one more segment.
    pub fn child(&self, segment: &str) -> Result<Self, InvalidKey> {
        check_segment(segment).map_err(|reason| InvalidKey {
            key: segment.to_string(),
            reason,
        })?;
        Ok(self.join_valid(segment))
    }

    /// Appends a segment the caller built from known-good parts (hex ids,
    /// digits, fixed names), so no error path is needed.
    pub(crate) fn join_valid(&self, segment: &str) -> Self {
        debug_assert!(check_segment(segment).is_ok(), "bad segment {segment:?}");
        if self.0.is_empty() {
            StateKey(segment.to_string())
        } else {
            StateKey(format!("{}/{segment}", self.0))
        }
    }

    /// The key as a string (`""` for the root).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the root key.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The segments, outermost first (none for the root).
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|s| !s.is_empty())
    }

    /// The last segment, if any.
    pub fn file_name(&self) -> Option<&str> {
        self.segments().last()
    }

    /// The key without its last segment (the root has no parent).
    pub fn parent(&self) -> Option<StateKey> {
        if self.0.is_empty() {
            return None;
        }
        Some(match self.0.rfind('/') {
            Some(i) => StateKey(self.0[..i].to_string()),
            None => StateKey::root(),
        })
    }

    /// The segments after `prefix` when `prefix` is a whole-segment prefix
    /// of this key (`a/b` is a prefix of `a/b/c`, not of `a/bc`).
    pub fn strip_prefix(&self, prefix: &StateKey) -> Option<Vec<&str>> {
        let mut mine = self.segments();
        for wanted in prefix.segments() {
            if mine.next() != Some(wanted) {
                return None;
            }
        }
        Some(mine.collect())
    }
}

impl fmt::Display for StateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Characters object_store percent-encodes in path segments; a key holding
/// one would come back from a listing spelled differently.
const ENCODED_BY_OBJECT_STORE: &[char] = &[
    '\\', '{', '}', '^', '%', '`', '[', ']', '"', '<', '>', '~', '#', '|', '*', '?',
];

fn check_segment(segment: &str) -> Result<(), &'static str> {
    if segment.is_empty() {
        return Err("empty path segment");
    }
    if segment == "." || segment == ".." {
        return Err("'.' and '..' segments are not allowed");
    }
    if segment.contains('/') {
        return Err("a segment cannot contain '/'");
    }
    if segment.chars().any(|c| c.is_ascii_control()) {
        return Err("control characters are not allowed");
    }
    if segment.contains(ENCODED_BY_OBJECT_STORE) {
        return Err("the characters \\ { } ^ % ` [ ] \" < > ~ # | * ? are not allowed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_navigate() {
        let k = StateKey::parse("a/b/c").expect("valid");
        assert_eq!(k.file_name(), Some("c"));
        assert_eq!(k.parent(), Some(StateKey::parse("a/b").expect("valid")));
        assert_eq!(
            StateKey::parse("a").expect("valid").parent(),
            Some(StateKey::root())
        );
        assert_eq!(StateKey::root().parent(), None);
        assert_eq!(k.child("d").expect("valid").as_str(), "a/b/c/d");
        assert_eq!(StateKey::root().child("x").expect("valid").as_str(), "x");
        assert!(StateKey::parse("").expect("root").is_root());
    }

    #[test]
    fn rejects_bad_keys() {
        for bad in [
            "/a", "a/", "a//b", "a/../b", "./a", "a\nb", "a#1", "50%", "x?",
        ] {
            assert!(StateKey::parse(bad).is_err(), "{bad:?}");
        }
        assert!(StateKey::root().child("a/b").is_err());
        assert!(StateKey::root().child("").is_err());
        let err = StateKey::parse("a//b").unwrap_err();
        assert!(err.to_string().contains("'a//b'"), "{err}");
    }

    #[test]
    fn prefix_is_segment_aware() {
        let k = StateKey::parse("a/bc/d").expect("valid");
        assert_eq!(
            k.strip_prefix(&StateKey::parse("a/bc").expect("valid")),
            Some(vec!["d"])
        );
        assert_eq!(
            k.strip_prefix(&StateKey::parse("a/b").expect("valid")),
            None
        );
        assert_eq!(
            k.strip_prefix(&StateKey::root()),
            Some(vec!["a", "bc", "d"])
        );
        assert_eq!(k.strip_prefix(&k), Some(vec![]));
    }
}
