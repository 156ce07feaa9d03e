//! Value parsers and printers shared by the keys of every crate: numbers in
//! ranges, booleans, text, durations (Flink's syntax), storage locations.
//! Each returns a [`ValueError`] without the key; [`super::Config::get`]
//! names it.

use std::num::NonZeroUsize;
use std::time::Duration;

use super::option::ValueError;
use crate::checkpoint::StorageLocation;

/// `true` or `false`, any case, surrounding space ignored.
pub fn boolean(text: &str) -> Result<bool, ValueError> {
    match text.trim() {
        v if v.eq_ignore_ascii_case("true") => Ok(true),
        v if v.eq_ignore_ascii_case("false") => Ok(false),
        _ => Err(ValueError::NotABool),
    }
}

/// Text that is not blank, as given.
pub fn text(text: &str) -> Result<String, ValueError> {
    if text.trim().is_empty() {
        return Err(ValueError::Invalid("must not be empty".to_string()));
    }
    Ok(text.to_string())
}

/// Any text, as given.
pub fn any_text(text: &str) -> Result<String, ValueError> {
    Ok(text.to_string())
}

/// Any text, surrounding space removed.
pub fn trimmed(text: &str) -> Result<String, ValueError> {
    Ok(text.trim().to_string())
}

/// A whole number (`i128`, so every `u64` and `i64` parses and range
/// checks stay exact).
pub fn integer(text: &str) -> Result<i128, ValueError> {
    text.trim()
        .parse::<i128>()
        .map_err(|_| ValueError::NotANumber)
}

/// A whole number greater than zero.
pub fn positive(text: &str) -> Result<u64, ValueError> {
    let n = integer(text)?;
    if n < 1 {
        return Err(ValueError::OutOfRange("must be greater than 0".to_string()));
    }
    u64::try_from(n).map_err(|_| ValueError::OutOfRange(format!("must be at most {}", u64::MAX)))
}

/// A positive whole number of milliseconds.
pub fn millis(text: &str) -> Result<Duration, ValueError> {
    positive(text).map(Duration::from_millis)
}

/// A positive whole number of seconds.
pub fn seconds(text: &str) -> Result<Duration, ValueError> {
    positive(text).map(Duration::from_secs)
}

/// Milliseconds, as [`millis`] reads them.
pub fn print_millis(d: &Duration) -> String {
    d.as_millis().to_string()
}

/// Seconds, as [`seconds`] reads them.
pub fn print_seconds(d: &Duration) -> String {
    d.as_secs().to_string()
}

/// A whole count greater than zero.
pub fn count(text: &str) -> Result<NonZeroUsize, ValueError> {
    let n = positive(text)?;
    usize::try_from(n)
        .ok()
        .and_then(NonZeroUsize::new)
        .ok_or_else(|| ValueError::OutOfRange(format!("must be at most {}", usize::MAX)))
}

/// A whole number of bytes from 1 to `MAX`.
pub fn bytes_up_to<const MAX: usize>(text: &str) -> Result<usize, ValueError> {
    let n = positive(text)?;
    usize::try_from(n)
        .ok()
        .filter(|n| *n <= MAX)
        .ok_or_else(|| ValueError::OutOfRange(format!("must be at most {MAX}")))
}

/// A whole number from 0 to `u64::MAX` (0 commonly meaning "none" or
/// "unlimited").
pub fn count_or_zero_u64(text: &str) -> Result<u64, ValueError> {
    let n = integer(text)?;
    u64::try_from(n).map_err(|_| ValueError::OutOfRange(format!("must be from 0 to {}", u64::MAX)))
}

/// A number of bytes, 0 or more, with an optional binary unit: `512`,
/// `64kb`, `64 MB`, `1g`, `2 GiB` (k, m, g and t are 1024, 1024², …;
/// case and a space before the unit do not matter).
pub fn size_or_zero(text: &str) -> Result<u64, ValueError> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    if number.is_empty() {
        return Err(ValueError::Invalid(
            "expected a whole number of bytes, optionally with a unit (kb, mb, gb)".to_string(),
        ));
    }
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(ValueError::Invalid(format!(
                "unknown unit '{other}': expected b, kb, mb, gb or tb"
            )))
        }
    };
    let n: u64 = number.parse().map_err(|_| ValueError::NotANumber)?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| ValueError::OutOfRange(format!("must be at most {} bytes", u64::MAX)))
}

