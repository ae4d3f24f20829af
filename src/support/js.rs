//! JavaScript's conversions that the reference's behaviour depends on, written once: the
//! whitespace `String#trim` removes, and `Number(string)`.
//!
//! Invariant: imports nothing from the crate; pure functions.

/// Whether `ch` is whitespace for JavaScript's `trim()` and `\s`: ECMAScript's WhiteSpace plus
/// LineTerminator set. It differs from `char::is_whitespace`: it includes U+FEFF (a byte-order
/// mark) and excludes U+0085 and U+180E.
pub fn is_whitespace(ch: char) -> bool {
    matches!(
        ch,
        '\u{9}' | '\u{a}' | '\u{b}' | '\u{c}' | '\u{d}' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// JavaScript's `Number(text)` (`StringToNumber`): surrounding whitespace ignored, empty is
/// 0, `0x`/`0o`/`0b` prefixes (any case, no sign), `Infinity` with a sign, decimal literals
/// (`5.`, `.5`, exponents); anything else is NaN.
pub fn string_to_number(text: &str) -> f64 {
    let trimmed = text.trim_matches(is_whitespace);
    if trimmed.is_empty() {
        return 0.0;
    }
    let radix = |digits: &str, base: u32| -> f64 {
        if digits.is_empty() {
            return f64::NAN;
        }
        let mut value = 0.0f64;
        for ch in digits.chars() {
            match ch.to_digit(base) {
                Some(digit) => value = value * f64::from(base) + f64::from(digit),
                None => return f64::NAN,
            }
        }
        value
    };
    for (prefix, base) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = trimmed.strip_prefix(prefix) {
            return radix(digits, base);
        }
    }
    let (sign, unsigned) = match trimmed.as_bytes()[0] {
        b'-' => (-1.0, &trimmed[1..]),
        b'+' => (1.0, &trimmed[1..]),
        _ => (1.0, trimmed),
    };
    if unsigned == "Infinity" {
        return sign * f64::INFINITY;
    }
    // StrDecimalLiteral: digits with an optional fraction and exponent; "5." and ".5" are
    // allowed, "." alone is not.
    let bytes = unsigned.as_bytes();
    let mut idx = 0;
    let int_digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    idx += int_digits;
    let mut frac_digits = 0;
    if bytes.get(idx) == Some(&b'.') {
        idx += 1;
        frac_digits = bytes[idx..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        idx += frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return f64::NAN;
    }
    if matches!(bytes.get(idx), Some(b'e' | b'E')) {
        idx += 1;
        if matches!(bytes.get(idx), Some(b'+' | b'-')) {
            idx += 1;
        }
        let exp_digits = bytes[idx..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if exp_digits == 0 {
            return f64::NAN;
        }
        idx += exp_digits;
    }
    if idx != bytes.len() {
        return f64::NAN;
    }
    // The grammar is checked above; Rust's parser accepts the same forms ("5.", ".5", "5.e3").
    unsigned
        .parse::<f64>()
        .map(|value| sign * value)
        .unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_as_javascript_reads_them() {
        for (text, expected) in [
            ("5", 5.0),
            (" 5 ", 5.0),
            ("\u{feff}7\u{2028}", 7.0),
            ("", 0.0),
            ("  ", 0.0),
            ("0x10", 16.0),
            ("0X10", 16.0),
            ("0b11", 3.0),
            ("0o17", 15.0),
            ("1e3", 1000.0),
            ("1.", 1.0),
            (".5", 0.5),
            ("5.e1", 50.0),
            ("+5", 5.0),
            ("-2.5", -2.5),
            ("Infinity", f64::INFINITY),
            ("-Infinity", f64::NEG_INFINITY),
        ] {
            assert_eq!(string_to_number(text), expected, "{text:?}");
        }
        for text in [
            "-0x5", "0x", "12abc", "1_000", "e5", ".", "1e", "infinity", "\u{85}1",
        ] {
            assert!(string_to_number(text).is_nan(), "{text:?}");
        }
    }
}
