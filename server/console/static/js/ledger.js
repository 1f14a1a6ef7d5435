// Ledger page: the directory rows (GET /api/directory), the records newest
// first (GET /api/ledger/records) with their replay links both ways, and a
// receipt view that checks the record's inclusion proof and the checkpoint
// signature in this browser (verify.js), against a verifier key pinned on
// first use in localStorage.

import { api } from './api.js';
import { card, errorBox, fill, h, shortId } from './dom.js';
import { parseVerifierKey, verifyReceipt } from './verify.js';

const PIN_KEY = 'asmp.verifierKey';

const receiptLink = (inv) => h('a', { href: `#/ledger/${encodeURIComponent(inv)}`, class: 'mono', title: inv }, shortId(inv));

/** The pinned key, pinning the server's on first use; {pinned, served, mismatch, firstUse}. */
async function pinnedKey() {
  const served = await api('/api/ledger/key', { accept: 'application/json' }).then((k) => k.public_key).catch(() => '');
  let pinned = localStorage.getItem(PIN_KEY) || '';
  let firstUse = false;
  if (!pinned && served) {
    pinned = served;
    firstUse = true;
    localStorage.setItem(PIN_KEY, served);
  }
  return { pinned, served, mismatch: Boolean(served && pinned && served !== pinned), firstUse };
}

function keyCard(k, onChange) {
  const input = h('input', { id: 'paste-key', type: 'text', spellcheck: 'false', autocomplete: 'off', placeholder: 'name+hash+key' });
  const err = h('span', { class: 'field-error', role: 'alert', id: 'paste-key-err' });
  const form = h('form', {
    class: 'paste-key', onsubmit: async (ev) => {
      ev.preventDefault();
      try {
        await parseVerifierKey(input.value);
      } catch (e) {
        err.textContent = e.message;
        return;
      }
      localStorage.setItem(PIN_KEY, input.value.trim());
      onChange();
    },
  }, h('div', { class: 'field' }, h('label', { for: 'paste-key' }, 'Pin another key (paste it from a source you trust)'), input, err),
  h('button', { type: 'submit', class: 'ghost' }, 'Pin key'));
  return card('Verifier key',
    h('p', null, 'Receipts are checked in this browser against this key: ', h('code', { id: 'pinned-key', class: 'wrap' }, k.pinned || 'none')),
    k.firstUse ? h('p', { class: 'notice info' }, 'Pinned on first use: the key the server presented now. Compare it with one you trust (asmp serve logs it as ledger_key).') : null,
    k.mismatch ? h('div', { class: 'notice error key-mismatch', role: 'alert' },
      h('strong', null, 'Key mismatch. '), 'The server now presents a different key: ', h('code', { class: 'wrap' }, k.served),
      '. Receipts are still checked against the pinned key. ',
      h('button', { type: 'button', class: 'ghost', onclick: () => { localStorage.setItem(PIN_KEY, k.served); onChange(); } }, 'Trust the new key')) : null,
    form);
}

