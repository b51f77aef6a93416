// What the forms that act on the server (start a workflow, publish an event)
// share: checking a JSON field before anything is sent, and saying in the
// form what the server answered when it refused.

import { h, replace } from './ui.js';

/**
 * parseJSONField parses text as JSON. Empty text is def. With object set,
 * only a JSON object is accepted. Returns {value} or {error}.
 */
export function parseJSONField(text, { object = false, def = undefined } = {}) {
  if (text.trim() === '') return { value: def };
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { error: 'Not valid JSON: ' + e.message };
  }
  if (object && (value === null || typeof value !== 'object' || Array.isArray(value))) {
    return { error: `Must be a JSON object ({…}), not ${Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value}.` };
  }
  return { value };
}

/**
 * showRefusal puts what the server answered in box: the status, its reason
 * and message, and for a 403 that the token in use may not do this.
 */
export function showRefusal(box, what, err) {
  const denied = err?.status === 403;
  replace(box, h('div', { class: 'form-refusal', role: 'alert', 'data-status': String(err?.status ?? '') },
    h('strong', {}, denied ? `${what}: not allowed with this token.` : `${what}:`), ' ',
    err?.describe ? err.describe() : String(err?.message || err),
    denied ? h('div', { class: 'muted small' }, 'Use “Forget token” at the top right and enter a token whose role may do this.') : null));
}