/// A whole number from 0 to `u32::MAX`.
pub fn count_or_zero_u32(text: &str) -> Result<u32, ValueError> {
    let n = integer(text)?;
    u32::try_from(n).map_err(|_| ValueError::OutOfRange(format!("must be from 0 to {}", u32::MAX)))
}

/// A `u32` of at least `MIN` (Flink's counts: a bare `u32`, so `-1` is not
/// a whole number to them either).
pub fn u32_at_least<const MIN: u32>(text: &str) -> Result<u32, ValueError> {
    let n: u32 = text.trim().parse().map_err(|_| ValueError::NotANumber)?;
    if n < MIN {
        return Err(ValueError::OutOfRange(format!("must be at least {MIN}")));
    }
    Ok(n)
}

/// A storage location: a path (made absolute), `file://` URI or object
/// store URI.
pub fn location(text: &str) -> Result<StorageLocation, ValueError> {
    StorageLocation::parse(text).map_err(|e| ValueError::Invalid(e.reason))
}

/// A location as [`location`] reads it back.
pub fn print_location(location: &StorageLocation) -> String {
    location.to_string()
}

/// A comma-separated list, each entry trimmed; an empty entry is refused.
pub fn list(text: &str) -> Result<Vec<String>, ValueError> {
    let entries: Vec<String> = text.split(',').map(|e| e.trim().to_string()).collect();
    if entries.iter().any(String::is_empty) {
        return Err(ValueError::Invalid(
            "has an empty entry in the comma-separated list".to_string(),
        ));
    }
    Ok(entries)
}

/// A list as [`list`] reads it back.
#[allow(clippy::ptr_arg)] // the printer of a `Vec` key
pub fn print_list(list: &Vec<String>) -> String {
    list.join(",")
}

/// A duration in Flink's syntax: a whole number and an optional unit
/// (`ms`, `s`, `min`, `h`, `d` and their long forms), milliseconds when
/// the unit is left out.
pub fn parse_duration(value: &str) -> Result<Duration, ValueError> {
    let invalid = |reason: &str| ValueError::Invalid(reason.to_string());
    let text = value.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let n: u64 = number
        .parse()
        .map_err(|_| invalid("expected a duration such as '500 ms', '10 s', '1 min' or '1 h'"))?;
    let millis_per_unit: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000,
        "m" | "min" | "minute" | "minutes" => 60_000,
        "h" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        _ => return Err(invalid("unknown unit; use ms, s, min, h or d")),
    };
    n.checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| invalid("too long"))
}

/// A duration in Flink's syntax, in the largest whole unit.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("min", 60_000),
        ("s", 1_000),
    ] {
        if ms > 0 && ms.is_multiple_of(size) {
            return format!("{} {unit}", ms / size);
        }
    }
    format!("{ms} ms")
}

/// [`format_duration`] as a printer.
pub fn print_duration(d: &Duration) -> String {
    format_duration(*d)
}

/// A finite decimal in `[min, max]`.
pub fn decimal(value: &str, min: f64, max: f64) -> Result<Decimal, ValueError> {
    let x: f64 = value
        .trim()
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite())
        .ok_or_else(|| ValueError::Invalid("expected a decimal number".to_string()))?;
    if !(min..=max).contains(&x) {
        return Err(ValueError::OutOfRange(format!(
            "must be between {min} and {max}"
        )));
    }
    Ok(Decimal(x))
}

/// A decimal as given back.
pub fn print_decimal(x: &Decimal) -> String {
    x.0.to_string()
}

/// A decimal setting (`backoff-multiplier`, `jitter-factor`,
/// `reader.diffScanBudget`), compared by its bits so configs stay `Eq`.
#[derive(Clone, Copy, Debug)]
pub struct Decimal(pub f64);

impl PartialEq for Decimal {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Decimal {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flink_duration_syntax() {
        let ms = |s| parse_duration(s).map(|d| d.as_millis()).ok();
        assert_eq!(ms("250"), Some(250));
        assert_eq!(ms("500 ms"), Some(500));
        assert_eq!(ms("10s"), Some(10_000));
        assert_eq!(ms(" 1 min "), Some(60_000));
        assert_eq!(ms("2 minutes"), Some(120_000));
        assert_eq!(ms("1 h"), Some(3_600_000));
        assert_eq!(ms("1 d"), Some(86_400_000));
        assert!(parse_duration("-1 s").is_err());
        for text in ["0 ms", "250 ms", "90 s", "1 min", "2 h", "3 d"] {
            let d = parse_duration(text).expect("parses");
            assert_eq!(format_duration(d), text);
        }
        assert!(parse_duration("s").is_err());
    }
}
