//! [`Decimal`]: an exact DECIMAL(precision, scale) value, its text form and
//! its parser. A DECIMAL cell is an unscaled integer (`Value::Decimal`);
//! its column's scale says where the point goes. Text is read and written
//! on the digits alone — no float ever holds the value, nothing is rounded.

use std::fmt;

use crate::schema::types::MAX_DECIMAL_PRECISION;
use crate::schema::value::pow10;
use crate::schema::Value;

/// An exact decimal number at a DECIMAL(precision, scale) column's type:
/// `unscaled × 10^-scale`, with at most `precision` digits in all.
///
/// ```
/// use kudu_client::Decimal;
/// let d = Decimal::parse("-12.5", 9, 2)?;
/// assert_eq!((d.unscaled(), d.to_string()), (-1250, "-12.50".to_owned()));
/// assert!(Decimal::parse("1.505", 9, 2).is_err()); // would need rounding
/// # Ok::<(), kudu_client::schema::DecimalError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decimal {
    unscaled: i128,
    precision: u8,
    scale: u8,
}

/// Why a value or a text is not a DECIMAL(precision, scale).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecimalError {
    /// The precision is outside 1..=38 or the scale above the precision.
    #[error(
        "DECIMAL({precision}, {scale}) is not a decimal type (precision 1..=38, scale at most the precision)"
    )]
    Type {
        /// The precision asked for.
        precision: u8,
        /// The scale asked for.
        scale: u8,
    },
    /// The text is not a decimal number (`-12.5`, `+7.`, `.5`, `1e-3`).
    #[error("{text:?} is not a decimal number")]
    Syntax {
        /// The text.
        text: String,
    },
    /// More digits than the precision allows.
    #[error("{value} has more than {precision} digits (DECIMAL({precision}, {scale}))")]
    Overflow {
        /// The value, as text or as an unscaled integer.
        value: String,
        /// The type's precision.
        precision: u8,
        /// The type's scale.
        scale: u8,
    },
    /// Non-zero digits past the scale: the value would have to be rounded,
    /// which is refused.
    #[error("{value} has non-zero digits past the scale of DECIMAL({precision}, {scale})")]
    Rounding {
        /// The text.
        value: String,
        /// The type's precision.
        precision: u8,
        /// The type's scale.
        scale: u8,
    },
}

impl Decimal {
    /// The largest precision of a DECIMAL column (38 digits, an `i128`).
    pub const MAX_PRECISION: u8 = MAX_DECIMAL_PRECISION;

    /// The decimal `unscaled × 10^-scale` of type DECIMAL(precision,
    /// scale): refused if the type is not one, or if `unscaled` has more
    /// than `precision` digits.
    pub fn new(unscaled: i128, precision: u8, scale: u8) -> Result<Decimal, DecimalError> {
        check_type(precision, scale)?;
        if unscaled.unsigned_abs() >= pow10(precision).unsigned_abs() {
            return Err(DecimalError::Overflow {
                value: format!("unscaled value {unscaled}"),
                precision,
                scale,
            });
        }
        Ok(Decimal {
            unscaled,
            precision,
            scale,
        })
    }

    /// Reads `text` (`-12.5`, `+7.`, `.5`, `007`, `1.500`, `125E-2`) at
    /// DECIMAL(precision, scale), exactly: fewer decimals than the scale
    /// are padded; more are accepted only if the extra ones are zeros
    /// (anything else would round, and is refused); leading zeros do not
    /// count towards the precision.
    pub fn parse(text: &str, precision: u8, scale: u8) -> Result<Decimal, DecimalError> {
        check_type(precision, scale)?;
        let number = Number::read(text).ok_or_else(|| DecimalError::Syntax {
            text: text.to_owned(),
        })?;
        let unscaled = number
            .unscaled(scale, precision)
            .map_err(|unfit| match unfit {
                Unfit::Overflow => DecimalError::Overflow {
                    value: text.to_owned(),
                    precision,
                    scale,
                },
                Unfit::Rounding => DecimalError::Rounding {
                    value: text.to_owned(),
                    precision,
                    scale,
                },
            })?;
        Ok(Decimal {
            unscaled,
            precision,
            scale,
        })
    }

    /// The unscaled integer (the cell a DECIMAL column stores).
    pub fn unscaled(&self) -> i128 {
        self.unscaled
    }

    /// Digits in all, at most.
    pub fn precision(&self) -> u8 {
        self.precision
    }

    /// Digits after the point.
    pub fn scale(&self) -> u8 {
        self.scale
    }
}

fn check_type(precision: u8, scale: u8) -> Result<(), DecimalError> {
    if (1..=MAX_DECIMAL_PRECISION).contains(&precision) && scale <= precision {
        Ok(())
    } else {
        Err(DecimalError::Type { precision, scale })
    }
}

