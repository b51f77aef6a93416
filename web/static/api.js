// The dashboard's only way to the server: fetch on the public /v1 API.
//
// Paths are relative ("v1/…"), so the page also works when flowd sits behind a
// proxy on a sub-path. A 401 opens the token prompt; the token lives in
// sessionStorage only (this tab, until it is closed) and is sent as a bearer token.

const TOKEN_KEY = 'flowd.token';

/** An error answer of the API: status code, reason phrase and the API's message. */
export class APIError extends Error {
  constructor(status, error, message, body) {
    super(message || error || `HTTP ${status}`);
    this.status = status;
    this.error = error || '';
    this.body = body;
  }
  /** One line for a banner: "409 Conflict: cannot pause …". */
  describe() {
    if (this.status === 0) return this.message;
    return `${this.status} ${this.error}${this.message ? ': ' + this.message : ''}`;
  }
}

let onAuthNeeded = () => {};
let onAnswer = () => {};

/** Registers what to do when the API asks for a token (reason: "missing" or "rejected"). */
export function setAuthHandler(fn) { onAuthNeeded = fn; }

/**
 * Registers fn(ok, reason), told after every request whether the server
 * answered: ok is false for a failed fetch or a 5xx.
 */
export function setAnswerHandler(fn) { onAnswer = fn; }

export function getToken() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
export function setToken(t) { sessionStorage.setItem(TOKEN_KEY, t); }
export function clearToken() { sessionStorage.removeItem(TOKEN_KEY); }

/**
 * request sends one API call. opts: body (object → JSON, string → as is),
 * headers, okStatuses (extra statuses that are not errors, e.g. [304]).
 * Resolves to {status, etag, data}; rejects with an APIError.
 */
export async function request(method, path, opts = {}) {
  const headers = new Headers(opts.headers || {});
  const token = getToken();
  if (token) headers.set('Authorization', 'Bearer ' + token);
  let body;
  if (opts.body !== undefined) {
    body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    if (!headers.has('Content-Type')) headers.set('Content-Type', 'application/json');
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body, cache: 'no-store' });
  } catch (e) {
    onAnswer(false, 'cannot reach the server');
    throw new APIError(0, 'Network error', `cannot reach the flowd server (${e.message})`);
  }
  onAnswer(res.status < 500, `the server answered ${res.status} ${res.statusText}`.trim());
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  const etag = res.headers.get('ETag');
  if (res.ok || (opts.okStatuses || []).includes(res.status)) {
    return { status: res.status, etag, data };
  }
  const err = new APIError(res.status, data?.error || res.statusText, data?.message || text.trim(), data);
  if (res.status === 401) {
    const reason = token ? 'rejected' : 'missing';
    if (token) clearToken();
    onAuthNeeded(reason);
  }
  throw err;
}

/** ifMatch is the If-Match value naming exactly one version. */
export function ifMatch(version) { return `"${version}"`; }

const enc = encodeURIComponent;

export const api = {
  // filters: more query parameters as the API takes them (search.NAME,
  // created_after, created_before, updated_before).
  listWorkflows: ({ status, definition, cursor, limit, idPrefix, filters } = {}) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filters || {})) q.set(k, v);
    if (status) q.set('status', status);
    if (definition) q.set('definition', definition);
    if (idPrefix) q.set('id_prefix', idPrefix);
    if (cursor) q.set('cursor', cursor);
    if (limit) q.set('limit', String(limit));
    const qs = q.toString();
    return request('GET', 'v1/workflows' + (qs ? '?' + qs : ''));
  },
  getWorkflow: (id, knownVersion) => request('GET', `v1/workflows/${enc(id)}`, knownVersion == null ? {} : {
    headers: { 'If-None-Match': ifMatch(knownVersion) }, okStatuses: [304],
  }),
  // One page of versions from since on, oldest first; data.next_since is
  // the since of the next page, absent on the last.
  history: (id, since = 0) => request('GET', `v1/workflows/${enc(id)}/history` + (since ? `?since=${since}` : '')),
  transition: (id, from, to) => request('POST', `v1/workflows/${enc(id)}/status`, { body: { from, to } }),
  action: (id, name) => request('POST', `v1/workflows/${enc(id)}/${name}`, { body: {} }),
  // from: {from: STEP} or {from_seq: N}; answers 201 with the new instance.
  rerun: (id, from) => request('POST', `v1/workflows/${enc(id)}/rerun`, { body: from }),
  patchState: (id, version, patch) => request('PATCH', `v1/workflows/${enc(id)}`, {
    body: patch,
    headers: { 'If-Match': ifMatch(version), 'Content-Type': 'application/merge-patch+json' },
  }),
  completeStep: (id, step, version, output) => request('POST', `v1/workflows/${enc(id)}/steps/${enc(step)}/complete`, {
    body: { output }, headers: { 'If-Match': ifMatch(version) },
  }),
  // Deletes a finished workflow only while it is still at version (412 otherwise).
  deleteWorkflow: (id, version) => request('DELETE', `v1/workflows/${enc(id)}`, { headers: { 'If-Match': ifMatch(version) } }),
  deleteDefinition: (name) => request('DELETE', `v1/definitions/${enc(name)}`),
  listDefinitions: () => request('GET', 'v1/definitions'),
  listWorkers: () => request('GET', 'v1/workers'),
  // body: {definition, id?, input?}; answers 201 with the new instance.
  createWorkflow: (body) => request('POST', 'v1/workflows', { body }),
  // body: {name, key?, data?}; answers 202 {id, delivered, failed?}.
  publishEvent: (body) => request('POST', 'v1/events', { body }),
  listSchedules: () => request('GET', 'v1/schedules'),
  // Bulk operations: the filter is the API's {status, definition, id_prefix,
  // search: {NAME: VALUE}, created_after, …}; count takes it as query.
  countBulk: (filter) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filter)) {
      if (k === 'search') for (const [n, sv] of Object.entries(v)) q.set('search.' + n, sv);
      else q.set(k, v);
    }
    return request('GET', 'v1/bulk/count?' + q.toString());
  },
  createBulk: (body) => request('POST', 'v1/bulk', { body }),
  listBulk: () => request('GET', 'v1/bulk?limit=20'),
  cancelBulk: (id) => request('POST', `v1/bulk/${enc(id)}/cancel`, { body: {} }),
  getDefinition: (name, revision) => request('GET', `v1/definitions/${enc(name)}` + (revision ? `?revision=${enc(revision)}` : '')),
};
