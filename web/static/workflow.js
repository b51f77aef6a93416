// One workflow: header with status, version and actions; the steps (a graph
// and an ordered list, or for a code workflow a timeline of what its code
// recorded); the state with its editor and the conflict view; the version
// history with a diff between consecutive versions.
//
// Live refresh asks GET /v1/workflows/{id} with If-None-Match, so an unchanged
// workflow costs a 304. The editor is never refreshed under the user: it keeps
// the version it was loaded at, and Save sends that version in If-Match.

import { api } from './api.js';
import { every } from './live.js';
import { renderDAG, topoOrder } from './dag.js';
import { watchWorkers } from './workers.js';
import { parentLink, childLinks } from './children.js';
import { priorityView, flowTags } from './flowcontrol.js';
import { swPanel, swState, swPendingCount, isSWDocument } from './sw.js';
import { codeState, isCodeDefinition, codeStepsCard } from './code.js';
import { timelineCard, rowsOrder } from './timeline.js';
import { rerunControl, rerunOfLink, rerunsList } from './rerun.js';
import { diff, formatPath, mergePatch, fullPatch, applyMergePatch, nullPaths, overlaps, isObject } from './jsondiff.js';
import {
  h, replace, badge, jsonView, jsonText, compact, when, stepCounts, banner, errorBanner, displayOrder,
  ACTIONS, TERMINAL,
} from './ui.js';

const HISTORY_SHOWN = 25;

// An instance in one of these statuses runs nothing more: its deadline no
// longer applies, so it is not shown.
const ENDED = ['COMPLETED', 'CANCELLED', 'FAILED', 'TIMED_OUT'];
// A step is under way in these statuses, and done in the others but PENDING.
const STEP_ACTIVE = ['RUNNING', 'WAITING'];
const STEP_DONE = ['COMPLETED', 'FAILED', 'SKIPPED', 'CANCELLED'];

