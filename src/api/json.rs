//! The JSON body extractor: precise problem responses for every way a body can be wrong.
//!
//! - not `application/json` → 415;
//! - over the body limit → 413;
//! - not JSON (syntax, truncated, trailing characters) → 400 with line and column;
//! - JSON of the wrong shape (unknown field, wrong type, missing field, bad enum value) → 422 with the field path,
//!   line and column.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::problem::{ApiError, ProblemLocation};

/// A JSON request body deserialized into `T`, with RFC 9457 errors instead of axum's plain-text rejections.
#[derive(Debug, Clone)]
pub struct ValidJson<T>(pub T);

/// Parses `bytes` as `T`, mapping errors as the module describes. Where `T` has an object (the body itself, or a
/// nested struct) the body must have an object too: serde would otherwise read a struct from an array,
/// positionally (`"constraints": [null, null]`); that is a 422 naming the field.
pub fn parse_json<T: DeserializeOwned + Serialize>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let result: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    let value = match result {
        Ok(v) => v,
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            return Err(json_error(&inner, Some(path)));
        }
    };
    de.end().map_err(|e| json_error(&e, None))?;
    // What was read, written back: every object in it came from an object of the body, or from an array.
    if let (Ok(input), Ok(read)) = (serde_json::from_slice::<Value>(bytes), serde_json::to_value(&value)) {
        if let Some(path) = array_for_object(&input, &read, String::new()) {
            let field = (!path.is_empty()).then_some(path);
            let detail = match &field {
                Some(f) => format!("{f}: invalid type: array, expected an object"),
                None => "the body must be a JSON object".to_string(),
            };
            let mut err = ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid-body",
                "The JSON body does not match the expected schema",
                detail,
            );
            err.errors.push(ProblemLocation { field, line: None, column: None, message: "expected an object".into() });
            return Err(err);
        }
    }
    Ok(value)
}

/// The first path (`a.b[2].c`, empty for the body) where the body has an array and what was read from it is an
/// object.
fn array_for_object(input: &Value, read: &Value, path: String) -> Option<String> {
    let join = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
    match (input, read) {
        (Value::Array(_), Value::Object(_)) => Some(path),
        (Value::Object(i), Value::Object(r)) => {
            i.iter().find_map(|(k, iv)| r.get(k).and_then(|rv| array_for_object(iv, rv, join(k))))
        }
        (Value::Array(i), Value::Array(r)) => {
            i.iter().zip(r).enumerate().find_map(|(n, (iv, rv))| array_for_object(iv, rv, format!("{path}[{n}]")))
        }
        _ => None,
    }
}

fn json_error(e: &serde_json::Error, path: Option<String>) -> ApiError {
    use serde_json::error::Category;
    let line = (e.line() > 0).then_some(e.line() as u64);
    let column = (e.column() > 0).then_some(e.column() as u64);
    // serde_json appends " at line L column C"; keep the message short, the numbers go in their own fields.
    let full = e.to_string();
    let message = full.split(" at line ").next().unwrap_or(&full).to_string();
    match e.classify() {
        Category::Data => {
            let field = path.filter(|p| p != ".");
            let detail = match &field {
                Some(f) => format!("{f}: {message}"),
                None => message.clone(),
            };
            let mut err = ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid-body",
                "The JSON body does not match the expected schema",
                detail,
            );
            err.errors.push(ProblemLocation { field, line, column, message });
            err
        }
        Category::Syntax | Category::Eof | Category::Io => {
            let mut err = ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid-json",
                "The body is not valid JSON",
                format!("{message} (line {}, column {})", e.line(), e.column()),
            );
            err.errors.push(ProblemLocation { field: None, line, column, message });
            err
        }
    }
}

impl<S: Send + Sync, T: DeserializeOwned + Serialize> FromRequest<S> for ValidJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        if !(essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                "Expected a JSON body",
                format!("Content-Type must be application/json, got {:?}", content_type),
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload-too-large",
                    "The body is larger than the server accepts",
                    rejection.body_text(),
                )
            } else {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "unreadable-body",
                    "The body could not be read",
                    rejection.body_text(),
                )
            }
        })?;
        parse_json(&bytes).map(ValidJson)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::TrainingRequest;

    #[test]
    fn errors_name_the_field_or_the_position() {
        let e = parse_json::<TrainingRequest>(br#"{"system": "x", "model": {"layers": "many"}}"#).unwrap_err();
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(e.errors[0].field.as_deref(), Some("model.layers"));

        let e = parse_json::<TrainingRequest>(b"{\"system\": \n  \"x\",,}").unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!((e.errors[0].line, e.errors[0].column), (Some(2), Some(7)));

        let e = parse_json::<TrainingRequest>(br#"{"system": "x", "modle": {}}"#).unwrap_err();
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(e.errors[0].message.contains("unknown field `modle`"), "{:?}", e.errors);

        let e = parse_json::<TrainingRequest>(
            br#"{"system": "x", "model": {"layers": 1, "hidden": 8, "heads": 1, "seq_len": 8, "vocab": 8},
                "parallelism": {}} trailing"#,
        )
        .unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn a_body_must_be_an_object_even_where_serde_would_read_an_array() {
        // serde reads a struct of optional fields from `[null, null]`, positionally.
        let e = parse_json::<crate::jobs::RetrainParams>(b"[null, null]").unwrap_err();
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(e.detail, "the body must be a JSON object");
        assert!(parse_json::<crate::jobs::RetrainParams>(b" \n {}").is_ok());
        // Nested: a struct field given as an array names the field; real arrays stay arrays.
        let body = br#"{"system": "dgx-h100", "gpus": 8, "global_batch": 8,
            "model": {"layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 128},
            "constraints": [null, null]}"#;
        let e = parse_json::<crate::llm::search::SearchRequest>(body).unwrap_err();
        assert_eq!(e.errors[0].field.as_deref(), Some("constraints"));
        let ok = br#"{"system": "dgx-h100", "gpus": 8, "global_batch": 8,
            "model": {"layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 128},
            "constraints": {"micro_batches": [1, 2]}}"#;
        assert!(parse_json::<crate::llm::search::SearchRequest>(ok).is_ok());
    }
}
