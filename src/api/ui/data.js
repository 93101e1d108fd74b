// The data page: GET /v1/systems and GET /v1/profiles (a hundred at a time).
'use strict';

(() => {
  const { api, el, status, fmt } = perfcast;
  const $ = id => document.getElementById(id);
  const PAGE = 100;
  let offset = 0;

  const cell = (text, cls) => el('td', { class: cls, text: text === null || text === undefined ? '—' : String(text) });
  const link = l => l.kind + ', ' + l.bandwidth_gbs + ' GB/s, ' + l.latency_us + ' µs';

  function systemRow(s) {
    return el('tr', { 'data-name': s.name },
      el('th', { scope: 'row', text: s.name }), cell(s.gpu_spec.name), cell(s.nodes, 'num'), cell(s.gpus_per_node, 'num'),
      cell(fmt.int(s.total_gpus), 'num'), cell(link(s.intra_node)), cell(link(s.inter_node)),
      cell(s.preset ? 'preset' : 'created ' + s.created_at.slice(0, 10)), cell(s.calibration ? 'yes' : 'no'));
  }

  function profileRow(p) {
    return el('tr', { 'data-id': p.id },
      el('th', { scope: 'row' }, el('a', { href: '/v1/profiles/' + p.id, text: p.id })), cell(p.format),
      cell(fmt.int(p.samples), 'num'), cell(fmt.int(p.rejected_total), 'num'), cell(p.system), cell(p.gpu),
      cell(fmt.bytes(p.raw_bytes), 'num'), cell(p.created_at.replace('T', ' ').slice(0, 19)));
  }

  async function loadProfiles() {
    const page = await (await api('/v1/profiles?limit=' + PAGE + '&offset=' + offset)).json();
    const body = $('profiles-table').tBodies[0];
    body.append(...page.profiles.map(profileRow));
    offset += page.profiles.length;
    $('profiles-table').hidden = offset === 0;
    $('profiles-summary').textContent = page.total === 0
      ? 'No profiles uploaded yet (POST /v1/profiles or perfcast import).'
      : 'Showing ' + offset + ' of ' + page.total + ' profiles.';
    $('more').hidden = offset >= page.total;
    return page.total;
  }

  async function init() {
    $('more').addEventListener('click', () => loadProfiles().catch(err =>
      status($('status'), 'Cannot list the profiles: ' + err.message, true)));
    try {
      const [systems, total] = await Promise.all([
        api('/v1/systems').then(r => r.json()),
        loadProfiles(),
      ]);
      $('systems-table').tBodies[0].replaceChildren(...systems.map(systemRow));
      $('systems-table').hidden = false;
      status($('status'), fmt.count(systems.length, 'system', 'systems') + ', ' + fmt.count(total, 'profile', 'profiles') + '.');
    } catch (err) {
      status($('status'), 'Cannot load the data: ' + err.message, true);
    }
    document.body.dataset.ready = 'true';
  }

  document.addEventListener('DOMContentLoaded', init);
})();