export function mount(root, { id }) {
  const st = {
    inst: null,
    def: null, // the definition revision the instance runs (definition-based only)
    history: null, // the versions loaded, oldest first: 0, 1, … with no gap
    historyNext: null, // the first version not loaded yet when more exist (next_since), else null
    historyAll: false,
    open: new Set(), // open <details> of step outputs, kept across refreshes
    completing: null, // {step, text} while the complete-step form is open
    editor: null, // {base, baseVersion, text}
    conflict: null, // {base, baseVersion, mine, server, serverVersion}
    confirmCancel: false,
    confirmDelete: false,
    rerunning: null, // the step whose "re-run from here" asks for a confirmation
    busy: false,
    gone: false,
  };

  const head = h('section', { class: 'card wf-head', id: 'wf-head' });
  const stepsBox = h('section', { class: 'card', id: 'wf-steps' });
  const timelineBox = h('section', { class: 'card', id: 'wf-timeline', hidden: true });
  const swBox = h('div', { id: 'wf-sw-box' });
  const workersBox = h('div', { id: 'wf-worker-warnings' });
  const workers = watchWorkers(workersBox, () => st);
  const stateBox = h('section', { class: 'card', id: 'wf-state' });
  const historyBox = h('section', { class: 'card', id: 'wf-history' });
  replace(root,
    h('nav', { class: 'crumbs' }, h('a', { href: '#/workflows' }, 'Workflows'), h('span', { class: 'sep' }, '/'), h('span', { class: 'mono' }, id)),
    head,
    workersBox,
    swBox,
    stepsBox,
    timelineBox,
    h('div', { class: 'wf-grid' }, stateBox, historyBox));
  replace(head, h('p', { class: 'muted' }, 'Loading…'));

  // ---- loading ----------------------------------------------------------

  async function loadAll() {
    try {
      const { data } = await api.getWorkflow(id);
      await setInstance(data);
    } catch (err) {
      if (err.status === 404) {
        st.gone = true;
        replace(head, h('h1', {}, 'Workflow not found'), h('p', {}, 'There is no workflow with the id ', h('code', {}, id), '. ', h('a', { href: '#/workflows' }, 'Back to the list.')));
        stepsBox.hidden = stateBox.hidden = historyBox.hidden = true;
        return;
      }
      errorBanner('Loading the workflow failed', err);
      replace(head, h('p', { class: 'muted' }, 'Could not load the workflow.'));
    }
  }

  async function setInstance(inst) {
    const changed = !st.inst || st.inst.version !== inst.version || st.inst.status !== inst.status;
    st.inst = inst;
    if (inst.definition && (!st.def || st.def.revision !== inst.definition_revision)) {
      try {
        const { data } = await api.getDefinition(inst.definition, inst.definition_revision || undefined);
        st.def = data;
      } catch (err) {
        if (err.status !== 404) errorBanner('Loading the definition failed', err);
      }
    }
    renderHead();
    replace(swBox, swPanel(inst));
    if (!st.completing) renderSteps();
    workers.update();
    renderState();
    if (changed) loadHistory();
  }

  async function refresh() {
    if (st.gone || !st.inst) return;
    const { status, data } = await api.getWorkflow(id, st.inst.version);
    if (status === 304) return;
    await setInstance(data);
  }

  // The history loads a page at a time, oldest first (the server sends at
  // most 1,000 versions a page). When the instance changes, the versions
  // after those loaded are fetched, as long as every earlier one is loaded;
  // otherwise "Load more versions" fetches the next page.
  async function loadHistory(more = false) {
    if (st.historyNext != null && !more) {
      renderHistory();
      return;
    }
    const have = st.history || [];
    const since = have.length ? have[have.length - 1].version + 1 : 0;
    try {
      const { data } = await api.history(id, since);
      // Another load may have appended meanwhile: keep versions in order, once.
      const cur = st.history || [];
      const last = cur.length ? cur[cur.length - 1].version : -1;
      if (last === since - 1) {
        st.history = cur.concat((data.versions || []).filter((v) => v.version > last));
        st.historyNext = data.next_since ?? null;
      }
    } catch (err) {
      errorBanner('Loading the history failed', err);
    }
    renderHistory();
    if (!st.completing) renderSteps(); // step times come from the history
  }

  // ---- header and actions -------------------------------------------------

  function renderHead() {
    const w = st.inst;
    const { done, total } = stepCounts(w.state);
    const actions = Object.entries(ACTIONS)
      .filter(([, from]) => from.includes(w.status))
      // A faulted Serverless Workflow instance cannot be retried (409):
      // its document retries tasks with try/catch.
      .filter(([name]) => !(name === 'retry' && swState(w)))
      .map(([name]) => name);
    const buttons = actions.map((name) => {
      if (name === 'cancel') {
        if (st.confirmCancel) {
          return h('span', { class: 'confirm' }, 'Cancel this workflow for good? ',
            h('button', { type: 'button', class: 'danger', id: 'btn-cancel-confirm', disabled: st.busy, onclick: () => act('cancel') }, 'Yes, cancel it'),
            h('button', { type: 'button', onclick: () => { st.confirmCancel = false; renderHead(); } }, 'No'));
        }
        return h('button', { type: 'button', class: 'danger-outline', id: 'btn-cancel', disabled: st.busy, onclick: () => { st.confirmCancel = true; renderHead(); } }, 'Cancel…');
      }
      const label = { pause: 'Pause', resume: 'Resume', retry: 'Retry' }[name];
      return h('button', { type: 'button', class: name === 'pause' ? '' : 'primary', id: `btn-${name}`, disabled: st.busy, onclick: () => act(name) }, label);
    });
    if (ENDED.includes(w.status)) {
      // Deleting is for good: a confirmation first, and If-Match with the
      // version shown, so a workflow retried meanwhile is not deleted.
      buttons.push(st.confirmDelete
        ? h('span', { class: 'confirm', id: 'delete-confirm' }, `Delete this workflow and its history (version ${w.version}) for good? `,
          h('button', { type: 'button', class: 'danger', id: 'btn-delete-confirm', disabled: st.busy, onclick: deleteWorkflow }, 'Yes, delete it'),
          h('button', { type: 'button', onclick: () => { st.confirmDelete = false; renderHead(); } }, 'No'))
        : h('button', { type: 'button', class: 'danger-outline', id: 'btn-delete', disabled: st.busy, onclick: () => { st.confirmDelete = true; renderHead(); } }, 'Delete…'));
    }
    if (w.status === 'PENDING' && !w.definition) {
      // A free-form instance starts only when a client says so.
      buttons.unshift(h('button', { type: 'button', class: 'primary', id: 'btn-start', disabled: st.busy, onclick: () => act('start') }, 'Start'));
    }
    replace(head,
      h('div', { class: 'wf-title' },
        h('h1', { class: 'mono', id: 'wf-id' }, w.id),
        badge(w.status, { id: 'wf-status', 'data-status': w.status }),
        h('div', { class: 'actions', id: 'wf-actions' }, buttons)),
      h('dl', { class: 'facts' },
        fact('Definition', w.definition
          ? h('span', {}, h('a', { href: '#/definitions/' + encodeURIComponent(w.definition) + (w.definition_revision ? '?revision=' + w.definition_revision : '') }, w.definition),
            w.definition_revision ? h('span', { class: 'muted' }, ` rev ${w.definition_revision}`) : null)
          : h('span', { class: 'muted' }, 'free-form')),
        w.parent ? fact('Parent', parentLink(w)) : null,
        w.rerun_of ? fact('Re-run of', rerunOfLink(w)) : null,
        w.reruns?.length ? fact('Re-runs', rerunsList(w)) : null,
        w.priority ? fact('Priority', priorityView(w)) : null,
        w.search && Object.keys(w.search).length ? fact('Search', h('span', { id: 'wf-search', class: 'search-attrs' },
          Object.keys(w.search).sort().map((k) => h('a', {
            class: 'chip', 'data-name': k, title: 'The workflows with this value',
            href: '#/workflows?' + new URLSearchParams({ ['search.' + k]: typeof w.search[k] === 'string' ? w.search[k] : JSON.stringify(w.search[k]) }),
          }, k + ' = ', h('code', {}, typeof w.search[k] === 'string' ? w.search[k] : JSON.stringify(w.search[k])))))) : null,
        fact('Version', h('span', { class: 'mono', id: 'wf-version', 'data-version': String(w.version) }, String(w.version)),
          h('span', { class: 'muted mono', title: 'ETag' }, ` ETag "${w.version}"`)),
        swState(w) ? fact('Pending', h('span', { id: 'wf-sw-pending-count' }, swPendingCount(w))) : fact('Steps', total ? `${done} of ${total} done` : h('span', { class: 'muted' }, 'none')),
        fact('Created', when(w.created_at)),
        fact('Updated', when(w.updated_at)),
        w.deadline && !ENDED.includes(w.status) ? fact('Deadline', h('span', { id: 'wf-deadline' }, when(w.deadline))) : null),
      h('details', { class: 'input-box', open: st.open.has('#input') || undefined, ontoggle: (e) => toggleOpen('#input', e.target.open) },
        h('summary', {}, 'Input'), jsonView(w.input ?? {}, { id: 'wf-input' })),
      outputBox(w));
  }

  // outputBox shows what a completed instance gave (absent before), open
  // unless the user closed it.
  function outputBox(w) {
    if (w.output === undefined) return null;
    return h('details', { class: 'input-box', id: 'wf-output-box', open: !st.open.has('#output-closed') || undefined, ontoggle: (e) => toggleOpen('#output-closed', !e.target.open) },
      h('summary', {}, 'Output'), jsonView(w.output, { id: 'wf-output' }));
  }

  function fact(label, ...value) {
    return h('div', { class: 'fact' }, h('dt', {}, label), h('dd', {}, ...value));
  }

  function toggleOpen(key, open) {
    if (open) st.open.add(key); else st.open.delete(key);
  }

  async function act(name) {
    st.busy = true;
    st.confirmCancel = false;
    renderHead();
    try {
      const { data } = name === 'start' ? await api.transition(id, 'PENDING', 'RUNNING') : await api.action(id, name);
      const past = { start: 'Started', pause: 'Paused', resume: 'Resumed', cancel: 'Cancelled', retry: 'Retrying' }[name];
      banner('success', `${past} — now ${data.status} at version ${data.version}.`);
      st.busy = false;
      await setInstance(data);
    } catch (err) {
      st.busy = false;
      errorBanner(`Could not ${name} the workflow`, err);
      await refresh().catch(() => {});
      renderHead();
    }
  }

  async function deleteWorkflow() {
    const version = st.inst.version;
    st.busy = true;
    st.confirmDelete = false;
    renderHead();
    try {
      await api.deleteWorkflow(id, version);
      st.gone = true;
      banner('success', `Workflow ${id} deleted.`);
      location.hash = '#/workflows';
    } catch (err) {
      st.busy = false;
      if (err.status === 412) {
        errorBanner(`The workflow changed since version ${version}; check it and delete again`, err);
      } else {
        errorBanner('Could not delete the workflow', err);
      }
      await refresh().catch(() => {});
      renderHead();
    }
  }

  // ---- steps ----------------------------------------------------------------

  function orderedSteps() {
    const stepsState = st.inst.state?.steps || {};
    const defSteps = st.def?.definition?.steps || [];
    const out = topoOrder(defSteps).map((d) => ({ id: d.id, def: d, s: stepsState[d.id] }));
    const known = new Set(defSteps.map((d) => d.id));
    for (const sid of Object.keys(stepsState).sort()) {
      if (!known.has(sid)) out.push({ id: sid, def: null, s: stepsState[sid] });
    }
    return out;
  }

  // isCode: a workflow written as code, whose steps only its code records.
  function isCode() {
    return codeState(st.inst) !== null || isCodeDefinition(st.def?.definition);
  }

  function canComplete(s) {
    if (!s || TERMINAL.includes(st.inst.status) || isCode()) return false;
    if (s.status === 'WAITING') return true;
    return !st.inst.definition && s.status !== 'COMPLETED'; // free-form: any open step
  }

  function renderSteps() {
    renderTimeline();
    if (isCode()) {
      const times = stepTimes(st.history || []);
      codeStepsCard(stepsBox, st.inst, {
        handler: st.def?.definition?.code?.handler,
        times: (sid, status) => stepTimesView(times[sid], status),
        open: st.open,
        toggle: toggleOpen,
        rerun: (sid, s) => (Number.isInteger(s?.seq) ? rerunControl(st.inst, sid, { from_seq: s.seq }, `#${s.seq} ${sid}`, rerunUI(sid)) : null),
      });
      stepsBox.hidden = false;
      return;
    }
    const steps = orderedSteps();
    // A Serverless Workflow instance has no flowd steps: its panel shows
    // where it is instead.
    stepsBox.hidden = steps.length === 0 && swState(st.inst) !== null;
    if (steps.length === 0) {
      replace(stepsBox, h('h2', {}, 'Steps'), h('p', { class: 'muted' }, 'This workflow has no steps.'));
      return;
    }
    const statuses = Object.fromEntries(steps.map((x) => [x.id, x.s?.status || 'PENDING']));
    const times = stepTimes(st.history || []);
    const graph = st.def?.definition?.steps?.length
      ? h('div', { class: 'dag-wrap' }, renderDAG(st.def.definition.steps, {
        statuses, progress: iterationLabels(steps), label: 'Steps of this workflow', onSelect: (sid) => document.getElementById('step-' + sid)?.scrollIntoView({ behavior: 'smooth', block: 'center' }),
      }))
      : null;
    replace(stepsBox,
      h('h2', {}, 'Steps'),
      graph,
      h('ol', { class: 'steps', id: 'step-list' }, steps.map((x) => stepItem(x, times))));
  }

  // rerunUI is the state of step sid's "re-run from here" confirmation.
  function rerunUI(sid) {
    return {
      asking: () => st.rerunning === sid,
      ask: (open) => { st.rerunning = open ? sid : null; renderSteps(); },
    };
  }

  function stepItem({ id: sid, def, s }, times) {
    const status = s?.status || 'PENDING';
    const hasOut = s && Object.hasOwn(s, 'output');
    const openKey = 'out:' + sid;
    const form = st.completing?.step === sid ? completeForm(sid) : null;
    return h('li', { class: `step st-border-${status}`, id: 'step-' + sid, 'data-step': sid, 'data-status': status },
      h('div', { class: 'step-row' },
        badge(status),
        h('span', { class: 'step-id mono' }, sid),
        def ? h('span', { class: 'tag' }, def.type === 'task' && def.handler ? `task · ${def.handler}` : def.type) : null,
        def?.depends_on?.length ? h('span', { class: 'muted small' }, 'after ' + def.depends_on.join(', ')) : null,
        def?.foreach ? h('span', { class: 'tag', title: 'foreach: ' + def.foreach }, def.max_concurrency ? `foreach · ${def.max_concurrency} at once` : 'foreach') : null,
        flowTags(def),
        h('span', { class: 'spacer' }),
        iterationsView(s?.iterations),
        stepTimesView(times[sid], status),
        s?.attempts ? h('span', { class: 'muted small', title: 'attempts delivered so far' }, s.attempts === 1 ? '1 attempt' : `${s.attempts} attempts`) : null,
        canComplete(s) && !form ? h('button', {
          type: 'button', class: 'small-btn', 'data-complete-step': sid,
          onclick: () => { st.completing = { step: sid, text: '{}' }; renderSteps(); document.getElementById('complete-output')?.focus(); },
        }, 'Complete…') : null,
        swState(st.inst) ? null : rerunControl(st.inst, sid, { from: sid }, `step ${sid}`, rerunUI(sid))),
      eventView(s),
      childLinks(sid, s),
      s?.error ? h('div', { class: 'step-error' }, s.error) : null,
      hasOut ? h('details', { class: 'step-output', open: st.open.has(openKey) || undefined, ontoggle: (e) => toggleOpen(openKey, e.target.open) },
        h('summary', {}, 'Output ', h('span', { class: 'muted mono' }, compact(s.output, 60))),
        jsonView(s.output)) : null,
      form);
  }

  function completeForm(sid) {
    const c = st.completing;
    const err = h('div', { class: 'field-error', id: 'complete-error' });
    const ta = h('textarea', {
      id: 'complete-output', rows: 4, spellcheck: 'false', value: c.text, 'aria-label': `Output of step ${sid}`,
      oninput: (e) => { c.text = e.target.value; err.textContent = parseError(c.text); },
    });
    const submit = async (e) => {
      e.preventDefault();
      let output;
      try { output = JSON.parse(c.text); } catch (ex) { err.textContent = 'Not valid JSON: ' + ex.message; return; }
      const version = st.inst.version;
      try {
        const { data } = await api.completeStep(id, sid, version, output);
        st.completing = null;
        banner('success', `Step ${sid} completed — workflow at version ${data.version}.`);
        await setInstance(data);
      } catch (ex) {
        if (ex.status === 412) {
          errorBanner(`The workflow changed since version ${version}; check the step and try again`, ex);
          await refresh().catch(() => {});
          renderSteps();
        } else {
          errorBanner(`Could not complete step ${sid}`, ex);
        }
      }
    };
    return h('form', { class: 'complete-form', onsubmit: submit },
      h('label', { for: 'complete-output' }, 'Output (JSON) — sent with If-Match: "', String(st.inst.version), '"'),
      ta, err,
      h('div', { class: 'actions' },
        h('button', { type: 'submit', class: 'primary', id: 'btn-complete-submit' }, 'Complete step'),
        h('button', { type: 'button', onclick: () => { st.completing = null; renderSteps(); } }, 'Cancel')));
  }

  function renderTimeline() {
    const order = rowsOrder(st.inst, isCode() ? [] : orderedSteps(), { code: isCode(), sw: swState(st.inst) !== null });
    timelineCard(timelineBox, st.inst, st.history || [], order, st.historyNext == null);
  }

  // ---- state, editor, conflict -------------------------------------------

  function renderState() {
    // Editing and comparing need the room: the state card then spans the grid.
    stateBox.classList.toggle('wide', Boolean(st.conflict || st.editor));
    if (st.conflict) return renderConflict();
    if (st.editor) return renderEditorNote();
    const w = st.inst;
    const terminal = TERMINAL.includes(w.status);
    replace(stateBox,
      h('div', { class: 'card-head' },
        h('h2', {}, 'State'),
        h('span', { class: 'muted small' }, `version ${w.version}`),
        h('span', { class: 'spacer' }),
        h('button', {
          type: 'button', id: 'btn-edit-state', disabled: terminal,
          title: terminal ? `A ${w.status} workflow cannot change` : 'Edit the state as JSON',
          onclick: openEditor,
        }, 'Edit state')),
      jsonView(displayOrder(w.state), { id: 'state-view' }));
  }

  // engineOwnsSteps: the engine owns the steps of a definition-based
  // instance; the server refuses a PATCH that touches them (409).
  function engineOwnsSteps() {
    return Boolean(st.inst?.definition);
  }

  // editable is the part of a state the editor shows and patches: all of
  // it, except the engine's steps, a Serverless Workflow instance's
  // interpreter state ("sw") and a code workflow's runs ("code"), which
  // only the engine writes.
  function editable(state) {
    if (!engineOwnsSteps() || !isObject(state)) return state;
    const { steps: _steps, ...rest } = state;
    if (engineOwnsSW()) delete rest.sw;
    if (isCode()) delete rest.code;
    return rest;
  }

  // engineOwnsSW: an instance of a Serverless Workflow document keeps its
  // interpreter state under "sw", which only the engine writes.
  function engineOwnsSW() {
    return engineOwnsSteps() && isSWDocument(st.def?.definition);
  }

  function openEditor() {
    const base = editable(structuredClone(st.inst.state));
    st.editor = { base, baseVersion: st.inst.version, text: jsonText(displayOrder(base)) };
    renderEditor();
    document.getElementById('state-editor')?.focus();
  }

  function closeEditor() {
    st.editor = null;
    st.conflict = null;
    renderState();
  }

  function renderEditor() {
    const ed = st.editor;
    stateBox.classList.add('wide');
    const err = h('div', { class: 'field-error', id: 'editor-error' });
    const warn = h('div', { class: 'field-warn', id: 'editor-warn' });
    const lines = ed.text.split('\n').length;
    const ta = h('textarea', {
      id: 'state-editor', class: 'editor', spellcheck: 'false', rows: Math.min(30, Math.max(12, lines + 1)), value: ed.text,
      'aria-label': 'State JSON',
      oninput: (e) => { ed.text = e.target.value; check(); },
    });
    const save = h('button', { type: 'button', class: 'primary', id: 'btn-save', onclick: saveEditor }, 'Save');
    const check = () => {
      const perr = parseError(ed.text, true);
      err.textContent = perr;
      save.disabled = Boolean(perr);
      warn.textContent = '';
      if (!perr && engineOwnsSW() && Object.hasOwn(JSON.parse(ed.text), 'sw')) {
        err.textContent = 'Remove "sw": the engine owns the Serverless Workflow state of this workflow.';
        save.disabled = true;
        return;
      }
      if (!perr && isCode() && Object.hasOwn(JSON.parse(ed.text), 'code')) {
        err.textContent = 'Remove "code": the engine keeps the runs of this workflow there.';
        save.disabled = true;
        return;
      }
      if (!perr && engineOwnsSteps() && Object.hasOwn(JSON.parse(ed.text), 'steps')) {
        err.textContent = isCode()
          ? 'Remove "steps": only the code of this workflow records its steps.'
          : 'Remove "steps": the engine owns the steps of this workflow; complete a waiting step with its Complete… button.';
        save.disabled = true;
        return;
      }
      if (!perr) {
        const nulls = nullPaths(JSON.parse(ed.text));
        if (nulls.length) warn.textContent = `A JSON merge patch cannot store null: ${nulls.map(formatPath).join(', ')} will be removed instead.`;
      }
    };
    replace(stateBox,
      h('div', { class: 'card-head' },
        h('h2', {}, 'Edit state'),
        h('span', { class: 'muted small' }, `based on version ${ed.baseVersion}`)),
      h('p', { class: 'hint' }, 'Save sends the edited state as a JSON Merge Patch with ', h('code', {}, `If-Match: "${ed.baseVersion}"`),
        '. If the workflow changed in the meantime you will see both versions.'),
      isCode() ? h('p', { class: 'hint', id: 'editor-steps-note' },
        'Steps are recorded by the code of this workflow and its runs are the engine\'s: neither is edited here. Variables and the other keys of the state can be edited.')
        : engineOwnsSteps() ? h('p', { class: 'hint', id: 'editor-steps-note' },
        'Steps are owned by the engine and are not edited here: a step is completed with its ', h('strong', {}, 'Complete…'),
        ' action (', h('code', {}, 'POST …/steps/{step}/complete'), '). Variables and the other keys of the state can be edited.') : null,
      h('div', { id: 'editor-note' }),
      ta, err, warn,
      h('div', { class: 'actions' },
        save,
        h('button', { type: 'button', id: 'btn-format', onclick: () => { try { ed.text = jsonText(JSON.parse(ed.text)); ta.value = ed.text; check(); } catch { /* shown below */ } } }, 'Format'),
        h('button', { type: 'button', id: 'btn-discard-edit', onclick: closeEditor }, 'Discard')));
    check();
    renderEditorNote();
  }

  // renderEditorNote updates only the note above the editor, so a refresh
  // never touches what the user is typing.
  function renderEditorNote() {
    const note = document.getElementById('editor-note');
    if (!note || !st.editor) return;
    const now = st.inst.version;
    replace(note, now > st.editor.baseVersion
      ? h('div', { class: 'inline-warn', id: 'editor-stale' }, `The workflow has changed since you started editing: it is at version ${now} now. Saving will show you both versions.`)
      : null);
  }

  async function saveEditor() {
    const ed = st.editor;
    let mine;
    try { mine = JSON.parse(ed.text); } catch { return; }
    if (!isObject(mine)) return;
    if (diff(ed.base, mine).length === 0) {
      banner('info', 'Nothing changed; nothing to save.');
      closeEditor();
      return;
    }
    const patch = fullPatch(ed.base, mine);
    try {
      const { data } = await api.patchState(id, ed.baseVersion, patch);
      st.editor = null;
      banner('success', `State saved — version ${ed.baseVersion} → ${data.version}.`);
      await setInstance(data);
    } catch (err) {
      if (err.status === 412) {
        await showConflict(ed.base, ed.baseVersion, mine);
        return;
      }
      errorBanner('Saving the state failed', err);
    }
  }

  async function showConflict(base, baseVersion, mine) {
    const { data } = await api.getWorkflow(id);
    st.conflict = { base, baseVersion, mine, server: editable(data.state), serverVersion: data.version };
    st.editor = null;
    await setInstance(data); // renders the conflict view through renderState
  }

  function renderConflict() {
    const c = st.conflict;
    if (st.inst.version > c.serverVersion) {
      // Live refresh saw a newer version: compare against that one.
      c.server = editable(st.inst.state);
      c.serverVersion = st.inst.version;
    }
    const theirs = diff(c.base, c.server);
    const ours = diff(c.base, c.mine);
    const both = overlaps(theirs, ours);
    const patch = mergePatch(c.base, c.mine);
    const result = displayOrder(applyMergePatch(c.server, patch));
    const paths = (changes) => new Set(changes.map((x) => formatPath(x.path)));
    replace(stateBox,
      h('div', { class: 'conflict', id: 'conflict' },
        h('div', { class: 'conflict-head' },
          h('h2', {}, 'Conflict: the workflow changed while you were editing'),
          h('p', {}, `You edited version ${c.baseVersion}; the server is at version ${c.serverVersion} now. `,
            'Your changes are not saved yet.')),
        h('div', { class: 'two-col' },
          h('div', {},
            h('h3', {}, `Changed on the server since version ${c.baseVersion}`),
            changeList(theirs, 'server-changes')),
          h('div', {},
            h('h3', {}, 'Your changes'),
            changeList(ours, 'my-changes'))),
        both.length ? h('div', { class: 'inline-warn', id: 'conflict-overlap' },
          'Both sides changed ', both.map((p, i) => [i ? ', ' : '', h('code', {}, formatPath(p))]),
          '. Re-applying keeps your value there.') : null,
        h('div', { class: 'two-col' },
          h('div', {}, h('h3', {}, `Your edit (based on version ${c.baseVersion})`),
            jsonView(displayOrder(c.mine), { id: 'conflict-mine', class: 'json side mine' }, paths(ours))),
          h('div', {}, h('h3', {}, `Server, version ${c.serverVersion}`),
            jsonView(displayOrder(c.server), { id: 'conflict-server', class: 'json side theirs' }, paths(theirs)))),
        h('details', { class: 'preview' },
          h('summary', {}, `Preview: your changes applied to version ${c.serverVersion}`),
          jsonView(result, { id: 'conflict-preview' }, new Set([...paths(ours), ...paths(theirs)]))),
        h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'primary', id: 'btn-reapply', onclick: reapply }, `Re-apply my changes on version ${c.serverVersion}`),
          h('button', {
            type: 'button', id: 'btn-edit-again',
            onclick: () => {
              st.editor = { base: structuredClone(c.server), baseVersion: c.serverVersion, text: jsonText(result) };
              stateBox.classList.add('wide');
              st.conflict = null;
              renderEditor();
            },
          }, 'Edit the merged result'),
          h('button', { type: 'button', class: 'danger-outline', id: 'btn-discard-mine', onclick: () => { banner('info', 'Your edit was discarded.'); closeEditor(); } }, 'Discard mine'))));
    // Scroll each side to its first change.
    for (const pre of stateBox.querySelectorAll('pre.side')) {
      const mark = pre.querySelector('mark');
      if (mark && mark.offsetTop > pre.clientHeight - 48) pre.scrollTop = mark.offsetTop - 48;
    }
  }

  async function reapply() {
    const c = st.conflict;
    // My changes relative to the version I started from, applied on top of
    // the server's newer version: what the server changed elsewhere stays.
    const patch = mergePatch(c.base, c.mine);
    if (Object.keys(patch).length === 0) {
      banner('info', 'Your edit changes nothing relative to the version you started from.');
      closeEditor();
      return;
    }
    try {
      const { data } = await api.patchState(id, c.serverVersion, patch);
      st.conflict = null;
      banner('success', `Your changes were re-applied on version ${c.serverVersion} — now version ${data.version}.`);
      await setInstance(data);
    } catch (err) {
      if (err.status === 412) {
        banner('warn', 'The workflow changed again; here is the newest version.');
        await showConflict(c.base, c.baseVersion, c.mine);
        return;
      }
      errorBanner('Re-applying failed', err);
    }
  }

  // ---- history --------------------------------------------------------------

  function renderHistory() {
    const versions = st.history || [];
    const items = [];
    for (let i = versions.length - 1; i >= 0; i--) {
      items.push(historyItem(versions[i], versions[i - 1]));
      if (!st.historyAll && items.length >= HISTORY_SHOWN) break;
    }
    const partial = st.historyNext != null;
    const total = st.inst ? st.inst.version + 1 : versions.length;
    let count = versions.length === 1 ? '1 version' : `${versions.length} versions, newest first`;
    if (partial) count = `versions 0–${versions.length - 1} of ${total}, newest first`;
    replace(historyBox,
      h('div', { class: 'card-head' }, h('h2', {}, 'History'),
        h('span', { class: 'muted small', id: 'history-count' }, count)),
      partial
        ? h('button', { type: 'button', class: 'link-button', id: 'history-more', onclick: () => loadHistory(true) }, 'Load more versions')
        : null,
      h('ol', { class: 'history', id: 'history' }, items),
      !st.historyAll && versions.length > HISTORY_SHOWN
        ? h('button', { type: 'button', class: 'link-button', onclick: () => { st.historyAll = true; renderHistory(); } }, (partial ? `Show all ${versions.length} loaded versions` : `Show all ${versions.length} versions`))
        : null);
  }

  function historyItem(v, prev) {
    const changes = [];
    if (prev && prev.status !== v.status) {
      changes.push(h('li', { class: 'chg chg-status' }, h('span', { class: 'op' }, '→'), 'status ', badge(prev.status), ' → ', badge(v.status)));
    }
    if (prev) {
      const d = diff(prev.state, v.state);
      changes.push(...d.map(changeItem));
      if (d.length === 0 && prev.status === v.status) changes.push(h('li', { class: 'chg muted' }, 'no change to the state'));
    }
    const key = 'v' + v.version;
    return h('li', { class: 'hist', 'data-version': String(v.version) },
      h('div', { class: 'hist-head' },
        h('span', { class: 'hist-v mono' }, `v${v.version}`),
        badge(v.status),
        h('span', { class: 'cause' }, v.cause || ''),
        // Who wrote the version: a token's name, "engine", "anonymous".
        v.actor ? h('span', { class: 'actor', title: 'who wrote this version' }, 'by ', h('span', { class: 'mono' }, v.actor)) : null,
        h('span', { class: 'spacer' }),
        when(v.at)),
      prev ? (changes.length > 8
        ? h('details', { class: 'many', open: st.open.has(key) || undefined, ontoggle: (e) => toggleOpen(key, e.target.open) },
          h('summary', {}, `${changes.length} changes`), h('ul', { class: 'changes' }, changes))
        : h('ul', { class: 'changes' }, changes))
        : h('details', { open: st.open.has(key) || undefined, ontoggle: (e) => toggleOpen(key, e.target.open) },
          h('summary', {}, 'Created with this state'), jsonView(v.state)));
  }

  // ---- shared -----------------------------------------------------------

  loadAll();
  const stop = every(refresh);
  // A running attempt's bar reaches to now: drawn again while any is open.
  const stopTimeline = every(async () => { if (st.inst && !ENDED.includes(st.inst.status) && !st.completing) renderTimeline(); });
  return () => { stop(); stopTimeline(); workers.stop(); };
}

