// DOM helpers shared by the views. Everything that comes from the API is put
// into the page as text (textContent / text nodes), never as HTML.

import { formatPath, isObject } from './jsondiff.js';

/**
 * h builds an element: h('a', {class: 'x', href: '#/', onclick: fn}, 'text', child…).
 * Attributes named on… are listeners; hidden, disabled, checked, value,
 * selected and open are set as properties; null, undefined and false children
 * are skipped; arrays are flattened.
 */
export function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (['hidden', 'disabled', 'checked', 'value', 'selected', 'open'].includes(k)) e[k] = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  append(e, children);
  return e;
}

function append(e, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(e, c);
    else e.append(c instanceof Node ? c : String(c));
  }
}

/** replace empties el and appends children. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** badge is a status pill; the st-STATUS class gives the colour everywhere. */
export function badge(status, extra = {}) {
  return h('span', { class: `badge st-${status}`, ...extra }, status.replace('_', ' '));
}

/** jsonText is value as indented JSON. */
export function jsonText(value) {
  return JSON.stringify(value, null, 2) ?? 'undefined';
}

/** compact is value as one line of JSON, cut at max characters. */
export function compact(value, max = 80) {
  const s = value === undefined ? '—' : JSON.stringify(value);
  return s.length > max ? s.slice(0, max - 1) + '…' : s;
}

/**
 * jsonView is a <pre> with value as indented, syntax-coloured JSON. Members
 * whose path (formatPath) is in highlight are wrapped in <mark>.
 */
export function jsonView(value, attrs = {}, highlight = null) {
  const pre = h('pre', { class: 'json', ...attrs });
  write(value, 0, pre, [], highlight);
  return pre;
}

function tok(cls, text) {
  const s = document.createElement('span');
  s.className = cls;
  s.textContent = text;
  return s;
}

function write(v, depth, out, path, highlight) {
  const pad = '  '.repeat(depth + 1);
  const end = '  '.repeat(depth);
  if (Array.isArray(v)) {
    if (v.length === 0) { out.append('[]'); return; }
    out.append('[\n');
    v.forEach((x, i) => {
      out.append(pad);
      member(x, depth, out, [...path, i], highlight, null);
      out.append(i < v.length - 1 ? ',\n' : '\n');
    });
    out.append(end + ']');
  } else if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v);
    if (keys.length === 0) { out.append('{}'); return; }
    out.append('{\n');
    keys.forEach((k, i) => {
      out.append(pad);
      member(v[k], depth, out, [...path, k], highlight, k);
      out.append(i < keys.length - 1 ? ',\n' : '\n');
    });
    out.append(end + '}');
  } else if (typeof v === 'string') {
    out.append(tok('j-str', JSON.stringify(v)));
  } else if (typeof v === 'number') {
    out.append(tok('j-num', String(v)));
  } else if (typeof v === 'boolean') {
    out.append(tok('j-bool', String(v)));
  } else {
    out.append(tok('j-null', 'null'));
  }
}

function member(v, depth, out, path, highlight, key) {
  let target = out;
  if (highlight?.has(formatPath(path))) {
    target = document.createElement('mark');
    out.append(target);
  }
  if (key !== null) target.append(tok('j-key', JSON.stringify(key)), ': ');
  write(v, depth + 1, target, path, highlight);
}

/**
 * displayOrder returns a state with "variables" first and "steps" last, the
 * order people read it in (the server sorts keys, which puts steps first).
 */
export function displayOrder(state) {
  if (!isObject(state)) return state;
  const out = {};
  if (Object.hasOwn(state, 'variables')) out.variables = state.variables;
  for (const [k, v] of Object.entries(state)) {
    if (k !== 'variables' && k !== 'steps') out[k] = v;
  }
  if (Object.hasOwn(state, 'steps')) out.steps = state.steps;
  return out;
}

/** when is a <time> showing how long ago iso was, with the exact time as its tooltip. */
export function when(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const d = new Date(iso);
  return h('time', { datetime: iso, title: d.toLocaleString() }, ago(d));
}

export function ago(d) {
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  if (s < -59) return 'in ' + span(-s);
  if (s < 5) return s < -5 ? `in ${-s}s` : 'just now';
  return span(s) + ' ago';
}