/// Exactly `scale` digits after the point: `-1250` at scale 2 is `-12.50`,
/// `5` at scale 3 is `0.005`, `7` at scale 0 is `7`.
impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // 39 digits hold any u128 below 10^38; one more for a leading 0.
        let mut digits = [b'0'; 40];
        let mut n = self.unscaled.unsigned_abs();
        let mut at = digits.len();
        while n > 0 {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
        }
        let scale = usize::from(self.scale);
        // At least one digit before the point.
        let start = at.min(digits.len() - scale - 1);
        let (int, frac) = digits[start..].split_at(digits.len() - start - scale);
        if self.unscaled < 0 {
            f.write_str("-")?;
        }
        // ASCII digits only.
        f.write_str(std::str::from_utf8(int).map_err(|_| fmt::Error)?)?;
        if scale > 0 {
            f.write_str(".")?;
            f.write_str(std::str::from_utf8(frac).map_err(|_| fmt::Error)?)?;
        }
        Ok(())
    }
}

impl From<DecimalError> for crate::Error {
    fn from(e: DecimalError) -> crate::Error {
        crate::Error::InvalidArgument(e.to_string())
    }
}

impl From<Decimal> for Value {
    fn from(d: Decimal) -> Value {
        Value::Decimal(d.unscaled)
    }
}

/// Why a well-formed number does not fit (see [`DecimalError`]).
enum Unfit {
    Overflow,
    Rounding,
}

/// A decimal text taken apart: sign, digits without leading zeros, and the
/// power of ten they are scaled by.
struct Number {
    negative: bool,
    /// ASCII digits, no leading zeros (empty for zero).
    digits: Vec<u8>,
    /// The value is `digits × 10^exponent`; saturated for absurd exponents
    /// (any non-zero digit then falls outside every DECIMAL).
    exponent: i64,
}

