// Flow control on the workflow page: the instance's priority and, on a
// step, the concurrency key and rate limit key its tasks share with other
// steps (as the definition writes them: a template is rendered per task).

import { h } from './ui.js';

// priorityView is the instance's priority (1–5, higher claimed first).
export function priorityView(w) {
  if (w.priority === undefined || w.priority === null) return null;
  return h('span', { id: 'wf-priority', 'data-priority': String(w.priority), title: 'tasks of higher priorities are claimed first (1–5)' }, String(w.priority));
}

// flowTags are the tags of a step's concurrency and rate_limit: the key
// and its limit or rate.
export function flowTags(def) {
  const tags = [];
  const c = def?.concurrency;
  if (c) {
    tags.push(h('span', { class: 'tag flow-concurrency', 'data-key': c.key, title: `at most ${c.limit} leased tasks with this key, across definitions and nodes` },
      `concurrency · ${c.key} · ${c.limit} at once`));
  }
  const r = def?.rate_limit;
  if (r) {
    const key = r.key || '""';
    const burst = r.burst ? `, burst ${r.burst}` : '';
    tags.push(h('span', { class: 'tag flow-rate', 'data-key': r.key || '', title: 'deliveries sharing this key stay within one token bucket' },
      `rate limit · ${key} · ${r.per_second}/s${burst}`));
  }
  return tags;
}