function span(s) {
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** stepCounts counts the finished (COMPLETED or SKIPPED) and all steps of a state. */
export function stepCounts(state) {
  const steps = Object.values(state?.steps || {});
  return {
    done: steps.filter((s) => s.status === 'COMPLETED' || s.status === 'SKIPPED').length,
    total: steps.length,
  };
}

// Banners ("toasts"): a stack in the bottom right corner, at most MAX_BANNERS
// at once. They dismiss themselves: success and info after a few seconds, a
// warning later, an error later still, and never while the pointer or the
// focus is on it (so it can be read and copied); all can be closed with ×, and
// a page change clears them. They never block the page: the stack lets clicks
// through, a success or info banner too (only its × takes clicks), and the
// view gets room below its content so that it can be scrolled clear of them.
export const MAX_BANNERS = 3;
export const BANNER_MS = { success: 4000, info: 4000, warn: 8000, error: 15000 };
// After the pointer or focus leaves, a banner stays at least this long.
const BANNER_GRACE_MS = 2000;

const banners = () => document.getElementById('banners');

/** banner shows a message; kind is 'error', 'success', 'info' or 'warn'. */
export function banner(kind, text, { detail, sticky } = {}) {
  const stack = banners();
  const key = `${kind}\n${text}\n${detail || ''}`;
  // The same message again (a poll failing each time) replaces the one shown
  // instead of stacking copies.
  for (const old of [...stack.children]) if (old.dataset.key === key) old.remove();

  let timer = null;
  let left = BANNER_MS[kind] ?? BANNER_MS.info;
  let since = 0;
  const dismiss = () => { clearTimeout(timer); box.remove(); };
  const arm = () => {
    if (sticky || timer) return;
    since = Date.now();
    timer = setTimeout(dismiss, left);
  };
  const hold = () => {
    if (!timer) return;
    clearTimeout(timer);
    timer = null;
    left = Math.max(left - (Date.now() - since), BANNER_GRACE_MS);
  };
  const box = h('div', {
    class: `banner banner-${kind}`, role: kind === 'error' ? 'alert' : 'status', 'data-key': key,
    onmouseenter: hold, onmouseleave: () => { if (!box.contains(document.activeElement)) arm(); },
    onfocusin: hold, onfocusout: (e) => { if (!box.contains(e.relatedTarget)) arm(); },
  },
  h('span', { class: 'banner-text' }, text),
  detail ? h('span', { class: 'banner-detail' }, detail) : null,
  h('button', { type: 'button', class: 'banner-close', 'aria-label': 'Dismiss', onclick: dismiss }, '×'));
  stack.append(box);
  // Over the limit, the oldest banner goes; an error only when all are errors.
  while (stack.children.length > MAX_BANNERS) {
    const all = [...stack.children];
    (all.find((b) => !b.classList.contains('banner-error')) || all[0]).remove();
  }
  arm();
  return box;
}

export function clearBanners() { banners().replaceChildren(); }

// The view keeps room below its content as tall as the banner stack, so that
// nothing has to stay under a banner.
function watchBannerSpace() {
  const stack = banners();
  if (!stack || typeof ResizeObserver === 'undefined') return;
  new ResizeObserver(() => {
    const hgt = stack.childElementCount ? stack.getBoundingClientRect().height : 0;
    document.documentElement.style.setProperty('--banner-space', `${Math.ceil(hgt)}px`);
  }).observe(stack);
}
watchBannerSpace();

/** errorBanner shows an API error (or any error) with the API's message. */
export function errorBanner(prefix, err) {
  if (err?.status === 401) return null; // the token prompt says it
  // A token whose role may not do this (a reader's, on an action button):
  // say so first; the server's message names the roles that may.
  const denied = err?.status === 403 ? 'not allowed with this token. ' : '';
  const text = denied + (err?.describe ? err.describe() : String(err?.message || err));
  return banner('error', prefix ? `${prefix} — ${text}` : text);
}

export const STATUSES = ['PENDING', 'QUEUED', 'RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'];

/** ACTIONS: the statuses each lifecycle action may start from (the engine's table). */
export const ACTIONS = {
  pause: ['RUNNING'],
  resume: ['PAUSED'],
  retry: ['FAILED', 'TIMED_OUT'],
  cancel: ['PENDING', 'QUEUED', 'RUNNING', 'PAUSED'],
};

export const TERMINAL = ['COMPLETED', 'CANCELLED'];
