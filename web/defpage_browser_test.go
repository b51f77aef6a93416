package web_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
)

// fulfilDefinition uses every field a step can have, and its graph has an
// arrow (receive → ship) that spans two layers past a column of three
// boxes: drawn straight, it goes through reserve.
const fulfilDefinition = `name: fulfil
timeout: 2h
priority: 4
concurrency: {key: "{{ .input.customer }}", limit: 2, strategy: cancel_newest}
output: {shipped: "{{ .steps.ship.output }}"}
steps:
  - {id: receive, type: task, handler: echo, input: {order: "{{ .input.order }}"}}
  - id: check
    type: task
    handler: echo
    depends_on: [receive]
    when: .input.check
    retry: {max_attempts: 5, initial_backoff: 1s, max_backoff: 30s}
    timeout: 30s
  - {id: reserve, type: http, depends_on: [receive], request: {method: POST, url: "http://127.0.0.1:9/reserve"}, rate_limit: {key: stock, per_second: 5, burst: 10}}
  - id: pack
    type: task
    handler: echo
    depends_on: [receive]
    foreach: .input.items
    max_concurrency: 3
    concurrency: {key: warehouse, limit: 2}
  - {id: payment, type: wait, event: payment.received, key: "{{ .input.order }}", depends_on: [check]}
  - {id: label, type: workflow, definition: shipping, depends_on: [pack], input: {order: "{{ .input.order }}"}}
  - {id: ship, type: task, handler: echo, depends_on: [receive, payment, label, reserve], join: any}
  - {id: approve, type: wait, depends_on: [ship]}
`

// crossings is a JS function of an <svg> drawn by renderDAG (and optionally
// extra paths with data-from and data-to): for every arrow, it samples the
// rendered path every 4px and reports each box, other than the two it
// connects, that a segment between consecutive samples enters.
const crossings = `((svg, extra = []) => {
	const boxes = [...svg.querySelectorAll('g.node')].map((g) => {
		const m = g.transform.baseVal[0].matrix;
		const r = g.querySelector('rect');
		return { id: g.dataset.step, x: m.e, y: m.f, w: r.width.baseVal.value, h: r.height.baseVal.value };
	});
	// Liang–Barsky: does the segment a→c enter the inside of box b?
	const hits = (a, c, b) => {
		const dx = c.x - a.x, dy = c.y - a.y;
		let t0 = 0, t1 = 1;
		for (const [p, q] of [[-dx, a.x - b.x], [dx, b.x + b.w - a.x], [-dy, a.y - b.y], [dy, b.y + b.h - a.y]]) {
			if (p === 0) { if (q <= 0) return false; continue; }
			const r = q / p;
			if (p < 0) t0 = Math.max(t0, r); else t1 = Math.min(t1, r);
			if (t0 >= t1) return false;
		}
		return true;
	};
	const found = [];
	for (const path of [...svg.querySelectorAll('path.edge'), ...extra]) {
		const len = path.getTotalLength();
		const pts = [];
		for (let l = 0; l < len; l += 4) pts.push(path.getPointAtLength(l));
		pts.push(path.getPointAtLength(len));
		for (const b of boxes) {
			if (b.id === path.dataset.from || b.id === path.dataset.to) continue;
			for (let i = 1; i < pts.length; i++) {
				if (hits(pts[i - 1], pts[i], b)) { found.push(path.dataset.from + ' → ' + path.dataset.to + ' crosses ' + b.id); break; }
			}
		}
	}
	return found;
})`

