// The timeline (a Gantt chart) of a workflow: one row per step — per
// recorded entry for a code workflow, per pending item for a Serverless
// Workflow instance — and a bar per attempt from its start to its end, or
// to now while it runs. Waits (wait steps, sleeps, events, timers) are
// drawn apart from runs; failed attempts are red; a foreach step is one
// row whose bar carries a mark where each iteration finished.
//
// Steps carry no times of their own: the bars are read from the version
// history, each version being a write with its time. A step's first attempt
// starts at the version where it became RUNNING; an attempt ends where the
// step left RUNNING or where a failure was recorded (a version whose cause
// says an attempt failed, or a new error), and the next attempt starts
// there, its backoff and its wait for a worker included: a worker's claim
// writes no version. A code
// workflow records a step only once it ran: its bar spans the versions
// around that record.

import { h, replace } from './ui.js';
import { codeEntries, entryKind } from './code.js';

const SVG = 'http://www.w3.org/2000/svg';
const ACTIVE = ['RUNNING', 'WAITING'];
// Bounds of the drawing, in viewBox units (it scales with the card).
const WIDTH = 1000;
const LABEL_W = 190;
const ROW_H = 26;
const AXIS_H = 26;
const RIGHT_PAD = 24;
/** MAX_ROWS bounds the rows drawn (a Serverless Workflow loop makes many items). */
export const MAX_ROWS = 80;

function ms(iso) { return Date.parse(iso); }

function errorOf(s) {
  if (s?.error === undefined || s?.error === null || s?.error === '') return '';
  return typeof s.error === 'string' ? s.error : JSON.stringify(s.error);
}

/**
 * failedHere reports whether version v is the engine recording a failed
 * attempt of step sid: its cause says so ('step "S" attempt N failed', or
 * 'step "S": lease expired …' / '… timed out'). The attempt count alone
 * does not tell: a worker's claim raises it, and a later write may carry
 * an older count.
 */
function failedHere(v, sid) {
  const c = typeof v.cause === 'string' ? v.cause : '';
  const name = `step ${JSON.stringify(sid)}`;
  return (c.startsWith(name + ' attempt ') && c.endsWith(' failed')) || c.startsWith(name + ': ');
}

/**
 * stepBars reads the attempts of one step (or code entry) from the
 * versions, oldest first. Each bar: {start, end (null while open), kind
 * ('run' or 'wait'), outcome, attempt, error, marks}. marks are
 * the times a foreach step's iterations finished: {at, failed}.
 */
export function stepBars(versions, sid, { waits = false } = {}) {
  const bars = [];
  let cur = null;
  let prev = null; // the step as the previous version had it
  let prevAt = null;
  // The error recorded last: a version repeating it is no new failure.
  const failed = { error: '' };
  const open = (v, s, status) => {
    const foreach = Boolean(s.iterations && typeof s.iterations === 'object');
    cur = {
      start: v.at, end: null, status, marks: [], outcome: 'running', foreach,
      // The attempt under way is the one after those recorded.
      attempt: foreach || waits || status === 'WAITING' ? 0 : (s.attempts || 0) + 1,
      kind: status === 'WAITING' || waits ? 'wait' : 'run',
    };
    bars.push(cur);
  };
  const close = (at, outcome, s, error = '') => {
    cur.end = at;
    cur.outcome = outcome;
    if (cur.attempt && s.attempts) cur.attempt = s.attempts;
    if (error) cur.error = error;
    cur = null;
  };
  for (const v of versions) {
    const s = v.state?.steps?.[sid];
    if (!s || typeof s !== 'object') {
      prevAt = v.at;
      continue;
    }
    const status = s.status || 'PENDING';
    const err = errorOf(s);
    const active = ACTIVE.includes(status);
    if (cur) {
      if (cur.foreach && prev?.iterations && s.iterations) {
        const done = (s.iterations.completed || 0) - (prev.iterations.completed || 0);
        const failed = (s.iterations.failed || 0) - (prev.iterations.failed || 0);
        if (done > 0) cur.marks.push({ at: v.at, failed: false, n: done });
        if (failed > 0) cur.marks.push({ at: v.at, failed: true, n: failed });
      }
      if (!active) {
        close(v.at, status.toLowerCase(), s, status === 'FAILED' ? err : '');
      } else if (!cur.foreach && cur.kind === 'run' && (failedHere(v, sid) || (err && err !== failed.error))) {
        // An attempt failed and the step stays RUNNING: the next one
        // (after its backoff) starts here.
        failed.error = err;
        close(v.at, 'failed', s, err);
        open(v, s, status);
      } else if (status !== cur.status) {
        close(v.at, cur.kind === 'wait' ? 'waited' : 'ran', s);
        open(v, s, status);
      }
    } else if (active) {
      open(v, s, status);
    } else if (!prev && status !== 'PENDING' && status !== 'SKIPPED') {
      // Recorded already finished (a code workflow's step): it ran between
      // the version before and this one.
      bars.push({
        start: prevAt ?? v.at, end: v.at, status, attempt: waits ? 0 : s.attempts || 0, kind: waits ? 'wait' : 'run',
        outcome: status.toLowerCase(), error: status === 'FAILED' ? err : '', marks: [], approx: true,
      });
    }
    prev = s;
    prevAt = v.at;
  }
  return bars;
}

