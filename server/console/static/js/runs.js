// Runs page: the server's runs newest first (GET /runs), filtered by
// workflow, state and status, kept live by polling GET /runs?updated_after=
// every 2 s at most while the page is open. A poll follows next_cursor
// (up to POLL_PAGES pages; a longer sweep goes on at the next poll), so
// that no change is lost when more runs change in one interval than a
// page holds.

import { api } from './api.js';
import { badge, errorBox, fill, h, shortId, timeAgo } from './dom.js';
import { shortVersion } from './workflows.js';

const STATUSES = ['active', 'awaiting_input', 'processing', 'completed', 'failed'];
const POLL_MS = 2000;
const POLL_PAGES = 10; // pages one poll reads at most

export async function mount(main, q) {
  const filters = {
    workflow_id: q.get('workflow_id') || '',
    state: q.get('state') || '',
    status: q.get('status') || '',
  };
  // The page size, from the address (limit=N) or the defaults: it is
  // passed on as given, so a bad one gets the server's hint.
  const limit = q.get('limit') || '';
  let catalog = [];
  const errors = h('div', { class: 'errors', 'aria-live': 'polite' });
  try {
    catalog = (await api('/workflows')).workflows || [];
  } catch (e) {
    errors.append(errorBox(e, 'Workflows'));
  }
  const wf = catalog.find((w) => w.workflow_id === filters.workflow_id);
  const states = wf ? wf.states : [...new Set(catalog.flatMap((w) => w.states || []))].sort();

  const select = (id, label, value, options, allLabel) => h('div', { class: 'field' },
    h('label', { for: id }, label),
    h('select', { id, name: id.replace('filter-', ''), onchange: apply },
      h('option', { value: '' }, allLabel),
      options.map((o) => h('option', { value: o, selected: o === value ? true : null }, o))));

  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter runs', onsubmit: (e) => { e.preventDefault(); apply(); } },
    select('filter-workflow', 'Workflow', filters.workflow_id, catalog.map((w) => w.workflow_id), 'All workflows'),
    select('filter-state', 'State', filters.state, states, 'Any state'),
    select('filter-status', 'Status', filters.status, STATUSES, 'Any status'),
    h('a', { class: 'button ghost', href: '#/runs' }, 'Clear'));

  function apply() {
    const p = new URLSearchParams();
    const wfv = form.querySelector('#filter-workflow').value;
    const st = form.querySelector('#filter-state').value;
    const status = form.querySelector('#filter-status').value;
    if (wfv) p.set('workflow_id', wfv);
    // A state of another workflow would only give a 400: keep it only if it still applies.
    const wdef = catalog.find((w) => w.workflow_id === wfv);
    if (st && (!wdef || wdef.states.includes(st))) p.set('state', st);
    if (status) p.set('status', status);
    if (limit) p.set('limit', limit);
    location.hash = '#/runs' + (p.toString() ? `?${p}` : '');
  }

  const tbody = h('tbody');
  const live = h('span', { class: 'live', 'aria-live': 'off' }, 'Connecting…');
  const more = h('button', { type: 'button', class: 'ghost', hidden: true, onclick: () => load(cursor) }, 'Load more');
  const empty = h('p', { class: 'muted empty', hidden: true }, 'No runs match. Start one from ', h('a', { href: '#/workflows' }, 'Workflows'), '.');
  const table = h('table', { class: 'runs' },
    h('caption', { class: 'sr-only' }, 'Runs, most recently changed first'),
    h('thead', null, h('tr', null, ['Run', 'Workflow', 'State', 'Status', 'Updated'].map((c) => h('th', { scope: 'col' }, c)))),
    tbody);
  fill(main,
    h('div', { class: 'page-head' }, h('h1', null, 'Runs'), live),
    form, errors,
    h('div', { class: 'table-wrap' }, table), empty, more);

  const rows = new Map(); // run_id -> {run, tr}
  let cursor = null;
  let newest = ''; // polls ask for the runs changed after this (the newest updated_at seen)
  let sweep = null; // a poll's walk of the changed runs cut short by POLL_PAGES: {cursor, top}
  let stopped = false;
  let timer = 0;

  const matches = (r) => (!filters.workflow_id || r.workflow_id === filters.workflow_id) &&
    (!filters.state || r.state === filters.state) && (!filters.status || r.status === filters.status);

  function row(r) {
    return h('tr', { dataset: { runId: r.run_id } },
      h('td', null, h('a', { href: `#/runs/${encodeURIComponent(r.run_id)}`, title: r.run_id, class: 'mono' }, shortId(r.run_id))),
      h('td', null, r.workflow_id, r.workflow_version ? h('span', { class: 'muted', title: r.workflow_version }, ` @${shortVersion(r.workflow_version)}`) : null),
      h('td', { class: 'mono' }, r.state),
      h('td', null, badge(r.status)),
      h('td', null, timeAgo(r.updated_at)));
  }

  // The list's order: newest updated_at first, ties by run_id.
  const newer = (a, b) => (a.updated_at !== b.updated_at ? a.updated_at > b.updated_at : a.run_id > b.run_id);

  function upsert(r, changed) {
    const old = rows.get(r.run_id);
    if (old && changed && old.run.updated_at === r.updated_at && old.run.state === r.state && old.run.status === r.status) return;
    if (old) { old.tr.remove(); rows.delete(r.run_id); }
    if (!matches(r)) return;
    const tr = row(r);
    if (changed) {
      // In order among the rows (the pages of one poll come newest first,
      // a sweep that goes on at the next poll brings older ones after).
      const before = [...tbody.children].find((el) => newer(r, rows.get(el.dataset.runId).run));
      tbody.insertBefore(tr, before || null);
      tr.classList.add('changed');
    } else tbody.append(tr);
    rows.set(r.run_id, { run: r, tr });
  }

  function params(extra) {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(filters)) if (v) p.set(k, v);
    for (const [k, v] of Object.entries(extra)) if (v) p.set(k, v);
    return p;
  }

  async function load(after) {
    try {
      const page = await api(`/runs?${params({ cursor: after, limit: limit || '50' })}`);
      for (const r of page.runs) upsert(r, false);
      cursor = page.next_cursor;
      more.hidden = !cursor;
      empty.hidden = rows.size > 0;
      return true;
    } catch (e) {
      errors.replaceChildren(errorBox(e, 'Runs'));
      return false;
    }
  }

  async function poll() {
    if (stopped) return;
    if (document.hidden) { timer = setTimeout(poll, POLL_MS); return; } // a hidden tab asks nothing
    try {
      // Every run changed since the newest seen, whatever the filters: a
      // run that left the filtered set is taken off the list. The pages
      // are followed to the end (newest moves on only then), POLL_PAGES
      // at a time.
      let next = sweep ? sweep.cursor : null;
      let top = sweep ? sweep.top : newest;
      for (let n = 0; n < POLL_PAGES; n++) {
        const p = new URLSearchParams({ limit: limit || '500' });
        if (newest) p.set('updated_after', newest);
        if (next) p.set('cursor', next);
        const page = await api(`/runs?${p}`);
        for (const r of page.runs) {
          if (r.updated_at > top) top = r.updated_at;
          upsert(r, true);
        }
        next = page.next_cursor;
        if (!next || stopped) break;
      }
      if (next) sweep = { cursor: next, top };
      else { sweep = null; newest = top; }
      empty.hidden = rows.size > 0;
      live.textContent = `Live · checked ${new Date().toLocaleTimeString()}`;
      live.classList.remove('stale');
    } catch (e) {
      live.textContent = `Not live: ${e.hint || e.message}`;
      live.classList.add('stale');
    }
    if (!stopped) timer = setTimeout(poll, POLL_MS);
  }

  // The newest change of all runs, whatever the filters, read before the
  // list: polls go on from it (a run changed in between is in both).
  let head = true;
  try {
    const page = await api('/runs?limit=1');
    if (page.runs.length) newest = page.runs[0].updated_at;
  } catch (e) {
    errors.replaceChildren(errorBox(e, 'Runs'));
    head = false;
  }
  if (!head || !(await load(null))) {
    // A list the server refuses (a bad filter) is not polled either.
    live.textContent = 'Not live';
    live.classList.add('stale');
    return () => {};
  }
  live.textContent = 'Live';
  timer = setTimeout(poll, POLL_MS);
  return () => { stopped = true; clearTimeout(timer); };
}