// The definition page shows every field of a step: a wait step's event,
// key and how long it may wait; a workflow step's child definition and its
// runs; when, join, foreach with max_concurrency, retry, timeout,
// concurrency and rate limit; and the definition's own priority,
// concurrency and output. Its graph draws no arrow through a box the arrow
// does not connect.
func TestDashboardDefinitionPageShowsEveryField(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	ctx := t.Context()
	for name, def := range map[string]string{
		"shipping": "name: shipping\nsteps:\n  - {id: print, type: task, handler: echo}\n",
		"fulfil":   fulfilDefinition,
	} {
		if _, _, err := f.client.PutDefinition(ctx, name, []byte(def)); err != nil {
			t.Fatalf("PUT definition %s: %v", name, err)
		}
	}
	tab := b.tab()
	row := func(step string) string { return `#def-steps tr[data-step="` + step + `"]` }
	cell := func(step, class string) string { return textOf(row(step) + " td." + class) }
	b.run(tab, "open the definition",
		chromedp.Navigate(f.url+"/#/definitions/fulfil"),
		waitFor(`document.querySelectorAll('#def-dag svg g.node').length === 8`),
		waitFor(`document.querySelectorAll('#def-steps tbody tr').length === 8`),
	)
	b.shot(tab, "definition-fields")
	b.shotElement(tab, "#def-dag", "definition-fields-graph")
	b.run(tab, "a wait step with an event says what it waits for",
		waitFor(textOf(row("payment")+" code.wait-event")+` === 'payment.received'`),
		waitFor(textOf(row("payment")+" code.wait-key")+` === '{{ .input.order }}'`),
		waitFor(textOf(row("payment")+" .wait-timeout")+` === "until the workflow's timeout (2h)"`),
		waitFor(`!`+cell("payment", "runs")+`.includes('completed through the API')`),
		// A wait step without an event still is completed through the API.
		waitFor(cell("approve", "runs")+` === 'completed through the API'`),
	)
	b.run(tab, "a workflow step links to its child definition and its runs",
		waitFor(`document.querySelector('`+row("label")+` a[data-child-definition]')?.getAttribute('href') === '#/definitions/shipping'`),
		waitFor(`document.querySelector('`+row("label")+` a[data-child-runs]')?.getAttribute('href') === '#/workflows?definition=shipping'`),
		waitFor(cell("label", "runs")+`.includes('{"order":"{{ .input.order }}"}')`),
	)
	b.run(tab, "when, join, foreach, retry, timeout, concurrency and rate limit",
		waitFor(textOf(row("check")+" code.flow-when")+` === '.input.check'`),
		waitFor(cell("check", "retry")+` === '5× from 1s up to 30s'`),
		waitFor(cell("check", "timeout")+` === '30s'`),
		waitFor(textOf(row("ship")+" code.flow-join")+` === 'any'`),
		waitFor(textOf(row("pack")+" code.flow-foreach")+` === '.input.items'`),
		waitFor(textOf(row("pack")+" .flow-max")+` === '≤ 3 items at once'`),
		waitFor(textOf(row("pack")+" code.limit-concurrency")+` === 'warehouse' && `+cell("pack", "limits")+`.includes('≤ 2 leased')`),
		waitFor(cell("reserve", "limits")+` === '5/s (burst 10) per key stock'`),
		waitFor(cell("reserve", "retry")+` === 'default' && `+cell("approve", "retry")+` === '—'`),
		waitFor(textOf("#def-priority")+` === '4'`),
		waitFor(textOf("#def-concurrency")+` === '≤ 2 running per key {{ .input.customer }} · over it: cancel newest'`),
		waitFor(textOf("#def-output")+` === '{"shipped":"{{ .steps.ship.output }}"}'`),
	)

	// The graph: no arrow goes through a box it does not connect. The check
	// itself must see a crossing where there is one: the straight line from
	// receive to ship goes through reserve.
	var found, straight []string
	b.run(tab, "check the arrows against the boxes",
		waitFor(`document.querySelectorAll('#def-dag svg path.edge').length === 10`),
		chromedp.Evaluate(crossings+`(document.querySelector('#def-dag svg'))`, &found),
		chromedp.Evaluate(`(() => {
			const svg = document.querySelector('#def-dag svg');
			const box = (id) => { const g = svg.querySelector('g.node[data-step="' + id + '"]'); const m = g.transform.baseVal[0].matrix; return { x: m.e, y: m.f, r: g.querySelector('rect') }; };
			const a = box('receive'), c = box('ship');
			const p = document.createElementNS('http://www.w3.org/2000/svg', 'path');
			const mid = a.r.height.baseVal.value / 2;
			p.setAttribute('d', 'M ' + (a.x + a.r.width.baseVal.value) + ' ' + (a.y + mid) + ' L ' + c.x + ' ' + (c.y + mid));
			p.dataset.from = 'receive'; p.dataset.to = 'ship';
			svg.append(p);
			const out = `+crossings+`(svg, [p]);
			p.remove();
			return out;
		})()`, &straight),
	)
	if len(found) != 0 {
		t.Errorf("arrows drawn through boxes: %q", found)
	}
	if !slices.Contains(straight, "receive → ship crosses reserve") {
		t.Errorf("the crossing check does not see a straight receive → ship line cross reserve: %q", straight)
	}

	// The same holds for graphs of every shape: 40 random DAGs of 2–14
	// steps, drawn by the dashboard's own renderDAG.
	var random []string
	b.run(tab, "check random graphs",
		chromedp.Evaluate(`import('/ui/dag.js').then(({ renderDAG }) => {
			let seed = 7;
			const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
			const box = document.createElement('div');
			document.body.append(box);
			const found = [];
			for (let g = 0; g < 40; g++) {
				const steps = [];
				const n = 2 + Math.floor(rnd() * 13);
				for (let i = 0; i < n; i++) {
					const deps = [];
					for (let j = 0; j < i; j++) if (rnd() < 0.3) deps.push('s' + j);
					steps.push({ id: 's' + i, type: 'task', handler: 'h', depends_on: deps });
				}
				const svg = renderDAG(steps);
				box.replaceChildren(svg);
				for (const c of `+crossings+`(svg)) found.push('graph ' + g + ': ' + c);
			}
			box.remove();
			return found;
		})`, &random, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }),
	)
	if len(random) != 0 {
		t.Errorf("arrows drawn through boxes in random graphs: %q", random)
	}

	// A workflow's page draws its graph the same way.
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "fulfil-1", Definition: "fulfil",
		Input: json.RawMessage(`{"order": "o-1", "customer": "c-1", "check": false, "items": ["a"]}`)}); err != nil {
		t.Fatal(err)
	}
	var onWorkflow []string
	b.run(tab, "check the workflow's graph",
		chromedp.Navigate(f.url+"/#/workflows/fulfil-1"),
		waitFor(`document.querySelectorAll('#wf-steps svg.dag g.node').length === 8`),
		waitFor(`!!document.querySelector('#wf-steps svg.dag g.node.st-SKIPPED[data-step="check"]')`),
		chromedp.Evaluate(crossings+`(document.querySelector('#wf-steps svg.dag'))`, &onWorkflow),
	)
	b.shotElement(tab, "#wf-steps svg.dag", "workflow-fields-graph")
	if len(onWorkflow) != 0 {
		t.Errorf("arrows drawn through boxes on the workflow page: %q", onWorkflow)
	}

	// The child's definition link leads to it.
	b.run(tab, "follow the child's definition link",
		chromedp.Navigate(f.url+"/#/definitions/fulfil"),
		waitFor(`!!document.querySelector('`+row("label")+` a[data-child-definition]')`),
		chromedp.Evaluate(`document.querySelector('`+row("label")+` a[data-child-definition]').click()`, nil),
		waitFor(textOf("#def-name")+` === 'shipping'`),
	)
	b.checkNoErrors()
}

