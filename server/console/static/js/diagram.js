// The workflow diagram the server draws for /visualize, fetched as SVG
// (GET /visualize.svg, with the token) and placed in the page as nodes:
// no inline script or style is involved, so the console's CSP holds.

import { api } from './api.js';
import { errorBox, fill, h } from './dom.js';

const latest = new WeakMap(); // element -> its latest request

export async function diagram(el, path) {
  const req = {};
  latest.set(el, req);
  try {
    const text = await api(path, { accept: 'image/svg+xml' });
    if (latest.get(el) !== req) return; // a newer diagram was asked for meanwhile
    const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
    const svg = doc.documentElement;
    if (svg.nodeName !== 'svg' || doc.querySelector('parsererror')) throw new Error('the diagram is not an SVG document');
    for (const s of svg.querySelectorAll('script, foreignObject')) s.remove();
    const node = document.importNode(svg, true);
    node.removeAttribute('width');
    node.removeAttribute('height');
    fill(el, node);
    const current = node.querySelector('.current');
    if (current) el.setAttribute('data-current', current.getAttribute('data-state') || '');
  } catch (e) {
    fill(el, errorBox(e, 'Diagram'), h('p', { class: 'muted' }, 'The diagram could not be drawn.'));
  }
}
