// The console's only way to the server: same-origin fetches of the public
// API with the operator's token as a Bearer header. The token is asked for
// when the server answers 401 and is kept in sessionStorage (this tab
// only), never put in a URL.

const TOKEN_KEY = 'asmp.token';

/**
 * The API's base path: where /console/ is mounted, so that a server behind
 * a path prefix (--public-url https://host/asmp) is called at /asmp/runs.
 */
export const BASE = location.pathname.replace(/\/console(\/.*)?$/, '');

/** An API path ("/runs") as the browser must ask for it. */
export function url(path) {
  return path.startsWith('/') ? BASE + path : path;
}

/** An API error: the HTTP status and the server's hint. */
export class ApiError extends Error {
  constructor(status, hint, body) {
    super(hint);
    this.status = status;
    this.hint = hint;
    this.body = body || {};
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

let asking = null;

/** Shows the token dialog (once for all waiting calls) and resolves with the token. */
function askToken(hint) {
  if (asking) return asking;
  const dialog = document.getElementById('token-dialog');
  const form = dialog.querySelector('form');
  const input = dialog.querySelector('input');
  dialog.querySelector('.hint').textContent = hint || 'This server needs a token.';
  input.value = '';
  asking = new Promise((resolve, reject) => {
    let given = false;
    const done = (ev) => {
      ev.preventDefault();
      const t = input.value.trim();
      if (!t) { input.focus(); return; }
      sessionStorage.setItem(TOKEN_KEY, t);
      given = true;
      dialog.close();
    };
    form.addEventListener('submit', done);
    dialog.addEventListener('close', () => {
      form.removeEventListener('submit', done);
      asking = null;
      if (given) resolve(token());
      else reject(new ApiError(401, `${hint || 'This server needs a token.'} No token was given: reload the page to enter one.`));
    }, { once: true });
  });
  dialog.showModal();
  input.focus();
  return asking;
}

export function headers(extra) {
  const hd = { ...extra };
  const t = token();
  if (t) hd.Authorization = `Bearer ${t}`;
  return hd;
}

async function errorOf(res) {
  let body = {};
  const text = await res.text().catch(() => '');
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  const hint = (body && typeof body.hint === 'string' && body.hint) ||
    `The server answered ${res.status} ${res.statusText}${text && !text.startsWith('{') ? `: ${text.slice(0, 200)}` : ''}.`;
  return new ApiError(res.status, hint, body);
}

/**
 * Calls the API: api('/runs?limit=5'), api('/runs', {method: 'POST', body: {...}}).
 * Resolves with the parsed JSON (or text for text answers), or with
 * {body, res} when opts.full; rejects with an ApiError carrying the hint.
 */
export async function api(path, opts = {}) {
  for (let attempt = 0; ; attempt++) {
    const init = { method: opts.method || 'GET', headers: headers({ Accept: opts.accept || 'application/json', ...opts.headers }), cache: 'no-store', signal: opts.signal };
    if (opts.body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.body);
    }
    let res;
    try {
      res = await fetch(url(path), init);
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(0, `Cannot reach the server (${e.message}). Check that asmp serve is running.`);
    }
    if (res.status === 401 && attempt < 5) {
      const err = await errorOf(res);
      await askToken(token() ? `That token was refused: ${err.hint}` : err.hint);
      continue;
    }
    if (!res.ok) throw await errorOf(res);
    const type = res.headers.get('Content-Type') || '';
    const body = type.includes('json') ? await res.json() : await res.text();
    return opts.full ? { body, res } : body;
  }
}

/**
 * Follows an NDJSON stream (GET /runs/{id}/stream) with fetch and a
 * ReadableStream (EventSource cannot send the Authorization header).
 * onLine gets each parsed line. Resolves when the stream ends.
 */
export async function stream(path, onLine, { signal, lastEventId } = {}) {
  const hd = headers({ Accept: 'application/x-ndjson' });
  if (lastEventId) hd['Last-Event-ID'] = String(lastEventId);
  const res = await fetch(url(path), { headers: hd, cache: 'no-store', signal });
  if (res.status === 401) {
    await askToken((await errorOf(res)).hint);
    return stream(path, onLine, { signal, lastEventId });
  }
  if (!res.ok) throw await errorOf(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (line) onLine(JSON.parse(line));
    }
  }
}
