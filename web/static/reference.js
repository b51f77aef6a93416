// API reference: the server's own OpenAPI document (GET /v1/openapi.json)
// rendered as a readable page — operations grouped by tag, each one a
// collapsible block with its parameters, request body and responses, and the
// schemas they refer to at the end. Written here so that nothing is fetched
// from a CDN; everything from the document is put in the page as text.

import { request } from './api.js';
import { h, replace, errorBanner } from './ui.js';

const METHODS = ['get', 'put', 'post', 'patch', 'delete'];

export function mount(root) {
  replace(root, h('div', { class: 'page-head' }, h('h1', {}, 'API reference')), h('p', { class: 'muted' }, 'Loading…'));
  let gone = false;
  request('GET', 'v1/openapi.json').then(({ data }) => {
    if (!gone) render(root, data || {});
  }, (err) => {
    if (!gone) errorBanner('Loading the API description failed', err);
  });
  return () => { gone = true; };
}

/** operations lists the document's operations as {method, path, op, item}. */
export function operations(doc) {
  const out = [];
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const method of METHODS) {
      if (item[method]) out.push({ method, path, op: item[method], item });
    }
  }
  return out;
}

function render(root, doc) {
  const info = doc.info || {};
  const ops = operations(doc);
  const tags = (doc.tags || []).map((t) => t.name).filter((n) => ops.some((o) => (o.op.tags || ['other'])[0] === n));
  for (const o of ops) {
    const t = (o.op.tags || ['other'])[0];
    if (!tags.includes(t)) tags.push(t);
  }
  const schemas = (doc.components || {}).schemas || {};
  replace(root,
    h('div', { class: 'page-head' },
      h('h1', {}, info.title || 'API reference'),
      h('a', { href: 'v1/openapi.json', class: 'mono', id: 'openapi-raw' }, 'GET /v1/openapi.json')),
    h('p', { class: 'muted' }, `OpenAPI ${doc.openapi || '?'} · API version ${info.version || '?'} · ${ops.length} operations`),
    info.description ? h('pre', { class: 'api-desc' }, info.description.trim()) : null,
    tags.map((t) => h('section', { class: 'card api-tag', 'data-tag': t },
      h('h2', {}, t),
      ops.filter((o) => (o.op.tags || ['other'])[0] === t).map((o) => operation(doc, o)))),
    h('section', { class: 'card api-tag', id: 'api-schemas' },
      h('h2', {}, 'Schemas'),
      Object.entries(schemas).map(([name, s]) => h('details', { class: 'api-schema', id: 'schema-' + name },
        h('summary', {}, h('span', { class: 'mono' }, name), s.description ? h('span', { class: 'muted' }, ' — ' + s.description) : null),
        schemaView(doc, s, 0)))));
}

function operation(doc, { method, path, op, item }) {
  const params = [...(item.parameters || []), ...(op.parameters || [])].map((p) => resolve(doc, p));
  const body = op.requestBody ? resolve(doc, op.requestBody) : null;
  return h('details', { class: 'api-op', 'data-op': method.toUpperCase() + ' ' + path },
    h('summary', {},
      h('span', { class: 'api-method m-' + method }, method.toUpperCase()), ' ',
      h('span', { class: 'mono api-path' }, path), ' ',
      h('span', { class: 'muted' }, op.summary || '')),
    op.description ? h('pre', { class: 'api-desc' }, op.description.trim()) : null,
    params.length === 0 ? null : [h('h4', {}, 'Parameters'),
      h('table', { class: 'table api-params' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'In'), h('th', {}, 'Schema'), h('th', {}, 'Description'))),
        h('tbody', {}, params.map((p) => h('tr', {},
          h('td', { class: 'mono' }, p.name, p.required ? h('span', { class: 'api-req', title: 'required' }, ' *') : null),
          h('td', {}, p.in),
          h('td', {}, typeLabel(doc, p.schema || {})),
          h('td', {}, p.description || '')))))],
    body ? [h('h4', {}, 'Request body', body.required ? '' : ' (optional)'),
      body.description ? h('p', { class: 'muted' }, body.description) : null,
      contentView(doc, body.content)] : null,
    h('h4', {}, 'Responses'),
    Object.entries(op.responses || {}).map(([code, r0]) => {
      const r = resolve(doc, r0);
      return h('div', { class: 'api-response' },
        h('div', {}, h('span', { class: 'mono api-code' }, code), ' ', r.description || ''),
        r.headers ? h('div', { class: 'muted' }, 'Headers: ', Object.keys(r.headers).join(', ')) : null,
        contentView(doc, r.content));
    }));
}

