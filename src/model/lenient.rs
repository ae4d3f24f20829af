//! Lenient deserialisers for numbers the reference writes as JavaScript numbers.
//!
//! A JavaScript number may arrive as `12`, `12.0` or `1.2e1`; token counts and timestamps are
//! read as integers whatever their spelling, so a typed view never fails on number style.

use serde::{Deserialize, Deserializer};

/// Reads any JSON number (or `null`) as an `i64`, truncating a fraction.
pub fn i64_any<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let value = Option::<serde_json::Number>::deserialize(deserializer)?;
    Ok(value.map(|number| number_to_i64(&number)).unwrap_or(0))
}

/// Reads an optional JSON number as an `Option<i64>`.
pub fn opt_i64_any<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    let value = Option::<serde_json::Number>::deserialize(deserializer)?;
    Ok(value.map(|number| number_to_i64(&number)))
}

/// Reads any JSON number (or `null`) as a `u64`, clamping negatives to zero.
pub fn u64_any<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let value = Option::<serde_json::Number>::deserialize(deserializer)?;
    Ok(value
        .map(|number| u64::try_from(number_to_i64(&number)).unwrap_or(0))
        .unwrap_or(0))
}

/// Reads an optional JSON number as an `Option<u64>`, clamping negatives to zero.
pub fn opt_u64_any<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    let value = Option::<serde_json::Number>::deserialize(deserializer)?;
    Ok(value.map(|number| u64::try_from(number_to_i64(&number)).unwrap_or(0)))
}

/// Reads any JSON number (or `null`) as an `f64`.
pub fn f64_any<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    let value = Option::<serde_json::Number>::deserialize(deserializer)?;
    Ok(value.and_then(|number| number.as_f64()).unwrap_or(0.0))
}

/// Reads a value, treating `null` as the type's default (1.6.0 gives a message with `null`
/// content empty content).
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Reads user content, treating `null` as no blocks (`[]`, as 1.6.0 normalises it).
pub fn null_as_empty_blocks<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<crate::model::message::UserContent, D::Error> {
    Ok(
        Option::<crate::model::message::UserContent>::deserialize(deserializer)?
            .unwrap_or_else(|| crate::model::message::UserContent::Blocks(Vec::new())),
    )
}

/// Reads a JSON boolean, treating `null` as `false`.
pub fn bool_any<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(deserializer)?.unwrap_or(false))
}

/// Returns the number as an `i64`, truncating fractions and saturating at the bounds.
pub fn number_to_i64(number: &serde_json::Number) -> i64 {
    if let Some(int) = number.as_i64() {
        int
    } else if let Some(uint) = number.as_u64() {
        i64::try_from(uint).unwrap_or(i64::MAX)
    } else {
        number.as_f64().map(|float| float as i64).unwrap_or(0)
    }
}

/// Reads an optional JSON value keeping an explicit `null` as `Some(Value::Null)`.
///
/// Use with `#[serde(default)]`: an absent key stays `None`, so `"details":null` and no
/// `details` key serialise back to what they were.
pub fn present<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(deserializer).map(Some)
}
