// Receipt verification in the browser, step for step as oip/verify.Receipt
// does it in Go: the record's entry_hash is the SHA-256 of its RFC 8785
// canonical JSON; its Merkle leaf is SHA-256(0x00 || that JSON); the
// inclusion proof (RFC 6962) leads from the leaf to the root of a
// checkpoint; the checkpoint is a signed note (golang.org/x/mod/sumdb/note)
// carrying an Ed25519 signature by the pinned verifier key. Nothing the
// server says about the outcome is believed: only the key is trusted.

const enc = new TextEncoder();

/** RFC 8785 (JCS) canonical JSON of a parsed JSON value. */
export function canonicalJSON(v) {
  if (v === null || typeof v === 'boolean') return JSON.stringify(v);
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error('a number is not finite');
    return JSON.stringify(v); // ECMAScript's shortest round-trip form, as JCS requires
  }
  if (typeof v === 'string') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map(canonicalJSON).join(',') + ']';
  if (typeof v === 'object') {
    // Keys sorted by UTF-16 code units: the default sort order.
    const keys = Object.keys(v).sort();
    return '{' + keys.map((k) => JSON.stringify(k) + ':' + canonicalJSON(v[k])).join(',') + '}';
  }
  throw new Error('not a JSON value');
}

/** The content entry_hash and the leaf commit to (oip/verify.CanonicalJSON). */
export function hashedRecord(r) {
  const h = {
    body: r.body === undefined ? null : r.body,
    inv_ID: r.inv_ID,
    key: r.key,
    seq: r.seq,
    source: r.source,
    supersedes: r.supersedes ? r.supersedes : null,
    timestamp: r.timestamp,
    type: r.type,
  };
  if (r.result_of) h.result_of = r.result_of;
  if (r.replay_of) h.replay_of = r.replay_of;
  return h;
}

async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let i = 0;
  for (const p of parts) { out.set(p, i); i += p.length; }
  return out;
}

