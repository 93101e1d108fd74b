// The serve page: a form → POST /v1/predictions/inference (latencies, throughput, memory and KV cache, the two
// engine steps' operators) and POST /v1/predictions/inference/search (the best configurations for a TTFT/TPOT
// target, and their Pareto chart of output tokens/s per GPU against tokens/s per user).
'use strict';

(() => {
  const { api, postJson, el, status, fmt } = perfcast;
  const $ = id => document.getElementById(id);
  const num = id => Number($(id).value);
  const ms = v => v.toFixed(v < 10 ? 2 : 1) + ' ms';
  const MEMORY_PARTS = [['weights_gib', 'Weights'], ['workspace_gib', 'Activation workspace'], ['kv_cache_gib', 'KV cache']];

  /** The prediction's and the search's request bodies from the form. */
  function requests() {
    const common = { system: $('system').value, model: $('model').value, engine: $('engine').value };
    const workload = { input_tokens: num('input_tokens'), output_tokens: num('output_tokens') };
    const slo = {};
    if ($('ttft_ms').value !== '') slo.ttft_ms = num('ttft_ms');
    if ($('tpot_ms').value !== '') slo.tpot_ms = num('tpot_ms');
    return [
      { ...common, parallelism: { tp: num('tp'), pp: num('pp') }, precision: $('precision').value,
        workload: { ...workload, concurrency: num('concurrency') } },
      { ...common, gpus: num('gpus'), workload, slo, top_k: num('top_k') },
    ];
  }

  function number(field, label, value, text, extraClass) {
    return el('div', {}, el('dt', { text: label }),
      el('dd', { 'data-field': field, 'data-value': String(value), class: extraClass, text }));
  }

  function showNumbers(p) {
    const t = p.throughput, m = p.memory;
    $('numbers').replaceChildren(
      number('ttft_ms', 'TTFT', p.ttft_ms, ms(p.ttft_ms)),
      number('tpot_ms', 'TPOT', p.tpot_ms, ms(p.tpot_ms)),
      number('request_latency_ms', 'Request latency', p.request_latency_ms, ms(p.request_latency_ms)),
      number('per_gpu', 'Output tokens/s per GPU', t.per_gpu, fmt.int(t.per_gpu)),
      number('per_user', 'Tokens/s per user', t.per_user, t.per_user.toFixed(1)),
      number('output_tokens_per_s', 'Output tokens/s', t.output_tokens_per_s, fmt.int(t.output_tokens_per_s)),
      number('kv_capacity_tokens', 'KV-cache capacity', m.kv_capacity_tokens, fmt.int(m.kv_capacity_tokens) + ' tokens'),
      number('max_concurrency', 'Max concurrency', m.max_concurrency, fmt.int(m.max_concurrency) + ' requests'),
      number('fits', 'Fits in memory', m.fits, m.fits ? 'yes' : 'no', m.fits ? 'fits-yes' : 'fits-no'),
    );
    $('numbers').hidden = false;
    const i = p.interval;
    const band = b => b.p10.toFixed(1) + '–' + b.p90.toFixed(1) + ' ms';
    $('interval').textContent = i ? '10–90 % intervals (' + i.class + ', ' + fmt.int(i.rows) + ' held-out rows): TTFT ' +
      band(i.ttft_ms) + ', TPOT ' + band(i.tpot_ms) + ', request latency ' + band(i.request_latency_ms) + '.' : '';
    $('interval').hidden = !i;
  }

  /** The simulated benchmark's latency distributions (`simulation.{ttft,tpot,itl,e2e_latency}`, each with
   *  `mean_ms`, `p50_ms`, `p90_ms`, `p99_ms`, `max_ms` — `vllm bench serve`'s statistics), when the answer has them
   *  (absent when the request sets `workload.simulate: false`). */
  const LATENCY_METRICS = [['ttft', 'TTFT'], ['tpot', 'TPOT'], ['itl', 'ITL'], ['e2e_latency', 'Request latency']];
  const LATENCY_COLUMNS = [['mean_ms', 'mean'], ['p50_ms', 'p50'], ['p90_ms', 'p90'], ['p99_ms', 'p99'], ['max_ms', 'max']];

  function showPercentiles(p) {
    const sim = p.simulation;
    const rows = sim ? LATENCY_METRICS.filter(([k]) => sim[k] && typeof sim[k].p50_ms === 'number') : [];
    $('percentiles-section').hidden = rows.length === 0;
    if (!rows.length) return;
    $('percentiles-note').textContent = 'Over ' + fmt.int(sim.completed) + ' of ' + fmt.int(sim.requests) +
      ' simulated requests (ITL over tokens), ms.';
    const t = $('percentiles-table');
    t.tHead.replaceChildren(el('tr', {}, el('th', { scope: 'col', text: 'Metric' }),
      ...LATENCY_COLUMNS.map(([, label]) => el('th', { scope: 'col', class: 'num', text: label }))));
    t.tBodies[0].replaceChildren(...rows.map(([k, label]) => el('tr', { 'data-metric': k },
      el('th', { scope: 'row', text: label }),
      ...LATENCY_COLUMNS.map(([c]) => el('td', { class: 'num', 'data-field': c, text: sim[k][c].toFixed(2) })))));
  }

  function showMemory(m) {
    const used = MEMORY_PARTS.reduce((s, [k]) => s + m[k], 0);
    const scale = Math.max(m.capacity_gib, used);
    const bar = $('memory-bar');
    bar.replaceChildren(...MEMORY_PARTS.map(([k, label], i) => {
      const seg = el('span', { class: 'c' + i, title: label + ': ' + fmt.gib(m[k]) });
      seg.style.width = (100 * m[k] / scale).toFixed(3) + '%';
      return seg;
    }));
    bar.setAttribute('aria-label', 'Memory per GPU: ' + MEMORY_PARTS.map(([k, l]) => l.toLowerCase() + ' ' +
      fmt.gib(m[k])).join(', ') + ' of ' + fmt.gib(m.capacity_gib) + '; the KV cache holds ' +
      fmt.int(m.kv_capacity_tokens) + ' tokens');
    const row = (label, field, text, swatch) => el('tr', {},
      el('th', { scope: 'row' }, swatch === undefined ? '' : el('span', { class: 'swatch c' + swatch, 'aria-hidden': 'true' }), label),
      el('td', { class: 'num', 'data-field': field, text }));
    $('memory-table').tBodies[0].replaceChildren(
      ...MEMORY_PARTS.map(([k, label], i) => row(label, k, m[k].toFixed(2), i)),
      row('Capacity (engine share of the GPU)', 'capacity_gib', m.capacity_gib.toFixed(2)),
      row('KV cache per token (all GPUs of the instance), KiB', 'kv_bytes_per_token', (m.kv_bytes_per_token / 1024).toFixed(1)),
      row('KV-cache blocks of ' + m.block_tokens + ' tokens', 'kv_blocks', fmt.int(m.kv_capacity_tokens / m.block_tokens)));
    $('memory-section').hidden = false;
  }

  /** One engine step: its time split and its operators by time per step, each with its share and source. */
  function step(title, s) {
    const gpu = s.operators.reduce((a, o) => a + o.total_us, 0);
    const ops = [...s.operators].sort((a, b) => b.total_us - a.total_us);
    const rows = ops.map(o => {
      const share = gpu > 0 ? o.total_us / gpu : 0;
      const meter = el('span', { class: 'meter', 'aria-hidden': 'true' });
      meter.style.width = (100 * share).toFixed(1) + '%';
      return el('tr', { 'data-op': o.name },
        el('th', { scope: 'row', text: o.name }), el('td', { class: 'num', text: o.calls_per_step.toFixed(2) }),
        el('td', { class: 'num', text: o.time_us.toFixed(1) }), el('td', { class: 'num', text: o.total_us.toFixed(1) }),
        el('td', { class: 'share' }, meter, fmt.pct(share)), el('td', { class: 'source', text: o.source }));
    });
    const what = [s.prefill_tokens ? fmt.int(s.prefill_tokens) + ' prompt tokens' : '',
      s.decode_seqs ? s.decode_seqs + ' decodes at ' + fmt.int(s.decode_context) + ' tokens of context' : '']
      .filter(Boolean).join(' and ');
    return el('details', { class: 'step', open: true },
      el('summary', { text: title + ': ' + ms(s.time_ms) + ' (GPU ' + ms(s.gpu_ms) + ', launches ' + ms(s.launch_ms) +
        ', host ' + ms(s.overhead_ms) + (s.cuda_graph ? ', CUDA graph' : '') + ') — ' + what }),
      el('table', {},
        el('caption', { text: 'Operators of the slowest pipeline stage, per micro-batch' }),
        el('thead', {}, el('tr', {}, ...['Operator', 'Calls', 'µs per call', 'µs per step', 'Share of GPU time', 'Source']
          .map((h, i) => el('th', { scope: 'col', class: i && i < 4 ? 'num' : undefined, text: h })))),
        el('tbody', {}, ...rows)));
  }

  function showSteps(p) {
    const b = p.batch;
    $('steps-summary').textContent = 'Steady batch: ' + b.running.toFixed(1) + ' requests running (' +
      b.decoding.toFixed(1) + ' decoding, ' + b.queued.toFixed(1) + ' queued); ' + fmt.pct(b.mixed_step_fraction) +
      ' of the steps carry prefill. Sources: ' + p.sources.join(', ') + '.';
    $('steps').replaceChildren(step('Prefill step', p.prefill_step), step('Decode step', p.decode_step));
    $('steps-section').hidden = false;
  }

  const label = h => 'tp' + h.tp + ' pp' + h.pp + (h.ep > 1 ? ' ep' + h.ep : '') + (h.dp_attention ? ' dp-attention' : '') +
    ' ' + h.precision;
  const perUser = h => h.prediction.throughput.per_user;

  /** The hits no other hit beats on both tokens/s per GPU and tokens/s per user. */
  function front(hits) {
    const onFront = new Set();
    let best = -Infinity;
    for (const h of [...hits].sort((a, b) => perUser(b) - perUser(a) || b.tokens_per_s_per_gpu - a.tokens_per_s_per_gpu)) {
      if (h.tokens_per_s_per_gpu > best) { onFront.add(h); best = h.tokens_per_s_per_gpu; }
    }
    return onFront;
  }

  /** 0 and round steps (1, 2 or 5 × 10^n) up to at least `max`. */
  function ticks(max) {
    const raw = max / 5, p = 10 ** Math.floor(Math.log10(raw || 1));
    const stepSize = [1, 2, 5, 10].map(f => f * p).find(s => s >= raw);
    const out = [];
    for (let v = 0; v < max + stepSize; v += stepSize) out.push(v);
    return out;
  }

  /** The Pareto chart: output tokens/s per GPU (y) against tokens/s per user (x), the front joined by a line. */
  function chart(hits, onFront) {
    const NS = 'http://www.w3.org/2000/svg';
    const svg = (tag, attrs = {}, text) => {
      const n = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
      if (text !== undefined) n.textContent = text;
      return n;
    };
    const W = 720, H = 380, L = 70, R = 20, T = 20, B = 50;
    const xs = ticks(Math.max(...hits.map(perUser))), ys = ticks(Math.max(...hits.map(h => h.tokens_per_s_per_gpu)));
    const x = v => L + (W - L - R) * v / xs[xs.length - 1], y = v => H - B - (H - T - B) * v / ys[ys.length - 1];
    const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', class: 'pareto' });
    for (const v of xs) {
      root.append(svg('line', { x1: x(v), x2: x(v), y1: T, y2: H - B, class: 'grid' }),
        svg('text', { x: x(v), y: H - B + 16, 'text-anchor': 'middle' }, fmt.int(v)));
    }
    for (const v of ys) {
      root.append(svg('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }),
        svg('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, fmt.int(v)));
    }
    root.append(svg('text', { x: (L + W - R) / 2, y: H - 8, 'text-anchor': 'middle', class: 'axis' }, 'tokens/s per user'),
      svg('text', { x: 14, y: (T + H - B) / 2, 'text-anchor': 'middle', class: 'axis',
        transform: `rotate(-90 14 ${(T + H - B) / 2})` }, 'output tokens/s per GPU'));
    const line = [...onFront].sort((a, b) => perUser(a) - perUser(b)).map(h => x(perUser(h)) + ',' + y(h.tokens_per_s_per_gpu));
    root.append(svg('polyline', { points: line.join(' '), class: 'front' }));
    for (const h of hits) {
      const c = svg('circle', { cx: x(perUser(h)), cy: y(h.tokens_per_s_per_gpu), r: 5,
        class: onFront.has(h) ? 'point on-front' : 'point', 'data-config': label(h) });
      c.append(svg('title', {}, label(h) + ', concurrency ' + h.concurrency + ': ' + fmt.int(h.tokens_per_s_per_gpu) +
        ' tokens/s per GPU, ' + perUser(h).toFixed(1) + ' tokens/s per user'));
      root.append(c);
      if (onFront.has(h)) root.append(svg('text', { x: x(perUser(h)) + 8, y: y(h.tokens_per_s_per_gpu) - 8, class: 'tag' }, label(h)));
    }
    root.setAttribute('aria-label', 'Pareto chart of ' + hits.length + ' configurations: output tokens/s per GPU ' +
      'against tokens/s per user; on the front: ' + [...onFront].map(label).join('; '));
    return root;
  }

  function showSearch(r) {
    const hits = r.best;
    $('search-summary').textContent = fmt.int(r.evaluated) + ' (configuration, concurrency) pairs evaluated in ' +
      r.elapsed_ms.toFixed(0) + ' ms; ' + fmt.int(r.feasible) + ' configurations meet the target' +
      (hits.length ? '; the best ' + hits.length + ' by tokens/s per GPU:' : '.');
    const onFront = front(hits);
    $('pareto').replaceChildren(...(hits.length ? [chart(hits, onFront)] : []));
    $('search-table').tBodies[0].replaceChildren(...hits.map(h => el('tr', { 'data-config': label(h) },
      el('th', { scope: 'row', text: (onFront.has(h) ? '★ ' : '') + label(h) }),
      ...[h.concurrency, h.replicas, h.ttft_ms.toFixed(1), h.tpot_ms.toFixed(2), fmt.int(h.tokens_per_s_per_gpu),
        perUser(h).toFixed(1)].map(v => el('td', { class: 'num', text: String(v) })))));
    $('search-table').hidden = hits.length === 0;
    $('search-section').hidden = false;
  }

  async function submit(e) {
    e.preventDefault();
    const [predictReq, searchReq] = requests();
    const button = $('predict');
    button.disabled = true;
    status($('status'), 'Predicting and searching…');
    const [p, s] = await Promise.allSettled([
      postJson('/v1/predictions/inference', predictReq).then(r => r.json()),
      postJson('/v1/predictions/inference/search', searchReq).then(r => r.json()),
    ]);
    button.disabled = false;
    if (p.status === 'rejected') {
      status($('status'), 'The prediction failed: ' + p.reason.message, true);
      $('result').dataset.state = 'failed';
      return;
    }
    const a = p.value;
    showNumbers(a);
    showPercentiles(a);
    showMemory(a.memory);
    showSteps(a);
    if (s.status === 'fulfilled') showSearch(s.value);
    else { $('search-section').hidden = false; $('search-summary').textContent = 'The search failed: ' + s.reason.message;
      $('pareto').replaceChildren(); $('search-table').hidden = true; }
    const warnings = [...a.warnings, ...(s.status === 'fulfilled' ? s.value.warnings : [])];
    $('warnings').replaceChildren(...warnings.map(w => el('li', { text: w })));
    $('warnings-section').hidden = warnings.length === 0;
    status($('status'), a.model.name + ' on ' + a.config.tp * a.config.pp + ' × ' + a.gpu + ' with ' + predictReq.engine +
      ': TTFT ' + ms(a.ttft_ms) + ', TPOT ' + ms(a.tpot_ms) + ', ' + fmt.int(a.throughput.per_gpu) + ' output tokens/s per GPU.');
    $('result').dataset.state = 'done';
  }

  function fill(select, values, preferred) {
    select.replaceChildren(...values.map(([value, text]) => el('option', { value, text })));
    if (values.some(([v]) => v === preferred)) select.value = preferred;
  }

  async function init() {
    $('serve-form').addEventListener('submit', submit);
    try {
      const [choices, systems] = await Promise.all([api('/ui/choices.json').then(r => r.json()),
        api('/v1/systems').then(r => r.json())]);
      fill($('model'), choices.models.map(m => [m.name, m.name + ' (' + m.params_b.toFixed(1) + ' B' + (m.moe ? ', MoE' : '') + ')']), 'Llama-3.1-70B');
      fill($('system'), systems.map(s => [s.name, s.name + ' — ' + fmt.int(s.total_gpus) + ' × ' + s.gpu_spec.name]), 'dgx-h100');
      fill($('engine'), choices.engines.map(e => [e, e]), 'vllm');
      fill($('precision'), choices.serving_precisions.map(p => [p, p]), 'bf16');
    } catch (err) {
      status($('status'), 'Cannot load the choices: ' + err.message, true);
      return;
    }
    document.body.dataset.ready = 'true';
  }

  document.addEventListener('DOMContentLoaded', init);
})();
