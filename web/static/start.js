// Start a workflow: pick a definition (GET /v1/definitions), give an id or
// let the server make one, write the input as JSON. The input is checked in
// the page before anything is sent; what the server refuses (an id in use,
// a concurrency key the input lacks, a token that may not) is said in the
// form. Once created (POST /v1/workflows) the page opens the new workflow.
//
// #/start?definition=NAME opens it with NAME picked (the definition page
// links here).

import { api } from './api.js';
import { parseJSONField, showRefusal } from './forms.js';
import { h, replace, banner, errorBanner } from './ui.js';

/** startLink is the "Start workflow" button for a definition (or none picked). */
export function startLink(definition = '') {
  return h('a', {
    class: 'button primary-link', id: 'btn-start-workflow',
    href: '#/start' + (definition ? '?definition=' + encodeURIComponent(definition) : ''),
  }, 'Start workflow…');
}

export function mount(root, { query }) {
  const picked = query.get('definition') || '';
  const st = { sending: false, left: false };
  const select = h('select', { id: 'start-definition', required: true, 'aria-label': 'Definition' },
    h('option', { value: '' }, 'Loading definitions…'));
  const idInput = h('input', {
    id: 'start-id', type: 'text', placeholder: 'left empty, the server makes one', autocomplete: 'off', spellcheck: 'false',
    'aria-label': 'Workflow id (optional)',
  });
  const inputErr = h('div', { class: 'field-error', id: 'start-input-error' });
  const input = h('textarea', {
    id: 'start-input', rows: 8, spellcheck: 'false', value: '{}', 'aria-label': 'Input (JSON object)',
    oninput: () => { inputErr.textContent = parseJSONField(input.value, { object: true }).error || ''; },
  });
  const answer = h('div', { id: 'start-answer' });
  const submit = h('button', { type: 'submit', class: 'primary', id: 'btn-start-submit' }, 'Start workflow');

  const send = async (e) => {
    e.preventDefault();
    replace(answer);
    const parsed = parseJSONField(input.value, { object: true, def: {} });
    inputErr.textContent = parsed.error || '';
    if (parsed.error) {
      input.focus();
      return;
    }
    if (!select.value) {
      replace(answer, h('div', { class: 'form-refusal', role: 'alert' }, 'Pick a definition first.'));
      return;
    }
    const body = { definition: select.value, input: parsed.value };
    if (idInput.value.trim()) body.id = idInput.value.trim();
    st.sending = true;
    submit.disabled = true;
    try {
      const { data } = await api.createWorkflow(body);
      banner('success', `Workflow ${data.id} started — ${data.status} at version ${data.version}.`);
      if (!st.left) location.hash = '#/workflows/' + encodeURIComponent(data.id);
    } catch (err) {
      if (err.status !== 401) showRefusal(answer, 'The server did not start the workflow', err);
    } finally {
      st.sending = false;
      submit.disabled = false;
    }
  };

  replace(root,
    h('nav', { class: 'crumbs' }, h('a', { href: '#/workflows' }, 'Workflows'), h('span', { class: 'sep' }, '/'), h('span', {}, 'Start')),
    h('section', { class: 'card form-card' },
      h('h1', {}, 'Start a workflow'),
      h('p', { class: 'hint' }, 'Sends ', h('code', {}, 'POST /v1/workflows'), ' and opens the new workflow.'),
      h('form', { id: 'start-form', class: 'stack-form', onsubmit: send, novalidate: true },
        h('label', { for: 'start-definition' }, 'Definition'), select,
        h('label', { for: 'start-id' }, 'Id ', h('span', { class: 'muted' }, '(optional)')), idInput,
        h('label', { for: 'start-input' }, 'Input ', h('span', { class: 'muted' }, '(a JSON object, available to steps as .input)')), input, inputErr,
        answer,
        h('div', { class: 'actions' }, submit, h('a', { href: '#/workflows' }, 'Cancel')))));

  (async () => {
    let defs;
    try {
      defs = (await api.listDefinitions()).data.definitions || [];
    } catch (err) {
      errorBanner('Loading definitions failed', err);
      replace(select, h('option', { value: '' }, 'Could not load the definitions'));
      return;
    }
    defs.sort((a, b) => a.name.localeCompare(b.name));
    if (defs.length === 0) {
      replace(select, h('option', { value: '' }, 'No definitions yet'));
      replace(answer, h('p', { class: 'muted', id: 'start-no-definitions' }, 'Add a definition first, with “flowd def apply FILE” or PUT /v1/definitions/NAME.'));
      return;
    }
    replace(select,
      h('option', { value: '' }, 'Pick a definition…'),
      defs.map((d) => h('option', { value: d.name, selected: d.name === picked }, `${d.name} (rev ${d.revision})`)));
    if (picked && select.value !== picked) {
      replace(answer, h('div', { class: 'form-refusal', role: 'alert' }, 'There is no definition ', h('code', {}, picked), '.'));
    }
  })();
  return () => { st.left = true; };
}
