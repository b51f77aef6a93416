// Definitions: the list of the latest revisions (live-refreshed), and one
// definition with its DAG drawn as SVG, its steps and its JSON — or, for a
// code definition (no steps), its handler, the retry of its runs and the
// workers serving it (live-refreshed).

import { api } from './api.js';
import { every } from './live.js';
import { renderDAG } from './dag.js';
import { stepsTable, definitionFacts } from './defsteps.js';
import { h, replace, jsonView, when, banner, errorBanner } from './ui.js';
import { isSWDocument, swTaskCount, swDefinitionCards } from './sw.js';
import { isCodeDefinition, codeDefinitionCards, runRetryText } from './code.js';
import { startLink } from './start.js';

export function mount(root, params) {
  if (params.page === 'one') {
    // Render into a box of our own: if the user moves on before the fetch
    // answers, the late render lands in a detached node, not the next view.
    const box = h('div');
    replace(root, box);
    // The page's live refresh starts once the definition has loaded, if
    // the user is still here.
    const life = { left: false, stop: null };
    mountOne(box, params.name, params.query.get('revision'), life);
    return () => { life.left = true; life.stop?.(); };
  }
  return mountList(root);
}

function mountList(root) {
  const tbody = h('tbody');
  replace(root,
    h('div', { class: 'page-head' }, h('h1', {}, 'Definitions')),
    h('div', { class: 'card table-card' },
      h('table', { class: 'table', id: 'def-table' },
        h('thead', {}, h('tr', {},
          h('th', {}, 'Name'), h('th', { class: 'num' }, 'Revision'), h('th', { class: 'num' }, 'Steps'),
          h('th', {}, 'Timeout'), h('th', {}, 'Updated'))),
        tbody)));
  let failed = false;
  const load = async () => {
    let defs;
    try {
      defs = (await api.listDefinitions()).data.definitions || [];
      failed = false;
    } catch (err) {
      if (!failed) errorBanner('Loading definitions failed', err);
      failed = true;
      return;
    }
    defs.sort((a, b) => a.name.localeCompare(b.name));
    if (defs.length === 0) {
      replace(tbody, h('tr', { class: 'empty-row' }, h('td', { colspan: 5 },
        'No definitions yet. Add one with “flowd def apply FILE” or PUT /v1/definitions/NAME.')));
      return;
    }
    replace(tbody, defs.map(definitionRow));
  };
  load();
  return every(load);
}

// timeoutText is a definition's workflow timeout: a duration, or a
// Serverless Workflow document's timeout.after (a duration object).
function timeoutText(def) {
  const t = isSWDocument(def) ? def.timeout?.after : def?.timeout;
  if (!t) return h('span', { class: 'muted' }, 'none');
  return h('span', { class: 'mono' }, typeof t === 'string' ? t : JSON.stringify(t));
}

function definitionRow(d) {
  const href = '#/definitions/' + encodeURIComponent(d.name);
  return h('tr', { class: 'clickable', 'data-name': d.name, onclick: (e) => { if (!e.target.closest('a')) location.hash = href; } },
    h('td', {}, h('a', { href, class: 'mono' }, d.name)),
    h('td', { class: 'num mono' }, String(d.revision)),
    h('td', { class: 'num mono' }, isCodeDefinition(d.definition)
      ? h('span', { class: 'tag', title: 'a workflow written as code: handler ' + d.definition.code.handler }, 'code')
      : isSWDocument(d.definition)
        ? h('span', { title: 'a Serverless Workflow document: its tasks at every depth' }, String(swTaskCount(d.definition)))
        : String(d.definition?.steps?.length ?? 0)),
    h('td', {}, timeoutText(d.definition)),
    h('td', {}, when(d.created_at)));
}

