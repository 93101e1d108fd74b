//! The dashboard (`/ui/`) in a real headless Chromium against the real server (the application over TCP on a
//! temporary SQLite file, with a trained model and an upload): each page loads without errors, the predict form
//! is driven with the keyboard and shows the API's own numbers and timeline for the same request, the models and
//! data pages list what the database holds, and a server that needs keys for reads works once a key is pasted.
//! Screenshots go to `out/ui-*.png`.

use std::path::PathBuf;
use std::time::Instant;

use axum::body::Body;
use axum::http::{header, Request};
use serde_json::{json, Value};

use crate::browser::Page;
use crate::common::{example_requests, TestApp};
use perfcast::api::ui::{DEFAULT_EXAMPLE, EXAMPLES};
use perfcast::config::Config;

fn out(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("out").join(name)
}

/// Serves `app`'s router on a free loopback port; returns its base URL.
async fn serve(app: &TestApp) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = app.router.clone();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

/// What the pages should show, from the API itself.
struct Expected {
    request: Value,
    answer: Value,
    timeline_rects: usize,
    keys: Vec<String>,
    systems: Vec<String>,
    profiles: Vec<String>,
}

fn rects(svg: &str) -> usize {
    roxmltree::Document::parse(svg).unwrap().descendants().filter(|n| n.has_tag_name("rect")).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_pages_in_a_real_browser() {
    let started = Instant::now();
    let app =
        TestApp::started(Config { auto_retrain: false, per_gpu_min_samples: 1_000_000, ..TestApp::config() }).await;
    // One upload and one trained model for the data and models pages.
    let csv = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/neusight/train_collect/linear__NVIDIA_A100-PCIE-40GB.csv.gz");
    let r = app.post_bytes("/v1/profiles", std::fs::read(csv).unwrap(), &[("content-encoding", "gzip")]).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let job = app.post_json("/v1/regressors/retrain", &json!({"grid": "minimal"})).await.json();
    assert_eq!(app.wait_job(job["id"].as_i64().unwrap(), 300).await["state"], "succeeded");

    // The default example with micro_batch 2 (what the test types into the form).
    let mut request =
        example_requests().into_iter().find(|(f, _)| f.ends_with(&format!("{DEFAULT_EXAMPLE}.json"))).unwrap().1;
    request["parallelism"]["micro_batch"] = json!(2);
    let answer = app.post_json("/v1/predictions/training", &request).await.json();
    let svg = app.post_json("/v1/predictions/training/timeline?format=svg", &request).await;
    assert_eq!(svg.status, 200);
    let names = |v: Value, list: &str, field: &str| -> Vec<String> {
        let items = if list.is_empty() { v } else { v[list].clone() };
        items.as_array().unwrap().iter().map(|x| x[field].as_str().unwrap().to_string()).collect()
    };
    let mut keys = names(app.get("/v1/regressors").await.json(), "", "key");
    keys.dedup();
    assert!(keys.contains(&"linear.fwd.fp32".to_string()), "{keys:?}");
    let expected = Expected {
        request,
        answer,
        timeline_rects: rects(std::str::from_utf8(&svg.body).unwrap()),
        keys,
        systems: names(app.get("/v1/systems").await.json(), "", "name"),
        profiles: names(app.get("/v1/profiles").await.json(), "profiles", "id"),
    };
    assert_eq!(expected.profiles.len(), 1);

    // A second server that requires a key for reads.
    let locked = TestApp::with_config(Config { auth_reads: true, ..TestApp::config() }).await;
    let base = serve(&app).await;
    let locked_base = serve(&locked).await;
    let key = locked.key.clone();
    let setup = started.elapsed();
    let browser_started = Instant::now();
    tokio::task::spawn_blocking(move || drive(&base, &locked_base, &key, &expected)).await.unwrap();
    eprintln!(
        "dashboard browser test: setup (upload, training, API answers) {:.1} s, browser {:.1} s",
        setup.as_secs_f64(),
        browser_started.elapsed().as_secs_f64()
    );
    // The static files answer conditional requests.
    let page = app.get("/ui/").await;
    let etag = page.headers[header::ETAG].to_str().unwrap().to_string();
    let again =
        app.send_bare(Request::get("/ui/").header(header::IF_NONE_MATCH, &etag).body(Body::empty()).unwrap()).await;
    assert_eq!(again.status, 304);
}

fn drive(base: &str, locked_base: &str, key: &str, want: &Expected) {
    let t0 = Instant::now();
    let step = |what: &str| eprintln!("dashboard: {what} at {:.1} s", t0.elapsed().as_secs_f64());
    let page = Page::launch(1280, 900);
    step("browser started");

    // Predict: the form starts from the default example; micro_batch is retyped with the keyboard, the form
    // submitted with Enter on its button.
    page.open(&format!("{base}/ui/"));
    step("predict page loaded");
    accessible(&page, "predict");
    assert_eq!(page.eval("document.getElementById('example').value"), DEFAULT_EXAMPLE);
    assert_eq!(page.eval("document.querySelectorAll('#example option').length"), EXAMPLES.len());
    page.focus("#f-micro_batch");
    page.retype("2");
    page.press("Tab");
    let in_form: Value = serde_json::from_str(page.eval("document.getElementById('request').value").as_str().unwrap())
        .expect("the request in the form is JSON");
    assert_eq!(in_form, want.request, "the form's request after typing micro_batch 2");
    page.focus("#predict");
    page.press("Enter");
    step("form typed and submitted");
    page.wait_until("document.getElementById('result').dataset.state", "the prediction");
    step("prediction shown");
    assert_eq!(page.eval("document.getElementById('result').dataset.state"), "done");

    // The numbers are the API's answer to the same request.
    let shown = page.eval(
        "Object.fromEntries([...document.querySelectorAll('#numbers dd')].map(d => [d.dataset.field, [d.dataset.value, d.textContent]]))",
    );
    let a = &want.answer;
    let value =
        |field: &str| shown[field][0].as_str().unwrap_or_else(|| panic!("no {field} shown: {shown}")).to_string();
    let text = |field: &str| shown[field][1].as_str().unwrap().to_string();
    // The page shows JavaScript's shortest round-trip text of the API's number. Rust's `str::parse` reads it
    // correctly rounded, serde_json's default float parser (no `float_roundtrip`) may land one ulp away, so
    // the shown number is read with the same parser as the API's answer.
    let num = |field: &str| serde_json::from_str::<f64>(&value(field)).unwrap();
    assert_eq!(num("iteration_time_s"), a["iteration_time_s"].as_f64().unwrap());
    assert_eq!(text("iteration_time_s"), format!("{:.1} ms", a["iteration_time_s"].as_f64().unwrap() * 1e3));
    assert_eq!(num("mfu"), a["throughput"]["mfu"].as_f64().unwrap());
    assert_eq!(text("mfu"), format!("{:.1} %", a["throughput"]["mfu"].as_f64().unwrap() * 100.0));
    assert_eq!(num("tokens_per_s"), a["throughput"]["tokens_per_s"].as_f64().unwrap());
    assert_eq!(num("memory_total_gib"), a["memory"]["total_gib"].as_f64().unwrap());
    let fits = a["memory"]["fits"].as_bool().unwrap();
    assert_eq!((value("memory_fits"), text("memory_fits")), (fits.to_string(), if fits { "yes" } else { "no" }.into()));

    // The memory bar: one segment per part, together the total's share of the bar.
    let widths = page.eval("[...document.querySelectorAll('#memory-bar span')].map(s => parseFloat(s.style.width))");
    let widths: Vec<f64> = widths.as_array().unwrap().iter().map(|w| w.as_f64().unwrap()).collect();
    assert_eq!(widths.len(), 5);
    let (total, capacity) = (a["memory"]["total_gib"].as_f64().unwrap(), a["memory"]["capacity_gib"].as_f64().unwrap());
    let share = 100.0 * total / capacity.max(total);
    assert!((widths.iter().sum::<f64>() - share).abs() < 0.01, "{widths:?} vs {share}");
    assert!(page
        .eval("document.getElementById('memory-bar').getAttribute('aria-label')")
        .as_str()
        .unwrap()
        .contains("GiB"));

    // The timeline is the API's SVG for the same request, inline.
    let svg = page.eval(
        "(() => { const s = document.querySelector('#timeline svg'); return s && [s.querySelectorAll('rect').length, s.textContent]; })()",
    );
    assert!(svg.is_array(), "no timeline SVG in the page");
    assert_eq!(svg[0], want.timeline_rects);
    assert!(svg[1].as_str().unwrap().contains("time (ms)"));
    page.assert_no_problems("predict");
    page.screenshot(&out("ui-predict.png"));
    step("predict checked and saved");

    // An API error shows the problem's detail in the status line.
    page.eval("(() => { const t = document.getElementById('request'); const r = JSON.parse(t.value); r.system = 'no-such-system'; t.value = JSON.stringify(r); })()");
    page.focus("#predict");
    page.press("Enter");
    page.wait_until("document.getElementById('result').dataset.state === 'failed'", "the failed prediction");
    let status = page.eval("document.getElementById('status').textContent");
    assert!(status.as_str().unwrap().contains("no-such-system"), "{status}");

    // Models: every key the API lists, with the active version's plot (the API's 900 × 800 SVG).
    page.open(&format!("{base}/ui/models"));
    accessible(&page, "models");
    let mut listed: Vec<String> = serde_json::from_value(
        page.eval("[...document.querySelectorAll('#models-table tbody tr')].map(r => r.dataset.key)"),
    )
    .unwrap();
    listed.sort();
    assert_eq!(listed, want.keys);
    let figure = "document.querySelector('figure[data-key=\"linear.fwd.fp32\"]')";
    page.wait_until(&format!("{figure}.dataset.state"), "the plot of linear.fwd.fp32");
    let img = page.eval(&format!(
        "(() => {{ const f = {figure}; const i = f.querySelector('img'); return [f.dataset.state, i && i.naturalWidth, i && i.naturalHeight, i && i.alt]; }})()"
    ));
    assert_eq!((&img[0], &img[1], &img[2]), (&json!("loaded"), &json!(900), &json!(800)), "{img}");
    assert!(img[3].as_str().unwrap().contains("linear.fwd.fp32"), "{img}");
    accessible(&page, "models with plots");
    page.assert_no_problems("models");
    page.screenshot(&out("ui-models.png"));
    step("models checked and saved");

    // Data: the systems and profiles the API lists.
    page.open(&format!("{base}/ui/data"));
    accessible(&page, "data");
    assert_eq!(
        page.eval("[...document.querySelectorAll('#systems-table tbody tr')].map(r => r.dataset.name)"),
        json!(want.systems)
    );
    assert_eq!(
        page.eval("[...document.querySelectorAll('#profiles-table tbody tr')].map(r => r.dataset.id)"),
        json!(want.profiles)
    );
    page.assert_no_problems("data");
    page.screenshot(&out("ui-data.png"));
    step("data checked and saved");

    // Reads that need a key: the page says so; with the key pasted into the header's form it works.
    page.open(&format!("{locked_base}/ui/data"));
    let status = page.eval("document.getElementById('status').textContent");
    assert!(status.as_str().unwrap().contains("API key"), "{status}");
    page.eval("document.querySelector('details.key').open = true");
    page.focus("#api-key");
    page.repaste(key);
    page.press("Enter");
    page.wait_until("document.getElementById('key-state').textContent.includes('is set')", "the key to be stored");
    page.open(&format!("{locked_base}/ui/data"));
    assert_eq!(page.eval("document.querySelectorAll('#systems-table tbody tr').length"), want.systems.len());
    step("key flow checked");
}

/// The page's accessibility basics: its language, one `h1`, every form control labelled, every image described,
/// a live region for results (one round trip: each costs the DevTools client about 0.1 s).
fn accessible(page: &Page, name: &str) {
    let facts = page.eval(
        "({ lang: document.documentElement.lang, h1: document.querySelectorAll('h1').length, \
           unlabelled: [...document.querySelectorAll('input, select, textarea')].filter(e => !e.labels || e.labels.length === 0).map(e => e.id), \
           undescribed: [...document.querySelectorAll('img')].filter(i => !i.alt).map(i => i.src), \
           live: document.querySelectorAll('[aria-live]').length })",
    );
    assert_eq!(facts["lang"], "en", "{name}: {facts}");
    assert_eq!(facts["h1"], 1, "{name}: {facts}");
    assert_eq!(facts["unlabelled"], json!([]), "{name}: controls without a label: {facts}");
    assert_eq!(facts["undescribed"], json!([]), "{name}: images without alt text: {facts}");
    assert!(facts["live"].as_u64().unwrap() >= 1, "{name}: no aria-live region: {facts}");
}

#[tokio::test]
async fn the_static_files_have_their_types_cache_headers_and_nothing_from_elsewhere() {
    let app = TestApp::new().await;
    let mut total = 0;
    for asset in perfcast::api::ui::assets() {
        // Without a key: the pages themselves are public.
        let r = app.send_bare(Request::get(asset.path).body(Body::empty()).unwrap()).await;
        assert_eq!(r.status, 200, "{}", asset.path);
        assert_eq!(r.content_type, asset.content_type, "{}", asset.path);
        assert_eq!(r.headers[header::CACHE_CONTROL], "no-cache", "{}", asset.path);
        assert_eq!(r.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{}", asset.path);
        assert!(r.headers.contains_key(header::ETAG), "{}", asset.path);
        let body = String::from_utf8(r.body).unwrap();
        assert!(!body.contains("http://") && !body.contains("https://"), "{} loads from elsewhere", asset.path);
        if asset.content_type.starts_with("text/html") {
            let csp = r.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
            assert!(csp.contains("default-src 'self'") && csp.contains("script-src 'self'"), "{csp}");
            assert!(body.contains("<html lang=\"en\">") && body.contains("aria-live"), "{}", asset.path);
        }
        total += body.len();
    }
    assert!(total < 64 * 1024, "the dashboard is {total} bytes");
    let r = app.send_bare(Request::get("/ui").body(Body::empty()).unwrap()).await;
    assert_eq!((r.status.as_u16(), r.headers[header::LOCATION].to_str().unwrap()), (308, "/ui/"));
    let r = app.send_bare(Request::get("/ui/examples.json").body(Body::empty()).unwrap()).await;
    assert_eq!(r.content_type, "application/json");
    let examples = r.json();
    assert_eq!(examples.as_object().unwrap().len(), EXAMPLES.len());
    let want = example_requests().into_iter().find(|(f, _)| f.ends_with(&format!("{DEFAULT_EXAMPLE}.json"))).unwrap().1;
    assert_eq!(examples[DEFAULT_EXAMPLE], want);
}
