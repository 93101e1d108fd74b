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

use super::problem::{ApiError, ProblemLocation};

/// A JSON request body deserialized into `T`, with RFC 9457 errors instead of axum's plain-text rejections.
#[derive(Debug, Clone)]
pub struct ValidJson<T>(pub T);

/// Parses `bytes` as `T`, mapping errors as the module describes.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
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
    Ok(value)
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

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ValidJson<T> {
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
}