/** changeList renders diff entries as a list, or a note when there are none. */
/**
 * iterationsView shows the progress of a foreach step, its state's
 * iterations {total, completed, failed, running}: "k/n items" with a bar,
 * and how many run or failed. Nothing for a step without iterations.
 */
export function iterationsView(it) {
  if (!it || typeof it.total !== 'number') return null;
  const parts = [`${it.completed}/${it.total} items`];
  if (it.running) parts.push(`${it.running} running`);
  if (it.failed) parts.push(`${it.failed} failed`);
  return h('span', {
    class: 'iterations muted small', 'data-iterations': `${it.completed}/${it.total}`,
    title: `foreach: ${it.completed} of ${it.total} iterations completed, ${it.running || 0} running, ${it.failed || 0} failed`,
  },
  // A <progress>, not a styled bar: the page's policy allows no inline style.
  h('progress', { class: 'iter-bar', max: String(Math.max(it.total, 1)), value: String(it.total ? it.completed : 1), 'aria-hidden': 'true' }),
  parts.join(' · '));
}

/** iterationLabels maps each foreach step with progress to "k/n", for the graph. */
export function iterationLabels(steps) {
  const out = {};
  for (const { id, s } of steps) {
    const it = s?.iterations;
    if (it && typeof it.total === 'number') out[id] = `${it.completed}/${it.total}`;
  }
  return out;
}

