// Draws a definition's steps as a DAG in SVG: a layered layout by depth
// (a step sits one column right of its deepest dependency), boxes with the step
// id and type, and arrows for depends_on. Colours come from CSS classes, so
// the step statuses look the same here as everywhere else on the page.

const SVG = 'http://www.w3.org/2000/svg';
const BOX_H = 46;
const GAP_X = 56;
const GAP_Y = 16;
const PAD = 12;
const CHAR_W = 7.4; // about one character of the 13px monospace id

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

/** layout places the steps: {nodes: Map id → {x, y, w, h, step}, width, height}. */
export function layout(steps) {
  const d = depths(steps);
  const layers = [];
  steps.forEach((s, i) => {
    const l = d.get(s.id);
    (layers[l] ||= []).push({ s, i });
  });
  const longest = Math.max(4, ...steps.map((s) => Math.max(s.id.length, (s.type || '').length + (s.handler || '').length + 3)));
  const w = Math.min(240, Math.max(120, Math.ceil(longest * CHAR_W) + 24));
  const nodes = new Map();
  let height = 0;
  layers.forEach((layer, li) => {
    if (!layer) return;
    // Order a layer by the mean position of its dependencies (fewer crossings),
    // then by definition order.
    const rank = (e) => {
      const ys = (e.s.depends_on || []).map((x) => nodes.get(x)?.y).filter((y) => y !== undefined);
      return ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : -1;
    };
    layer.sort((a, b) => rank(a) - rank(b) || a.i - b.i);
    layer.forEach((e, k) => {
      const y = PAD + k * (BOX_H + GAP_Y);
      nodes.set(e.s.id, { x: PAD + li * (w + GAP_X), y, w, h: BOX_H, step: e.s });
      height = Math.max(height, y + BOX_H + PAD);
    });
  });
  // Centre short layers against the tallest one.
  const inner = height - 2 * PAD;
  layers.forEach((layer) => {
    if (!layer) return;
    const used = layer.length * BOX_H + (layer.length - 1) * GAP_Y;
    const shift = (inner - used) / 2;
    for (const e of layer) nodes.get(e.s.id).y += shift;
  });
  const width = PAD * 2 + layers.length * w + Math.max(0, layers.length - 1) * GAP_X;
  return { nodes, width, height: Math.max(height, BOX_H + 2 * PAD) };
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
  const { nodes, width, height } = layout(steps);
  const svg = el('svg', {
    class: 'dag', viewBox: `0 0 ${width} ${height}`, width, height,
    role: 'img', 'aria-label': label || 'Step graph',
  });
  const defs = el('defs', {},
    el('marker', { id: 'dag-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
      el('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'dag-arrowhead' })));
  svg.append(defs);
  const edges = el('g', { class: 'edges' });
  for (const s of steps) {
    const to = nodes.get(s.id);
    for (const dep of s.depends_on || []) {
      const from = nodes.get(dep);
      if (!from) continue;
      const x1 = from.x + from.w;
      const y1 = from.y + from.h / 2;
      const x2 = to.x - 2;
      const y2 = to.y + to.h / 2;
      const mx = (x1 + x2) / 2;
      edges.append(el('path', {
        class: edgeClass(statuses?.[s.id]), d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, 'marker-end': 'url(#dag-arrow)',
        'data-from': dep, 'data-to': s.id,
      }));
    }
  }
  svg.append(edges);
  const maxChars = Math.floor((nodes.values().next().value?.w - 20) / CHAR_W) || 16;
  for (const [id, n] of nodes) {
    const status = statuses?.[id];
    const kind = n.step.type === 'task' && n.step.handler ? `task · ${n.step.handler}` : (n.step.type || '');
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
