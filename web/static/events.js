// Publish an event (POST /v1/events): name, key, data. The page checks the
// name and the data before sending, and then shows what the server answered:
// the event's id, the workflows whose waiting steps took it, the deliveries
// that failed, and that it is stored for steps that start waiting later.

import { api } from './api.js';
import { parseJSONField, showRefusal } from './forms.js';
import { h, replace } from './ui.js';

// What the server accepts as an event name and key.
const NAME = /^[A-Za-z0-9._:-]{1,128}$/;
const MAX_KEY = 256;

export function mount(root) {
  let left = false;
  const name = h('input', { id: 'event-name', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'payment', 'aria-label': 'Event name' });
  const nameErr = h('div', { class: 'field-error', id: 'event-name-error' });
  const key = h('input', { id: 'event-key', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'order-77', 'aria-label': 'Key (optional)' });
  const data = h('textarea', { id: 'event-data', rows: 6, spellcheck: 'false', value: '', placeholder: '{"amount": 3}', 'aria-label': 'Data (JSON)' });
  const dataErr = h('div', { class: 'field-error', id: 'event-data-error' });
  const answer = h('div', { id: 'event-answer' });
  const submit = h('button', { type: 'submit', class: 'primary', id: 'btn-event-submit' }, 'Publish event');

  const check = () => {
    const n = name.value.trim();
    nameErr.textContent = n === '' ? '' : NAME.test(n) ? '' : 'A name is 1–128 characters of letters, digits and . _ : -';
    if ([...key.value].length > MAX_KEY) nameErr.textContent = `The key has ${[...key.value].length} characters, more than ${MAX_KEY}.`;
    dataErr.textContent = parseJSONField(data.value).error || '';
  };
  name.addEventListener('input', check);
  key.addEventListener('input', check);
  data.addEventListener('input', check);

  const send = async (e) => {
    e.preventDefault();
    check();
    if (!name.value.trim()) nameErr.textContent = 'Name the event.';
    if (nameErr.textContent || dataErr.textContent) return;
    const body = { name: name.value.trim() };
    if (key.value) body.key = key.value;
    const parsed = parseJSONField(data.value, { def: null });
    if (parsed.value !== null) body.data = parsed.value;
    submit.disabled = true;
    replace(answer);
    try {
      const { data: res } = await api.publishEvent(body);
      if (!left) replace(answer, delivery(body, res));
    } catch (err) {
      if (err.status !== 401 && !left) showRefusal(answer, 'The server did not take the event', err);
    } finally {
      submit.disabled = false;
    }
  };

  replace(root,
    h('div', { class: 'page-head' }, h('h1', {}, 'Events')),
    h('section', { class: 'card form-card' },
      h('h2', {}, 'Publish an event'),
      h('p', { class: 'hint' }, 'Sends ', h('code', {}, 'POST /v1/events'),
        '. Every step waiting for this name and key takes it now; the server also keeps it (',
        h('code', {}, '--event-retention'), ', 24 h by default) for steps that start waiting later.'),
      h('form', { id: 'event-form', class: 'stack-form', onsubmit: send, novalidate: true },
        h('label', { for: 'event-name' }, 'Name'), name, nameErr,
        h('label', { for: 'event-key' }, 'Key ', h('span', { class: 'muted' }, '(optional; as the waiting step rendered it)')), key,
        h('label', { for: 'event-data' }, 'Data ', h('span', { class: 'muted' }, '(JSON, optional: the output of the steps that take it)')), data, dataErr,
        h('div', { class: 'actions' }, submit)),
      answer));
  return () => { left = true; };
}

/** delivery says what the server did with the event. */
function delivery(body, res) {
  const delivered = res.delivered || [];
  const failed = res.failed || [];
  const what = [h('code', {}, body.name), body.key ? [' · key ', h('code', {}, body.key)] : ''];
  const took = delivered.length === 0
    ? 'No step was waiting for it now.'
    : delivered.length === 1 ? '1 waiting step took it:' : `${delivered.length} waiting steps took it:`;
  return h('div', { class: 'event-result', role: 'status', 'data-delivered': String(delivered.length), 'data-event-id': res.id || '' },
    h('p', {}, h('strong', {}, 'Event published: '), what, ' ', h('span', { class: 'muted mono' }, res.id || '')),
    h('p', { id: 'event-took' }, took),
    delivered.length ? h('ul', { class: 'plain', id: 'event-delivered' }, delivered.map((id) => h('li', {},
      h('a', { class: 'mono', href: '#/workflows/' + encodeURIComponent(id) }, id)))) : null,
    failed.length ? h('div', { class: 'form-refusal', id: 'event-failed' },
      h('strong', {}, `${failed.length} deliver${failed.length === 1 ? 'y' : 'ies'} failed`), ' (the server retries them):',
      h('ul', { class: 'plain' }, failed.map((f) => h('li', {}, h('span', { class: 'mono' }, `${f.workflow_id} · ${f.step}`), ': ', f.error)))) : null,
    h('p', { class: 'muted small' }, 'It stays stored for the event retention: a step that starts waiting for it later, in a workflow created before it was published, takes it then.'));
}