function changeList(changes, elId) {
  if (changes.length === 0) return h('p', { class: 'muted', id: elId }, 'No changes.');
  return h('ul', { class: 'changes', id: elId }, changes.map(changeItem));
}

function changeItem(c) {
  const path = h('code', { class: 'path' }, formatPath(c.path));
  if (c.op === 'added') {
    return h('li', { class: 'chg chg-add' }, h('span', { class: 'op' }, '+'), path, ' = ', h('span', { class: 'val', title: JSON.stringify(c.to) }, compact(c.to)));
  }
  if (c.op === 'removed') {
    return h('li', { class: 'chg chg-del' }, h('span', { class: 'op' }, '−'), path, h('span', { class: 'muted' }, ' removed (was '), h('span', { class: 'val', title: JSON.stringify(c.from) }, compact(c.from, 50)), h('span', { class: 'muted' }, ')'));
  }
  return h('li', { class: 'chg chg-mod' }, h('span', { class: 'op' }, '~'), path, ': ',
    h('span', { class: 'val old', title: JSON.stringify(c.from) }, compact(c.from, 50)), ' → ',
    h('span', { class: 'val', title: JSON.stringify(c.to) }, compact(c.to, 50)));
}

/** parseError is '' when text is valid JSON (an object, when object is set), else why not. */
function parseError(text, object = false) {
  let v;
  try { v = JSON.parse(text); } catch (e) { return 'Not valid JSON: ' + e.message; }
  if (object && !isObject(v)) return 'The state must be a JSON object.';
  return '';
}

