//! Authentication and rate limiting of requests.
//!
//! Writes (uploads, systems, GPU imports, retrains, calibrations) need `Authorization: Bearer <key>` with write
//! scope; reads are open unless `auth_reads` is set (then any valid key). A presented key is always checked, and
//! each key is rate limited (token bucket; `429` with `Retry-After`). Missing or invalid key → `401` with
//! `WWW-Authenticate: Bearer`; a read key on a write, or a revoked key → `403`.

use std::num::NonZeroU32;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{MatchedPath, State};
use axum::http::{header, HeaderValue, Method, Request, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::problem::ApiError;
use super::AppState;
use crate::service::keys::{AuthError, Scope};

/// Route templates whose POST is a write.
pub const WRITE_ROUTES: [&str; 6] = [
    "/v1/profiles",
    "/v1/systems",
    "/v1/gpus/import",
    "/v1/regressors/retrain",
    "/v1/systems/{name}/calibrate",
    "/v1/systems/{name}/training-runs",
];

/// The authentication settings and the per-key rate limiter.
#[derive(Debug)]
pub struct AuthState {
    pub reads_need_key: bool,
    limiter: DefaultKeyedRateLimiter<String>,
}

impl AuthState {
    /// `per_s` requests per second per key with `burst` (both at least 1).
    pub fn new(reads_need_key: bool, per_s: u32, burst: u32) -> Arc<AuthState> {
        let rate = NonZeroU32::new(per_s.max(1)).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(burst.max(1)).unwrap_or(NonZeroU32::MIN);
        Arc::new(AuthState { reads_need_key, limiter: RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst)) })
    }
}

fn is_write(method: &Method, route: Option<&str>) -> bool {
    *method == Method::POST && route.is_some_and(|r| WRITE_ROUTES.contains(&r))
}

fn unauthorized(detail: &str) -> Response {
    let mut res =
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "Authentication required", detail).into_response();
    res.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    res
}

fn forbidden(detail: &str) -> Response {
    ApiError::new(StatusCode::FORBIDDEN, "forbidden", "Not allowed", detail).into_response()
}

/// The middleware (a route layer: it sees the matched route template).
pub async fn authenticate(State(state): State<AppState>, req: Request<Body>, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string());
    let need = if is_write(req.method(), route.as_deref()) {
        Some(Scope::Write)
    } else if state.auth.reads_need_key {
        Some(Scope::Read)
    } else {
        None
    };
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(|k| k.trim().to_string());
    let Some(key) = bearer else {
        return match need {
            None => next.run(req).await,
            Some(Scope::Write) => {
                unauthorized("this request changes data: send Authorization: Bearer <write key> (perfcast keys create)")
            }
            Some(Scope::Read) => {
                unauthorized("this server requires an API key for reads: send Authorization: Bearer <key>")
            }
        };
    };
    let principal = match state.service.authenticate(&key).await {
        Ok(Ok(p)) => p,
        Ok(Err(AuthError::Revoked)) => return forbidden("the API key was revoked"),
        Ok(Err(e)) => return unauthorized(&e.to_string()),
        Err(e) => return ApiError::from(e).into_response(),
    };
    if need == Some(Scope::Write) && principal.scope < Scope::Write {
        return forbidden(&format!(
            "key {:?} has {} scope; this request needs write",
            principal.name,
            principal.scope.as_str()
        ));
    }
    if let Err(not_until) = state.auth.limiter.check_key(&principal.key_id) {
        let wait = not_until.wait_time_from(DefaultClock::default().now()).as_secs().max(1);
        let mut res = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate-limited",
            "Too many requests",
            format!("key {:?} is over its rate limit; retry in {wait} s", principal.name),
        )
        .into_response();
        res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(wait));
        return res;
    }
    next.run(req).await
}
