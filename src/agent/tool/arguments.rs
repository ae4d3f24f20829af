//! Argument preparation for a tool call (`spec/tools.md` §1.3 steps 3–4): the tool's own
//! `prepare_arguments`, then coercion and validation against its JSON Schema, with the
//! reference's error text.
//!
//! The reference validates with TypeBox (`Value.Convert`, then the compiled checker); this
//! module reproduces what the built-in schemas need, for the keywords `type` (one name or a
//! list), `properties`, `required`, `additionalProperties` (boolean or schema), `items`,
//! `const`, `enum` and `anyOf`:
//!
//! * **Coercion** (TypeBox `Convert`) by the schema's type: to `number` from a numeric string
//!   (JavaScript `Number()` rules: surrounding whitespace, `0x`/`0o`/`0b`, exponent; the result
//!   must be finite), `"true"`/`"false"` (any case), a boolean, `null`; to `integer` the same,
//!   truncated; to `boolean` from `"true"`/`"false"` (any case), `"1"`/`"0"`, `1`/`0`, `null`;
//!   to `string` from a number (JavaScript `toString`), a boolean or `null` (`"null"`); to
//!   `array` by wrapping any non-array (`5` → `[5]`). Objects are never created.
//! * **Errors**, in TypeBox's order: type; for objects `required` (one error naming every
//!   missing key, reported at the first one), then each extra key (`schema is false`) and the
//!   object (`must not have additional properties`), then properties in schema order; for
//!   arrays each item; then `const`, `enum`, `anyOf`.
//! * **Text**: `Validation failed for tool "<name>":`, one `  - <path>: <message>` line per
//!   error (dotted path such as `edits.0.oldText`, `root` for the top level), a blank line,
//!   `Received arguments:` and the *prepared* (not coerced) arguments as 2-space JSON.
//!
//! Validated arguments reach a tool as its own `Deserialize` struct ([`typed_arguments`]), each
//! field read with [`lenient`]: a value of another type than declared reads as the field's
//! default. The loop validates before a tool runs, so only an extension's `tool_call` hook,
//! which may rewrite the arguments after validation, can hand a tool such a value; it is then
//! treated as absent, never as a failed call.
//!
//! Invariant: pure functions over `serde_json::Value`; never panics on any input.

use serde::de::{Deserialize, DeserializeOwned, Deserializer};
use serde_json::{Map, Number, Value};

use crate::agent::tool::Tool;
use crate::support::json::{to_js_pretty, write_number};

/// Prepares and validates a call's raw arguments for `tool`; returns the coerced arguments, or
/// the reference's validation error text.
pub fn prepare_call(tool: &dyn Tool, raw: &Value) -> Result<Value, String> {
    let prepared = tool.prepare_arguments(raw.clone());
    validate_arguments(
        &tool.definition().name,
        &tool.definition().parameters,
        prepared,
    )
}

/// Coerces `arguments` to `schema` and validates them; returns the coerced value or the
/// multi-line error text naming `tool_name`.
pub fn validate_arguments(
    tool_name: &str,
    schema: &Value,
    arguments: Value,
) -> Result<Value, String> {
    let coerced = convert(schema, arguments.clone());
    let mut errors = Vec::new();
    collect_errors(schema, &coerced, &mut Vec::new(), &mut errors);
    if errors.is_empty() {
        return Ok(coerced);
    }
    let lines = errors
        .iter()
        .map(|error| format!("  - {}: {}", error.path, error.message))
        .collect::<Vec<_>>()
        .join("\n");
    Err(format!(
        "Validation failed for tool \"{tool_name}\":\n{lines}\n\nReceived arguments:\n{}",
        to_js_pretty(&arguments)
    ))
}

/// Reads validated arguments into a tool's argument struct; anything but an object (possible
/// only after a hook rewrote the arguments) reads as `T::default()`.
pub fn typed_arguments<T: DeserializeOwned + Default>(arguments: &Value) -> T {
    if !arguments.is_object() {
        return T::default();
    }
    T::deserialize(arguments).unwrap_or_default()
}

/// `deserialize_with` for a field of an argument struct (with `#[serde(default)]`): the value
/// when it has the field's type, else the field's default.
pub fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(
    deserializer: D,
) -> Result<T, D::Error> {
    let value = Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).unwrap_or_default())
}

/// An item of an argument list read as `T` ([`typed_arguments`]): a struct when the item is an
/// object of its shape, else `T::default()`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lenient<T>(pub T);

impl<'de, T: DeserializeOwned + Default> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(Self(typed_arguments(&value)))
    }
}

struct SchemaError {
    path: String,
    message: String,
}

