//! The dashboard (`/ui/`) in a real headless Chromium against the real server (the application over TCP on a
//! temporary SQLite file, with a trained model and an upload): each page loads without errors, the predict form
//! is driven with the keyboard and shows the API's own numbers and timeline for the same request, the serve page
//! shows the API's serving prediction (with the simulated benchmark's latency percentiles) and search (with its
//! Pareto front), the operator page shows the API's analytic and learned estimates with their source, the
//! models and data pages list what the database holds, and a server that needs keys for reads works once a key is
//! pasted. Screenshots (1280 × 800 window, whole page) go to `out/ui-*.png`.

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
    /// The serve page's requests as its form builds them (defaults, concurrency typed as 64) and the API's answers.
    serve: Value,
    serve_answer: Value,
    search_answer: Value,
    /// The operator page's request (A100 PCIe, linear fp32 with M typed as 2048) and the API's answer; and the same
    /// in bf16, which no learned model covers.
    operator: Value,
    operator_answer: Value,
    operator_bf16_answer: Value,
}

/// The configuration label the serve page gives a search hit (`tp4 pp1 bf16`).
fn config_label(h: &Value) -> String {
    let mut s = format!("tp{} pp{}", h["tp"], h["pp"]);
    if h["ep"].as_u64().unwrap() > 1 {
        s.push_str(&format!(" ep{}", h["ep"]));
    }
    if h["dp_attention"] == true {
        s.push_str(" dp-attention");
    }
    format!("{s} {}", h["precision"].as_str().unwrap())
}