/**
 * swBars reads the pending items of a Serverless Workflow instance from the
 * versions: one row per item, a bar from the version that added it to the
 * one that removed it.
 */
export function swBars(versions) {
  const rows = new Map();
  let open = new Map();
  for (const v of versions) {
    const pending = v.state?.sw?.pending;
    const now = new Map(Object.entries(pending && typeof pending === 'object' ? pending : {}));
    const fault = v.state?.sw?.error?.instance;
    for (const [id, bar] of open) {
      if (!now.has(id)) {
        bar.end = v.at;
        // The item the instance faulted at failed; the others completed.
        bar.outcome = fault && fault === rows.get(id).label ? 'failed' : 'completed';
      }
    }
    for (const [id, item] of now) {
      if (open.has(id)) continue;
      const kind = ['timer', 'listen', 'child'].includes(item?.kind) ? 'wait' : 'run';
      const bar = { start: v.at, end: null, kind, outcome: 'running', attempt: 0, marks: [] };
      rows.set(id, { id, label: item?.pointer || id, tag: item?.kind || '?', bars: [bar] });
    }
    open = new Map([...now.keys()].map((id) => [id, rows.get(id).bars[0]]).filter(([, b]) => b.end === null));
  }
  const seq = (id) => { const m = /^sw-(\d+)$/.exec(id); return m ? Number(m[1]) : Number.MAX_SAFE_INTEGER; };
  return [...rows.values()].sort((a, b) => seq(a.id) - seq(b.id));
}

/**
 * timelineRows builds the rows of an instance: rowsOf lists {id, label,
 * tag} in the order to draw them. A bar still open ends at now while the
 * instance runs, and at its last version once the instance has ended (then
 * it is marked as stopped, or failed with the instance).
 */
export function timelineRows(versions, inst, order, now = Date.now()) {
  const ended = ['COMPLETED', 'CANCELLED', 'FAILED', 'TIMED_OUT'].includes(inst?.status);
  const lastAt = versions.length ? versions[versions.length - 1].at : null;
  const rows = order === 'sw' ? swBars(versions) : order.map((r) => ({ ...r, bars: stepBars(versions, r.id, r) }));
  for (const r of rows) {
    for (const b of r.bars) {
      if (b.end !== null) continue;
      if (ended) {
        b.end = lastAt;
        b.outcome = inst.status === 'FAILED' ? 'failed' : 'stopped';
      } else {
        b.end = new Date(now).toISOString();
        b.open = true;
      }
    }
  }
  return rows.filter((r) => r.bars.length > 0);
}

function svg(name, attrs = {}, ...children) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null && v !== false) e.setAttribute(k, String(v));
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) e.append(c instanceof Node ? c : String(c));
  return e;
}

