// The models page: GET /v1/regressors grouped by key, and each active version's accuracy plot
// (GET /v1/regressors/{key}/plot.svg), fetched when it scrolls into view.
'use strict';

(() => {
  const { api, el, status, fmt } = perfcast;
  const $ = id => document.getElementById(id);

  /** Versions by key (keys sorted, versions as listed): [{key, versions, active}]. */
  function byKey(list) {
    const keys = new Map();
    for (const v of list) {
      if (!keys.has(v.key)) keys.set(v.key, []);
      keys.get(v.key).push(v);
    }
    return [...keys.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([key, versions]) =>
      ({ key, versions, active: versions.find(v => v.active) || null }));
  }

  async function loadPlot(figure) {
    const { key, version, mape } = figure.dataset;
    try {
      const blob = await (await api('/v1/regressors/' + encodeURIComponent(key) + '/plot.svg')).blob();
      const img = el('img', {
        src: URL.createObjectURL(blob), width: 900, height: 800,
        alt: 'Accuracy plot of ' + key + ' version ' + version + ': predicted against measured time on its ' +
          'validation rows, log–log with the y = x line; validation MAPE ' + mape + '.',
      });
      figure.replaceChildren(img, figure.querySelector('figcaption'));
      figure.dataset.state = 'loaded';
    } catch (err) {
      figure.replaceChildren(el('p', { class: 'plot-missing', text: err.message }), figure.querySelector('figcaption'));
      figure.dataset.state = 'failed';
    }
  }

  function render(groups) {
    const rows = groups.map(g => {
      const v = g.active || g.versions[g.versions.length - 1];
      const cell = (text, cls) => el('td', { class: cls, text });
      return el('tr', { 'data-key': g.key },
        el('th', { scope: 'row' }, el('a', { href: '#plot-' + g.key, text: g.key })),
        cell(v.scope), cell(g.active ? 'v' + g.active.version : 'none', 'num'), cell(String(g.versions.length), 'num'),
        cell(fmt.pct(v.validation_mape), 'num'), cell(fmt.pct(v.analytic_validation_mape), 'num'),
        cell(fmt.int(v.validation_rows), 'num'), cell(fmt.int(v.samples), 'num'));
    });
    $('models-table').tBodies[0].replaceChildren(...rows);
    $('models-table').hidden = false;

    const observer = 'IntersectionObserver' in window ? new IntersectionObserver(entries => {
      for (const e of entries) {
        if (e.isIntersecting) { observer.unobserve(e.target); loadPlot(e.target); }
      }
    }, { rootMargin: '400px' }) : null;
    const figures = groups.map(g => {
      const caption = el('figcaption', {},
        el('strong', { text: g.key }), ' ',
        g.active ? 'v' + g.active.version + ', validation MAPE ' + fmt.pct(g.active.validation_mape) +
          ' (analytic ' + fmt.pct(g.active.analytic_validation_mape) + ')' : '');
      const figure = el('figure', { id: 'plot-' + g.key, class: 'model', 'data-key': g.key }, caption);
      if (!g.active) {
        figure.prepend(el('p', { class: 'plot-missing', text: 'No active version: nothing to plot.' }));
        figure.dataset.state = 'none';
      } else {
        figure.dataset.version = g.active.version;
        figure.dataset.mape = fmt.pct(g.active.validation_mape);
        figure.prepend(el('p', { class: 'muted', text: 'Loading the plot…' }));
        if (observer) observer.observe(figure); else loadPlot(figure);
      }
      return figure;
    });
    $('plots').replaceChildren(...figures);
  }

  async function init() {
    try {
      const groups = byKey(await (await api('/v1/regressors')).json());
      if (groups.length === 0) {
        status($('status'), 'No models yet: upload profiles (POST /v1/profiles) and they are trained in the background.');
      } else {
        render(groups);
        const active = groups.filter(g => g.active).length;
        status($('status'), fmt.count(groups.length, 'model key', 'model keys') + ', ' + active + ' with an active version.');
      }
    } catch (err) {
      status($('status'), 'Cannot list the models: ' + err.message, true);
    }
    document.body.dataset.ready = 'true';
  }

  document.addEventListener('DOMContentLoaded', init);
})();