async function mountOne(root, name, revision, life) {
  replace(root,
    h('nav', { class: 'crumbs' }, h('a', { href: '#/definitions' }, 'Definitions'), h('span', { class: 'sep' }, '/'), h('span', { class: 'mono' }, name)),
    h('p', { class: 'muted' }, 'Loading…'));
  let info;
  let latest;
  try {
    info = (await api.getDefinition(name, revision || undefined)).data;
    latest = revision ? (await api.getDefinition(name)).data.revision : info.revision;
  } catch (err) {
    if (err.status === 404) {
      replace(root, h('div', { class: 'empty' }, h('h2', {}, 'Definition not found'),
        h('p', {}, 'There is no definition ', h('code', {}, name), revision ? ` at revision ${revision}` : '', '. ',
          h('a', { href: '#/definitions' }, 'Back to the definitions.'))));
      return;
    }
    errorBanner('Loading the definition failed', err);
    return;
  }
  const def = info.definition || { steps: [] };
  const steps = def.steps || [];
  const base = '#/definitions/' + encodeURIComponent(name);
  const revLinks = [];
  for (let r = Math.max(1, latest - 9); r <= latest; r++) {
    revLinks.push(r === info.revision
      ? h('span', { class: 'rev current' }, String(r))
      : h('a', { class: 'rev', href: r === latest ? base : `${base}?revision=${r}` }, String(r)));
  }
  if (isSWDocument(def)) {
    // A Serverless Workflow document: its tasks and the document itself.
    replace(root,
      h('nav', { class: 'crumbs' }, h('a', { href: '#/definitions' }, 'Definitions'), h('span', { class: 'sep' }, '/'), h('span', { class: 'mono' }, name)),
      h('section', { class: 'card' },
        h('div', { class: 'wf-title' },
          h('h1', { class: 'mono', id: 'def-name' }, name),
          h('span', { class: 'tag' }, `revision ${info.revision}`),
          h('span', { class: 'tag', id: 'def-kind' }, 'Serverless Workflow'),
          h('span', { class: 'spacer' }),
          h('a', { class: 'button', href: '#/workflows?definition=' + encodeURIComponent(name) }, 'Workflows of this definition →'),
        startLink(name),
          deleteControl(name)),
        h('dl', { class: 'facts' },
          h('div', { class: 'fact' }, h('dt', {}, 'Revisions'), h('dd', { class: 'revs' }, revLinks)))),
      swDefinitionCards(info));
    return;
  }
  if (isCodeDefinition(def)) {
    // A workflow written as code: no steps to draw, the function's handler
    // and the workers that serve it instead.
    const { cards, load } = codeDefinitionCards(def);
    replace(root,
      h('nav', { class: 'crumbs' }, h('a', { href: '#/definitions' }, 'Definitions'), h('span', { class: 'sep' }, '/'), h('span', { class: 'mono' }, name)),
      h('section', { class: 'card' },
        h('div', { class: 'wf-title' },
          h('h1', { class: 'mono', id: 'def-name' }, name),
          h('span', { class: 'tag' }, `revision ${info.revision}`),
          h('span', { class: 'tag', id: 'def-kind' }, 'code'),
          h('span', { class: 'spacer' }),
          h('a', { class: 'button', href: '#/workflows?definition=' + encodeURIComponent(name) }, 'Workflows of this definition →'),
        startLink(name),
          deleteControl(name)),
        h('dl', { class: 'facts' },
          h('div', { class: 'fact' }, h('dt', {}, 'Handler'), h('dd', {}, h('code', { id: 'def-handler' }, def.code.handler))),
          h('div', { class: 'fact' }, h('dt', {}, 'Runs retried'), h('dd', { id: 'def-run-retry', title: 'how failed runs of the function are retried (retry)' }, runRetryText(def.retry))),
          h('div', { class: 'fact' }, h('dt', {}, 'Timeout'), h('dd', {}, def.timeout || h('span', { class: 'muted' }, 'none'))),
          h('div', { class: 'fact' }, h('dt', {}, 'Retention'), h('dd', {}, retentionText(def.retention))),
          h('div', { class: 'fact' }, h('dt', {}, 'Stored'), h('dd', {}, when(info.created_at))),
          h('div', { class: 'fact' }, h('dt', {}, 'Revisions'), h('dd', { class: 'revs' }, revLinks)))),
      cards);
    await load();
    if (!life.left) life.stop = every(load);
    return;
  }
  replace(root,
    h('nav', { class: 'crumbs' }, h('a', { href: '#/definitions' }, 'Definitions'), h('span', { class: 'sep' }, '/'), h('span', { class: 'mono' }, name)),
    h('section', { class: 'card' },
      h('div', { class: 'wf-title' },
        h('h1', { class: 'mono', id: 'def-name' }, name),
        h('span', { class: 'tag' }, `revision ${info.revision}`),
        h('span', { class: 'spacer' }),
        h('a', { class: 'button', href: '#/workflows?definition=' + encodeURIComponent(name) }, 'Workflows of this definition →'),
        startLink(name),
        deleteControl(name)),
      h('dl', { class: 'facts' },
        h('div', { class: 'fact' }, h('dt', {}, 'Steps'), h('dd', {}, String(steps.length))),
        h('div', { class: 'fact' }, h('dt', {}, 'Timeout'), h('dd', {}, def.timeout || h('span', { class: 'muted' }, 'none'))),
        h('div', { class: 'fact' }, h('dt', {}, 'Retention'), h('dd', {}, retentionText(def.retention))),
        definitionFacts(def),
        h('div', { class: 'fact' }, h('dt', {}, 'Stored'), h('dd', {}, when(info.created_at))),
        h('div', { class: 'fact' }, h('dt', {}, 'Revisions'), h('dd', { class: 'revs' }, revLinks)))),
    h('section', { class: 'card' },
      h('h2', {}, 'Graph'),
      steps.length ? h('div', { class: 'dag-wrap', id: 'def-dag' }, renderDAG(steps, { label: `Steps of ${name}` }))
        : h('p', { class: 'muted' }, 'No steps.')),
    h('section', { class: 'card' },
      h('h2', {}, 'Steps'),
      h('div', { class: 'table-scroll' }, stepsTable(def))),
    h('section', { class: 'card' },
      h('details', { class: 'json-box' }, h('summary', {}, 'Definition JSON'), jsonView(def, { id: 'def-json' }))));
}

// retentionText says how long finished workflows of the definition are
// kept: its own retention, for ever (0s), or the server's (--retention).
function retentionText(r) {
  if (r === undefined || r === null) return h('span', { class: 'muted' }, "the server's");
  if (r === '0s') return 'for ever';
  return r;
}

// deleteControl is the Delete… button of a definition, behind a
// confirmation: every revision goes, and the server refuses (409) while a
// workflow of it is not finished.
function deleteControl(name) {
  const box = h('span', { class: 'actions', id: 'def-delete' });
  const ask = () => replace(box, h('button', { type: 'button', class: 'danger-outline', id: 'btn-def-delete', onclick: confirm }, 'Delete…'));
  const confirm = () => replace(box, h('span', { class: 'confirm', id: 'def-delete-confirm' }, 'Delete every revision of this definition? ',
    h('button', { type: 'button', class: 'danger', id: 'btn-def-delete-confirm', onclick: remove }, 'Yes, delete it'),
    h('button', { type: 'button', onclick: ask }, 'No')));
  const remove = async () => {
    try {
      await api.deleteDefinition(name);
      banner('success', `Definition ${name} deleted.`);
      location.hash = '#/definitions';
    } catch (err) {
      errorBanner(err.status === 409 ? 'The definition still has workflows that are not finished' : 'Could not delete the definition', err);
      ask();
    }
  };
  ask();
  return box;
}