/** span is a short form of a duration in ms. */
export function span(d) {
  if (!(d >= 0)) return '—';
  if (d < 1000) return `${Math.round(d)} ms`;
  const s = d / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

function barTitle(r, b) {
  const parts = [r.id];
  if (b.attempt) parts.push(`attempt ${b.attempt}`);
  parts.push({ run: 'ran', wait: 'waited' }[b.kind] + ' ' + span(ms(b.end) - ms(b.start)) + (b.approx ? ' at most' : ''));
  parts.push(b.open ? 'still going' : b.outcome);
  if (b.marks.length) parts.push(`${b.marks.filter((m) => !m.failed).reduce((n, m) => n + m.n, 0)} iterations finished, ${b.marks.filter((m) => m.failed).reduce((n, m) => n + m.n, 0)} failed`);
  if (b.error) parts.push(b.error);
  return parts.join(' · ');
}

/** renderTimeline draws rows (from timelineRows) as an SVG Gantt chart. */
export function renderTimeline(rows, { label = 'Timeline' } = {}) {
  const shown = rows.slice(0, MAX_ROWS);
  const starts = shown.flatMap((r) => r.bars.map((b) => ms(b.start)));
  const ends = shown.flatMap((r) => r.bars.map((b) => ms(b.end)));
  const t0 = Math.min(...starts);
  const t1 = Math.max(t0 + 1000, ...ends);
  const plotW = WIDTH - LABEL_W - RIGHT_PAD;
  const x = (iso) => LABEL_W + ((ms(iso) - t0) / (t1 - t0)) * plotW;
  const height = AXIS_H + shown.length * ROW_H + 8;
  const grid = [];
  for (let i = 0; i <= 4; i++) {
    const gx = LABEL_W + (plotW * i) / 4;
    grid.push(svg('line', { class: 'tl-grid', x1: gx, x2: gx, y1: AXIS_H - 6, y2: height }));
    grid.push(svg('text', { class: 'tl-axis', x: gx, y: AXIS_H - 10, 'text-anchor': i === 0 ? 'start' : i === 4 ? 'end' : 'middle' },
      i === 0 ? new Date(t0).toLocaleTimeString() : '+' + span(((t1 - t0) * i) / 4)));
  }
  const rowEls = shown.map((r, i) => {
    const y = AXIS_H + i * ROW_H;
    const name = r.label.length > 24 ? r.label.slice(0, 23) + '…' : r.label;
    return svg('g', { class: 'tl-row', 'data-row': r.id },
      svg('title', {}, r.label),
      i % 2 ? svg('rect', { class: 'tl-stripe', x: 0, y, width: WIDTH, height: ROW_H }) : null,
      svg('text', { class: 'tl-label', x: 8, y: y + ROW_H / 2 + 4, 'data-label': r.label }, name,
        r.tag ? svg('tspan', { class: 'tl-tag', dx: 6 }, r.tag) : null),
      r.bars.map((b) => {
        const bx = x(b.start);
        const bw = Math.max(3, x(b.end) - bx);
        const cls = `tl-bar tl-${b.kind} tl-${b.outcome}${b.open ? ' tl-open' : ''}${b.approx ? ' tl-approx' : ''}`;
        return svg('g', {
          class: cls, 'data-step': r.id, 'data-attempt': b.attempt, 'data-kind': b.kind, 'data-outcome': b.open ? 'running' : b.outcome,
          'data-marks': b.marks.length || null,
        },
        svg('title', {}, barTitle(r, b)),
        svg('rect', { x: bx, y: y + 5, width: bw, height: ROW_H - 10, rx: 3 }),
        b.outcome === 'failed' ? svg('text', { class: 'tl-x', x: bx + bw + 3, y: y + ROW_H / 2 + 4 }, '✕') : null,
        b.marks.map((m) => svg('line', { class: m.failed ? 'tl-mark tl-mark-failed' : 'tl-mark', x1: x(m.at), x2: x(m.at), y1: y + 3, y2: y + ROW_H - 3 })));
      }));
  });
  return svg('svg', {
    class: 'timeline', viewBox: `0 0 ${WIDTH} ${height}`, width: '100%', role: 'img', 'aria-label': label,
    preserveAspectRatio: 'xMinYMin meet',
  }, grid, rowEls);
}

/** legend explains the kinds of bar rows has. */
export function legend(rows) {
  const all = rows.flatMap((r) => r.bars);
  const item = (cls, text) => h('span', { class: 'tl-key' }, h('span', { class: `tl-swatch ${cls}` }), text);
  return h('div', { class: 'tl-legend muted small' },
    all.some((b) => b.kind === 'run' && b.open) ? item('tl-run', 'running') : null,
    item('tl-completed', 'completed'),
    all.some((b) => b.outcome === 'failed') ? item('tl-failed', 'failed attempt (✕)') : null,
    all.some((b) => b.kind === 'wait') ? item('tl-wait', 'waiting (event, sleep, approval, child)') : null,
    all.some((b) => b.marks.length) ? item('tl-mark-key', 'foreach item finished') : null);
}

/**
 * rowsOrder is what timelineRows draws for an instance: its recorded entries
 * (code), its pending items ('sw'), or its steps in the order given, each
 * with its definition when it has one.
 */
export function rowsOrder(inst, steps, { code, sw }) {
  if (sw) return 'sw';
  if (code) {
    return codeEntries(inst).map(({ id, s }) => {
      const kind = entryKind(s);
      return { id, label: id, tag: kind, waits: kind !== 'step' };
    });
  }
  return steps.map(({ id, def }) => ({
    id, label: id,
    tag: def ? (def.foreach ? `${def.type} · foreach` : def.type) : '',
    waits: ['wait', 'sleep', 'workflow'].includes(def?.type),
  }));
}

/**
 * timelineCard fills box with the timeline of inst: versions are the
 * history loaded so far (complete says whether it is all of it).
 */
export function timelineCard(box, inst, versions, order, complete) {
  const rows = versions.length ? timelineRows(versions, inst, order) : [];
  box.hidden = rows.length === 0;
  if (rows.length === 0) {
    replace(box);
    return;
  }
  replace(box,
    h('div', { class: 'card-head' },
      h('h2', {}, 'Timeline'),
      h('span', { class: 'muted small' }, `from ${versions.length} version${versions.length === 1 ? '' : 's'} of the history` +
        (complete ? '' : ' loaded so far (load more versions below for the rest)'))),
    h('div', { class: 'tl-wrap' }, renderTimeline(rows, { label: `Timeline of ${inst.id}` })),
    rows.length > MAX_ROWS ? h('p', { class: 'muted small' }, `The first ${MAX_ROWS} of ${rows.length} rows are drawn.`) : null,
    legend(rows));
}