/// The hits on the Pareto front of (tokens/s per user, tokens/s per GPU), both to maximize: a hit is on it when
/// no other hit is at least as good on both and better on one. Quadratic and independent of the page's sweep.
fn pareto_front(hits: &[Value]) -> Vec<String> {
    let point = |h: &Value| {
        (h["prediction"]["throughput"]["per_user"].as_f64().unwrap(), h["tokens_per_s_per_gpu"].as_f64().unwrap())
    };
    hits.iter()
        .filter(|h| {
            let (u, g) = point(h);
            !hits.iter().any(|o| {
                let (ou, og) = point(o);
                ou >= u && og >= g && (ou > u || og > g)
            })
        })
        .map(config_label)
        .collect()
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
    // The serve page's defaults (examples/serving/llama-3.1-70b_tp4_h100.json with concurrency 64; the search
    // example's target with 10 configurations).
    let serve_requests = json!({
        "predict": {"system": "dgx-h100", "model": "Llama-3.1-70B", "engine": "vllm", "precision": "bf16",
            "parallelism": {"tp": 4, "pp": 1},
            "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 64}},
        "search": {"system": "dgx-h100", "model": "Llama-3.1-70B", "engine": "vllm", "gpus": 8,
            "workload": {"input_tokens": 1024, "output_tokens": 256}, "slo": {"ttft_ms": 500, "tpot_ms": 30},
            "top_k": 10},
    });
    let serve_answer = app.post_json("/v1/predictions/inference", &serve_requests["predict"]).await.json();
    let search_answer = app.post_json("/v1/predictions/inference/search", &serve_requests["search"]).await.json();
    assert!(search_answer["best"].as_array().unwrap().len() >= 2, "{search_answer}");
    let operator = json!({"gpu": "A100-PCIE-40GB", "op": "linear", "phase": "fwd", "dtype": "fp32",
        "dims": {"B": 1, "M": 2048, "N": 4096, "K": 4096}});
    let operator_answer = app.post_json("/v1/estimates/operator", &operator).await.json();
    assert!(operator_answer["source"].as_str().unwrap().starts_with("regressor:linear.fwd.fp32"), "{operator_answer}");
    let mut bf16 = operator.clone();
    bf16["dtype"] = json!("bf16");
    let operator_bf16_answer = app.post_json("/v1/estimates/operator", &bf16).await.json();
    assert_eq!(operator_bf16_answer["source"], "analytic");
    let expected = Expected {
        request,
        answer,
        timeline_rects: rects(std::str::from_utf8(&svg.body).unwrap()),
        keys,
        systems: names(app.get("/v1/systems").await.json(), "", "name"),
        profiles: names(app.get("/v1/profiles").await.json(), "profiles", "id"),
        serve: serve_requests,
        serve_answer,
        search_answer,
        operator,
        operator_answer,
        operator_bf16_answer,
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
    let page = Page::launch(1280, 800);
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

    serve_page(&page, base, want);
    step("serve checked and saved");
    operator_page(&page, base, want);
    step("operator checked and saved");

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

/// The shown `data-value` of every `[data-field]` element under `scope` (a CSS selector), by field.
fn shown_values(page: &Page, scope: &str) -> Value {
    page.eval(&format!(
        "Object.fromEntries([...document.querySelectorAll('{scope} [data-field]')].map(d => [d.dataset.field, d.dataset.value ?? d.textContent]))"
    ))
}

/// The shown number of `field` (read with the API answer's parser, see the predict page's check).
fn shown(values: &Value, field: &str) -> f64 {
    let text = values[field].as_str().unwrap_or_else(|| panic!("no {field} shown: {values}"));
    serde_json::from_str::<f64>(text).unwrap()
}

/// Serve: the form starts from the serving example; the concurrency is retyped with the keyboard and the form
/// submitted with Enter; the numbers, memory, steps and search are the API's answers to the same two requests.
fn serve_page(page: &Page, base: &str, want: &Expected) {
    page.open(&format!("{base}/ui/serve"));
    accessible(page, "serve");
    let form = page.eval("['model', 'system', 'engine', 'precision'].map(id => document.getElementById(id).value)");
    assert_eq!(form, json!(["Llama-3.1-70B", "dgx-h100", "vllm", "bf16"]));
    let catalog = perfcast::llm::serving::catalog::names();
    assert_eq!(page.eval("[...document.querySelectorAll('#model option')].map(o => o.value)"), json!(catalog));
    page.focus("#concurrency");
    page.retype("64");
    // The page's requests, as it sends them.
    page.eval(
        r#"(() => { window.__sent = {}; const real = window.fetch; window.fetch = (...args) => {
            if (args[1] && args[1].body) window.__sent[new URL(String(args[0]), location.href).pathname] = JSON.parse(args[1].body);
            return real(...args);
        }; return true; })()"#,
    );
    page.focus("#predict");
    page.press("Enter");
    page.wait_until("document.getElementById('result').dataset.state", "the serving prediction");
    assert_eq!(page.eval("document.getElementById('result').dataset.state"), "done");
    let sent = page.eval("window.__sent");
    assert_eq!(sent["/v1/predictions/inference"], want.serve["predict"], "the prediction's request");
    assert_eq!(sent["/v1/predictions/inference/search"], want.serve["search"], "the search's request");

    let (a, values) = (&want.serve_answer, shown_values(page, "#numbers"));
    assert_eq!(shown(&values, "ttft_ms"), a["ttft_ms"].as_f64().unwrap());
    assert_eq!(shown(&values, "tpot_ms"), a["tpot_ms"].as_f64().unwrap());
    assert_eq!(shown(&values, "request_latency_ms"), a["request_latency_ms"].as_f64().unwrap());
    assert_eq!(shown(&values, "per_gpu"), a["throughput"]["per_gpu"].as_f64().unwrap());
    assert_eq!(shown(&values, "per_user"), a["throughput"]["per_user"].as_f64().unwrap());
    assert_eq!(shown(&values, "kv_capacity_tokens"), a["memory"]["kv_capacity_tokens"].as_f64().unwrap());
    assert_eq!(shown(&values, "max_concurrency"), a["memory"]["max_concurrency"].as_f64().unwrap());
    let ttft = page.eval("document.querySelector('#numbers [data-field=ttft_ms]').textContent");
    let t = a["ttft_ms"].as_f64().unwrap();
    assert_eq!(ttft, json!(format!("{:.*} ms", if t < 10.0 { 2 } else { 1 }, t)));
    // The memory bar: weights, workspace and KV cache, together their share of the engine's capacity.
    let m = &a["memory"];
    let widths = page.eval("[...document.querySelectorAll('#memory-bar span')].map(s => parseFloat(s.style.width))");
    let widths: Vec<f64> = widths.as_array().unwrap().iter().map(|w| w.as_f64().unwrap()).collect();
    let used: f64 = ["weights_gib", "workspace_gib", "kv_cache_gib"].iter().map(|k| m[k].as_f64().unwrap()).sum();
    let share = 100.0 * used / m["capacity_gib"].as_f64().unwrap().max(used);
    assert_eq!(widths.len(), 3);
    assert!((widths.iter().sum::<f64>() - share).abs() < 0.01, "{widths:?} vs {share}");
    // Both steps, every operator of each, slowest first.
    let steps = page.eval("[...document.querySelectorAll('#steps details')].map(d => [...d.querySelectorAll('tbody tr')].map(r => r.dataset.op))");
    for (i, kind) in ["prefill_step", "decode_step"].iter().enumerate() {
        let mut ops: Vec<(f64, String)> = a[kind]["operators"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o["total_us"].as_f64().unwrap(), o["name"].as_str().unwrap().to_string()))
            .collect();
        ops.sort_by(|x, y| y.0.total_cmp(&x.0));
        let names: Vec<String> = ops.into_iter().map(|(_, n)| n).collect();
        assert_eq!(steps[i], json!(names), "{kind}");
    }
    // The simulated benchmark's percentiles, as the API's answer gives them (ms, two decimals).
    let sim = &a["simulation"];
    assert!(sim.is_object(), "the default serving answer simulates the benchmark: {a}");
    let mut want_table = vec![json!(["Metric", "mean", "p50", "p90", "p99", "max"])];
    for (k, label) in [("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e_latency", "Request latency")] {
        let mut row = vec![json!(label)];
        for c in ["mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"] {
            row.push(json!(format!("{:.2}", sim[k][c].as_f64().unwrap())));
        }
        want_table.push(json!(row));
    }
    assert_eq!(page.eval("document.getElementById('percentiles-section').hidden"), false);
    let table = page
        .eval("[...document.querySelectorAll('#percentiles-table tr')].map(r => [...r.cells].map(c => c.textContent))");
    assert_eq!(table, json!(want_table));

    // The search: the API's best configurations in its order, one point each, the front marked.
    let hits = want.search_answer["best"].as_array().unwrap();
    let labels: Vec<String> = hits.iter().map(config_label).collect();
    assert_eq!(
        page.eval("[...document.querySelectorAll('#search-table tbody tr')].map(r => r.dataset.config)"),
        json!(labels)
    );
    let per_gpu =
        page.eval("[...document.querySelectorAll('#search-table tbody tr')].map(r => r.cells[5].textContent)");
    let want_per_gpu: Vec<String> = hits
        .iter()
        .map(|h| {
            let v = h["tokens_per_s_per_gpu"].as_f64().unwrap().round() as u64;
            v.to_string()
                .as_bytes()
                .rchunks(3)
                .rev()
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    assert_eq!(per_gpu, json!(want_per_gpu));
    let mut front = pareto_front(hits);
    front.sort();
    let mut marked: Vec<String> = serde_json::from_value(
        page.eval("[...document.querySelectorAll('#pareto circle.on-front')].map(c => c.dataset.config)"),
    )
    .unwrap();
    marked.sort();
    assert_eq!(marked, front, "the chart's front");
    assert_eq!(page.eval("document.querySelectorAll('#pareto circle').length"), hits.len());
    assert!(page
        .eval("document.querySelector('#pareto svg').getAttribute('aria-label')")
        .as_str()
        .unwrap()
        .contains("Pareto"));
    page.assert_no_problems("serve");
    page.screenshot(&out("ui-serve.png"));

    // An answer without the simulation (`workload.simulate: false`) has no percentiles: no table.
    page.eval(
        r#"(() => { const real = window.fetch; window.fetch = async (...args) => {
            const res = await real(...args);
            if (!String(args[0]).endsWith('/v1/predictions/inference')) return res;
            const answer = await res.json();
            delete answer.simulation;
            return new Response(JSON.stringify(answer), { status: 200, headers: { 'Content-Type': 'application/json' } });
        }; return true; })()"#,
    );
    page.eval("(() => { delete document.getElementById('result').dataset.state; return true; })()");
    page.focus("#predict");
    page.press("Enter");
    page.wait_until("document.getElementById('result').dataset.state", "the prediction without a simulation");
    assert_eq!(page.eval("document.getElementById('percentiles-section').hidden"), true);
    page.assert_no_problems("serve without a simulation");
}