export async function mount(main) {
  const k = await pinnedKey();
  const rowsBox = h('div', { class: 'table-wrap' });
  const recBody = h('tbody');
  const recErr = h('div');
  const more = h('button', { type: 'button', class: 'ghost', hidden: true, onclick: () => loadRecords(cursor) }, 'Load older records');
  let cursor = null;
  fill(main,
    h('div', { class: 'page-head' }, h('h1', null, 'Ledger')),
    h('div', { class: 'ledger-grid' },
      card('Directory rows', rowsBox),
      keyCard(k, () => mount(main))),
    card('Records, newest first', recErr,
      h('div', { class: 'table-wrap' }, h('table', { class: 'records' },
        h('thead', null, h('tr', null, ['Seq', 'Receipt', 'Key', 'Type', 'When', 'Source', 'Links'].map((c) => h('th', { scope: 'col' }, c)))),
        recBody)), more));

  try {
    const page = await api('/api/directory');
    fill(rowsBox, page.rows.length ? h('table', { class: 'rows' },
      h('thead', null, h('tr', null, ['Key', 'Command', 'Description', 'Version'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, page.rows.map((r) => h('tr', null,
        h('td', { class: 'mono' }, r.key), h('td', { class: 'mono' }, r.command || ''), h('td', null, r.description || ''),
        h('td', null, receiptLink(r.inv_ID)))))) : h('p', { class: 'muted' }, 'No directory rows yet: dispatch one with asmp dispatch.'));
  } catch (e) {
    fill(rowsBox, errorBox(e, 'Directory'));
  }

  async function loadRecords(after) {
    try {
      const page = await api(`/api/ledger/records?limit=50${after ? `&cursor=${encodeURIComponent(after)}` : ''}`);
      for (const r of page.records) {
        recBody.append(h('tr', null,
          h('td', null, String(r.seq)), h('td', null, receiptLink(r.inv_ID)), h('td', { class: 'mono' }, r.key),
          h('td', null, r.type), h('td', null, h('time', { datetime: r.timestamp }, r.timestamp)), h('td', null, r.source),
          h('td', { class: 'links' }, recordLinks(r))));
      }
      if (!page.records.length && !after) recBody.append(h('tr', null, h('td', { colspan: 7, class: 'muted' }, 'The ledger is empty.')));
      cursor = page.next_cursor;
      more.hidden = !cursor;
    } catch (e) {
      recErr.replaceChildren(errorBox(e, 'Records'));
    }
  }
  await loadRecords(null);
}

function recordLinks(r) {
  const out = [];
  if (r.supersedes) out.push(h('span', null, 'supersedes ', receiptLink(r.supersedes)));
  if (r.replay_of) out.push(h('span', null, 'replays ', receiptLink(r.replay_of)));
  if (r.result_of) out.push(h('span', null, 'result of ', receiptLink(r.result_of)));
  for (const by of r.replayed_by || []) out.push(h('span', null, 'replayed by ', receiptLink(by)));
  return out;
}

export async function mountReceipt(main, inv) {
  let rec;
  try {
    rec = await api(`/api/dispatch?receipt=${encodeURIComponent(inv)}`);
  } catch (e) {
    fill(main, h('p', { class: 'crumbs' }, h('a', { href: '#/ledger' }, '← Ledger')), h('h1', null, 'Receipt'), errorBox(e));
    return;
  }
  const k = await pinnedKey();
  const mark = h('div', { class: 'verdict pending', id: 'verdict', role: 'status' }, 'Checking…');
  const steps = h('ol', { class: 'steps' });
  fill(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/ledger' }, '← Ledger')),
    h('div', { class: 'page-head' }, h('h1', { class: 'mono run-id' }, rec.inv_ID)),
    h('div', { class: 'ledger-grid' },
      card('Verification (in this browser)', mark, steps),
      card('Record',
        h('dl', { class: 'summary' },
          h('dt', null, 'Seq'), h('dd', null, String(rec.seq)),
          h('dt', null, 'Key'), h('dd', { class: 'mono' }, rec.key),
          h('dt', null, 'Type'), h('dd', null, rec.type),
          h('dt', null, 'When'), h('dd', null, rec.timestamp),
          h('dt', null, 'Source'), h('dd', null, rec.source),
          h('dt', null, 'Entry hash'), h('dd', { class: 'mono wrap' }, rec.entry_hash),
          h('dt', null, 'Links'), h('dd', { class: 'links' }, recordLinks(rec).length ? recordLinks(rec) : 'none')),
        h('h3', null, 'Body'), h('pre', { class: 'data' }, JSON.stringify(rec.body, null, 2)))),
    keyCard(k, () => mountReceipt(main, inv)));

  let result;
  try {
    if (!k.pinned) throw new Error('no verifier key is pinned: paste one below');
    const proof = await api(`/api/ledger/proof?inv_ID=${encodeURIComponent(inv)}`);
    result = await verifyReceipt(rec, proof, k.pinned);
  } catch (e) {
    result = { ok: false, steps: [{ name: 'the proof can be fetched and checked', ok: false, detail: e.hint || e.message }] };
  }
  mark.className = `verdict ${result.ok ? 'ok' : 'bad'}`;
  fill(mark, h('span', { class: 'icon', 'aria-hidden': 'true' }, result.ok ? '✓' : '✗'), result.ok ? 'Verified' : 'Not verified');
  fill(steps, result.steps.map((s) => h('li', { class: s.ok ? 'ok' : 'bad' },
    h('span', { class: 'icon', 'aria-hidden': 'true' }, s.ok ? '✓' : '✗'), h('span', { class: 'sr-only' }, s.ok ? 'passed: ' : 'failed: '),
    s.name, s.detail ? h('div', { class: 'muted mono wrap' }, s.detail) : null)));
}