fn schema_types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// TypeBox `Value.Convert` for the supported keywords.
fn convert(schema: &Value, value: Value) -> Value {
    let Value::Object(keywords) = schema else {
        return value;
    };
    if let Some(variants) = keywords.get("anyOf").and_then(Value::as_array) {
        if variants.iter().any(|variant| is_valid(variant, &value)) {
            return value;
        }
        return variants
            .iter()
            .map(|variant| convert(variant, value.clone()))
            .find(|candidate| is_valid(schema, candidate))
            .unwrap_or(value);
    }
    if let Some(constant) = keywords.get("const") {
        if *constant == value {
            return value;
        }
        let candidate = match constant {
            Value::Bool(_) => to_boolean(&value).map(Value::Bool),
            Value::Number(_) => to_number(&value).and_then(number_value),
            Value::String(_) => to_string(&value).map(Value::String),
            _ => None,
        };
        return match candidate {
            Some(candidate) if candidate == *constant => candidate,
            _ => value,
        };
    }
    let types = schema_types(schema);
    // TypeBox dispatches on the schema's kind; a type list is a union of kinds.
    if types.len() > 1 {
        if types.iter().any(|name| matches_type(name, &value)) {
            return value;
        }
        for name in &types {
            let candidate = convert_to(name, keywords, value.clone());
            if matches_type(name, &candidate) {
                return candidate;
            }
        }
        return value;
    }
    match types.first() {
        Some(name) => convert_to(name, keywords, value),
        None => value,
    }
}

fn convert_to(type_name: &str, keywords: &Map<String, Value>, value: Value) -> Value {
    match type_name {
        "array" => {
            let items = match value {
                Value::Array(items) => items,
                other => vec![other],
            };
            match keywords.get("items") {
                Some(item_schema) if item_schema.is_object() => Value::Array(
                    items
                        .into_iter()
                        .map(|item| convert(item_schema, item))
                        .collect(),
                ),
                _ => Value::Array(items),
            }
        }
        "object" => {
            let Value::Object(mut map) = value else {
                return value;
            };
            let properties = keywords.get("properties").and_then(Value::as_object);
            if let Some(properties) = properties {
                for (key, property_schema) in properties {
                    if let Some(current) = map.get_mut(key) {
                        let taken = std::mem::take(current);
                        *current = convert(property_schema, taken);
                    }
                }
            }
            if let Some(extra_schema @ Value::Object(_)) = keywords.get("additionalProperties") {
                for (key, current) in map.iter_mut() {
                    if properties.is_some_and(|known| known.contains_key(key)) {
                        continue;
                    }
                    let taken = std::mem::take(current);
                    *current = convert(extra_schema, taken);
                }
            }
            Value::Object(map)
        }
        "number" => to_number(&value).and_then(number_value).unwrap_or(value),
        "integer" => to_number(&value)
            .map(f64::trunc)
            .and_then(number_value)
            .unwrap_or(value),
        "boolean" => to_boolean(&value).map(Value::Bool).unwrap_or(value),
        "string" => to_string(&value).map(Value::String).unwrap_or(value),
        "null" => match &value {
            Value::Null => value,
            Value::Bool(false) => Value::Null,
            Value::Number(number) if number.as_f64() == Some(0.0) => Value::Null,
            Value::String(text)
                if text.is_empty()
                    || text == "0"
                    || text.eq_ignore_ascii_case("null")
                    || text.eq_ignore_ascii_case("undefined") =>
            {
                Value::Null
            }
            _ => value,
        },
        _ => value,
    }
}

/// Returns a JSON number for a finite float, as an integer when it is one (so `"5"` becomes
/// `5`, not `5.0`); `None` for NaN and the infinities.
pub fn number_value(float: f64) -> Option<Value> {
    if !float.is_finite() {
        return None;
    }
    if float.fract() == 0.0 && float.abs() < 9_007_199_254_740_992.0 {
        // Exact: the value is an integer within the range where f64 and i64 agree.
        let int = float as i64;
        if int == 0 && float.is_sign_negative() {
            return Number::from_f64(float).map(Value::Number);
        }
        return Some(Value::Number(Number::from(int)));
    }
    Number::from_f64(float).map(Value::Number)
}

