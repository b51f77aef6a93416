// The workflow list's filters by search attributes and time. They live in
// the page's address, as the API takes them (search.NAME=VALUE,
// created_after, created_before, updated_before: RFC 3339), so a filtered
// list can be shared: #/workflows?search.customer=acme&created_after=….

import { h } from './ui.js';

const NAME = /^[a-z][a-z0-9_]{0,62}$/; // a search attribute's name, as the server checks it
export const TIMES = [
  ['created_after', 'Created after'],
  ['created_before', 'Created before'],
  ['updated_before', 'Updated before'],
];

// listFilters reads the filters of the page's query: the API parameters
// to pass on, and whether any is set.
export function listFilters(query) {
  const params = {};
  for (const [k, v] of query) {
    if (k.startsWith('search.') || TIMES.some(([t]) => t === k)) params[k] = v;
  }
  return { params, any: Object.keys(params).length > 0 };
}

// filterChips shows each filter set, with a button that removes it.
export function filterChips(query, setQuery) {
  const { params } = listFilters(query);
  return Object.entries(params).map(([k, v]) => {
    const label = k.startsWith('search.') ? k.slice('search.'.length) + ' = ' : (TIMES.find(([t]) => t === k)[1].toLowerCase() + ' ');
    const shown = k.startsWith('search.') ? v : new Date(v).toLocaleString();
    return h('span', { class: 'chip', 'data-filter': k }, label, h('code', {}, shown),
      h('button', { type: 'button', class: 'chip-x', 'aria-label': `Remove filter ${k}`, onclick: () => setQuery({ [k]: '' }) }, '×'));
  });
}

// localValue is t (RFC 3339) as a datetime-local input shows it.
function localValue(t) {
  if (!t) return '';
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

// filterForm is the form that sets the filters: attributes as NAME=VALUE
// (one per line or separated by spaces; several are ANDed) and the times.
// Applying it replaces the filters in the address; a mistake is shown
// under the form and changes nothing.
export function filterForm(query, setQuery) {
  const { params, any } = listFilters(query);
  const attrs = Object.entries(params).filter(([k]) => k.startsWith('search.')).map(([k, v]) => `${k.slice(7)}=${v}`).join('\n');
  const where = h('textarea', { id: 'filter-where', rows: 2, placeholder: 'customer=acme\nregion=eu', spellcheck: 'false', 'aria-label': 'Search attributes, NAME=VALUE' });
  where.value = attrs;
  const times = TIMES.map(([k, label]) => [k, h('input', { id: 'filter-' + k.replace('_', '-'), type: 'datetime-local', value: localValue(params[k]), 'aria-label': label })]);
  const problem = h('p', { class: 'form-error', id: 'filter-error', hidden: true });
  const apply = (e) => {
    e.preventDefault();
    const changes = {};
    for (const k of Object.keys(params)) changes[k] = '';
    for (const pair of where.value.split(/\s+/).filter(Boolean)) {
      const i = pair.indexOf('=');
      const name = i < 0 ? pair : pair.slice(0, i);
      if (i < 0 || !NAME.test(name)) {
        problem.hidden = false;
        problem.textContent = `“${pair}”: write NAME=VALUE, NAME a lowercase letter then a-z, 0-9 or _`;
        return;
      }
      changes['search.' + name] = pair.slice(i + 1);
    }
    for (const [k, input] of times) changes[k] = input.value ? new Date(input.value).toISOString() : '';
    problem.hidden = true;
    setQuery(changes);
  };
  return h('details', { class: 'filter-box', id: 'filter-box', open: any || undefined },
    h('summary', {}, 'Filter by search attributes and time'),
    h('form', { id: 'filter-form', class: 'filter-form', onsubmit: apply },
      h('label', { class: 'field' }, h('span', {}, 'Search attributes (NAME=VALUE, all must match)'), where),
      times.map(([k, input]) => h('label', { class: 'field' }, h('span', {}, TIMES.find(([t]) => t === k)[1]), input)),
      h('div', { class: 'filter-actions' },
        h('button', { type: 'submit', class: 'primary', id: 'filter-apply' }, 'Apply'),
        any ? h('button', { type: 'button', id: 'filter-clear', onclick: () => setQuery(Object.fromEntries(Object.keys(params).map((k) => [k, '']))) }, 'Clear') : null),
      problem));
}
