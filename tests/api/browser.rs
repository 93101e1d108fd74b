//! A headless Chromium for the dashboard tests (the `headless_chrome` crate over the DevTools protocol): finds the
//! browser, opens a tab that records page errors and CSP violations, evaluates JavaScript, waits for conditions
//! with a deadline and a clear message, and saves full-page screenshots.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use headless_chrome::browser::tab::ModifierKey;
use headless_chrome::protocol::cdp::Page as Cdp;
use headless_chrome::{Browser, LaunchOptions, Tab};
use serde_json::Value;

/// How long a page gets to reach a state the test waits for (the suite shares two cores with LightGBM fits).
pub const WAIT: Duration = Duration::from_secs(60);

/// Records uncaught errors, failed resource loads, unhandled rejections and CSP violations of every page the tab
/// opens in `window.__problems` (installed before the page's own scripts run).
const RECORD_PROBLEMS: &str = r#"
window.__problems = [];
addEventListener('error', e => window.__problems.push('error: ' + (e.message || (e.target && (e.target.src || e.target.href)) || e.type)), true);
addEventListener('unhandledrejection', e => window.__problems.push('unhandled rejection: ' + e.reason));
document.addEventListener('securitypolicyviolation', e => window.__problems.push('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI));
"#;

/// The browser binary: `$PERFCAST_CHROMIUM`, else `chromium` or `chromium-browser` on the `PATH`.
pub fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("PERFCAST_CHROMIUM") {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "PERFCAST_CHROMIUM={} is not a file", p.display());
        return p;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "no Chromium for the dashboard's browser test: install Debian's `chromium` package (scripts/test does: \
         apt-get install --no-install-recommends chromium) or set PERFCAST_CHROMIUM to a Chromium/Chrome binary"
    );
}

/// A headless Chromium and one tab.
pub struct Page {
    _browser: Browser,
    pub tab: Arc<Tab>,
}

impl Page {
    /// Starts the browser (no sandbox: CI runs as root) with a `width` × `height` window.
    pub fn launch(width: u32, height: u32) -> Page {
        let path = chromium();
        let args: Vec<&OsStr> =
            ["--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage", "--no-first-run"]
                .iter()
                .map(OsStr::new)
                .collect();
        let options = LaunchOptions::default_builder()
            .path(Some(path.clone()))
            .headless(true)
            .sandbox(false)
            .window_size(Some((width, height)))
            .args(args)
            .idle_browser_timeout(Duration::from_secs(300))
            .build()
            .unwrap();
        let browser =
            Browser::new(options).unwrap_or_else(|e| panic!("cannot start {} headless: {e:#}", path.display()));
        let tab = browser.new_tab().unwrap_or_else(|e| panic!("cannot open a tab: {e:#}"));
        tab.set_default_timeout(WAIT);
        tab.call_method(Cdp::AddScriptToEvaluateOnNewDocument {
            source: RECORD_PROBLEMS.to_string(),
            world_name: None,
            include_command_line_api: None,
            run_immediately: None,
        })
        .unwrap();
        Page { _browser: browser, tab }
    }

    /// Loads `url` and waits until the page says it is ready (`<body data-ready="true">`, set by its script once
    /// its first API calls are answered).
    pub fn open(&self, url: &str) {
        self.tab.navigate_to(url).unwrap_or_else(|e| panic!("cannot load {url}: {e:#}"));
        self.tab.wait_until_navigated().unwrap_or_else(|e| panic!("{url} did not finish loading: {e:#}"));
        self.wait_until("document.body && document.body.dataset.ready === 'true'", &format!("{url} to be ready"));
    }

    /// The JSON value of the JavaScript expression `js` (awaited when it is a promise).
    pub fn eval(&self, js: &str) -> Value {
        let r = self
            .tab
            .evaluate(&format!("(async () => JSON.stringify(await ({js})))()"), true)
            .unwrap_or_else(|e| panic!("evaluating {js}: {e:#}"));
        match r.value {
            Some(Value::String(s)) => serde_json::from_str(&s).unwrap(),
            _ => Value::Null,
        }
    }

    /// Waits until `condition` (JavaScript) is true; panics after [`WAIT`] naming `what` and the page's status line.
    pub fn wait_until(&self, condition: &str, what: &str) {
        let start = Instant::now();
        loop {
            if self.eval(&format!("(() => {{ try {{ return !!({condition}); }} catch (_) {{ return false; }} }})()"))
                == Value::Bool(true)
            {
                return;
            }
            if start.elapsed() > WAIT {
                let status = self.eval("document.getElementById('status')?.textContent ?? '(no status line)'");
                panic!("waited {} s for {what}; the page's status says: {status}", WAIT.as_secs());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The problems the page recorded (see [`RECORD_PROBLEMS`]); asserts there are none.
    pub fn assert_no_problems(&self, page: &str) {
        let problems = self.eval("window.__problems");
        assert_eq!(problems, serde_json::json!([]), "{page} reported problems");
    }

    /// Focuses the element `selector` (as Tab would).
    pub fn focus(&self, selector: &str) {
        let found = self.eval(&format!(
            "(() => {{ const e = document.querySelector({}); if (e) e.focus(); return !!e && document.activeElement === e; }})()",
            serde_json::to_string(selector).unwrap()
        ));
        assert_eq!(found, Value::Bool(true), "cannot focus {selector}");
    }

    /// Replaces the focused field's text by typing `text` (Ctrl+A, then the keys).
    pub fn retype(&self, text: &str) {
        self.tab.press_key_with_modifiers("a", Some(&[ModifierKey::Ctrl])).unwrap();
        self.tab.press_key("Backspace").unwrap();
        self.tab.type_str(text).unwrap();
    }

    /// Replaces the focused field's text by pasting `text` (Ctrl+A, then one text insertion, as a paste does).
    pub fn repaste(&self, text: &str) {
        self.tab.press_key_with_modifiers("a", Some(&[ModifierKey::Ctrl])).unwrap();
        self.tab.press_key("Backspace").unwrap();
        self.tab.send_character(text).unwrap();
    }

    /// Presses `key` (e.g. `Enter`, `Tab`).
    pub fn press(&self, key: &str) {
        self.tab.press_key(key).unwrap();
    }

    /// Saves a PNG of the whole page (beyond the window) to `path`.
    pub fn screenshot(&self, path: &Path) {
        let size = self.eval("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]");
        let (w, h) = (size[0].as_f64().unwrap(), size[1].as_f64().unwrap());
        let shot = self
            .tab
            .call_method(Cdp::CaptureScreenshot {
                format: Some(Cdp::CaptureScreenshotFormatOption::Png),
                quality: None,
                clip: Some(Cdp::Viewport { x: 0.0, y: 0.0, width: w, height: h, scale: 1.0 }),
                from_surface: Some(true),
                capture_beyond_viewport: Some(true),
                optimize_for_speed: None,
            })
            .unwrap_or_else(|e| panic!("screenshot: {e:#}"));
        let png = base64::engine::general_purpose::STANDARD.decode(shot.data).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}
