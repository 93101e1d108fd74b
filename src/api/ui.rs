//! The dashboard at `/ui/`: five static pages — predict training (`/ui/`), serve (`/ui/serve`: a serving
//! prediction and the configuration search with its Pareto chart), operator (`/ui/operator`: one operator's
//! analytic and learned estimates), models (`/ui/models`), data (`/ui/data`) — with one stylesheet and a little
//! plain JavaScript, compiled into the binary (`include_str!`: no CDN, no build step). The pages call the public
//! API from the browser (with the API key the user pastes, kept in `sessionStorage`, when reads need one); this
//! module only serves the files, the example requests of `examples/` the predict form starts from
//! (`/ui/examples.json`), and what the serve and operator forms offer (`/ui/choices.json`: the model catalog,
//! engines, precisions, operator classes with their dim names).
//!
//! Every file is answered with its content type, `Cache-Control: no-cache` and a content-hash `ETag` (a
//! conditional request gets `304`), `X-Content-Type-Options: nosniff`, and the pages with a Content Security Policy
//! that allows only this origin (plus `blob:` images: the accuracy plots are fetched with the key, then shown).

use std::sync::OnceLock;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};

/// One file of the dashboard.
#[derive(Debug)]
pub struct Asset {
    /// The URL path it is served at.
    pub path: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its content.
    pub body: &'static str,
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";

/// A page of the dashboard: its URL path, `<title>`, own script, and the contents of its `<main>` (the file under
/// `src/api/ui/`); [`LAYOUT`] gives every page the same head, navigation and key form.
struct Page {
    path: &'static str,
    title: &'static str,
    script: &'static str,
    main: &'static str,
}

/// The frame of every page (`src/api/ui/layout.html`): `{{title}}`, `{{script}}` and `{{main}}` are the page's,
/// `{{current PATH}}` marks the navigation link of the page being shown (`aria-current="page"`).
const LAYOUT: &str = include_str!("ui/layout.html");

const PAGES: [Page; 5] = [
    Page { path: "/ui/", title: "Predict · perfcast", script: "/ui/predict.js", main: include_str!("ui/index.html") },
    Page {
        path: "/ui/serve",
        title: "Serving · perfcast",
        script: "/ui/serve.js",
        main: include_str!("ui/serve.html"),
    },
    Page {
        path: "/ui/operator",
        title: "Operator · perfcast",
        script: "/ui/operator.js",
        main: include_str!("ui/operator.html"),
    },
    Page {
        path: "/ui/models",
        title: "Models · perfcast",
        script: "/ui/models.js",
        main: include_str!("ui/models.html"),
    },
    Page { path: "/ui/data", title: "Data · perfcast", script: "/ui/data.js", main: include_str!("ui/data.html") },
];

/// `page` in [`LAYOUT`].
fn compose(page: &Page) -> String {
    let mut html = LAYOUT.replace("{{title}}", page.title).replace("{{script}}", page.script);
    for p in &PAGES {
        let mark = if p.path == page.path { " aria-current=\"page\"" } else { "" };
        html = html.replace(&format!("{{{{current {}}}}}", p.path), mark);
    }
    html.replace("{{main}}", page.main)
}

/// The dashboard's files, by URL path: the three pages ([`PAGES`] in [`LAYOUT`], composed once) and the static
/// files.
pub fn assets() -> &'static [Asset] {
    static ASSETS: OnceLock<Vec<Asset>> = OnceLock::new();
    ASSETS.get_or_init(|| {
        let mut v: Vec<Asset> = PAGES
            .iter()
            .map(|p| Asset { path: p.path, content_type: HTML, body: Box::leak(compose(p).into_boxed_str()) })
            .collect();
        v.extend([
            Asset { path: "/ui/app.css", content_type: "text/css; charset=utf-8", body: include_str!("ui/app.css") },
            Asset { path: "/ui/app.js", content_type: JS, body: include_str!("ui/app.js") },
            Asset { path: "/ui/predict.js", content_type: JS, body: include_str!("ui/predict.js") },
            Asset { path: "/ui/models.js", content_type: JS, body: include_str!("ui/models.js") },
            Asset { path: "/ui/data.js", content_type: JS, body: include_str!("ui/data.js") },
            Asset { path: "/ui/serve.js", content_type: JS, body: include_str!("ui/serve.js") },
            Asset { path: "/ui/operator.js", content_type: JS, body: include_str!("ui/operator.js") },
        ]);
        v
    })
}

