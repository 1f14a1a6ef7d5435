// Run page: where one run stands and why (state, status, hint), the CLI
// prompt's options as buttons with their keys, typed inputs built from each
// option's expects, a confirmation for critical actions, live updates from
// the run's NDJSON stream, task progress, the history from the event log
// and the workflow diagram with the current state highlighted.

import { api, stream } from './api.js';
import { badge, card, errorBox, fill, h, timeAgo } from './dom.js';
import { diagram } from './diagram.js';
import { shortVersion } from './workflows.js';

const TERMINAL = new Set(['completed', 'failed']);
const HISTORY = 100;

/** Checks a typed input against its expects type; returns [value, error]. */
export function parseTyped(type, raw, checked) {
  const t = { int: 'integer', float: 'number', bool: 'boolean', str: 'string' }[type] || type;
  switch (t) {
    case 'string': return [raw, null];
    case 'boolean': return [Boolean(checked), null];
    case 'number': {
      const n = Number(raw);
      return raw.trim() === '' || !Number.isFinite(n) ? [null, 'must be a number, e.g. 12.5'] : [n, null];
    }
    case 'integer': {
      const n = Number(raw);
      return raw.trim() === '' || !Number.isSafeInteger(n) ? [null, 'must be a whole number, e.g. 3'] : [n, null];
    }
    case 'array':
    case 'object': {
      let v;
      try { v = JSON.parse(raw); } catch { return [null, `must be a JSON ${t}`]; }
      const ok = t === 'array' ? Array.isArray(v) : v !== null && typeof v === 'object' && !Array.isArray(v);
      return ok ? [v, null] : [null, `must be a JSON ${t}`];
    }
    default: return [raw, null];
  }
}

// The answer the open confirmation waits for. The dialog's close event is
// queued, so one from an earlier showing can arrive after the next showing
// opened: a close counts only while the dialog is shut, and it settles
// whichever question is pending now, once.
let pendingConfirm = null;

function confirmDialog(message) {
  const dialog = document.getElementById('confirm-dialog');
  if (!dialog.dataset.wired) {
    dialog.dataset.wired = 'yes';
    dialog.addEventListener('close', () => {
      if (dialog.open || !pendingConfirm) return;
      const settle = pendingConfirm;
      pendingConfirm = null;
      settle(dialog.returnValue === 'confirm');
    });
  }
  if (pendingConfirm) pendingConfirm(false); // an earlier question not yet settled is a no
  dialog.querySelector('.message').textContent = message;
  dialog.returnValue = '';
  return new Promise((resolve) => {
    pendingConfirm = resolve;
    dialog.showModal();
    dialog.querySelector('button[value="cancel"]').focus();
  });
}

/** A duration in whole seconds as Go prints it: 9m58s, 2h0m0s, 45s. */
function goDuration(sec) {
  const h = Math.floor(sec / 3600), m = Math.floor((sec % 3600) / 60), s = sec % 60;
  if (h) return `${h}h${m}m${s}s`;
  if (m) return `${m}m${s}s`;
  return `${s}s`;
}

/**
 * The pending timers a frame names in _links ("timer:ACTION" with a
 * due_at), soonest first, each described for people as seen at nowMs:
 * "escalate in 9m58s (at 2026-12-03T10:30:00Z)" (as asmp show and attach
 * say it).
 */
export function timerLines(frame, nowMs) {
  return Object.entries(frame._links || {})
    .filter(([k, l]) => k.startsWith('timer:') && k.length > 6 && l && !Number.isNaN(Date.parse(l.due_at)))
    .map(([k, l]) => ({ action: k.slice(6), due: Date.parse(l.due_at) }))
    .sort((a, b) => a.due - b.due || (a.action < b.action ? -1 : a.action > b.action ? 1 : 0))
    .map(({ action, due }) => {
      const at = new Date(due).toISOString().replace(/\.\d{3}Z$/, 'Z');
      const left = Math.round((due - nowMs) / 1000);
      if (left > 0) return `${action} in ${goDuration(left)} (at ${at})`;
      if (left === 0) return `${action} due now (at ${at})`;
      return `${action} due ${goDuration(-left)} ago (at ${at})`;
    });
}

