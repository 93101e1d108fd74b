// The predict page: an example request in an editable form → POST /v1/predictions/training (key numbers, memory
// bar) and POST /v1/predictions/training/timeline?format=svg (the timeline, inline SVG).
'use strict';

(() => {
  const { api, postJson, el, status, fmt } = perfcast;
  const DEFAULT_EXAMPLE = 'perlmutter-a100-40g/gpt-20b_pp4-tp4-dp8';
  const MEMORY_PARTS = [
    ['weights_gib', 'Weights'], ['gradients_gib', 'Gradients'], ['optimizer_gib', 'Optimizer states'],
    ['activations_gib', 'Activations'], ['allowance_gib', 'Context, workspaces, fragmentation'],
  ];
  let examples = {};

  const $ = id => document.getElementById(id);

  /** The request in the text area, or null (with the reason in the status) when it is not a JSON object. */
  function readRequest() {
    try {
      const v = JSON.parse($('request').value);
      if (v && typeof v === 'object' && !Array.isArray(v)) return v;
      status($('status'), 'The request must be a JSON object.', true);
    } catch (e) {
      status($('status'), 'The request is not valid JSON: ' + e.message, true);
    }
    return null;
  }

  function writeRequest(req) {
    $('request').value = JSON.stringify(req, null, 2);
    for (const input of document.querySelectorAll('input[data-key]')) {
      const v = req.parallelism && req.parallelism[input.dataset.key];
      input.value = v === undefined ? '' : v;
    }
  }

  /** A parallelism field changed: write it into the JSON request. */
  function fieldChanged(e) {
    const req = readRequest();
    if (!req) return;
    req.parallelism = req.parallelism || {};
    const n = Number(e.target.value);
    if (e.target.value === '') delete req.parallelism[e.target.dataset.key];
    else req.parallelism[e.target.dataset.key] = Number.isInteger(n) ? n : e.target.value;
    $('request').value = JSON.stringify(req, null, 2);
  }

  function number(field, label, value, text, extraClass) {
    return el('div', {}, el('dt', { text: label }),
      el('dd', { 'data-field': field, 'data-value': String(value), class: extraClass, text }));
  }

  function showNumbers(p) {
    const m = p.memory;
    const dl = $('numbers');
    dl.replaceChildren(
      number('iteration_time_s', 'Iteration time', p.iteration_time_s, fmt.ms(p.iteration_time_s)),
      number('mfu', 'MFU', p.throughput.mfu, fmt.pct(p.throughput.mfu)),
      number('tokens_per_s', 'Tokens per second', p.throughput.tokens_per_s, fmt.int(p.throughput.tokens_per_s)),
      number('model_tflops_per_gpu', 'Model TFLOP/s per GPU', p.throughput.model_tflops_per_gpu,
        p.throughput.model_tflops_per_gpu.toFixed(1)),
      number('memory_total_gib', 'Memory per GPU', m.total_gib, fmt.gib(m.total_gib) + ' of ' + fmt.gib(m.capacity_gib)),
      number('memory_fits', 'Fits in memory', m.fits, m.fits ? 'yes' : 'no', m.fits ? 'fits-yes' : 'fits-no'),
      number('bubble_fraction', 'Pipeline bubble', p.bubble_fraction, fmt.pct(p.bubble_fraction)),
      number('gpus', 'GPUs', p.config.gpus, fmt.int(p.config.gpus) + ' × ' + p.gpu),
    );
    dl.hidden = false;
  }

  function showMemory(m) {
    const scale = Math.max(m.capacity_gib, m.total_gib);
    const bar = $('memory-bar');
    bar.replaceChildren(...MEMORY_PARTS.map(([k, label], i) => {
      const seg = el('span', { class: 'c' + i, title: label + ': ' + fmt.gib(m[k]) });
      seg.style.width = (100 * m[k] / scale).toFixed(3) + '%';
      return seg;
    }));
    const rows = MEMORY_PARTS.map(([k, label], i) =>
      el('tr', {}, el('th', { scope: 'row' }, el('span', { class: 'swatch c' + i, 'aria-hidden': 'true' }), label),
        el('td', { class: 'num', 'data-field': k, text: m[k].toFixed(2) })));
    bar.setAttribute('aria-label', 'Memory per GPU of stage ' + m.stage + ': ' + fmt.gib(m.total_gib) + ' of ' +
      fmt.gib(m.capacity_gib) + (m.fits ? ' (fits)' : ' (does not fit)') + '; ' +
      MEMORY_PARTS.map(([k, label]) => label.toLowerCase() + ' ' + fmt.gib(m[k])).join(', '));
    rows.push(el('tr', {}, el('th', { scope: 'row', text: 'Total (capacity ' + fmt.gib(m.capacity_gib) + ')' }),
      el('td', { class: 'num', 'data-field': 'total_gib', text: m.total_gib.toFixed(2) })));
    $('memory-table').tBodies[0].replaceChildren(...rows);
    $('memory-section').hidden = false;
  }

  function showTimeline(svgText) {
    const doc = new DOMParser().parseFromString(svgText, 'image/svg+xml');
    const svg = doc.documentElement;
    if (svg.nodeName !== 'svg') throw new Error('the timeline is not an SVG document');
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', 'Gantt chart of the predicted iteration: one row per pipeline stage and stream, time in ms');
    $('timeline').replaceChildren(document.importNode(svg, true));
    $('timeline-section').hidden = false;
  }

  async function predict(e) {
    e.preventDefault();
    const req = readRequest();
    if (!req) return;
    const button = $('predict');
    button.disabled = true;
    status($('status'), 'Predicting…');
    try {
      const [answer, timeline] = await Promise.all([
        postJson('/v1/predictions/training', req).then(r => r.json()),
        postJson('/v1/predictions/training/timeline?format=svg', req).then(r => r.text()),
      ]);
      showNumbers(answer);
      showMemory(answer.memory);
      showTimeline(timeline);
      const warnings = answer.warnings || [];
      $('warnings').replaceChildren(...warnings.map(w => el('li', { text: w })));
      $('warnings-section').hidden = warnings.length === 0;
      status($('status'), 'Predicted ' + answer.config.gpus + ' GPUs on ' + answer.system + ': ' +
        fmt.ms(answer.iteration_time_s) + ' per iteration, MFU ' + fmt.pct(answer.throughput.mfu) + '.');
      $('result').dataset.state = 'done';
    } catch (err) {
      status($('status'), 'The prediction failed: ' + err.message, true);
      $('result').dataset.state = 'failed';
    } finally {
      button.disabled = false;
    }
  }

  async function downloadTrace() {
    const req = readRequest();
    if (!req) return;
    try {
      const blob = await (await postJson('/v1/predictions/training/timeline?format=chrome', req)).blob();
      const a = el('a', { href: URL.createObjectURL(blob), download: 'perfcast-trace.json' });
      document.body.append(a);
      a.click();
      a.remove();
      status($('status'), 'Trace downloaded: open it in ui.perfetto.dev (Open trace file) or chrome://tracing.');
    } catch (err) {
      status($('status'), 'The trace failed: ' + err.message, true);
    }
  }

  async function init() {
    $('predict-form').addEventListener('submit', predict);
    $('trace').addEventListener('click', downloadTrace);
    for (const input of document.querySelectorAll('input[data-key]')) input.addEventListener('change', fieldChanged);
    const select = $('example');
    select.addEventListener('change', () => writeRequest(examples[select.value]));
    try {
      examples = await (await api('/ui/examples.json')).json();
    } catch (err) {
      status($('status'), 'Cannot load the examples: ' + err.message, true);
      return;
    }
    for (const name of Object.keys(examples)) select.append(el('option', { value: name, text: name }));
    select.value = DEFAULT_EXAMPLE in examples ? DEFAULT_EXAMPLE : Object.keys(examples)[0];
    writeRequest(examples[select.value]);
    document.body.dataset.ready = 'true';
  }

  document.addEventListener('DOMContentLoaded', init);
})();