/// Operator: the GPU and precision chosen, M retyped with the keyboard; the analytic and learned answers side by
/// side with the learned one's source, as the API answers; then a precision no learned model covers.
fn operator_page(page: &Page, base: &str, want: &Expected) {
    page.open(&format!("{base}/ui/operator"));
    accessible(page, "operator");
    let req = &want.operator;
    let choose = |id: &str, value: &str| {
        let set = page.eval(&format!(
            "(() => {{ const s = document.getElementById('{id}'); s.value = {v}; s.dispatchEvent(new Event('change')); return s.value; }})()",
            v = serde_json::to_string(value).unwrap()
        ));
        assert_eq!(set, json!(value), "{id} has no option {value}");
    };
    choose("gpu", req["gpu"].as_str().unwrap());
    choose("op", "linear");
    choose("dtype", "fp32");
    assert_eq!(
        page.eval("[...document.querySelectorAll('#dims input')].map(i => i.dataset.dim)"),
        json!(["B", "M", "N", "K"])
    );
    page.focus("#dim-M");
    page.retype("2048");
    page.focus("#estimate");
    page.press("Enter");
    page.wait_until("document.getElementById('result').dataset.state", "the operator estimate");
    let a = &want.operator_answer;
    let values = shown_values(page, "#answers");
    assert_eq!(shown(&values, "analytic_us"), a["analytic_us"].as_f64().unwrap());
    assert_eq!(shown(&values, "predicted_us"), a["predicted_us"].as_f64().unwrap());
    assert_eq!(page.eval("document.getElementById('source').textContent"), a["source"]);
    assert_eq!(page.eval("document.querySelectorAll('#compare .row').length"), 2);
    page.assert_no_problems("operator");
    page.screenshot(&out("ui-operator.png"));

    choose("dtype", "bf16");
    page.eval("(() => { delete document.getElementById('result').dataset.state; return true; })()");
    page.focus("#estimate");
    page.press("Enter");
    page.wait_until("document.getElementById('result').dataset.state", "the bf16 estimate");
    let b = &want.operator_bf16_answer;
    let values = shown_values(page, "#answers");
    assert_eq!(shown(&values, "predicted_us"), b["predicted_us"].as_f64().unwrap());
    assert_eq!(page.eval("document.getElementById('source').textContent"), "analytic");
    assert!(page
        .eval("document.getElementById('learned-how').textContent")
        .as_str()
        .unwrap()
        .contains("no learned model"));
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
        // SVG's namespace name (the serve page draws its chart with `createElementNS`) is an identifier, not a load.
        let urls = body.replace("'http://www.w3.org/2000/svg'", "");
        assert!(!urls.contains("http://") && !urls.contains("https://"), "{} loads from elsewhere", asset.path);
        if asset.content_type.starts_with("text/html") {
            let csp = r.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
            assert!(csp.contains("default-src 'self'") && csp.contains("script-src 'self'"), "{csp}");
            assert!(body.contains("<html lang=\"en\">") && body.contains("aria-live"), "{}", asset.path);
        }
        total += body.len();
    }
    assert!(total < 112 * 1024, "the dashboard is {total} bytes");
    let r = app.send_bare(Request::get("/ui").body(Body::empty()).unwrap()).await;
    assert_eq!((r.status.as_u16(), r.headers[header::LOCATION].to_str().unwrap()), (308, "/ui/"));
    let r = app.send_bare(Request::get("/ui/examples.json").body(Body::empty()).unwrap()).await;
    assert_eq!(r.content_type, "application/json");
    let examples = r.json();
    assert_eq!(examples.as_object().unwrap().len(), EXAMPLES.len());
    let want = example_requests().into_iter().find(|(f, _)| f.ends_with(&format!("{DEFAULT_EXAMPLE}.json"))).unwrap().1;
    assert_eq!(examples[DEFAULT_EXAMPLE], want);
    // What the serve and operator forms offer: the catalog, the engines, every operator class with its dims.
    let r = app.send_bare(Request::get("/ui/choices.json").body(Body::empty()).unwrap()).await;
    assert_eq!(r.content_type, "application/json");
    let choices = r.json();
    let models: Vec<&str> = choices["models"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(models, perfcast::llm::serving::catalog::names());
    let llama = choices["models"].as_array().unwrap().iter().find(|m| m["name"] == "Llama-3.1-70B").unwrap();
    // Meta's model card: 70.6 B parameters.
    assert!((llama["params_b"].as_f64().unwrap() - 70.6).abs() < 0.1, "{llama}");
    assert_eq!(choices["engines"], json!(["vllm", "sglang", "trtllm"]));
    let linear = choices["operators"].as_array().unwrap().iter().find(|o| o["op"] == "linear").unwrap();
    assert_eq!(linear["dims"], json!(["B", "M", "N", "K"]));
    assert_eq!(linear["forward_only"], false);
    let decode = choices["operators"].as_array().unwrap().iter().find(|o| o["op"] == "attention_decode").unwrap();
    assert_eq!(
        (decode["dims"].clone(), decode["forward_only"].clone()),
        (json!(["B", "C", "A", "G", "D"]), json!(true))
    );
    assert!(choices["dtypes"].as_array().unwrap().contains(&json!("fp8_block")));
}
