// The operator page: a GPU, an operator class, its phase, precision and dims → POST /v1/estimates/operator; the
// analytic (roofline) and learned answers side by side, with the learned answer's source.
'use strict';

(() => {
  const { api, postJson, el, status, fmt } = perfcast;
  const $ = id => document.getElementById(id);
  const us = v => (v >= 1000 ? (v / 1000).toFixed(3) + ' ms' : v.toFixed(2) + ' µs');
  // A starting shape per dim name (a 4096-wide layer at 1k tokens, 32 heads of 128, …), editable.
  const DEFAULT_DIMS = { B: 1, M: 4096, N: 4096, K: 4096, H: 4096, I: 2, L: 1024, A: 32, D: 128, G: 8, C: 2048,
    T: 4096, V: 128256, F: 14336, E: 8, P: 1000000 };
  let operators = [];

  function showDims() {
    const o = operators.find(x => x.op === $('op').value);
    const before = Object.fromEntries([...document.querySelectorAll('#dims input')].map(i => [i.dataset.dim, i.value]));
    $('dims').replaceChildren(...o.dims.map(d => el('div', {}, el('label', { for: 'dim-' + d, text: d }),
      el('input', { id: 'dim-' + d, 'data-dim': d, type: 'number', min: 1, step: 1, required: true,
        value: before[d] || DEFAULT_DIMS[d] || 1 }))));
    $('dims-help').textContent = o.op + ' takes ' + o.dims.join(', ') + (o.forward_only ? ' (forward only: a serving operator).' : '.');
    $('phase').disabled = o.forward_only;
    if (o.forward_only) $('phase').value = 'fwd';
  }

  function request() {
    const dims = Object.fromEntries([...document.querySelectorAll('#dims input')].map(i => [i.dataset.dim, Number(i.value)]));
    return { gpu: $('gpu').value, op: $('op').value, phase: $('phase').value, dtype: $('dtype').value, dims };
  }

  function show(e) {
    const a = e.analytic, learned = e.source !== 'analytic';
    document.querySelector('[data-field="analytic_us"]').textContent = us(e.analytic_us);
    document.querySelector('[data-field="predicted_us"]').textContent = us(e.predicted_us);
    document.querySelector('[data-field="analytic_us"]').dataset.value = String(e.analytic_us);
    document.querySelector('[data-field="predicted_us"]').dataset.value = String(e.predicted_us);
    $('analytic-how').textContent = a.bound + '-bound: ' + (a.flops / 1e9).toFixed(2) + ' GFLOP, ' +
      fmt.bytes(a.bytes) + ', ' + a.kernels + (a.kernels === 1 ? ' kernel.' : ' kernels.');
    $('learned-how').replaceChildren('Source: ', el('code', { id: 'source', text: e.source }), learned
      ? ' — the analytic time × ' + (e.predicted_us / e.analytic_us).toFixed(3) + ' (the model’s learned correction).'
      : ' — no learned model covers this operator, precision and GPU: the answer is the analytic one.');
    $('answers').hidden = false;
    // Two bars on one scale.
    const max = Math.max(e.analytic_us, e.predicted_us);
    const bar = (cls, label, v) => {
      const b = el('span', { class: 'fill ' + cls });
      b.style.width = (100 * v / max).toFixed(2) + '%';
      return el('div', { class: 'row' }, el('span', { class: 'name', text: label }), el('span', { class: 'track' }, b),
        el('span', { class: 'num', text: us(v) }));
    };
    $('compare').replaceChildren(bar('c0', 'Analytic', e.analytic_us), bar('c1', 'Learned', e.predicted_us));
    $('compare').setAttribute('aria-label', 'Analytic ' + us(e.analytic_us) + ', learned ' + us(e.predicted_us));
    $('compare').hidden = false;
    const rows = [['Time, µs', a.time_us.toFixed(3)], ['Compute terms, µs', a.compute_us.toFixed(3)],
      ['Memory terms, µs', a.memory_us.toFixed(3)], ['Launch overhead, µs', a.launch_us.toFixed(3)],
      ['FLOPs', fmt.int(a.flops)], ['DRAM bytes', fmt.int(a.bytes)],
      ['Arithmetic intensity, FLOP/byte', a.bytes > 0 ? (a.flops / a.bytes).toFixed(1) : '—'],
      ['Peak used, TFLOP/s', (a.peak_flops / 1e12).toFixed(1)], ['Kernels', a.kernels], ['Waves', a.waves.toFixed(2)],
      ['Tiles (CTAs)', fmt.int(a.tiles)], ['Split-K', a.split_k], ['Tile efficiency', fmt.pct(a.tile_efficiency)],
      ['Bound', a.bound], ['Dims (class slots)', e.dims.join(' × ')]];
    $('analytic-table').tBodies[0].replaceChildren(...rows.map(([k, v]) =>
      el('tr', {}, el('th', { scope: 'row', text: k }), el('td', { class: 'num', text: String(v) }))));
    $('analytic-table').hidden = false;
  }

  async function submit(ev) {
    ev.preventDefault();
    const button = $('estimate');
    button.disabled = true;
    status($('status'), 'Estimating…');
    try {
      const e = await (await postJson('/v1/estimates/operator', request())).json();
      show(e);
      status($('status'), e.op + ' ' + e.phase + ' ' + e.dtype + ' on ' + e.gpu + ': analytic ' + us(e.analytic_us) +
        ', learned ' + us(e.predicted_us) + ' (' + e.source + ').');
      $('result').dataset.state = 'done';
    } catch (err) {
      status($('status'), 'The estimate failed: ' + err.message, true);
      $('result').dataset.state = 'failed';
    } finally {
      button.disabled = false;
    }
  }

  async function init() {
    $('operator-form').addEventListener('submit', submit);
    $('op').addEventListener('change', showDims);
    try {
      const [choices, gpus] = await Promise.all([api('/ui/choices.json').then(r => r.json()),
        api('/v1/gpus').then(r => r.json())]);
      operators = choices.operators;
      $('gpu').replaceChildren(...gpus.map(g => el('option', { value: g.name, text: g.name })));
      $('op').replaceChildren(...operators.map(o => el('option', { value: o.op, text: o.op })));
      $('dtype').replaceChildren(...choices.dtypes.map(d => el('option', { value: d, text: d })));
      const h100 = gpus.find(g => /H100.*SXM|H100 80GB HBM3/.test(g.name));
      if (h100) $('gpu').value = h100.name;
      $('op').value = 'linear';
      $('dtype').value = 'bf16';
      showDims();
    } catch (err) {
      status($('status'), 'Cannot load the choices: ' + err.message, true);
      return;
    }
    document.body.dataset.ready = 'true';
  }

  document.addEventListener('DOMContentLoaded', init);
})();
