// Draws a definition's steps as a DAG in SVG: a layered layout by depth
// (a step sits one column right of its deepest dependency), boxes with the step
// id and type, and arrows for depends_on that go around the boxes they pass.
// Colours come from CSS classes, so the step statuses look the same here as
// everywhere else on the page.

const SVG = 'http://www.w3.org/2000/svg';
const BOX_H = 46;
const GAP_X = 56;
const GAP_Y = 16;
const PAD = 12;
const CHAR_W = 7.4; // about one character of the 13px monospace id
const WAYPOINT_H = 8; // the gap an arrow passing a layer keeps in it

/** depths maps each step id to its layer: 0 without dependencies, else 1 + the deepest dependency. */
export function depths(steps) {
  const byId = new Map(steps.map((s) => [s.id, s]));
  const memo = new Map();
  const visit = (id, seen) => {
    if (memo.has(id)) return memo.get(id);
    if (seen.has(id)) return 0; // a cycle cannot be stored; stay finite anyway
    seen.add(id);
    const deps = (byId.get(id)?.depends_on || []).filter((d) => byId.has(d));
    const d = deps.length ? 1 + Math.max(...deps.map((x) => visit(x, seen))) : 0;
    memo.set(id, d);
    return d;
  };
  for (const s of steps) visit(s.id, new Set());
  return memo;
}

/** topoOrder orders the steps by depth, then as the definition lists them. */
export function topoOrder(steps) {
  const d = depths(steps);
  return steps.map((s, i) => ({ s, i })).sort((a, b) => d.get(a.s.id) - d.get(b.s.id) || a.i - b.i).map((x) => x.s);
}

/**
 * layout places the steps in layers by depth: {nodes: Map id → {x, y, w, h,
 * step}, edges: [{from, to, via}], width, height}. An arrow that spans
 * layers passes each layer between it and its step through a waypoint of
 * its own (via: the centre of each, left to right), which holds a gap in
 * that layer's column: so no arrow is drawn through a box it does not
 * connect.
 */
export function layout(steps) {
  const d = depths(steps);
  // Boxes fit ids and handlers; a longer second line is cut short.
  const longest = Math.max(4, ...steps.map((s) => Math.max(s.id.length, (s.type || '').length + (s.handler || '').length + 3)));
  const w = Math.min(240, Math.max(120, Math.ceil(longest * CHAR_W) + 24));
  // A layer holds items: a step's box, or a waypoint of an arrow. An item's
  // preds are the items one layer left that an arrow comes in from.
  const layers = [];
  const items = new Map();
  const add = (layer, item) => {
    (layers[layer] ||= []).push(item);
    items.set(item.key, item);
    return item;
  };
  steps.forEach((s, i) => add(d.get(s.id), { key: s.id, step: s, i, h: BOX_H, preds: [] }));
  const edges = [];
  steps.forEach((s, i) => {
    for (const dep of s.depends_on || []) {
      if (!items.has(dep)) continue;
      const via = [];
      let prev = dep;
      for (let l = d.get(dep) + 1; l < d.get(s.id); l++) {
        // Waypoints sort after the boxes of their layer that rank alike.
        const wp = add(l, { key: `${dep}\u0000${s.id}\u0000${l}`, i: steps.length + i, h: WAYPOINT_H, preds: [prev] });
        via.push(wp);
        prev = wp.key;
      }
      items.get(s.id).preds.push(prev);
      edges.push({ from: dep, to: s.id, via });
    }
  });
  // Order each layer by the mean position of its preds (fewer crossings),
  // then by definition order; stack it top down.
  const heights = [];
  layers.forEach((layer, li) => {
    const rank = (e) => (e.preds.length ? e.preds.reduce((a, p) => a + items.get(p).pos, 0) / e.preds.length : -1);
    layer.sort((a, b) => rank(a) - rank(b) || a.i - b.i);
    let y = 0;
    layer.forEach((e, k) => {
      e.pos = k;
      e.x = PAD + li * (w + GAP_X);
      e.y = y;
      y += e.h + GAP_Y;
    });
    heights[li] = y - GAP_Y;
  });
  // Centre each layer against the tallest one.
  const inner = Math.max(BOX_H, ...heights.filter((x) => x !== undefined));
  layers.forEach((layer, li) => {
    for (const e of layer) e.y += PAD + (inner - heights[li]) / 2;
  });
  const nodes = new Map();
  for (const s of steps) {
    const e = items.get(s.id);
    nodes.set(s.id, { x: e.x, y: e.y, w, h: BOX_H, step: s });
  }
  for (const e of edges) e.via = e.via.map((wp) => ({ x: wp.x, y: wp.y + wp.h / 2, w }));
  const width = PAD * 2 + layers.length * w + Math.max(0, layers.length - 1) * GAP_X;
  return { nodes, edges, width, height: inner + 2 * PAD };
}

