// perfcast dashboard, shared by every page: the API key (sessionStorage), calls to the public API, DOM helpers
// and number formats. Plain JavaScript, no dependencies.
'use strict';

const perfcast = (() => {
  const KEY = 'perfcast.api_key';

  /** The API key the user pasted for this browser tab ('' when none). */
  function apiKey() {
    try { return sessionStorage.getItem(KEY) || ''; } catch (_) { return ''; }
  }

  /** An API error: the HTTP status and the problem's detail (RFC 9457). */
  class ApiError extends Error {
    constructor(status, detail) { super(detail); this.status = status; }
  }

  /** fetch() against the API with the key when one is set; throws ApiError with the problem's detail. */
  async function api(path, options = {}) {
    const headers = new Headers(options.headers || {});
    const key = apiKey();
    if (key) headers.set('Authorization', 'Bearer ' + key);
    const res = await fetch(path, { ...options, headers });
    if (!res.ok) {
      let detail = res.status + ' ' + res.statusText;
      try { const p = await res.json(); detail = p.detail || p.title || detail; } catch (_) { /* not a problem */ }
      if (res.status === 401) detail += ' — paste an API key under “API key”.';
      throw new ApiError(res.status, detail);
    }
    return res;
  }

  /** POSTs `body` as JSON. */
  function postJson(path, body) {
    return api(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  }

  /** A new element: attributes (`text` sets textContent, `class` the class) and children (nodes or strings). */
  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') node.textContent = v;
      else if (k === 'class') node.className = v;
      else node.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) node.append(c);
    return node;
  }

  /** Shows `message` in the live status region `node` (an error in bold red). */
  function status(node, message, isError = false) {
    node.textContent = message;
    node.classList.toggle('error', isError);
  }

  const fmt = {
    count: (n, one, many) => n + ' ' + (n === 1 ? one : many),
    ms: s => (s * 1e3).toFixed(1) + ' ms',
    pct: f => (f * 100).toFixed(1) + ' %',
    gib: g => g.toFixed(1) + ' GiB',
    int: n => Math.round(n).toLocaleString('en-US'),
    bytes: b => b >= 1048576 ? (b / 1048576).toFixed(1) + ' MiB' : b >= 1024 ? (b / 1024).toFixed(1) + ' KiB' : b + ' B',
  };

  // The API key form in the header of every page.
  function wireKeyForm() {
    const form = document.getElementById('key-form');
    if (!form) return;
    const input = document.getElementById('api-key');
    const state = document.getElementById('key-state');
    const show = () => { state.textContent = apiKey() ? 'A key is set for this tab.' : 'No key set: reads are open unless the server requires one.'; };
    form.addEventListener('submit', e => {
      e.preventDefault();
      try { sessionStorage.setItem(KEY, input.value.trim()); } catch (_) { /* storage disabled */ }
      input.value = '';
      show();
    });
    document.getElementById('key-clear').addEventListener('click', () => {
      try { sessionStorage.removeItem(KEY); } catch (_) { /* storage disabled */ }
      show();
    });
    show();
  }
  document.addEventListener('DOMContentLoaded', wireKeyForm);

  return { api, postJson, el, status, fmt, ApiError, apiKey };
})();