export function toHex(b) {
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

function fromHex(s) {
  if (typeof s !== 'string' || !/^[0-9a-f]{64}$/.test(s)) return null;
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function fromBase64(s) {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) return null;
  try {
    return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

function equalBytes(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

const leafHash = (data) => sha256(concat(Uint8Array.of(0), data));
const nodeHash = (l, r) => sha256(concat(Uint8Array.of(1), l, r));

function bitLen(x) { let n = 0; while (x > 0n) { n++; x >>= 1n; } return n; }
function onesCount(x) { let n = 0; while (x > 0n) { n += Number(x & 1n); x >>= 1n; } return n; }

/**
 * RFC 6962 root from an inclusion proof (transparency-dev/merkle's
 * RootFromInclusionProof): the inner part chains by the index's bits, the
 * border part always from the right.
 */
export async function rootFromInclusionProof(index, size, leaf, proof) {
  index = BigInt(index); size = BigInt(size);
  if (index >= size) throw new Error(`index is beyond size: ${index} >= ${size}`);
  const inner = bitLen(index ^ (size - 1n));
  const border = onesCount(index >> BigInt(inner));
  if (proof.length !== inner + border) throw new Error(`wrong proof size ${proof.length}, want ${inner + border}`);
  let seed = leaf;
  for (let i = 0; i < inner; i++) {
    seed = ((index >> BigInt(i)) & 1n) === 0n ? await nodeHash(seed, proof[i]) : await nodeHash(proof[i], seed);
  }
  for (let i = inner; i < proof.length; i++) seed = await nodeHash(proof[i], seed);
  return seed;
}

/** Parses a note verifier key "name+hash+base64(0x01 || Ed25519 key)". */
export async function parseVerifierKey(vkey) {
  vkey = (vkey || '').trim();
  // name+hash+key, cut at the first two '+' (base64 may hold more), as note.NewVerifier does.
  const i = vkey.indexOf('+');
  const j = vkey.indexOf('+', i + 1);
  const name = i > 0 ? vkey.slice(0, i) : '';
  const hash16 = j > i ? vkey.slice(i + 1, j) : '';
  const key64 = j > i ? vkey.slice(j + 1) : '';
  if (!name || !/^[0-9a-f]{8}$/.test(hash16)) throw new Error('malformed verifier key');
  const key = fromBase64(key64 || '');
  if (!key || key.length !== 33 || key[0] !== 1) throw new Error('the verifier key is not an Ed25519 key');
  const sum = await sha256(concat(enc.encode(name + '\n'), key));
  if (toHex(sum.slice(0, 4)) !== hash16) throw new Error('the verifier key\'s hash does not match its name and key');
  return { name, hash: hash16, raw: key.slice(1) };
}

/**
 * Verifies a signed checkpoint note with the verifier key and parses its
 * body (oip/verify.OpenCheckpoint): origin, tree size, root hash.
 */
export async function openCheckpoint(note, vkey) {
  const v = await parseVerifierKey(vkey);
  const split = note.lastIndexOf('\n\n');
  if (split < 0) throw new Error('malformed checkpoint note');
  const text = note.slice(0, split + 1);
  const sigs = note.slice(split + 2);
  if (!sigs.endsWith('\n')) throw new Error('malformed checkpoint note');
  let verified = false;
  for (const line of sigs.slice(0, -1).split('\n')) {
    if (!line.startsWith('— ')) throw new Error('malformed checkpoint signature line');
    const [name, b64] = line.slice(2).split(' ');
    const sig = fromBase64(b64 || '');
    if (!sig || sig.length < 5) throw new Error('malformed checkpoint signature');
    if (name !== v.name || toHex(sig.slice(0, 4)) !== v.hash) continue;
    const key = await crypto.subtle.importKey('raw', v.raw, { name: 'Ed25519' }, false, ['verify']);
    if (!(await crypto.subtle.verify({ name: 'Ed25519' }, key, sig.slice(4), enc.encode(text)))) {
      throw new Error(`the checkpoint's signature by ${name} is invalid`);
    }
    verified = true;
  }
  if (!verified) throw new Error('the checkpoint carries no signature by the pinned key');
  const lines = text.split('\n');
  if (lines.length < 4) throw new Error('checkpoint body has fewer than three lines');
  const [origin, sizeText, rootText] = lines;
  if (!origin) throw new Error('checkpoint has an empty origin');
  if (!/^(0|[1-9][0-9]*)$/.test(sizeText)) throw new Error(`checkpoint tree size ${JSON.stringify(sizeText)} is not a decimal number`);
  const root = fromBase64(rootText);
  if (!root || root.length !== 32) throw new Error('checkpoint root hash is not base64 of 32 bytes');
  return { origin, treeSize: BigInt(sizeText), rootHex: toHex(root), root };
}

/**
 * Checks a receipt: record (as GET /api/dispatch?receipt= answers it),
 * proof (GET /api/ledger/proof, with its checkpoint note) and the trusted
 * verifier key. Returns {ok, steps: [{name, ok, detail}]}: ok only when
 * every step holds.
 */
export async function verifyReceipt(record, proof, vkey) {
  const steps = [];
  const step = (name, ok, detail) => { steps.push({ name, ok, detail }); return ok; };
  try {
    const canon = enc.encode(canonicalJSON(hashedRecord(record)));
    const entry = toHex(await sha256(canon));
    if (!step('entry_hash is the SHA-256 of the record\'s canonical JSON', entry === record.entry_hash,
      entry === record.entry_hash ? entry : `the record says ${record.entry_hash}, its content hashes to ${entry}`)) return { ok: false, steps };
    if (proof.entry_hash && proof.entry_hash !== entry) return { ok: step('the proof is for this record', false, `proof is for entry_hash ${proof.entry_hash}`), steps };
    if (proof.inv_ID && proof.inv_ID !== record.inv_ID) return { ok: step('the proof is for this record', false, `proof is for ${proof.inv_ID}`), steps };
    if (!(record.seq >= 1) || proof.leaf_index !== record.seq - 1) return { ok: step('the proof is for this record', false, `proof is for leaf ${proof.leaf_index}, the record's seq is ${record.seq}`), steps };
    const leaf = await leafHash(canon);
    if (proof.leaf_hash && proof.leaf_hash !== toHex(leaf)) return { ok: step('the leaf hash is the record\'s', false, `proof's leaf ${proof.leaf_hash} is not ${toHex(leaf)}`), steps };
    step('the proof is for this record', true, `record ${record.seq} of ${proof.tree_size} (leaf index ${proof.leaf_index})`);
    let ck;
    try {
      ck = await openCheckpoint(proof.checkpoint || '', vkey);
    } catch (e) {
      return { ok: step('the checkpoint is signed by the pinned key (Ed25519)', false, e.message), steps };
    }
    step('the checkpoint is signed by the pinned key (Ed25519)', true, `${ck.origin}, ${ck.treeSize} records`);
    if (ck.treeSize !== BigInt(proof.tree_size)) return { ok: step('the proof leads to the checkpoint\'s root', false, `proof is for tree size ${proof.tree_size}, the checkpoint has ${ck.treeSize}`), steps };
    if (proof.root_hash && proof.root_hash !== ck.rootHex) return { ok: step('the proof leads to the checkpoint\'s root', false, `proof's root ${proof.root_hash} is not the checkpoint's ${ck.rootHex}`), steps };
    const path = (proof.proof || []).map(fromHex);
    const bad = path.findIndex((p) => p === null);
    if (bad >= 0) return { ok: step('the proof leads to the checkpoint\'s root', false, `proof hash ${bad} is not a hex SHA-256 hash`), steps };
    let root;
    try {
      root = await rootFromInclusionProof(proof.leaf_index, ck.treeSize, leaf, path);
    } catch (e) {
      return { ok: step('the proof leads to the checkpoint\'s root', false, e.message), steps };
    }
    if (!equalBytes(root, ck.root)) return { ok: step('the proof leads to the checkpoint\'s root', false, `the proof leads to ${toHex(root)}, the checkpoint's root is ${ck.rootHex}`), steps };
    step('the proof leads to the checkpoint\'s root', true, ck.rootHex);
    return { ok: true, steps };
  } catch (e) {
    step('the receipt can be read', false, e.message);
    return { ok: false, steps };
  }
}
