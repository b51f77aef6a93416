package web_test

// Real-browser tests: Debian's chromium, driven with chromedp, against the real
// API server (httpapi over SQLite, with an engine and in-process handlers) on
// httptest. Without /usr/bin/chromium they skip, or fail when CI=true.
//
// Every view is saved as a PNG in the test's temp dir and, when
// FLOWD_SCREENSHOTS names a folder, there too.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/web"
	"github.com/flowd/flowd/workflow"
)

const chromiumPath = "/usr/bin/chromium"

// The browser window the screenshots are taken in.
const viewportWidth, viewportHeight = 1280, 900

// findChromium returns the browser to drive, or skips the test (fails under CI).
func findChromium(t *testing.T) string {
	t.Helper()
	path := chromiumPath
	if _, err := os.Stat(path); err != nil {
		p, lerr := exec.LookPath("chromium")
		if lerr != nil {
			msg := fmt.Sprintf("browser test needs Debian's chromium at %s (apt-get install -y chromium; scripts/test installs it as root)", chromiumPath)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		path = p
	}
	return path
}

// browser is one headless chromium; tab opens pages in it.
type browser struct {
	t     *testing.T
	root  context.Context // the first tab; the browser lives as long as it does
	shots []string        // folders screenshots are written to

	mu     sync.Mutex
	errors []string // JavaScript exceptions and console errors of every tab
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := findChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.WindowSize(viewportWidth, viewportHeight),
		// Quiet on a closed network (DEPENDENCIES.md).
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("hide-scrollbars", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium refuses to sandbox as root
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()), opts...)
	root, cancelRoot := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(string, ...any) {
		// cdproto of the pinned chromedp does not know every event of a newer
		// chromium; those decoding complaints are noise.
	}))
	t.Cleanup(func() { cancelRoot(); cancelAlloc() })
	start := time.Now()
	if err := chromedp.Run(root); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	t.Logf("chromium started in %v", time.Since(start).Round(time.Millisecond))
	b := &browser{t: t, root: root, shots: []string{t.TempDir()}}
	if dir := os.Getenv("FLOWD_SCREENSHOTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b.shots = append(b.shots, dir)
	}
	b.listen(root)
	return b
}

// tab opens a new tab in its own browser context (like an incognito window:
// its own sessionStorage and cookies).
func (b *browser) tab() context.Context {
	b.t.Helper()
	ex := cdp.WithExecutor(b.root, chromedp.FromContext(b.root).Browser)
	bc, err := target.CreateBrowserContext().WithDisposeOnDetach(true).Do(ex)
	if err != nil {
		b.t.Fatalf("creating a browser context: %v", err)
	}
	// Headless chromium opens a tab in a new browser context only as a new
	// window ("no browser is open" otherwise), which chromedp.WithNewBrowserContext
	// does not ask for; so create the target here and attach to it.
	id, err := target.CreateTarget("about:blank").WithBrowserContextID(bc).WithNewWindow(true).Do(ex)
	if err != nil {
		b.t.Fatalf("opening a tab: %v", err)
	}
	ctx, cancel := chromedp.NewContext(b.root, chromedp.WithTargetID(id))
	b.t.Cleanup(func() {
		cancel()
		_ = target.DisposeBrowserContext(bc).Do(ex)
	})
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(viewportWidth, viewportHeight)); err != nil {
		b.t.Fatalf("attaching to the tab: %v", err)
	}
	b.listen(ctx)
	return ctx
}

// listen records JavaScript exceptions, console.error calls and browser log
// errors (CSP violations among them); the test fails on any. HTTP error
// statuses the page provokes on purpose (412, 401) are network entries and
// not recorded.
func (b *browser) listen(ctx context.Context) {
	chromedp.ListenTarget(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + ev.ExceptionDetails.Error()
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				msg = "console.error: " + strings.Join(parts, " ")
			}
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.LevelError && ev.Entry.Source != cdplog.SourceNetwork {
				msg = fmt.Sprintf("log (%s): %s", ev.Entry.Source, ev.Entry.Text)
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.errors = append(b.errors, msg)
			b.mu.Unlock()
		}
	})
	if err := chromedp.Run(ctx, cdplog.Enable()); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) checkNoErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		b.t.Errorf("browser reported %s", e)
	}
}

// run performs the actions, failing the test with what was being done.
func (b *browser) run(ctx context.Context, what string, actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		b.shot(ctx, "failed-"+strings.ReplaceAll(what, " ", "-"))
		b.mu.Lock()
		for _, e := range b.errors {
			b.t.Logf("browser reported %s", e)
		}
		b.mu.Unlock()
		b.t.Fatalf("%s: %v", what, err)
	}
}

// shot saves a full-page PNG of the tab as NAME.png in every screenshot
// folder. It scrolls to the top and makes the viewport as tall as the page,
// so the sticky header sits where it belongs.
func (b *browser) shot(ctx context.Context, name string) {
	b.t.Helper()
	var png []byte
	err := chromedp.Run(ctx,
		chromedp.Evaluate(`window.scrollTo(0, 0)`, nil),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, _, _, _, _, content, err := page.GetLayoutMetrics().Do(ctx)
			if err != nil {
				return err
			}
			height := max(viewportHeight, int64(math.Ceil(content.Height)))
			if err := emulation.SetDeviceMetricsOverride(viewportWidth, height, 1, false).Do(ctx); err != nil {
				return err
			}
			png, err = page.CaptureScreenshot().WithFormat(page.CaptureScreenshotFormatPng).Do(ctx)
			if rerr := emulation.SetDeviceMetricsOverride(viewportWidth, viewportHeight, 1, false).Do(ctx); err == nil {
				err = rerr
			}
			return err
		}))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	for _, dir := range b.shots {
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			b.t.Error(err)
		}
	}
}