function el(name, attrs = {}, ...children) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  for (const c of children) e.append(c);
  return e;
}

/** edgeClass marks an arrow into a skipped step, which is drawn as not taken. */
export function edgeClass(targetStatus) {
  return targetStatus === 'SKIPPED' ? 'edge to-skipped' : 'edge';
}

/** statusLine is a box's second line: the status, and a foreach step's progress. */
function statusLine(status, progress) {
  return status && progress ? `${status} · ${progress}` : status;
}

/** kindLine is a box's second line without a status: the type, and what it runs or waits for. */
function kindLine(s) {
  const what = { task: s.handler, wait: s.event, workflow: s.definition }[s.type];
  return what ? `${s.type} · ${what}` : (s.type || '');
}

function fit(text, maxChars) {
  return text.length <= maxChars ? text : text.slice(0, Math.max(1, maxChars - 1)) + '…';
}

/**
 * renderDAG returns an <svg> of the steps. statuses (optional) maps a step id
 * to its status, which picks the box colour; progress (optional) maps a step
 * id to a short text shown after its status (a foreach step's "k/n");
 * onSelect(id) (optional) is called when a box is clicked.
 */
export function renderDAG(steps, { statuses, progress, onSelect, label } = {}) {
  const { nodes, edges: routes, width, height } = layout(steps);
  const svg = el('svg', {
    class: 'dag', viewBox: `0 0 ${width} ${height}`, width, height,
    role: 'img', 'aria-label': label || 'Step graph',
  });
  const defs = el('defs', {},
    el('marker', { id: 'dag-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
      el('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'dag-arrowhead' })));
  svg.append(defs);
  const edges = el('g', { class: 'edges' });
  for (const e of routes) {
    const from = nodes.get(e.from);
    const to = nodes.get(e.to);
    // Curves bridge the gaps between columns; a straight line crosses each
    // column the arrow passes, at its waypoint.
    let x = from.x + from.w;
    let y = from.y + from.h / 2;
    let d = `M ${x} ${y}`;
    const curveTo = (x2, y2) => {
      const mx = (x + x2) / 2;
      d += ` C ${mx} ${y}, ${mx} ${y2}, ${x2} ${y2}`;
      x = x2;
      y = y2;
    };
    for (const wp of e.via) {
      curveTo(wp.x, wp.y);
      x = wp.x + wp.w;
      d += ` L ${x} ${y}`;
    }
    curveTo(to.x - 2, to.y + to.h / 2);
    edges.append(el('path', {
      class: edgeClass(statuses?.[e.to]), d, 'marker-end': 'url(#dag-arrow)',
      'data-from': e.from, 'data-to': e.to,
    }));
  }
  svg.append(edges);
  const maxChars = Math.floor((nodes.values().next().value?.w - 20) / CHAR_W) || 16;
  for (const [id, n] of nodes) {
    const status = statuses?.[id];
    const kind = kindLine(n.step);
    const g = el('g', {
      class: 'node' + (status ? ' st-' + status : ' st-none') + (onSelect ? ' clickable' : ''),
      transform: `translate(${n.x} ${n.y})`, 'data-step': id,
    },
    el('title', {}, `${id} (${kind})${status ? ' — ' + status : ''}${progress?.[id] ? ' · ' + progress[id] + ' items' : ''}`),
    el('rect', { width: n.w, height: n.h, rx: 7, ry: 7 }),
    el('text', { x: 10, y: 19, class: 'node-id' }, fit(id, maxChars)),
    // With statuses (a workflow's graph) the second line is the status; the
    // step list beside it shows the type.
    el('text', { x: 10, y: 36, class: status ? 'node-status' : 'node-type' }, fit(statusLine(status, progress?.[id]) || kind, Math.floor(maxChars * 1.15))));
    if (onSelect) {
      g.setAttribute('tabindex', '0');
      g.addEventListener('click', () => onSelect(id));
      g.addEventListener('keydown', (e) => { if (e.key === 'Enter') onSelect(id); });
    }
    svg.append(g);
  }
  return svg;
}