/**
 * stepTimes derives, from the history (oldest first), when each step started
 * (the first version where it was RUNNING or WAITING) and finished (the
 * version where it last became COMPLETED, FAILED, SKIPPED or CANCELLED; none
 * while it runs again after a retry).
 */
export function stepTimes(versions) {
  const times = {};
  let prev = {};
  for (const v of versions) {
    const now = {};
    for (const [sid, s] of Object.entries(v.state?.steps || {})) {
      const status = s?.status || 'PENDING';
      now[sid] = status;
      const t = times[sid] || (times[sid] = {});
      if (STEP_ACTIVE.includes(status) && !t.started) t.started = v.at;
      if (!STEP_DONE.includes(status)) t.finished = undefined;
      else if (status !== prev[sid] || !t.finished) t.finished = v.at;
    }
    prev = now;
  }
  return times;
}

/**
 * eventView shows the event a wait step waits for — its name and its key as
 * rendered when the step started waiting (state.steps.S.event) — and, once
 * an event completed it, which one.
 */
export function eventView(s) {
  const ev = s?.event;
  if (!ev || typeof ev !== 'object' || typeof ev.name !== 'string') return null;
  const key = ev.key ? [' · key ', h('span', { class: 'mono event-key' }, ev.key)] : [' · no key'];
  if (s.status === 'WAITING') {
    return h('div', { class: 'step-event small', 'data-event': ev.name, title: 'POST /v1/events or flowd event completes this step' },
      'waiting for event ', h('span', { class: 'mono event-name' }, ev.name), key);
  }
  if (s.status === 'COMPLETED' && ev.id) {
    return h('div', { class: 'step-event small muted', 'data-event': ev.name, title: 'event ' + ev.id },
      'completed by event ', h('span', { class: 'mono event-name' }, ev.name), key);
  }
  return null;
}

/** stepTimesView shows a step's start, end and duration, when known. */
function stepTimesView(t, status) {
  if (!t || (!t.started && !t.finished)) return null;
  const parts = [];
  if (t.started) parts.push(h('span', { class: 'step-started' }, 'started ', when(t.started)));
  if (t.finished && STEP_DONE.includes(status)) {
    parts.push(h('span', { class: 'step-finished' }, `${status.toLowerCase()} `, when(t.finished)));
    if (t.started) {
      const ms = new Date(t.finished) - new Date(t.started);
      parts.push(h('span', { class: 'step-duration', title: `${ms} ms` }, 'took ' + duration(ms)));
    }
  }
  return h('span', { class: 'muted small step-times' }, parts.map((p, i) => [i ? ' · ' : '', p]));
}

/** duration is a short human form of ms milliseconds. */
export function duration(ms) {
  if (!(ms >= 0)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}
