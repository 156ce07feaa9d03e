//! [`Secret`]: a credential that never prints.
//!
//! Debug and Display both show `***`, so a secret inside settings, an error
//! or a log field cannot leak by formatting; the value is reached only
//! through [`Secret::expose`], at the one place it is handed to the client.

use std::fmt;

/// A secret string (S3 secret key, session token).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the storage client and for redaction.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Replaces every occurrence of every secret in `text` by `***`. Secrets
/// shorter than 4 characters are left alone: replacing them would mangle
/// ordinary words, and such a secret protects nothing anyway.
pub fn redact(text: &str, secrets: &[Secret]) -> String {
    let mut out = text.to_string();
    for secret in secrets {
        let value = secret.expose();
        if value.len() >= 4 {
            out = out.replace(value, "***");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints() {
        let s = Secret::new("wJalrXUtnFEMI/K7MDENG");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(format!("{:?}", Some(s.clone())), "Some(***)");
        assert_eq!(s.expose(), "wJalrXUtnFEMI/K7MDENG");
    }

    #[test]
    fn redacts_every_occurrence() {
        let secrets = [Secret::new("topsecret"), Secret::new("tok3n-value")];
        assert_eq!(
            redact("a topsecret b tok3n-value c topsecret", &secrets),
            "a *** b *** c ***"
        );
        assert_eq!(redact("abc", &[Secret::new("ab")]), "abc");
    }
}
