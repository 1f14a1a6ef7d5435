// The console's shell: a hash router over the pages. Each page module
// exports mount(main, params, query) and may return a cleanup function,
// called when the operator leaves the page (it stops polls and streams).

import { forgetToken, token } from './api.js';
import { errorBox, fill, h } from './dom.js';
import * as runs from './runs.js';
import * as run from './run.js';
import * as workflows from './workflows.js';
import * as ledger from './ledger.js';
import * as webhooks from './webhooks.js';
import * as schedules from './schedules.js';

const routes = [
  [/^#\/runs\/([^/?]+)$/, 'runs', (m) => run.mount, (m) => [decodeURIComponent(m[1])]],
  [/^#\/runs(?:\?.*)?$/, 'runs', () => runs.mount, () => []],
  [/^#\/workflows$/, 'workflows', () => workflows.mount, () => []],
  [/^#\/ledger\/([^/?]+)$/, 'ledger', () => ledger.mountReceipt, (m) => [decodeURIComponent(m[1])]],
  [/^#\/ledger(?:\?.*)?$/, 'ledger', () => ledger.mount, () => []],
  [/^#\/webhooks$/, 'webhooks', () => webhooks.mount, () => []],
  [/^#\/schedules$/, 'schedules', () => schedules.mount, () => []],
];

let cleanup = null;

function query() {
  const i = location.hash.indexOf('?');
  return new URLSearchParams(i >= 0 ? location.hash.slice(i + 1) : '');
}

async function route() {
  if (cleanup) { try { cleanup(); } catch { /* leaving anyway */ } cleanup = null; }
  const main = document.getElementById('main');
  if (!location.hash || location.hash === '#' || location.hash === '#/') {
    location.replace('#/runs');
    return;
  }
  const r = routes.find(([re]) => re.test(location.hash));
  for (const a of document.querySelectorAll('header nav a')) {
    if (r && a.dataset.page === r[1]) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (!r) {
    fill(main, h('h1', null, 'Not found'), h('p', { class: 'notice error', role: 'alert' },
      'The console has no page at ', h('code', null, location.hash), '. ', h('a', { href: '#/runs' }, 'See the runs.')));
    return;
  }
  const m = location.hash.match(r[0]);
  fill(main, h('p', { class: 'muted' }, 'Loading…'));
  try {
    const c = await r[2](m)(main, ...r[3](m), query());
    if (typeof c === 'function') cleanup = c;
  } catch (e) {
    fill(main, h('h1', null, 'Something went wrong'), errorBox(e));
  }
  document.getElementById('sign-out').hidden = !token();
}

window.addEventListener('hashchange', route);
document.getElementById('sign-out').addEventListener('click', () => {
  forgetToken();
  route();
});
window.addEventListener('unhandledrejection', (ev) => {
  // An API failure nobody caught still shows its hint, in place.
  const main = document.getElementById('main');
  main.prepend(errorBox(ev.reason));
  ev.preventDefault();
});
route();
