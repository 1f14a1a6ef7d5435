// Webhooks page: the server's subscriptions (GET /webhooks, admin scope)
// with each one's recent deliveries (GET /webhooks/{id}/deliveries), what
// became of them, and a button to send a delivery again.

import { api } from './api.js';
import { badge, card, errorBox, fill, h, shortId, timeAgo } from './dom.js';

export async function mount(main) {
  let subs;
  try {
    subs = (await api('/webhooks')).webhooks || [];
  } catch (e) {
    fill(main, h('h1', null, 'Webhooks'), errorBox(e));
    return;
  }
  const list = h('div', { class: 'webhook-list' });
  fill(main, h('div', { class: 'page-head' }, h('h1', null, 'Webhooks'), h('span', { class: 'muted' }, `${subs.length} subscriptions`)),
    subs.length ? null : h('p', { class: 'muted' }, 'No subscriptions. Add one with ', h('code', null, 'asmp webhooks add URL'), ' or POST /webhooks.'),
    list);
  for (const s of subs) {
    const deliveries = h('div', { class: 'deliveries' }, h('p', { class: 'muted' }, 'Loading deliveries…'));
    list.append(card(null,
      h('div', { class: 'wf-head' }, h('h2', { class: 'mono' }, s.url), badge(s.status === 'active' ? 'active' : 'failed')),
      h('p', { class: 'muted' }, h('span', { class: 'mono', title: s.id }, s.id), ' · ', (s.events || []).join(', '),
        s.workflow_id ? ` · workflow ${s.workflow_id}` : '', s.states && s.states.length ? ` · states ${s.states.join(', ')}` : ''),
      s.disabled_reason ? h('p', { class: 'notice error', role: 'status' }, s.disabled_reason) : null,
      deliveries));
    loadDeliveries(deliveries, s);
  }
}

async function loadDeliveries(el, s) {
  let page;
  try {
    page = await api(`/webhooks/${encodeURIComponent(s.id)}/deliveries?limit=20`);
  } catch (e) {
    fill(el, errorBox(e, 'Deliveries'));
    return;
  }
  const ds = page.deliveries || [];
  if (!ds.length) {
    fill(el, h('p', { class: 'muted' }, 'No deliveries yet.'));
    return;
  }
  const msg = h('div', { 'aria-live': 'polite' });
  fill(el, msg, h('table', { class: 'deliveries-table' },
    h('thead', null, h('tr', null, ['Delivery', 'Type', 'Run', 'Status', 'Attempts', 'Created', 'Last error', ''].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, ds.map((d) => h('tr', { dataset: { delivery: d.id } },
      h('td', { class: 'mono', title: d.id }, shortId(d.id)),
      h('td', null, d.type),
      h('td', null, h('a', { href: `#/runs/${encodeURIComponent(d.run_id)}`, class: 'mono', title: d.run_id }, shortId(d.run_id))),
      h('td', null, h('span', { class: `badge delivery-${d.status}` }, d.status),
        d.next_attempt_at ? h('span', { class: 'muted' }, ' next at ', h('time', { datetime: d.next_attempt_at, title: d.next_attempt_at }, d.next_attempt_at.slice(11, 19))) : null),
      h('td', null, String(d.attempts)),
      h('td', null, timeAgo(d.created_at)),
      h('td', { class: 'muted' }, d.last_error || ''),
      h('td', null, d.status === 'pending' ? null : h('button', {
        type: 'button', class: 'ghost', onclick: async (ev) => {
          ev.target.disabled = true;
          try {
            await api(`/webhooks/${encodeURIComponent(s.id)}/deliveries/${encodeURIComponent(d.id)}/redeliver`, { method: 'POST', body: {} });
            msg.replaceChildren(h('p', { class: 'notice' }, `Delivery ${shortId(d.id)} is sent again.`));
            loadDeliveries(el, s);
          } catch (e) {
            msg.replaceChildren(errorBox(e, 'Redeliver'));
            ev.target.disabled = false;
          }
        },
      }, 'Redeliver')))))));
}