// shotElement saves a PNG of just the element matching sel.
func (b *browser) shotElement(ctx context.Context, sel, name string) {
	b.t.Helper()
	var png []byte
	if err := chromedp.Run(ctx, chromedp.Screenshot(sel, &png, chromedp.ByQuery)); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	for _, dir := range b.shots {
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			b.t.Error(err)
		}
	}
}

// dismissBanners removes the page's transient messages, for a clean screenshot.
var dismissBanners = chromedp.Evaluate(`document.getElementById('banners').replaceChildren()`, nil)

// waitFor waits until the JavaScript expression is truthy; a timeout names it.
// An expression that throws is not true yet: an element it reads may not be
// rendered yet (the page renders after a navigation's hash change).
func waitFor(expr string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		guarded := `(() => { try { return !!(` + expr + `); } catch (e) { return false; } })()`
		err := chromedp.Poll(guarded, nil, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)).Do(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", expr, err)
		}
		return nil
	})
}

// textOf is the text of the first element matching a CSS selector, as a JS expression.
func textOf(sel string) string {
	return fmt.Sprintf(`(document.querySelector(%q)?.textContent ?? "")`, sel)
}

// setValue sets a form field as typing would: value, then an input and a change event.
func setValue(sel, value string) chromedp.Action {
	return chromedp.Evaluate(fmt.Sprintf(`(() => {
		const el = document.querySelector(%q);
		el.value = %q;
		el.dispatchEvent(new Event('input', {bubbles: true}));
		el.dispatchEvent(new Event('change', {bubbles: true}));
		return true;
	})()`, sel, value), nil)
}

// editStateVariable changes one variable in the state editor's JSON text.
func editStateVariable(name, value string) chromedp.Action {
	return chromedp.Evaluate(fmt.Sprintf(`(() => {
		const ta = document.getElementById('state-editor');
		const s = JSON.parse(ta.value);
		s.variables = s.variables || {};
		s.variables[%q] = %q;
		ta.value = JSON.stringify(s, null, 2);
		ta.dispatchEvent(new Event('input', {bubbles: true}));
		return true;
	})()`, name, value), nil)
}

// fixture is the API server the browser talks to, and a Go client of it.
type fixture struct {
	url    string
	client *httpapi.Client
	st     store.Backend // the server's store, for writing many versions fast
	outage atomic.Int32  // what the server does now: one of the outage constants
}

// What the fixture's server does with each request, to play a server that
// does not answer.
const (
	serving      int32 = iota
	answering503       // every request gets 503, as from a proxy whose backend is gone
	hangingUp          // every connection is closed without an answer: fetch fails
)

// serve passes the request to next unless an outage is being played.
func (f *fixture) serve(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch f.outage.Load() {
		case answering503:
			http.Error(w, "backend down", http.StatusServiceUnavailable)
		case hangingUp:
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
		default:
			next.ServeHTTP(w, r)
		}
	})
}

const orderDefinition = `name: order
timeout: 1h
steps:
  - id: reserve
    type: task
    handler: echo
    input: {sku: "{{ .input.sku }}", qty: "{{ .input.qty }}"}
  - id: charge
    type: task
    handler: echo
    input: {amount: "{{ .input.amount }}"}
    depends_on: [reserve]
  - id: approve
    type: wait
    depends_on: [reserve]
  - id: ship
    type: task
    handler: echo
    input: {reserved: "{{ .steps.reserve.output }}"}
    depends_on: [approve, charge]
  - id: notify
    type: wait
    depends_on: [ship]
`

const welcomeDefinition = `name: welcome-email
steps:
  - id: send
    type: task
    handler: echo
    input: {to: "{{ .input.email }}"}
`

const reportDefinition = `name: nightly-report
steps:
  - id: fetch
    type: task
    handler: fail
    retry: {max_attempts: 1}
  - id: render
    type: task
    handler: echo
    depends_on: [fetch]
`

// newFixture starts the real server over SQLite (with tokens, token-file
// lines, when given: the first must be an admin's, the fixture's client
// uses it) with an engine whose
// in-process handlers are echo (returns its input) and fail, and creates a few
// workflows through the API. order-1001 ends up RUNNING with reserve and charge
// COMPLETED and approve WAITING.
func newFixture(t *testing.T, tokens ...string) *fixture {
	t.Helper()
	return newFixtureOn(t, openSQLite, tokens...)
}

