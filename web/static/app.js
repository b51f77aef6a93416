// The dashboard shell: hash router, live-refresh switch and token prompt.
//
// Routes: #/workflows[?status=&definition=], #/workflows/ID, #/definitions,
// #/definitions/NAME[?revision=N], #/start[?definition=NAME], #/events,
// #/workers, #/schedules, #/bulk[?filter], #/api. Each view is mount(root, params) → cleanup.

import { setAuthHandler, setAnswerHandler, setToken, clearToken, getToken } from './api.js';
import { clearBanners, h, replace } from './ui.js';
import { live, setLive, onLiveChange, serverAnswered } from './live.js';
import * as workflows from './workflows.js';
import * as workflowPage from './workflow.js';
import * as definitions from './definitions.js';
import * as schedules from './schedules.js';
import * as reference from './reference.js';
import * as startPage from './start.js';
import * as events from './events.js';
import * as workers from './workers.js';
import * as bulk from './bulk.js';

// The indicator has three states (data-state): live (green), paused (grey)
// and offline (red: the server does not answer; it is probed until it does).
function renderLive() {
  const b = document.getElementById('live-toggle');
  const state = live.offline ? 'offline' : live.on ? 'live' : 'paused';
  b.dataset.state = state;
  b.setAttribute('aria-pressed', String(live.on));
  b.classList.toggle('off', !live.on);
  b.classList.toggle('offline', live.offline);
  const toggle = live.on ? 'click to pause live refresh' : 'click to resume live refresh';
  b.title = {
    live: 'Refreshing every 2 seconds — click to pause',
    paused: 'Live refresh paused — click to resume',
    offline: `The flowd server does not answer (${live.offlineReason}); retrying every 2 seconds — ${toggle}`,
  }[state];
  document.getElementById('live-label').textContent = { live: 'Live', paused: 'Paused', offline: 'Offline — retrying' }[state];
}

const routes = [
  { re: /^\/?$/, view: workflows, nav: 'workflows' },
  { re: /^\/workflows\/?$/, view: workflows, nav: 'workflows' },
  { re: /^\/workflows\/([^/]+)$/, view: workflowPage, nav: 'workflows', keys: ['id'] },
  { re: /^\/definitions\/?$/, view: definitions, nav: 'definitions', page: 'list' },
  { re: /^\/definitions\/([^/]+)$/, view: definitions, nav: 'definitions', keys: ['name'], page: 'one' },
  { re: /^\/start\/?$/, view: startPage, nav: 'workflows' },
  { re: /^\/events\/?$/, view: events, nav: 'events' },
  { re: /^\/workers\/?$/, view: workers, nav: 'workers' },
  { re: /^\/schedules\/?$/, view: schedules, nav: 'schedules' },
  { re: /^\/bulk\/?$/, view: bulk, nav: 'bulk' },
  { re: /^\/api\/?$/, view: reference, nav: 'api' },
];

let cleanup = null;
let currentHash = null;

function route() {
  const raw = location.hash.replace(/^#/, '') || '/workflows';
  const [path, qs] = raw.split('?');
  const query = new URLSearchParams(qs || '');
  const root = document.getElementById('view');
  if (cleanup) { cleanup(); cleanup = null; }
  if (raw !== currentHash) clearBanners();
  currentHash = raw;
  for (const r of routes) {
    const m = r.re.exec(path);
    if (!m) continue;
    const params = { query, page: r.page };
    (r.keys || []).forEach((k, i) => { params[k] = decodeURIComponent(m[i + 1]); });
    document.querySelectorAll('[data-nav]').forEach((a) => a.classList.toggle('active', a.dataset.nav === r.nav));
    replace(root);
    cleanup = r.view.mount(root, params) || null;
    return;
  }
  replace(root, h('div', { class: 'empty' }, h('h2', {}, 'Not found'),
    h('p', {}, 'No page at ', h('code', {}, '#' + raw), '. ', h('a', { href: '#/workflows' }, 'Go to the workflows.'))));
}

/** reload mounts the current view again (after a token was entered). */
export function reload() { currentHash = null; route(); }

function showTokenPrompt(reason) {
  live.authPending = true;
  updateForget();
  const modal = document.getElementById('auth');
  document.getElementById('token-reason').textContent = reason === 'rejected'
    ? 'The server rejected the token. Enter a valid bearer token.'
    : 'This flowd server requires a bearer token for its API.';
  if (modal.hidden) {
    modal.hidden = false;
    const input = document.getElementById('token-input');
    input.value = '';
    input.focus();
  }
}

function setupAuth() {
  setAuthHandler(showTokenPrompt);
  document.getElementById('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const t = document.getElementById('token-input').value.trim();
    if (!t) return;
    setToken(t);
    document.getElementById('auth').hidden = true;
    live.authPending = false;
    updateForget();
    reload();
  });
  document.getElementById('forget-token').addEventListener('click', () => {
    clearToken();
    updateForget();
    reload();
  });
  updateForget();
}

function updateForget() {
  document.getElementById('forget-token').hidden = !getToken();
}

function start() {
  renderLive();
  onLiveChange(renderLive);
  setAnswerHandler(serverAnswered);
  document.getElementById('live-toggle').addEventListener('click', () => setLive(!live.on));
  setupAuth();
  window.addEventListener('hashchange', route);
  route();
}

start();