/** The key an option answers to, as shown on its button. */
function keyLabel(k) {
  return k === 'enter' ? '↵ Enter' : k;
}

export async function mount(main, runId) {
  const base = `/runs/${encodeURIComponent(runId)}`;
  let frame, version;
  try {
    const r = await api(base, { full: true });
    frame = r.body;
    version = Number((r.res.headers.get('ETag') || '').replace(/\D/g, '')) || 0;
  } catch (e) {
    fill(main, h('h1', null, 'Run'), errorBox(e), h('p', null, h('a', { href: '#/runs' }, '← All runs')));
    return;
  }

  const title = h('h1', { class: 'mono run-id' }, runId);
  const live = h('span', { class: 'live', 'aria-live': 'off' }, 'Connecting…');
  const summary = h('dl', { class: 'summary' });
  const hint = h('p', { class: 'run-hint', 'aria-live': 'polite' });
  const act = h('div', { class: 'act' });
  const message = h('div', { class: 'action-message', 'aria-live': 'assertive' });
  const progress = h('div', { class: 'progress', hidden: true },
    h('label', { for: 'task-progress' }, 'Task progress'), h('progress', { id: 'task-progress', max: 100 }), h('span', { class: 'progress-hint' }));
  const diag = h('div', { class: 'diagram' });
  const history = h('div', { class: 'table-wrap' });
  const data = h('pre', { class: 'data' });

  fill(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/runs' }, '← All runs')),
    h('div', { class: 'page-head' }, title, live),
    h('div', { class: 'run-grid' },
      h('div', { class: 'col' },
        card('Where it stands', summary, hint, progress),
        card('Act', message, act),
        card('Data', data)),
      h('div', { class: 'col' },
        card('Diagram', diag),
        card('History', history))));

  let cli = null;
  let cliState = null; // the state cli was fetched for
  let stopped = false;
  let drawnState = null; // the state the diagram shows
  const ctrl = new AbortController();

  let generation = 0;
  async function refresh(next) {
    const gen = ++generation;
    frame = next;
    renderSummary();
    let got;
    try {
      got = await api(`${base}/cli`);
    } catch (e) {
      got = null;
      if (gen === generation) message.replaceChildren(errorBox(e, 'Prompt'));
    }
    if (gen !== generation) return; // a newer frame came meanwhile: its refresh draws
    cli = got;
    cliState = next.state;
    renderAct();
    loadHistory();
    if (next.state !== drawnState) {
      drawnState = next.state;
      diagram(diag, `/visualize.svg?run_id=${encodeURIComponent(runId)}`);
    }
  }

  // The run's pending timers, one line each; the time left is redrawn
  // every second.
  const timerItems = () => timerLines(frame, Date.now()).map((t) => h('div', { class: 'timer' }, t));
  const ticker = setInterval(() => {
    const dd = summary.querySelector('#run-timers');
    if (dd) fill(dd, timerItems());
  }, 1000);

  // The workflow version the run is pinned to, when the server names it.
  const wfVersion = () => (frame._links && frame._links.workflow_version && frame._links.workflow_version.version) || '';

  function renderSummary() {
    fill(summary,
      h('dt', null, 'Workflow'), h('dd', null, h('a', { href: `#/runs?workflow_id=${encodeURIComponent(frame.workflow_id)}` }, frame.workflow_id)),
      h('dt', null, 'State'), h('dd', { class: 'mono', id: 'run-state' }, frame.state),
      h('dt', null, 'Status'), h('dd', { id: 'run-status' }, badge(frame.status)),
      h('dt', null, 'Version'), h('dd', null, String(version || '')),
      wfVersion() ? [h('dt', null, 'Workflow version'), h('dd', { class: 'mono', title: wfVersion() }, shortVersion(wfVersion()))] : null,
      frame.milestones && frame.milestones.length ? [h('dt', null, 'Milestones'), h('dd', null, frame.milestones.join(' → '))] : null,
      timerLines(frame, Date.now()).length ? [h('dt', null, 'Timers'), h('dd', { id: 'run-timers' }, timerItems())] : null);
    renderHint();
    progress.hidden = frame.status !== 'processing';
    data.textContent = JSON.stringify(frame.data || {}, null, 2);
  }

  // The hint a person reads: the state's CLI hint (worded for people, with
  // the run's data), else the frame's, which is worded for agents and is
  // kept as the element's title. cli is the last one fetched: used only
  // while it is the CLI of the frame's state.
  function renderHint() {
    const human = cli && cliState === frame.state && cli.hint;
    hint.textContent = human || frame.hint || '';
    hint.title = human && frame.hint && human !== frame.hint ? `For agents: ${frame.hint}` : '';
  }

  function renderAct() {
    renderHint();
    const offered = new Map((frame.next_states || []).map((n) => [n.action, n]));
    const options = (cli && cli.options) || [...offered.keys()].map((a) => ({ action: a, label: a }));
    if (!options.length) {
      fill(act, h('p', { class: 'muted' }, TERMINAL.has(frame.status) ? 'This run has ended: nothing more to do.' : 'No action is offered now.'));
      return;
    }
    const list = h('div', { class: 'options' });
    options.forEach((o, i) => {
      const ns = offered.get(o.action) || { action: o.action };
      const expects = ns.expects || {};
      const keys = [...new Set([String(i + 1), o.keys].filter(Boolean))];
      const fields = Object.entries(expects).map(([name, type]) => {
        const id = `in-${o.action}-${name}`;
        const err = h('span', { class: 'field-error', id: `${id}-err`, role: 'alert' });
        const t = { int: 'integer', float: 'number', bool: 'boolean', str: 'string' }[type] || type;
        let input;
        if (t === 'boolean') input = h('input', { id, name, type: 'checkbox', dataset: { type: t } });
        else if (t === 'array' || t === 'object') input = h('textarea', { id, name, rows: 3, placeholder: t === 'array' ? '[ ]' : '{ }', dataset: { type: t }, 'aria-describedby': `${id}-err` });
        else input = h('input', { id, name, type: 'text', inputmode: t === 'string' ? null : 'decimal', autocomplete: 'off', dataset: { type: t }, 'aria-describedby': `${id}-err` });
        return h('div', { class: `field${t === 'boolean' ? ' check' : ''}` }, h('label', { for: id }, `${name} `, h('span', { class: 'muted' }, `(${t})`)), input, err);
      });
      const button = h('button', { type: 'submit', class: ns.is_critical ? 'danger' : 'primary', dataset: { action: o.action }, 'aria-keyshortcuts': keys.join(' ') },
        h('span', null, o.label || o.action), ...keys.map((k) => h('kbd', null, keyLabel(k))));
      const form = h('form', { class: 'option', dataset: { action: o.action }, novalidate: true, onsubmit: (ev) => { ev.preventDefault(); fire(o, ns, form); } },
        fields.length ? h('div', { class: 'fields' }, fields) : null, button);
      list.append(form);
    });
    fill(act,
      cli && cli.prompt ? h('h3', { class: 'prompt' }, cli.prompt) : null,
      cli && cli.input_hint ? h('p', { class: 'input-hint muted' }, cli.input_hint) : null,
      list);
  }

  async function fire(o, ns, form) {
    const input = {};
    let bad = false;
    for (const el of form.querySelectorAll('[data-type]')) {
      const [v, err] = parseTyped(el.dataset.type, el.value || '', el.checked);
      const box = form.querySelector(`#${CSS.escape(el.id)}-err`);
      box.textContent = err ? `${el.name} ${err}` : '';
      el.setAttribute('aria-invalid', err ? 'true' : 'false');
      if (err) { if (!bad) el.focus(); bad = true; } else input[el.name] = v;
    }
    if (bad) return; // nothing is sent while an input has the wrong type
    if (ns.is_critical && !(await confirmDialog(`"${o.label || o.action}" is a critical action on run ${runId}. Do it?`))) return;
    message.replaceChildren();
    for (const b of act.querySelectorAll('button')) b.disabled = true;
    try {
      const r = await api(`${base}/transitions/${encodeURIComponent(o.action)}`, {
        method: 'POST', body: input, full: true, headers: version ? { 'If-Match': `"${version}"` } : {},
      });
      version = Number((r.res.headers.get('ETag') || '').replace(/\D/g, '')) || version + 1;
      await refresh(r.body);
    } catch (e) {
      message.replaceChildren(errorBox(e, `${o.label || o.action} was refused`));
      for (const b of act.querySelectorAll('button')) b.disabled = false;
    }
  }

  async function loadHistory() {
    try {
      // The last HISTORY events (a long-lived run has many).
      const after = Math.max(0, version - HISTORY);
      const log = await api(`${base}/events${after ? `?after=${after}` : ''}`);
      const rows = (log.events || []).slice().reverse().map((e) => h('tr', null,
        h('td', null, timeAgo(e.time)),
        h('td', null, e.kind === 'transition' ? h('span', { class: 'mono' }, e.action) : e.kind),
        h('td', { class: 'mono' }, e.from ? `${e.from} → ${e.to}` : e.to),
        h('td', null, e.actor),
        h('td', null, badge(e.status))));
      fill(history, after ? h('p', { class: 'muted' }, `The last ${HISTORY} of ${version} events.`) : null, h('table', { class: 'history' },
        h('thead', null, h('tr', null, ['When', 'What', 'States', 'By', 'Status'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', null, rows)));
    } catch (e) {
      fill(history, errorBox(e, 'History'));
    }
  }

  function onKey(ev) {
    if (ev.defaultPrevented || ev.metaKey || ev.ctrlKey || ev.altKey) return;
    const tag = (ev.target && ev.target.tagName) || '';
    if (['INPUT', 'TEXTAREA', 'SELECT'].includes(tag) || document.querySelector('dialog[open]')) return;
    const key = ev.key === 'Enter' ? 'enter' : ev.key.toLowerCase();
    for (const b of act.querySelectorAll('button[data-action]')) {
      const keys = (b.getAttribute('aria-keyshortcuts') || '').split(' ');
      if (!keys.includes(key) || b.disabled) continue;
      ev.preventDefault();
      const field = b.form.querySelector('[data-type]');
      if (field && !field.value) field.focus(); // type first, then Enter
      else b.form.requestSubmit(b);
      return;
    }
  }
  document.addEventListener('keydown', onKey);

  async function follow() {
    let last = 0;
    while (!stopped) {
      try {
        live.textContent = '● Live';
        live.classList.remove('stale');
        let ended = false;
        await stream(`${base}/stream`, (line) => {
          if (line.id) last = line.id;
          if (line.heartbeat) return;
          if (line.progress !== undefined && !line.state) {
            progress.hidden = false;
            const pct = parseFloat(line.progress);
            const bar = progress.querySelector('progress');
            if (Number.isFinite(pct)) bar.value = pct; else bar.removeAttribute('value');
            progress.querySelector('.progress-hint').textContent = `${line.progress}${line.hint ? ` · ${line.hint}` : ''}`;
            return;
          }
          if (line.state) {
            const { id, ...f } = line;
            const newer = id === undefined || id > version;
            if (id) version = Math.max(version, id);
            if (newer || f.state !== frame.state || f.status !== frame.status) refresh(f);
            if (TERMINAL.has(f.status)) ended = true;
          }
        }, { signal: ctrl.signal, lastEventId: last || undefined });
        if (ended || TERMINAL.has(frame.status)) {
          live.textContent = 'Ended';
          return;
        }
      } catch (e) {
        if (stopped || e.name === 'AbortError') return;
        live.textContent = `Not live: ${e.hint || e.message}`;
        live.classList.add('stale');
      }
      await new Promise((r) => setTimeout(r, 1500));
    }
  }

  await refresh(frame);
  follow();
  return () => { stopped = true; ctrl.abort(); clearInterval(ticker); document.removeEventListener('keydown', onKey); };
}