impl Number {
    fn read(text: &str) -> Option<Number> {
        let (negative, rest) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let (mantissa, exponent) = match rest.find(['e', 'E']) {
            Some(at) => (&rest[..at], Some(&rest[at + 1..])),
            None => (rest, None),
        };
        let exponent: i64 = match exponent {
            None => 0,
            Some(e) => {
                let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                e.parse().unwrap_or(if e.starts_with('-') {
                    i64::MIN / 2
                } else {
                    i64::MAX / 2
                })
            }
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all = int.bytes().chain(frac.bytes());
        if (int.is_empty() && frac.is_empty()) || !all.clone().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let digits = all.skip_while(|&b| b == b'0').collect();
        let frac_len = i64::try_from(frac.len()).unwrap_or(i64::MAX / 2);
        Some(Number {
            negative,
            digits,
            exponent: exponent.saturating_sub(frac_len),
        })
    }

    /// The unscaled integer at `scale`, if it has at most `precision`
    /// digits and needs no rounding.
    fn unscaled(&self, scale: u8, precision: u8) -> Result<i128, Unfit> {
        if self.digits.is_empty() {
            return Ok(0);
        }
        // At `scale` the value is digits × 10^shift.
        let shift = self.exponent.saturating_add(i64::from(scale));
        let kept: &[u8] = if shift < 0 {
            let dropped = usize::try_from(shift.unsigned_abs()).unwrap_or(usize::MAX);
            // Dropping every digit drops a non-zero one (no leading zeros).
            let keep = self
                .digits
                .len()
                .checked_sub(dropped)
                .ok_or(Unfit::Rounding)?;
            if self.digits[keep..].iter().any(|&d| d != b'0') {
                return Err(Unfit::Rounding);
            }
            &self.digits[..keep]
        } else {
            &self.digits
        };
        let zeros = usize::try_from(shift.max(0)).unwrap_or(usize::MAX);
        if kept.len().saturating_add(zeros) > usize::from(precision) {
            return Err(Unfit::Overflow);
        }
        // At most 38 digits: fits an i128.
        let mut unscaled: i128 = 0;
        for &d in kept {
            unscaled = unscaled * 10 + i128::from(d - b'0');
        }
        unscaled *= pow10(u8::try_from(zeros).map_err(|_| Unfit::Overflow)?);
        Ok(if self.negative { -unscaled } else { unscaled })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX38: i128 = 10_i128.pow(38) - 1;

    fn text(unscaled: i128, precision: u8, scale: u8) -> String {
        Decimal::new(unscaled, precision, scale)
            .unwrap()
            .to_string()
    }

    fn parse(s: &str, precision: u8, scale: u8) -> Result<i128, DecimalError> {
        Decimal::parse(s, precision, scale).map(|d| d.unscaled())
    }

    #[test]
    fn text_has_exactly_the_scale_s_decimals() {
        assert_eq!(text(1234, 9, 2), "12.34");
        assert_eq!(text(-1250, 9, 2), "-12.50");
        assert_eq!(text(-5, 3, 3), "-0.005");
        assert_eq!(text(5, 3, 3), "0.005");
        assert_eq!(text(-5, 2, 1), "-0.5");
        assert_eq!(text(123456, 10, 2), "1234.56");
        assert_eq!(text(7, 1, 0), "7");
        assert_eq!(text(-7, 1, 0), "-7");
        assert_eq!(text(0, 1, 0), "0");
        assert_eq!(text(0, 9, 2), "0.00");
        assert_eq!(text(MAX38, 38, 0), "9".repeat(38));
        assert_eq!(
            text(MAX38, 38, 10),
            "9999999999999999999999999999.9999999999"
        );
        assert_eq!(text(-MAX38, 38, 38), format!("-0.{}", "9".repeat(38)));
        assert_eq!(text(1, 38, 38), format!("0.{}1", "0".repeat(37)));
    }

    #[test]
    fn new_refuses_what_no_decimal_column_holds() {
        assert_eq!(
            Decimal::new(i128::MAX, 38, 38),
            Err(DecimalError::Overflow {
                value: format!("unscaled value {}", i128::MAX),
                precision: 38,
                scale: 38
            })
        );
        assert!(matches!(
            Decimal::new(1000, 3, 0),
            Err(DecimalError::Overflow { .. })
        ));
        assert!(Decimal::new(-999, 3, 0).is_ok());
        assert_eq!(
            Decimal::new(1, 0, 0),
            Err(DecimalError::Type {
                precision: 0,
                scale: 0
            })
        );
        assert!(matches!(
            Decimal::new(1, 39, 0),
            Err(DecimalError::Type { .. })
        ));
        assert!(matches!(
            Decimal::new(1, 5, 6),
            Err(DecimalError::Type { .. })
        ));
    }

    #[test]
    fn parsing_is_exact_at_the_scale() {
        for (s, want) in [
            ("-12.5", -1250),
            ("7", 700),
            ("1.500", 150),
            (".5", 50),
            ("+7.", 700),
            ("+0.01", 1),
            ("-0.00", 0),
            ("0000012.34", 1234),
            ("-000.5", -50),
            ("1e3", 100_000),
            ("125E-2", 125),
            ("12.25", 1225),
            ("0e99999999999999999999", 0),
        ] {
            assert_eq!(parse(s, 9, 2), Ok(want), "{s}");
        }
        assert_eq!(parse("100000000", 9, 0), Ok(100_000_000));
        assert_eq!(parse("-42", 2, 0), Ok(-42));
        assert_eq!(
            parse("0.00000000000000000000000000000000000001", 38, 38),
            Ok(1)
        );
        assert_eq!(
            parse("9999999999999999999999999999.9999999999", 38, 10),
            Ok(MAX38)
        );
        assert_eq!(
            parse("-9999999999999999999999999999.9999999999", 38, 10),
            Ok(-MAX38)
        );
        assert_eq!(parse(&"9".repeat(38), 38, 0), Ok(MAX38));
    }

    #[test]
    fn parsing_refuses_rounding_overflow_and_non_numbers() {
        let rounding =
            |s: &str, p, sc| matches!(parse(s, p, sc), Err(DecimalError::Rounding { .. }));
        let overflow =
            |s: &str, p, sc| matches!(parse(s, p, sc), Err(DecimalError::Overflow { .. }));
        assert!(rounding("1.505", 9, 2));
        assert!(rounding("0.001", 9, 2));
        assert!(rounding("0.5", 9, 0));
        assert!(rounding("1e-99999999999999999999", 18, 4));
        assert!(overflow("10000000", 9, 2));
        assert!(overflow("1e9", 9, 0));
        assert!(overflow("1e99999999999999999999", 18, 4));
        assert!(overflow("1", 38, 38));
        assert!(overflow(&"9".repeat(39), 38, 0));
        for bad in [
            "", "-", "+", ".", "1e", "1e+", "e5", "1.2.3", "12a", " 1", "1 ", "--1", "0x10",
        ] {
            assert_eq!(
                parse(bad, 9, 2),
                Err(DecimalError::Syntax { text: bad.into() }),
                "{bad:?}"
            );
        }
        assert_eq!(
            Decimal::parse("1.505", 9, 2).unwrap_err().to_string(),
            "1.505 has non-zero digits past the scale of DECIMAL(9, 2)"
        );
        assert_eq!(
            Decimal::parse("10000000", 9, 2).unwrap_err().to_string(),
            "10000000 has more than 9 digits (DECIMAL(9, 2))"
        );
        assert!(matches!(
            Decimal::parse("1", 40, 0),
            Err(DecimalError::Type { .. })
        ));
    }

    #[test]
    fn text_reads_back_to_the_same_value() {
        for (u, p, s) in [
            (0, 1, 0),
            (-1, 5, 5),
            (MAX38, 38, 19),
            (-MAX38, 38, 0),
            (1_000, 9, 3),
        ] {
            let d = Decimal::new(u, p, s).unwrap();
            assert_eq!(Decimal::parse(&d.to_string(), p, s), Ok(d));
        }
        assert_eq!(
            Value::from(Decimal::new(-5, 3, 1).unwrap()),
            Value::Decimal(-5)
        );
    }
}