function contentView(doc, content) {
  if (!content) return null;
  return Object.entries(content).map(([type, m]) => h('div', { class: 'api-content' },
    h('span', { class: 'muted mono' }, type), ' ', schemaView(doc, m.schema || {}, 0)));
}

/** resolve follows a local $ref ("#/components/…") of a parameter, body or response. */
function resolve(doc, v) {
  let seen = 0;
  while (v && v.$ref && seen++ < 10) {
    v = v.$ref.replace(/^#\//, '').split('/').reduce((o, k) => (o ? o[k] : undefined), doc) || {};
  }
  return v || {};
}

function refName(ref) { return ref.split('/').pop(); }

/** refLink opens and scrolls to a schema of the Schemas section. */
function refLink(ref) {
  const name = refName(ref);
  return h('button', {
    type: 'button', class: 'link-button mono api-ref',
    onclick: () => {
      const d = document.getElementById('schema-' + name);
      if (d) { d.open = true; d.scrollIntoView({ block: 'start' }); }
    },
  }, name);
}

/** typeLabel is a one-line description of a schema: a type, enum, const or reference. */
function typeLabel(doc, s) {
  if (s.$ref) return refLink(s.$ref);
  if (s.const !== undefined) return h('code', {}, JSON.stringify(s.const));
  if (s.enum) return h('span', { class: 'mono' }, s.enum.join(' | '));
  if (s.type === 'array' || (Array.isArray(s.type) && s.type.includes('array'))) {
    return h('span', {}, 'array of ', s.items ? typeLabel(doc, s.items) : 'any');
  }
  const t = Array.isArray(s.type) ? s.type.join(' | ') : s.type || 'any JSON';
  const extra = [];
  if (s.format) extra.push(s.format);
  if (s.pattern) extra.push('pattern ' + s.pattern);
  if (s.minimum !== undefined) extra.push('≥ ' + s.minimum);
  if (s.maximum !== undefined) extra.push('≤ ' + s.maximum);
  if (s.maxLength !== undefined) extra.push('≤ ' + s.maxLength + ' chars');
  return h('span', { class: 'mono' }, t, extra.length ? h('span', { class: 'muted' }, ' (' + extra.join(', ') + ')') : null);
}

/** schemaView shows an object's properties (nested up to three levels) or a type. */
function schemaView(doc, s, depth) {
  const props = s.properties || {};
  if (s.$ref || Object.keys(props).length === 0 || depth > 2) {
    const add = s.additionalProperties && typeof s.additionalProperties === 'object'
      ? h('span', {}, ' map of ', typeLabel(doc, s.additionalProperties)) : null;
    return h('span', { class: 'api-type' }, typeLabel(doc, s), add);
  }
  const required = s.required || [];
  return h('ul', { class: 'api-props' },
    s.additionalProperties === false ? h('li', { class: 'muted' }, 'no other fields (400)') : null,
    Object.entries(props).map(([name, p]) => h('li', {},
      h('span', { class: 'mono' }, name), required.includes(name) ? h('span', { class: 'api-req', title: 'required' }, ' *') : null,
      ': ', schemaView(doc, p, depth + 1),
      p.description ? h('span', { class: 'muted' }, ' — ' + p.description) : null)));
}
