// Re-runs: a finished workflow runs again, as a new workflow, from one of
// its steps (a code workflow: from one of its recorded entries). The step's
// "Re-run from here…" asks first, then starts the re-run and goes to it;
// the page of a re-run links to its original, and the original lists its
// re-runs.

import { api } from './api.js';
import { h, banner, errorBanner } from './ui.js';

// A workflow in one of these statuses may be re-run: it runs nothing more.
const RERUNNABLE = ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'];

function workflowHref(id) { return '#/workflows/' + encodeURIComponent(id); }

/** canRerun: w has finished and runs flowd steps or code (not free-form). */
export function canRerun(w) {
  return Boolean(w?.definition) && RERUNNABLE.includes(w.status);
}

/** rerunOfLink is the "Re-run of" fact's value, or null. */
export function rerunOfLink(w) {
  if (typeof w?.rerun_of !== 'string' || !w.rerun_of) return null;
  return h('a', { href: workflowHref(w.rerun_of), class: 'mono', id: 'wf-rerun-of', 'data-rerun-of': w.rerun_of }, w.rerun_of);
}

/** rerunsList is the "Re-runs" fact's value (newest first), or null. */
export function rerunsList(w) {
  const ids = Array.isArray(w?.reruns) ? w.reruns.filter((x) => typeof x === 'string') : [];
  if (ids.length === 0) return null;
  return h('span', { id: 'wf-reruns' }, ids.map((id, i) => h('span', {}, i > 0 ? ', ' : '',
    h('a', { href: workflowHref(id), class: 'mono', 'data-rerun': id }, id))));
}

/**
 * rerunControl is a step's "Re-run from here…" button, or its confirmation
 * while ui.asking() says so. from is {from: STEP} or {from_seq: N}; what
 * names it in the question; ui.ask(open) opens or closes the question and
 * renders again.
 */
export function rerunControl(w, sid, from, what, ui) {
  if (!canRerun(w)) return null;
  if (!ui.asking()) {
    return h('button', {
      type: 'button', class: 'small-btn', 'data-rerun-step': sid, title: 'Start a new workflow that runs this step and what follows it again',
      onclick: () => ui.ask(true),
    }, 'Re-run from here…');
  }
  const go = async (e) => {
    e.target.disabled = true;
    try {
      const { data } = await api.rerun(w.id, from);
      banner('success', `Started ${data.id}, a re-run of ${w.id} from ${what}.`);
      ui.ask(false);
      location.hash = workflowHref(data.id);
    } catch (err) {
      e.target.disabled = false;
      errorBanner('Could not re-run the workflow', err);
    }
  };
  return h('span', { class: 'confirm rerun-confirm', id: 'rerun-confirm-' + sid },
    `Start a new workflow that runs ${what} and everything after it again? `,
    h('button', { type: 'button', class: 'primary', id: 'btn-rerun-confirm', onclick: go }, 'Yes, re-run'),
    h('button', { type: 'button', onclick: () => ui.ask(false) }, 'No'));
}