// nestedSWDocument has 4 tasks at the top and 10 at every depth: a try
// and its catch, a for, a fork and a do each hold tasks of their own.
const nestedSWDocument = `document: {dsl: '1.0.0', namespace: shop, name: nested, version: '1.0.0'}
do:
  - prepare:
      set: {n: 1}
  - score:
      try:
        - ask:
            call: echo
      catch:
        errors: {with: {type: https://serverlessworkflow.io/spec/1.0.0/errors/runtime}}
        do:
          - assume:
              set: {score: 0}
  - each:
      for: {each: item, in: '${ .items }'}
      do:
        - pack:
            call: echo
  - both:
      fork:
        branches:
          - left:
              set: {l: 1}
          - right:
              do:
                - inner:
                    set: {r: 1}
`

// The definitions list counts a Serverless Workflow document's tasks at
// every depth, as flowd def list does, and its page says so.
func TestDashboardDefinitionsCountServerlessTasks(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	if _, _, err := f.client.PutDefinition(t.Context(), "nested", []byte(nestedSWDocument)); err != nil {
		t.Fatal(err)
	}
	tab := b.tab()
	b.run(tab, "the list counts every task",
		chromedp.Navigate(f.url+"/#/definitions"),
		waitFor(`!!document.querySelector('#def-table tr[data-name="nested"]')`),
		waitFor(textOf(`#def-table tr[data-name="nested"] td:nth-child(3)`)+` === '10'`),
		// A steps definition still counts its steps.
		waitFor(textOf(`#def-table tr[data-name="order"] td:nth-child(3)`)+` === '5'`),
	)
	b.shot(tab, "definitions-serverless-count")
	b.run(tab, "the page counts them too",
		chromedp.Navigate(f.url+"/#/definitions/nested"),
		waitFor(textOf("#sw-task-count")+` === '10 at every depth, 4 at the top'`),
		waitFor(`document.querySelectorAll('#def-sw-tasks tbody tr').length === 4`),
	)
	b.shot(tab, "definition-serverless-count")
	b.checkNoErrors()
}
