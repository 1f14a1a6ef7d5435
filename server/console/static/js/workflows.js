// Workflows page: the served workflows (GET /workflows) with their states
// and diagrams, a button to start a run of each, and, when the server
// reports them, each workflow's versions with their active runs.

import { api } from './api.js';
import { card, errorBox, fill, h } from './dom.js';
import { diagram } from './diagram.js';

export async function mount(main) {
  let catalog;
  try {
    catalog = (await api('/workflows')).workflows || [];
  } catch (e) {
    fill(main, h('h1', null, 'Workflows'), errorBox(e));
    return;
  }
  const list = h('div', { class: 'workflow-list' });
  fill(main, h('div', { class: 'page-head' }, h('h1', null, 'Workflows'), h('span', { class: 'muted' }, `${catalog.length} served`)), list);
  for (const w of catalog) {
    const msg = h('div', { 'aria-live': 'polite' });
    const start = h('button', {
      type: 'button', class: 'primary', onclick: async () => {
        start.disabled = true;
        try {
          const f = await api('/runs', { method: 'POST', body: { workflow_id: w.workflow_id } });
          location.hash = `#/runs/${encodeURIComponent(f.run_id)}`;
        } catch (e) {
          msg.replaceChildren(errorBox(e, 'Start'));
          start.disabled = false;
        }
      },
    }, 'Start a run');
    const diag = h('div', { class: 'diagram' });
    const versions = Array.isArray(w.versions) && w.versions.length ? h('table', { class: 'versions' },
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Version'), h('th', { scope: 'col' }, 'Active runs'))),
      h('tbody', null, w.versions.map((v) => h('tr', null,
        h('td', { class: 'mono', title: versionOf(v) }, shortVersion(versionOf(v))),
        h('td', null, String(v.active_runs ?? v.active ?? '—')))))) : null;
    list.append(card(null,
      h('div', { class: 'wf-head' }, h('h2', { class: 'mono' }, w.workflow_id), start),
      h('p', null, w.description || ''),
      msg,
      h('p', { class: 'states' }, (w.states || []).map((s) => h('span', { class: `chip${s === w.initial_state ? ' initial' : ''}`, title: s === w.initial_state ? 'initial state' : null }, s))),
      versions,
      h('p', null, h('a', { href: `#/runs?workflow_id=${encodeURIComponent(w.workflow_id)}` }, 'Runs of this workflow →')),
      diag));
    diagram(diag, `/visualize.svg?workflow_id=${encodeURIComponent(w.workflow_id)}`);
  }
}

/** The version string of one entry of a workflow's versions (a string or an object). */
function versionOf(v) {
  return typeof v === 'string' ? v : String(v.version ?? v.workflow_version ?? v.id ?? '');
}

/** sha256:0123456789ab… for display; the full version is the title. */
export function shortVersion(v) {
  return v && v.length > 19 ? `${v.slice(0, 19)}…` : v || '';
}
