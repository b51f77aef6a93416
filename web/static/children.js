// Links between a child workflow and its parent: the child's page names
// the parent's step that started it, and a workflow step of the parent
// links to the child (or, for a foreach, the children, in item order) its
// latest attempt runs.

import { h } from './ui.js';

function workflowHref(id) { return '#/workflows/' + encodeURIComponent(id); }

/** parentLink is the "Parent" fact of a child workflow, or null. */
export function parentLink(w) {
  const p = w?.parent;
  if (!p?.workflow_id) return null;
  const item = p.index !== undefined && p.index !== null ? ` item ${p.index}` : '';
  return h('span', { id: 'wf-parent' },
    h('a', { href: workflowHref(p.workflow_id), class: 'mono', 'data-parent': p.workflow_id }, p.workflow_id),
    h('span', { class: 'muted' }, ` step ${p.step}${item}`));
}

/** childLinks lists the child workflows a step runs, or null. */
export function childLinks(sid, s) {
  const ids = Array.isArray(s?.children) ? s.children.filter((x) => typeof x === 'string')
    : typeof s?.child === 'string' ? [s.child] : [];
  if (ids.length === 0) return null;
  return h('div', { class: 'step-children small', id: 'children-' + sid },
    h('span', { class: 'muted' }, ids.length === 1 ? 'child workflow ' : 'child workflows '),
    ids.map((id, i) => h('span', {}, i > 0 ? ', ' : '',
      h('a', { href: workflowHref(id), class: 'mono', 'data-child': id }, id))));
}
