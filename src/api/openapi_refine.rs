//! Corrections to the generated OpenAPI document, so that it describes exactly what the server accepts and
//! answers (schemathesis checks both directions against it):
//!
//! - **Flattened structs.** utoipa writes a `#[serde(flatten)]` field as `allOf: [{$ref: X}, {…}]`; when `X`
//!   forbids additional properties (a `deny_unknown_fields` input type also used in a response), no object can
//!   satisfy both parts. Such an `allOf` is merged into one object schema (the properties and required fields of
//!   every part).
//! - **Unsigned integers.** utoipa writes `u32`/`u64` as `format: int32`/`int64` with `minimum: 0`; validators
//!   then cap them at 2³¹ − 1 / 2⁶³ − 1 although the server accepts up to 2³² − 1 / 2⁶⁴ − 1. They become
//!   `format: uint32` / `uint64` (OpenAPI formats are open-ended), keeping `minimum: 0`.

use serde_json::{Map, Value};

/// Applies the corrections above. A document that does not survive the round trip through JSON is returned as
/// it was.
pub fn refine(doc: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    let Ok(mut v) = serde_json::to_value(&doc) else { return doc };
    let schemas = v.pointer("/components/schemas").and_then(Value::as_object).cloned().unwrap_or_default();
    walk(&mut v, &schemas);
    serde_json::from_value(v).unwrap_or(doc)
}

fn walk(v: &mut Value, schemas: &Map<String, Value>) {
    match v {
        Value::Object(o) => {
            merge_closed_all_of(o, schemas);
            unsigned_format(o);
            for child in o.values_mut() {
                walk(child, schemas);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| walk(c, schemas)),
        _ => {}
    }
}

/// The schema a part stands for (following one `$ref` into `components.schemas`).
fn resolve<'a>(part: &'a Value, schemas: &'a Map<String, Value>) -> &'a Value {
    part.get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
        .and_then(|name| schemas.get(name))
        .unwrap_or(part)
}

fn merge_closed_all_of(o: &mut Map<String, Value>, schemas: &Map<String, Value>) {
    let Some(Value::Array(parts)) = o.get("allOf") else { return };
    let closed = parts.iter().any(|p| resolve(p, schemas).get("additionalProperties") == Some(&Value::Bool(false)));
    let objects = parts.iter().all(|p| resolve(p, schemas).get("properties").is_some());
    if !closed || !objects {
        return;
    }
    let mut properties = Map::new();
    let mut required: Vec<Value> = Vec::new();
    for part in parts {
        let s = resolve(part, schemas);
        if let Some(Value::Object(p)) = s.get("properties") {
            properties.extend(p.clone());
        }
        if let Some(Value::Array(r)) = s.get("required") {
            required.extend(r.iter().filter(|x| !required.contains(x)).cloned().collect::<Vec<_>>());
        }
    }
    o.remove("allOf");
    o.insert("type".into(), Value::from("object"));
    o.insert("properties".into(), Value::Object(properties));
    o.insert("required".into(), Value::Array(required));
}

fn unsigned_format(o: &mut Map<String, Value>) {
    let integer = match o.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    };
    let unsigned = o.get("minimum").and_then(Value::as_f64) == Some(0.0);
    if !(integer && unsigned) {
        return;
    }
    let to = match o.get("format").and_then(Value::as_str) {
        Some("int32") => "uint32",
        Some("int64") => "uint64",
        _ => return,
    };
    o.insert("format".into(), Value::from(to));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refined(v: Value) -> Value {
        let doc: utoipa::openapi::OpenApi = serde_json::from_value(v).unwrap();
        serde_json::to_value(refine(doc)).unwrap()
    }

    #[test]
    fn a_flattened_closed_struct_becomes_one_object_and_unsigned_ints_lose_the_signed_cap() {
        let doc = json!({
            "openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {},
            "components": {"schemas": {
                "Spec": {"type": "object", "additionalProperties": false, "required": ["name"],
                         "properties": {"name": {"type": "string"},
                                        "sm_count": {"type": "integer", "format": "int32", "minimum": 0}}},
                "Entry": {"allOf": [{"$ref": "#/components/schemas/Spec"},
                                    {"type": "object", "required": ["aliases"],
                                     "properties": {"aliases": {"type": "array", "items": {"type": "string"}}}}]},
                "Signed": {"type": "integer", "format": "int64"}
            }}
        });
        let v = refined(doc);
        let entry = &v["components"]["schemas"]["Entry"];
        assert!(entry.get("allOf").is_none(), "{entry}");
        assert_eq!(entry["required"], json!(["name", "aliases"]));
        assert_eq!(entry["properties"]["aliases"]["type"], "array");
        assert_eq!(entry["properties"]["sm_count"]["format"], "uint32");
        assert_eq!(v["components"]["schemas"]["Spec"]["properties"]["sm_count"]["format"], "uint32");
        // Signed integers and open allOfs are left alone.
        assert_eq!(v["components"]["schemas"]["Signed"]["format"], "int64");
    }
}