macro_rules! examples {
    ($($name:literal),* $(,)?) => {
        [$(($name, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/", $name, ".json")))),*]
    };
}

/// The request files of `examples/` (name without `.json` → body) the predict page offers.
pub const EXAMPLES: [(&str, &str); 13] = examples!(
    "dgx-h100/llama-3.1-405b_pp8-vp8-cp2_embedding-loss-split",
    "dgx-h100/llama-3.1-8b_fp8-tensorwise_param-gather_cuda-graphs",
    "dgx-h100/llama-3.1-8b_torchtitan_fsdp2_compiled",
    "perlmutter-a100-40g/gpt-20b_pp4-tp4-dp8",
    "perlmutter-a100-40g/gpt-20b_pp4-tp8-dp4",
    "perlmutter-a100-40g/gpt-20b_pp8-tp4-dp4",
    "perlmutter-a100-40g/llama-13b_pp4-tp8-dp2",
    "perlmutter-a100-40g/llemma-7b_pp4-tp2-dp2",
    "vista-gh200/gpt-20b_pp4-tp4-dp8",
    "vista-gh200/gpt-20b_pp4-tp8-dp4",
    "vista-gh200/gpt-20b_pp8-tp4-dp4",
    "vista-gh200/llama-13b_pp4-tp8-dp2",
    "vista-gh200/llemma-7b_pp4-tp2-dp2",
);

/// The page the predict form starts from.
pub const DEFAULT_EXAMPLE: &str = "perlmutter-a100-40g/gpt-20b_pp4-tp4-dp8";

/// Only this origin: scripts, styles, API calls; images also from `blob:` (the plots) and `data:`. Inline
/// `style` attributes are allowed for the timeline's SVG, which the page inserts into its document.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
    img-src 'self' blob: data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// `{"<system>/<file>": request, ...}` of [`EXAMPLES`] (built once).
pub fn examples_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let map: serde_json::Map<String, serde_json::Value> = EXAMPLES
            .iter()
            .map(|(name, body)| (name.to_string(), serde_json::from_str(body).unwrap_or(serde_json::Value::Null)))
            .collect();
        serde_json::Value::Object(map).to_string()
    })
}

/// What the serve and operator forms offer (built once): `models` (the serving catalog: `name`, `params_b` =
/// parameters in billions, `moe`), `engines`, `serving_precisions`, `operators` (each class's `op`, its `dims`
/// names in slot order and whether it is `forward_only`) and `dtypes` (every precision an operator estimate takes).
pub fn choices_json() -> &'static str {
    use crate::hw::Precision;
    use crate::llm::serving::catalog::catalog;
    use crate::llm::serving::request::{Engine, ServingPrecision};
    use crate::op::OpClass;
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let models: Vec<serde_json::Value> = catalog()
            .iter()
            .map(|e| {
                serde_json::json!({"name": e.model.name, "params_b": e.model.params_total() / 1e9,
                    "moe": e.model.moe.is_some()})
            })
            .collect();
        let operators: Vec<serde_json::Value> = OpClass::ALL
            .iter()
            .map(|c| serde_json::json!({"op": c.as_str(), "dims": c.dim_names(), "forward_only": c.is_serving()}))
            .collect();
        serde_json::json!({
            "models": models,
            "engines": Engine::ALL.iter().map(|e| e.as_str()).collect::<Vec<_>>(),
            "serving_precisions": [ServingPrecision::Bf16, ServingPrecision::Fp16, ServingPrecision::Fp8],
            "operators": operators,
            "dtypes": Precision::ALL,
        })
        .to_string()
    })
}