// newFixtureOn is newFixture over the store open returns.
func newFixtureOn(t *testing.T, open func(*testing.T) store.Backend, tokens ...string) *fixture {
	t.Helper()
	ctx := t.Context()
	st := open(t)
	t.Cleanup(func() { st.Close() })
	var err error
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	workers := 2
	eng, err := engine.New(engine.Config{Store: st, Workers: &workers, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eng.Register("echo", func(_ context.Context, task engine.Task) (json.RawMessage, error) { return task.Input, nil })
	eng.Register("fail", func(context.Context, engine.Task) (json.RawMessage, error) {
		return nil, engine.Permanent(errors.New("upstream answered 503 Service Unavailable"))
	})
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	var toks []httpapi.Token
	if len(tokens) > 0 {
		if toks, err = httpapi.ParseTokens(strings.Join(tokens, "\n")); err != nil {
			t.Fatal(err)
		}
	}
	api, err := httpapi.NewServer(httpapi.Config{Store: st, Engine: eng, Tokens: toks})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st}
	srv := httptest.NewServer(f.serve(api))
	t.Cleanup(srv.Close)
	var opts []httpapi.ClientOption
	if len(toks) > 0 {
		opts = append(opts, httpapi.WithToken(toks[0].Secret))
	}
	f.url, f.client = srv.URL, httpapi.NewClient(srv.URL, opts...)

	for name, def := range map[string]string{"order": orderDefinition, "nightly-report": reportDefinition, "welcome-email": welcomeDefinition} {
		if _, _, err := f.client.PutDefinition(ctx, name, []byte(def)); err != nil {
			t.Fatalf("PUT definition %s: %v", name, err)
		}
	}
	create := func(req httpapi.CreateWorkflowRequest) {
		t.Helper()
		if _, err := f.client.CreateWorkflow(ctx, req); err != nil {
			t.Fatalf("creating %s: %v", req.ID, err)
		}
	}
	create(httpapi.CreateWorkflowRequest{ID: "import-42", Input: json.RawMessage(`{"file":"s3://exports/2026-11-21.csv"}`),
		State: json.RawMessage(`{"variables":{"rows_done":1200,"source":"s3://exports/2026-11-21.csv"},
			"steps":{"download":{"status":"COMPLETED","attempts":1,"output":{"bytes":48213}},
			"parse":{"status":"RUNNING","attempts":2},"load":{"status":"PENDING","attempts":0}}}`)})
	create(httpapi.CreateWorkflowRequest{ID: "welcome-31", Definition: "welcome-email", Input: json.RawMessage(`{"email":"ada@example.com"}`)})
	create(httpapi.CreateWorkflowRequest{ID: "sync-contacts", State: json.RawMessage(`{"variables":{"cursor":"2026-11-21T09:00:00Z","synced":0}}`)})
	create(httpapi.CreateWorkflowRequest{ID: "report-7", Definition: "nightly-report"})
	create(httpapi.CreateWorkflowRequest{ID: "order-1002", Definition: "order", Input: json.RawMessage(`{"sku":"B-7","qty":1,"amount":12.5}`)})
	if _, err := f.client.Action(ctx, "order-1002", "cancel"); err != nil {
		t.Fatal(err)
	}
	create(httpapi.CreateWorkflowRequest{ID: "order-1001", Definition: "order", Input: json.RawMessage(`{"sku":"A-1","qty":2,"amount":49.9}`)})

	f.waitFor(t, "order-1001 waiting for approve", "order-1001", func(w *workflow.Instance) bool {
		s := w.State.Steps
		return s["charge"].Status == workflow.StepCompleted && s["approve"].Status == workflow.StepWaiting
	})
	f.waitFor(t, "report-7 failed", "report-7", func(w *workflow.Instance) bool { return w.Status == workflow.StatusFailed })
	f.waitFor(t, "welcome-31 completed", "welcome-31", func(w *workflow.Instance) bool { return w.Status == workflow.StatusCompleted })
	return f
}

func (f *fixture) get(t *testing.T, id string) *workflow.Instance {
	t.Helper()
	w, err := f.client.GetWorkflow(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (f *fixture) waitFor(t *testing.T, what, id string, ok func(*workflow.Instance) bool) *workflow.Instance {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		w := f.get(t, id)
		if ok(w) {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; workflow is %s at version %d", what, w.Status, w.Version)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func variable(t *testing.T, w *workflow.Instance, name string) string {
	t.Helper()
	var v string
	if _, err := w.State.Var(name, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDashboard walks through the dashboard the way an operator would: list,
// workflow, pause and resume, edit the state, lose a race against a second
// browser and re-apply, complete a waiting step, and the definitions.
func TestDashboard(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	begin := time.Now()
	f := newFixture(t)
	t.Logf("fixture ready in %v", time.Since(begin).Round(time.Millisecond))
	a := b.tab()

	// The list shows every instance; the status filter and the search narrow it.
	b.run(a, "open the list",
		chromedp.Navigate(f.url+"/"),
		waitFor(`document.querySelectorAll('#wf-table tbody tr[data-id]').length === 6`),
		waitFor(textOf(`tr[data-id="report-7"]`)+`.includes('FAILED')`),
		waitFor(textOf(`tr[data-id="order-1001"]`)+`.includes('2/5')`),
	)
	b.shot(a, "list")
	b.run(a, "filter by status",
		setValue("#status-filter", "FAILED"),
		waitFor(`location.hash === '#/workflows?status=FAILED'`),
		waitFor(`document.querySelectorAll('#wf-table tbody tr[data-id]').length === 1 && !!document.querySelector('tr[data-id="report-7"]')`),
		setValue("#status-filter", ""),
		waitFor(`document.querySelectorAll('#wf-table tbody tr[data-id]').length === 6`),
		setValue("#search", "1002"),
		waitFor(`document.querySelectorAll('#wf-table tbody tr[data-id]').length === 1`),
		setValue("#search", ""),
		waitFor(`document.querySelectorAll('#wf-table tbody tr[data-id]').length === 6`),
	)

	// The workflow page: status, steps in definition order, state, history.
	b.run(a, "open order-1001",
		chromedp.Click(`tr[data-id="order-1001"] a.wf-link`, chromedp.ByQuery),
		waitFor(textOf("#wf-status")+` === 'RUNNING'`),
		waitFor(`[...document.querySelectorAll('#step-list > li')].map(li => li.dataset.step).join() === 'reserve,charge,approve,ship,notify'`),
		waitFor(`document.querySelector('#step-approve')?.dataset.status === 'WAITING'`),
		waitFor(`document.querySelectorAll('#wf-steps svg.dag g.node').length === 5`),
		waitFor(`document.querySelectorAll('#history > li').length >= 3`),
		waitFor(textOf("#state-view")+`.includes('"approve"')`),
		// A running instance shows its deadline; a finished step its times,
		// derived from the history.
		waitFor(`!!document.getElementById('wf-deadline')`),
		waitFor(`!!document.querySelector('#step-reserve .step-duration') && !!document.querySelector('#step-reserve .step-started')`),
		waitFor(`!!document.querySelector('#step-approve .step-started') && !document.querySelector('#step-approve .step-duration')`),
	)
	b.shot(a, "workflow")

	// Pause and resume: the page and the API agree.
	b.run(a, "pause", chromedp.Click("#btn-pause", chromedp.ByID), waitFor(textOf("#wf-status")+` === 'PAUSED'`), waitFor(`!!document.getElementById('btn-resume')`))
	if w := f.get(t, "order-1001"); w.Status != workflow.StatusPaused {
		t.Fatalf("after Pause the API says %s", w.Status)
	}
	b.shot(a, "workflow-paused")
	b.run(a, "resume", chromedp.Click("#btn-resume", chromedp.ByID), waitFor(textOf("#wf-status")+` === 'RUNNING'`), waitFor(`!!document.getElementById('btn-pause')`))
	if w := f.get(t, "order-1001"); w.Status != workflow.StatusRunning {
		t.Fatalf("after Resume the API says %s", w.Status)
	}

	// A second, separate browser opens the editor now, at the current version.
	base := f.get(t, "order-1001")
	bTab := b.tab()
	b.run(bTab, "second browser opens the editor",
		chromedp.Navigate(f.url+"/#/workflows/order-1001"),
		waitFor(fmt.Sprintf(`document.getElementById('wf-version')?.dataset.version === '%d'`, base.Version)),
		chromedp.Click("#btn-edit-state", chromedp.ByID),
		waitFor(`!!document.getElementById('state-editor')`),
	)

	// The first browser edits and saves: the version goes up by one.
	var refusesSteps bool
	b.run(a, "edit and save",
		chromedp.Click("#btn-edit-state", chromedp.ByID),
		waitFor(`!!document.getElementById('state-editor')`),
		// The engine owns the steps: the editor says so, leaves them out,
		// and will not save a state with a steps key.
		waitFor(textOf("#editor-steps-note")+`.includes('owned by the engine')`),
		waitFor(`!document.getElementById('state-editor').value.includes('"steps"')`),
		chromedp.Evaluate(`(() => {
			const ta = document.getElementById('state-editor');
			const before = ta.value;
			const s = JSON.parse(before);
			s.steps = {approve: {status: 'COMPLETED'}};
			ta.value = JSON.stringify(s);
			ta.dispatchEvent(new Event('input', {bubbles: true}));
			const refused = document.getElementById('btn-save').disabled && document.getElementById('editor-error').textContent.includes('engine owns the steps');
			ta.value = before;
			ta.dispatchEvent(new Event('input', {bubbles: true}));
			return refused && !document.getElementById('btn-save').disabled;
		})()`, &refusesSteps),
		editStateVariable("priority", "high"),
	)
	if !refusesSteps {
		t.Error("the editor of a definition-based workflow accepted a steps key")
	}
	b.shot(a, "workflow-editor")
	b.run(a, "save", chromedp.Click("#btn-save", chromedp.ByID), waitFor(`!document.getElementById('state-editor') && `+textOf("#state-view")+`.includes('"priority"')`))
	saved := f.get(t, "order-1001")
	if saved.Version != base.Version+1 || variable(t, saved, "priority") != "high" {
		t.Fatalf("after Save: version %d (want %d), priority %q", saved.Version, base.Version+1, variable(t, saved, "priority"))
	}

	// The second browser, still at the old version, saves its own edit: 412,
	// the conflict view, and re-applying keeps both edits.
	b.run(bTab, "stale save shows the conflict",
		waitFor(`!!document.getElementById('editor-stale')`), // live refresh noticed the newer version
		editStateVariable("note", "checked by ops"),
		chromedp.Click("#btn-save", chromedp.ByID),
		waitFor(`!!document.getElementById('conflict')`),
		waitFor(textOf("#server-changes")+`.includes('variables.priority')`),
		waitFor(textOf("#my-changes")+`.includes('variables.note')`),
		waitFor(textOf("#btn-reapply")+fmt.Sprintf(`.includes('version %d')`, saved.Version)),
	)
	b.shot(bTab, "workflow-conflict")
	b.shotElement(bTab, "#wf-state", "conflict-card")
	if w := f.get(t, "order-1001"); w.Version != saved.Version {
		t.Fatalf("the stale save changed the workflow: version %d, want %d", w.Version, saved.Version)
	}
	b.run(bTab, "re-apply",
		chromedp.Click("#btn-reapply", chromedp.ByID),
		waitFor(`!document.getElementById('conflict') && `+textOf("#state-view")+`.includes('checked by ops')`),
	)
	merged := f.get(t, "order-1001")
	if merged.Version != saved.Version+1 || variable(t, merged, "priority") != "high" || variable(t, merged, "note") != "checked by ops" {
		t.Fatalf("after re-apply: version %d (want %d), variables %s", merged.Version, saved.Version+1, merged.State.Variables)
	}
	if got, want := len(merged.State.Steps), len(base.State.Steps); got != want {
		t.Fatalf("after re-apply the state has %d steps, want %d", got, want)
	}
	b.shot(bTab, "workflow-reapplied")

	// Live refresh brings the second browser's edit to the first one.
	b.run(a, "live refresh", waitFor(textOf("#state-view")+`.includes('checked by ops')`),
		waitFor(textOf("#history")+`.includes('variables.note')`))

	// Complete the waiting step with an output, sent with If-Match.
	b.run(a, "complete approve",
		chromedp.Click(`button[data-complete-step="approve"]`, chromedp.ByQuery),
		waitFor(`!!document.getElementById('complete-output')`),
		setValue("#complete-output", `{"approved_by": "ops"}`),
		chromedp.Click("#btn-complete-submit", chromedp.ByID),
		waitFor(`document.querySelector('#step-approve')?.dataset.status === 'COMPLETED'`),
		waitFor(`document.querySelector('#step-notify')?.dataset.status === 'WAITING'`),
		waitFor(`!!document.querySelector('#step-approve .step-duration')`),
	)
	done := f.get(t, "order-1001")
	if st := done.State.Steps["approve"]; st.Status != workflow.StepCompleted || string(st.Output) != `{"approved_by":"ops"}` {
		t.Fatalf("approve after Complete: %s %s", st.Status, st.Output)
	}
	b.run(a, "open an output", chromedp.Click(`#step-reserve details.step-output summary`, chromedp.ByQuery), dismissBanners)
	b.shot(a, "workflow-done")

	// A free-form workflow: steps in key order, no graph.
	b.run(a, "free-form workflow",
		chromedp.Navigate(f.url+"/#/workflows/import-42"),
		waitFor(`[...document.querySelectorAll('#step-list > li')].map(li => li.dataset.step).join() === 'download,load,parse'`),
		waitFor(`!document.querySelector('#wf-steps svg')`),
		waitFor(textOf("#wf-status")+` === 'PENDING'`),
	)
	b.shot(a, "workflow-free-form")
	b.run(a, "start it", chromedp.Click("#btn-start", chromedp.ByID), waitFor(textOf("#wf-status")+` === 'RUNNING' && !!document.getElementById('btn-pause')`))
	if w := f.get(t, "import-42"); w.Status != workflow.StatusRunning {
		t.Fatalf("after Start the API says %s", w.Status)
	}

	// A failed workflow offers Retry.
	b.run(a, "failed workflow",
		chromedp.Navigate(f.url+"/#/workflows/report-7"),
		waitFor(textOf("#wf-status")+` === 'FAILED'`),
		waitFor(`!!document.getElementById('btn-retry') && !document.getElementById('btn-pause')`),
		waitFor(textOf("#step-fetch")+`.includes('503')`),
	)
	b.shot(a, "workflow-failed")

	// Searching an exact id opens it.
	b.run(a, "search an exact id",
		chromedp.Navigate(f.url+"/#/workflows"),
		waitFor(`document.querySelectorAll('#wf-table tbody tr[data-id]').length === 6`),
		chromedp.SendKeys("#search", "order-1002"+kb.Enter, chromedp.ByID),
		waitFor(`location.hash === '#/workflows/order-1002' && `+textOf("#wf-status")+` === 'CANCELLED'`),
		// A cancelled workflow offers no action but Delete….
		waitFor(`!document.getElementById('wf-actions').querySelector('button:not(#btn-delete)') && !!document.getElementById('btn-delete')`),
		// A stopped instance has no deadline; the steps it stopped are
		// CANCELLED, in the list and in the graph.
		waitFor(`!document.getElementById('wf-deadline') && !`+textOf("#wf-head")+`.includes('Deadline')`),
		waitFor(`!!document.querySelector('#step-list > li[data-status="CANCELLED"]') && !!document.querySelector('#wf-steps svg.dag g.node.st-CANCELLED')`),
	)
	b.shot(a, "workflow-cancelled")

	// Paging with next_cursor, two at a time, newest first.
	all, err := f.client.ListWorkflows(t.Context(), httpapi.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, w := range all.Workflows {
		ids = append(ids, w.ID)
	}
	const shownIDs = `[...document.querySelectorAll('#wf-table tbody tr[data-id]')].map(tr => tr.dataset.id).join()`
	page := func(from int) string { return fmt.Sprintf("%s === %q", shownIDs, strings.Join(ids[from:from+2], ",")) }
	b.run(a, "paging",
		chromedp.Navigate(f.url+"/#/workflows?limit=2"),
		waitFor(page(0)),
		clickNow("page-next"), waitFor(page(2)),
		clickNow("page-next"), waitFor(page(4)),
		clickNow("page-prev"), waitFor(page(2)),
		clickNow("page-prev"), waitFor(page(0)+` && document.getElementById('page-prev').disabled`),
	)

	// Live refresh picks up a new workflow; paused, it does not.
	b.run(a, "the list refreshes itself",
		chromedp.Navigate(f.url+"/#/workflows"),
		waitFor(`document.querySelectorAll('#wf-table tbody tr[data-id]').length === 6`),
	)
	if _, err := f.client.CreateWorkflow(t.Context(), httpapi.CreateWorkflowRequest{ID: "late-1"}); err != nil {
		t.Fatal(err)
	}
	b.run(a, "a new workflow appears", waitFor(`!!document.querySelector('tr[data-id="late-1"]')`))
	b.run(a, "pause live refresh", chromedp.Click("#live-toggle", chromedp.ByID), waitFor(textOf("#live-label")+` === 'Paused'`))
	if _, err := f.client.CreateWorkflow(t.Context(), httpapi.CreateWorkflowRequest{ID: "late-2"}); err != nil {
		t.Fatal(err)
	}
	var appeared bool
	b.run(a, "nothing while paused", chromedp.Sleep(3*time.Second), chromedp.Evaluate(`!!document.querySelector('tr[data-id="late-2"]')`, &appeared))
	if appeared {
		t.Error("the list refreshed while live refresh was paused")
	}
	b.run(a, "resume live refresh", chromedp.Click("#live-toggle", chromedp.ByID),
		waitFor(textOf("#live-label")+` === 'Live' && !!document.querySelector('tr[data-id="late-2"]')`))

	// Definitions: the list, and one definition with its graph.
	b.run(a, "definitions",
		chromedp.Navigate(f.url+"/#/definitions"),
		waitFor(`document.querySelectorAll('#def-table tbody tr[data-name]').length === 3`),
	)
	b.shot(a, "definitions")
	b.run(a, "definition graph",
		chromedp.Click(`tr[data-name="order"] a`, chromedp.ByQuery),
		waitFor(`document.querySelectorAll('#def-dag svg g.node').length === 5`),
		waitFor(`document.querySelectorAll('#def-dag svg path.edge').length === 5`),
		// order has no retention of its own: the server's applies.
		waitFor(`[...document.querySelectorAll('.fact')].some(f => f.textContent === "Retentionthe server's")`),
	)
	var columns []float64
	b.run(a, "read the layout", chromedp.Evaluate(`['reserve','charge','approve','ship','notify'].map(id =>
		document.querySelector('#def-dag g.node[data-step="' + id + '"]').transform.baseVal[0].matrix.e)`, &columns))
	if !(columns[0] < columns[1] && columns[1] == columns[2] && columns[2] < columns[3] && columns[3] < columns[4]) {
		t.Errorf("layers by depth: x of reserve, charge, approve, ship, notify = %v", columns)
	}
	b.shot(a, "definition")

	// A finished workflow is deleted after a confirmation that names the
	// version sent as If-Match; the list no longer shows it.
	b.run(a, "delete a cancelled workflow",
		chromedp.Navigate(f.url+"/#/workflows/order-1002"),
		waitFor(textOf("#wf-status")+` === 'CANCELLED'`),
		chromedp.Click("#btn-delete", chromedp.ByID),
		waitFor(textOf("#delete-confirm")+`.includes('(version ')`),
		chromedp.Click("#btn-delete-confirm", chromedp.ByID),
		waitFor(`location.hash === '#/workflows'`),
		waitFor(`!!document.querySelector('#wf-table tbody tr[data-id="order-1001"]') && !document.querySelector('tr[data-id="order-1002"]')`),
	)
	if _, err := f.client.GetWorkflow(t.Context(), "order-1002"); !httpapi.IsNotFound(err) {
		t.Errorf("after the delete through the dashboard the API answers %v, want 404", err)
	}
	b.checkNoErrors()
}

// liveIndicator is the state of the Live indicator as a JS expression:
// data-state, label and whether its dot is red, green or neither.
const liveIndicator = `(() => {
	const b = document.getElementById('live-toggle');
	const [r, g] = getComputedStyle(b.querySelector('.live-dot')).backgroundColor.match(/\d+/g).map(Number);
	const colour = r > 150 && g < 100 ? 'red' : g > 120 && r < 100 ? 'green' : 'other';
	return b.dataset.state + ' ' + document.getElementById('live-label').textContent + ' ' + colour;
})()`

// TestDashboardLiveIndicator: the Live indicator turns red and says so while
// the server does not answer (a 5xx, or no answer at all), and green again as
// soon as it answers; with live refresh paused it still retries.
func TestDashboardLiveIndicator(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	tab := b.tab()
	const (
		green  = liveIndicator + ` === 'live Live green'`
		red    = liveIndicator + ` === 'offline Offline — retrying red'`
		paused = liveIndicator + ` === 'paused Paused other'`
	)
	b.run(tab, "open the list",
		chromedp.Navigate(f.url+"/"),
		waitFor(`document.querySelectorAll('#wf-table tbody tr[data-id]').length === 6`),
		waitFor(green),
	)
	for _, outage := range []struct {
		name string
		mode int32
	}{{"503", answering503}, {"hang up", hangingUp}} {
		f.outage.Store(outage.mode)
		b.run(tab, outage.name+": the indicator turns red", waitFor(red),
			waitFor(`document.getElementById('live-toggle').title.includes('does not answer')`))
		b.shot(tab, "live-offline-"+strings.ReplaceAll(outage.name, " ", "-"))
		f.outage.Store(serving)
		b.run(tab, outage.name+": back, the indicator turns green", waitFor(green))
	}

	// Paused, nothing polls; a failed action still shows the server is gone,
	// and the probe notices when it is back.
	b.run(tab, "pause", chromedp.Click("#live-toggle", chromedp.ByID), waitFor(paused))
	f.outage.Store(hangingUp)
	b.run(tab, "a request fails while paused",
		chromedp.Navigate(f.url+"/#/definitions"),
		waitFor(red))
	f.outage.Store(serving)
	b.run(tab, "back while paused", waitFor(paused))
	b.checkNoErrors()
}

// TestDashboardToasts: a success toast appears after an action and goes by
// itself; what lies under the toast area stays clickable; errors stay longer
// and can be closed; no more than three are shown at once.
func TestDashboardToasts(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	tab := b.tab()
	b.run(tab, "open order-1001",
		chromedp.Navigate(f.url+"/#/workflows/order-1001"),
		waitFor(textOf("#wf-status")+` === 'RUNNING' && !!document.getElementById('btn-pause')`),
		// A control where the toasts show up, below them.
		chromedp.Evaluate(`(() => {
			const c = document.createElement('button');
			c.id = 'under-toasts';
			c.textContent = 'under the toasts';
			Object.assign(c.style, {position: 'fixed', right: '0', bottom: '0', width: '40rem', height: '14rem', zIndex: '1'});
			c.addEventListener('click', () => { c.dataset.clicks = String(Number(c.dataset.clicks || 0) + 1); });
			document.body.append(c);
			return true;
		})()`, nil),
	)

	var at struct {
		X, Y    float64
		Covered bool
		Hit     string
	}
	b.run(tab, "an action shows a success toast",
		chromedp.Click("#btn-pause", chromedp.ByID),
		waitFor(`!!document.querySelector('#banners .banner-success')`),
		chromedp.Evaluate(`(() => {
			window.toast = document.querySelector('#banners .banner-success');
			const r = window.toast.getBoundingClientRect();
			const x = r.left + r.width / 3, y = r.top + r.height / 2;
			// Hit testing skips what lets clicks through: the toast is drawn
			// there, but the control is what a click finds.
			const c = document.getElementById('under-toasts').getBoundingClientRect();
			const inside = x > c.left && x < c.right && y > c.top && y < c.bottom;
			const hit = document.elementFromPoint(x, y);
			return {X: x, Y: y, Covered: inside && hit?.id === 'under-toasts', Hit: hit ? hit.tagName + '#' + hit.id + '.' + hit.className : 'nothing'};
		})()`, &at),
	)
	if !at.Covered {
		t.Fatalf("a click on the toast at (%v, %v) would reach %s, not the control under it", at.X, at.Y, at.Hit)
	}
	b.shot(tab, "toast-success")
	var clicks string
	var shown bool
	b.run(tab, "click through the toast",
		chromedp.MouseClickXY(at.X, at.Y),
		chromedp.Evaluate(`document.getElementById('under-toasts').dataset.clicks ?? ''`, &clicks),
		chromedp.Evaluate(`window.toast.isConnected`, &shown),
	)
	if clicks != "1" || !shown {
		t.Errorf("a click on a shown toast (shown: %v) reached the control under it %q times, want once", shown, clicks)
	}
	b.run(tab, "the success toast goes by itself", waitFor(`!window.toast.isConnected`))

	// An error stays longer than a success message and has a close button;
	// the gap between toasts lets clicks through as well.
	b.run(tab, "an error and a success toast",
		chromedp.Evaluate(`import('./ui/ui.js').then(ui => {
			window.errorToast = ui.banner('error', 'Something failed');
			window.okToast = ui.banner('success', 'Something worked');
			return true;
		})`, nil, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }),
		chromedp.Evaluate(`(() => {
			const e = window.errorToast.getBoundingClientRect(), o = window.okToast.getBoundingClientRect();
			return {X: e.left + e.width / 2, Y: (e.bottom + o.top) / 2, Covered: o.top > e.bottom};
		})()`, &at),
	)
	if !at.Covered {
		t.Fatalf("the two toasts are not stacked with a gap: %+v", at)
	}
	b.run(tab, "click between the toasts",
		chromedp.MouseClickXY(at.X, at.Y),
		waitFor(`document.getElementById('under-toasts').dataset.clicks === '2'`),
		waitFor(`!window.okToast.isConnected`),
	)
	b.run(tab, "the error outlives it and closes with ×",
		waitFor(`window.errorToast.isConnected`),
		chromedp.Click(`#banners .banner-error .banner-close`, chromedp.ByQuery),
		waitFor(`!window.errorToast.isConnected && document.querySelectorAll('#banners .banner').length === 0`),
	)

	var texts []string
	b.run(tab, "at most three at once",
		chromedp.Evaluate(`import('./ui/ui.js').then(ui => {
			ui.banner('error', 'error 1');
			for (let i = 1; i <= 4; i++) ui.banner('info', 'info ' + i);
			return [...document.querySelectorAll('#banners .banner-text')].map(e => e.textContent);
		})`, &texts, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }),
	)
	if diff := cmp.Diff([]string{"error 1", "info 3", "info 4"}, texts); diff != "" {
		t.Errorf("toasts shown (-want +got):\n%s", diff)
	}
	// The page keeps room below its content, so it scrolls clear of them.
	var clear bool
	b.run(tab, "the content scrolls clear of the toasts",
		chromedp.Evaluate(`document.getElementById('under-toasts').remove()`, nil),
		waitFor(`parseFloat(getComputedStyle(document.documentElement).getPropertyValue('--banner-space')) >= Math.floor(document.getElementById('banners').getBoundingClientRect().height) && document.querySelectorAll('#banners .banner').length > 0`),
		chromedp.Evaluate(`window.scrollTo(0, document.documentElement.scrollHeight)`, nil),
		chromedp.Evaluate(`(() => {
			const view = document.getElementById('view'), last = view.lastElementChild;
			return last.getBoundingClientRect().bottom <= document.getElementById('banners').getBoundingClientRect().top;
		})()`, &clear),
	)
	if !clear {
		t.Error("scrolled to the bottom, the page's last element is still under the toasts")
	}
	b.checkNoErrors()
}

// TestDashboardTokenPrompt: with tokens configured, the page asks for one,
// keeps it in sessionStorage only, and sends it as a bearer token.
func TestDashboardTokenPrompt(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t, "s3cret-token")
	tab := b.tab()
	b.run(tab, "the page asks for a token",
		chromedp.Navigate(f.url+"/"),
		waitFor(`!document.getElementById('auth').hidden`),
	)
	b.shot(tab, "token-prompt")
	b.run(tab, "a wrong token is rejected",
		chromedp.SendKeys("#token-input", "wrong"+kb.Enter, chromedp.ByID),
		waitFor(`!document.getElementById('auth').hidden && `+textOf("#token-reason")+`.includes('rejected')`),
	)
	var stored struct {
		Session string `json:"session"`
		Local   int    `json:"local"`
	}
	b.run(tab, "the right token opens the list",
		chromedp.SendKeys("#token-input", "s3cret-token"+kb.Enter, chromedp.ByID),
		waitFor(`document.getElementById('auth').hidden && document.querySelectorAll('#wf-table tbody tr[data-id]').length === 6`),
		chromedp.Evaluate(`({session: sessionStorage.getItem('flowd.token'), local: localStorage.length})`, &stored),
	)
	if stored.Session != "s3cret-token" || stored.Local != 0 {
		t.Errorf("token storage: sessionStorage %q, localStorage has %d items", stored.Session, stored.Local)
	}
	// Another browser context has its own session: it is asked again.
	other := b.tab()
	b.run(other, "a new session asks again", chromedp.Navigate(f.url+"/"), waitFor(`!document.getElementById('auth').hidden`))
	b.checkNoErrors()
}

// TestMergePatchInBrowser checks the page's JSON helpers in the browser
// against Go's RFC 7396 implementation: applying the patches the editor builds
// must give exactly the edited document.
func TestMergePatchInBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	mux := http.NewServeMux()
	mux.Handle("GET "+web.AssetPrefix, web.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	cases := []struct {
		name       string
		base, mine string
		want       string   // the document after applying; mine when empty
		wantDiff   []string // diff(base, mine) as "path op"
	}{
		{name: "nothing", base: `{"a":1}`, mine: `{"a":1}`, wantDiff: []string{}},
		{name: "add change remove", base: `{"a":1,"b":{"c":2,"d":3},"e":"x"}`, mine: `{"a":2,"b":{"c":2},"f":[1,2]}`,
			wantDiff: []string{"a changed", "b.d removed", "e removed", "f added"}},
		{name: "nested object replaced by scalar", base: `{"v":{"x":{"y":1}}}`, mine: `{"v":{"x":5}}`, wantDiff: []string{"v.x changed"}},
		{name: "scalar replaced by object", base: `{"v":5}`, mine: `{"v":{"x":{"y":1}}}`, wantDiff: []string{"v changed"}},
		{name: "arrays are replaced whole", base: `{"l":[1,{"a":1},3]}`, mine: `{"l":[1,{"a":2}]}`, wantDiff: []string{"l[1].a changed", "l[2] removed"}},
		{name: "unchanged null is kept", base: `{"a":null,"b":1}`, mine: `{"a":null,"b":2}`, wantDiff: []string{"b changed"}},
		{name: "new null is left out", base: `{"b":1}`, mine: `{"b":1,"n":null}`, want: `{"b":1}`, wantDiff: []string{"n added"}},
		{name: "null removes", base: `{"a":{"x":1},"b":1}`, mine: `{"a":{"x":null},"b":null}`, want: `{"a":{}}`, wantDiff: []string{"a.x changed", "b changed"}},
		{name: "odd keys", base: `{"steps":{"a b":{"status":"PENDING"}}}`, mine: `{"steps":{"a b":{"status":"COMPLETED"},"x.y":{}}}`,
			wantDiff: []string{`steps["a b"].status changed`, `steps["x.y"] added`}},
	}
	var pairs [][2]json.RawMessage
	for _, c := range cases {
		pairs = append(pairs, [2]json.RawMessage{json.RawMessage(c.base), json.RawMessage(c.mine)})
	}
	in, err := json.Marshal(pairs)
	if err != nil {
		t.Fatal(err)
	}
	var out []struct {
		Min  json.RawMessage `json:"min"`
		Full json.RawMessage `json:"full"`
		JS   json.RawMessage `json:"js"`
		Diff []string        `json:"diff"`
	}
	tab := b.tab()
	b.run(tab, "run the JSON helpers",
		chromedp.Navigate(srv.URL+web.AssetPrefix+"jsondiff.js"),
		chromedp.Evaluate(fmt.Sprintf(`import('./jsondiff.js').then(m => %s.map(([base, mine]) => {
			const min = m.mergePatch(base, mine);
			return {min, full: m.fullPatch(base, mine), js: m.applyMergePatch(base, min),
				diff: m.diff(base, mine).map(d => m.formatPath(d.path) + ' ' + d.op)};
		}))`, in), &out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }),
	)
	for i, c := range cases {
		want := c.want
		if want == "" {
			want = c.mine
		}
		for _, p := range []struct {
			kind  string
			patch json.RawMessage
		}{{"mergePatch", out[i].Min}, {"fullPatch", out[i].Full}} {
			got, err := jsonpatch.MergePatch([]byte(c.base), p.patch)
			if err != nil {
				t.Errorf("%s: %s %s: %v", c.name, p.kind, p.patch, err)
				continue
			}
			if !jsonpatch.Equal(got, []byte(want)) {
				t.Errorf("%s: applying %s %s to %s gives %s, want %s", c.name, p.kind, p.patch, c.base, got, want)
			}
		}
		if !jsonpatch.Equal(out[i].JS, []byte(want)) {
			t.Errorf("%s: applyMergePatch in JS gives %s, want %s", c.name, out[i].JS, want)
		}
		if diff := cmp.Diff(c.wantDiff, out[i].Diff); diff != "" {
			t.Errorf("%s: diff paths (-want +got):\n%s", c.name, diff)
		}
	}
	b.checkNoErrors()
}

// TestDashboardHistoryPages: the history panel loads the first page of
// versions (1,000) and says so; "Load more versions" loads the rest.
func TestDashboardHistoryPages(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	ctx := t.Context()
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "long"}); err != nil {
		t.Fatal(err)
	}
	const versions = 1005
	// The versions a PATCH {"variables":{"n":v}} each would write, written
	// straight to the store in one group write: a thousand PATCH requests
	// took minutes of SQLite under the race detector, and the dashboard
	// reads the history through the API either way.
	inst, err := f.st.Get(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	ws := make([]*store.Write, 0, versions-1)
	for v := 1; v < versions; v++ {
		st := workflow.State{Variables: map[string]json.RawMessage{"n": json.RawMessage(strconv.Itoa(v))}}
		ws = append(ws, &store.Write{ID: "long", ExpectedVersion: int64(v - 1), From: inst.Status, Status: inst.Status, State: st, Cause: "patch"})
	}
	if _, _, err := f.st.ApplyGroup(ctx, nil, ws, nil); err != nil {
		t.Fatal(err)
	}
	tab := b.tab()
	b.run(tab, "open the long workflow",
		chromedp.Navigate(f.url+"/#/workflows/long"),
		waitFor(textOf("#history-count")+` === 'versions 0–999 of 1005, newest first'`),
		waitFor(`document.querySelector('#history > li')?.dataset.version === '999'`),
	)
	b.run(tab, "load more",
		chromedp.Click("#history-more", chromedp.ByID),
		waitFor(textOf("#history-count")+` === '1005 versions, newest first'`),
		waitFor(`!document.getElementById('history-more')`),
		waitFor(`document.querySelector('#history > li')?.dataset.version === '1004'`),
	)
	b.checkNoErrors()
}

// clickNow clicks the element with id as it is when the action runs, in
// one step of the page's own: the list's live refresh re-renders the
// pager, and a click that found the node before a refresh fails on a node
// that is gone.
func clickNow(id string) chromedp.Action {
	return chromedp.Evaluate(fmt.Sprintf(`document.getElementById(%q).click()`, id), nil)
}
