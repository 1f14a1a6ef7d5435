// Small DOM helpers: elements are built with h(), never from HTML strings,
// so server data is always text.

/** h('a', {href: '#/runs', class: 'x', onclick: fn}, 'text', child, ...) */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value' || k === 'checked' || k === 'disabled' && v === true) el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

/** Replaces el's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** An error box showing the server's hint (or the error's message) in place. */
export function errorBox(err, what) {
  const hint = err && (err.hint || err.message) || String(err);
  return h('div', { class: 'notice error', role: 'alert' },
    h('strong', null, what ? `${what}: ` : (err && err.status ? `${err.status} ` : '')),
    h('span', { class: 'hint' }, hint));
}

/** A status badge. */
export function badge(status) {
  return h('span', { class: `badge status-${status || 'unknown'}` }, status || 'unknown');
}

/** "3 s ago", "5 min ago", … with the exact time as a title. */
export function timeAgo(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return h('span', null, iso || '');
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  let text;
  if (s < 60) text = `${s} s ago`;
  else if (s < 3600) text = `${Math.floor(s / 60)} min ago`;
  else if (s < 86400) text = `${Math.floor(s / 3600)} h ago`;
  else text = new Date(t).toISOString().slice(0, 10);
  return h('time', { datetime: iso, title: iso }, text);
}

/** Shortens a run or record id for tables (the full id is the title). */
export function shortId(id) {
  return id && id.length > 13 ? `${id.slice(0, 8)}…${id.slice(-4)}` : id;
}

/** A card with a heading. */
export function card(title, ...children) {
  return h('section', { class: 'card' }, title ? h('h2', null, title) : null, ...children);
}