/// The strong `ETag` of `body`: the first 16 hex digits of its SHA-256, quoted.
fn etag(body: &[u8]) -> String {
    format!("\"{}\"", &hex::encode(Sha256::digest(body))[..16])
}

/// `body` with its headers, or `304` when `request` already holds it (`If-None-Match`).
fn serve(request: &HeaderMap, content_type: &'static str, body: &'static str) -> Response {
    let tag = etag(body.as_bytes());
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let mut res = if fresh { StatusCode::NOT_MODIFIED.into_response() } else { body.into_response() };
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if let Ok(v) = HeaderValue::from_str(&tag) {
        h.insert(header::ETAG, v);
    }
    if content_type == HTML {
        h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
        h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    }
    res
}

/// The dashboard's routes: every [`assets`] file, `/ui/examples.json`, and `/ui` redirecting to `/ui/`.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let mut r = Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/examples.json", get(|h: HeaderMap| async move { serve(&h, "application/json", examples_json()) }))
        .route("/ui/choices.json", get(|h: HeaderMap| async move { serve(&h, "application/json", choices_json()) }));
    for a in assets() {
        r = r.route(a.path, get(move |h: HeaderMap| async move { serve(&h, a.content_type, a.body) }));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_request_is_offered_and_the_default_is_one() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
        let mut on_disk = Vec::new();
        for system in std::fs::read_dir(dir).unwrap() {
            let system = system.unwrap().path();
            // Requests of other routes (serving, searches, estimates, systems), not the training form's.
            if system.file_name().is_some_and(|n| ["serving", "search", "estimates", "systems"].iter().any(|d| n == *d))
            {
                continue;
            }
            for f in std::fs::read_dir(&system).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "json") {
                    let name = f.strip_prefix(dir).unwrap().with_extension("");
                    on_disk.push(name.to_string_lossy().trim_start_matches('/').to_string());
                }
            }
        }
        on_disk.sort();
        let mut offered: Vec<String> = EXAMPLES.iter().map(|(n, _)| n.to_string()).collect();
        offered.sort();
        assert_eq!(offered, on_disk, "add new example requests to ui::EXAMPLES");
        let parsed: serde_json::Value = serde_json::from_str(examples_json()).unwrap();
        assert_eq!(parsed.as_object().unwrap().len(), EXAMPLES.len());
        assert!(parsed[DEFAULT_EXAMPLE]["system"].is_string());
        assert!(EXAMPLES.iter().all(|(_, b)| serde_json::from_str::<serde_json::Value>(b).is_ok()));
    }

    #[test]
    fn every_page_is_the_layout_around_its_main_with_its_own_link_marked() {
        let pages: Vec<&Asset> = assets().iter().filter(|a| a.content_type == HTML).collect();
        assert_eq!(
            pages.iter().map(|a| a.path).collect::<Vec<_>>(),
            ["/ui/", "/ui/serve", "/ui/operator", "/ui/models", "/ui/data"]
        );
        for (a, p) in pages.iter().zip(&PAGES) {
            assert!(!a.body.contains("{{"), "{}: a placeholder is left", a.path);
            assert!(a.body.starts_with("<!doctype html>") && a.body.ends_with("</main>\n</body>\n</html>\n"));
            assert!(a.body.contains(&format!("<title>{}</title>", p.title)));
            assert!(a.body.contains(&format!("<script src=\"{}\" defer></script>", p.script)));
            assert!(a.body.contains(p.main));
            // Exactly one link is current: the page's own.
            assert_eq!(a.body.matches("aria-current=\"page\"").count(), 1, "{}", a.path);
            assert!(a.body.contains(&format!("<a href=\"{}\" aria-current=\"page\">", p.path)), "{}", a.path);
        }
    }

    #[test]
    fn etags_follow_the_content() {
        assert_eq!(etag(b"a"), etag(b"a"));
        assert_ne!(etag(b"a"), etag(b"b"));
        assert_eq!(etag(b"").len(), 18);
    }
}