/// TypeBox `TryNumber`.
fn to_number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(number) => number.as_f64(),
        Value::Bool(flag) => Some(if *flag { 1.0 } else { 0.0 }),
        Value::Null => Some(0.0),
        Value::String(text) => {
            if let Some(number) = js_string_to_number(text).filter(|n| n.is_finite()) {
                return Some(number);
            }
            if text.eq_ignore_ascii_case("false") {
                return Some(0.0);
            }
            if text.eq_ignore_ascii_case("true") {
                return Some(1.0);
            }
            bigint_like(text)
        }
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// TypeBox's `TryBigInt` string forms that `Number()` rejects: `12n` and `-0n`.
fn bigint_like(text: &str) -> Option<f64> {
    let digits = text.strip_suffix('n')?;
    let unsigned = digits.strip_prefix('-').unwrap_or(digits);
    let canonical = unsigned == "0"
        || (unsigned.starts_with(|c: char| ('1'..='9').contains(&c))
            && unsigned.chars().all(|c| c.is_ascii_digit()));
    if !canonical {
        return None;
    }
    let float: f64 = digits.parse().ok()?;
    (float.abs() <= 9_007_199_254_740_991.0).then_some(float)
}

/// TypeBox `TryBoolean`.
fn to_boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(*flag),
        Value::Null => Some(false),
        Value::Number(number) => match number.as_f64() {
            Some(0.0) => Some(false),
            Some(1.0) => Some(true),
            _ => None,
        },
        Value::String(text) => {
            if text.eq_ignore_ascii_case("false") || text == "0" {
                Some(false)
            } else if text.eq_ignore_ascii_case("true") || text == "1" {
                Some(true)
            } else {
                None
            }
        }
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// TypeBox `TryString`.
fn to_string(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Null => Some("null".to_owned()),
        Value::Number(number) => {
            let mut out = String::new();
            write_number(&mut out, number);
            Some(out)
        }
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// JavaScript's `Number(string)`; `None` stands for `NaN`.
pub fn js_string_to_number(text: &str) -> Option<f64> {
    Some(crate::support::js::string_to_number(text)).filter(|number| !number.is_nan())
}

fn matches_type(type_name: &str, value: &Value) -> bool {
    match type_name {
        "number" => value.as_f64().is_some_and(f64::is_finite),
        "integer" => value
            .as_f64()
            .is_some_and(|number| number.is_finite() && number.fract() == 0.0),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "null" => value.is_null(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

fn is_valid(schema: &Value, value: &Value) -> bool {
    let mut errors = Vec::new();
    collect_errors(schema, value, &mut Vec::new(), &mut errors);
    errors.is_empty()
}

fn format_path(path: &[String]) -> String {
    if path.is_empty() {
        "root".to_owned()
    } else {
        path.join(".")
    }
}

fn push_error(errors: &mut Vec<SchemaError>, path: &[String], message: impl Into<String>) {
    errors.push(SchemaError {
        path: format_path(path),
        message: message.into(),
    });
}

/// TypeBox `Errors` for the supported keywords, in its order.
fn collect_errors(
    schema: &Value,
    value: &Value,
    path: &mut Vec<String>,
    errors: &mut Vec<SchemaError>,
) {
    let keywords = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => return push_error(errors, path, "schema is false"),
        Value::Object(keywords) => keywords,
        _ => return,
    };
    let types = schema_types(schema);
    if !types.is_empty() && !types.iter().any(|name| matches_type(name, value)) {
        let message = match types.as_slice() {
            [single] => format!("must be {single}"),
            many => format!("must be either {}", many.join(" or ")),
        };
        push_error(errors, path, message);
    }
    if let Value::Object(map) = value {
        if let Some(required) = keywords.get("required").and_then(Value::as_array) {
            let missing: Vec<&str> = required
                .iter()
                .filter_map(Value::as_str)
                .filter(|key| !map.contains_key(*key))
                .collect();
            if let Some(first) = missing.first() {
                path.push((*first).to_owned());
                push_error(
                    errors,
                    path,
                    format!("must have required properties {}", missing.join(", ")),
                );
                path.pop();
            }
        }
        let properties = keywords.get("properties").and_then(Value::as_object);
        if let Some(extra_schema) = keywords.get("additionalProperties") {
            let ignored = matches!(extra_schema, Value::Bool(true))
                || extra_schema.as_object().is_some_and(Map::is_empty);
            if !ignored {
                let before = errors.len();
                for (key, item) in map {
                    if properties.is_some_and(|known| known.contains_key(key)) {
                        continue;
                    }
                    path.push(key.clone());
                    collect_errors(extra_schema, item, path, errors);
                    path.pop();
                }
                if errors.len() > before {
                    push_error(errors, path, "must not have additional properties");
                }
            }
        }
        if let Some(properties) = properties {
            for (key, property_schema) in properties {
                if let Some(item) = map.get(key) {
                    path.push(key.clone());
                    collect_errors(property_schema, item, path, errors);
                    path.pop();
                }
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, keywords.get("items")) {
        for (idx, item) in items.iter().enumerate() {
            path.push(idx.to_string());
            collect_errors(item_schema, item, path, errors);
            path.pop();
        }
    }
    if let Some(constant) = keywords.get("const")
        && constant != value
    {
        push_error(errors, path, "must be equal to constant");
    }
    if let Some(allowed) = keywords.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        push_error(errors, path, "must be equal to one of the allowed values");
    }
    if let Some(variants) = keywords.get("anyOf").and_then(Value::as_array) {
        let mut branch_errors = Vec::new();
        let mut matched = false;
        for variant in variants {
            let mut errs = Vec::new();
            collect_errors(variant, value, path, &mut errs);
            if errs.is_empty() {
                matched = true;
                break;
            }
            branch_errors.extend(errs);
        }
        if !matched {
            errors.extend(branch_errors);
            push_error(errors, path, "must match a schema in anyOf");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn javascript_number_parsing() {
        for (text, expected) in [
            ("5", Some(5.0)),
            (" 5 ", Some(5.0)),
            ("", Some(0.0)),
            ("  ", Some(0.0)),
            ("0x10", Some(16.0)),
            ("0b11", Some(3.0)),
            ("1e3", Some(1000.0)),
            ("1.", Some(1.0)),
            (".5", Some(0.5)),
            ("+5", Some(5.0)),
            ("-0x5", None),
            ("12abc", None),
            ("1_000", None),
            ("e5", None),
            ("Infinity", Some(f64::INFINITY)),
        ] {
            assert_eq!(js_string_to_number(text), expected, "{text:?}");
        }
    }

    fn check(schema: Value, args: Value, expected: Result<Value, &str>) {
        let got = validate_arguments("t", &schema, args.clone());
        match (got, expected) {
            (Ok(value), Ok(want)) => assert_eq!(value, want, "{args}"),
            (Err(text), Err(want)) => {
                let head = text.split("\n\nReceived").next().unwrap_or_default();
                assert_eq!(head, want, "{args}");
            }
            (got, want) => panic!("{args}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn coercion_and_errors_follow_typebox() {
        let schema = json!({"type":"object","required":["p"],"properties":{
            "p":{"type":"string"},"n":{"type":"number"},"i":{"type":"integer"},
            "b":{"type":"boolean"},"a":{"type":"array","items":{"type":"number"}}}});
        check(
            schema.clone(),
            json!({"p": 5, "n": "0x10", "i": "1.5", "b": "TRUE", "a": "7"}),
            Ok(json!({"p":"5","n":16,"i":1,"b":true,"a":[7]})),
        );
        check(
            schema.clone(),
            json!({"p": null, "n": null, "b": 0}),
            Ok(json!({"p":"null","n":0,"b":false})),
        );
        check(
            schema.clone(),
            json!({"n": "x", "b": "yes"}),
            Err(
                "Validation failed for tool \"t\":\n  - p: must have required properties p\n  - n: must be number\n  - b: must be boolean",
            ),
        );
        check(
            schema,
            json!("str"),
            Err("Validation failed for tool \"t\":\n  - root: must be object"),
        );
    }

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Args {
        #[serde(default, deserialize_with = "lenient")]
        path: String,
        #[serde(default, deserialize_with = "lenient")]
        limit: Option<f64>,
        #[serde(default, deserialize_with = "lenient")]
        ignore_case: bool,
        #[serde(default, deserialize_with = "lenient")]
        items: Option<Vec<Lenient<Item>>>,
    }

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    struct Item {
        #[serde(default, deserialize_with = "lenient")]
        text: String,
    }

    #[test]
    fn typed_arguments_read_mistyped_fields_as_their_defaults() {
        assert_eq!(
            typed_arguments::<Args>(&json!({"path": "a", "limit": 5, "ignoreCase": true,
                "items": [{"text": "x"}, 7, {"text": 1}], "extra": null})),
            Args {
                path: "a".into(),
                limit: Some(5.0),
                ignore_case: true,
                items: Some(vec![
                    Lenient(Item { text: "x".into() }),
                    Lenient(Item::default()),
                    Lenient(Item::default()),
                ]),
            }
        );
        // What only a hook's rewrite can produce: values of other types, or no object at all.
        assert_eq!(
            typed_arguments::<Args>(
                &json!({"path": 5, "limit": "10", "ignoreCase": "yes", "items": {"text": "x"}})
            ),
            Args::default()
        );
        assert_eq!(typed_arguments::<Args>(&json!(["a", 5])), Args::default());
        assert_eq!(typed_arguments::<Args>(&Value::Null), Args::default());
    }
}
