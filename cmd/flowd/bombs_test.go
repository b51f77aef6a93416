package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Requests that made a node build gigabytes (or crash) before expressions,
// documents and numbers were bounded. Each runs against a real `flowd
// serve` (SQLite); the node must answer as the bounds say, keep answering
// /healthz quickly, and its peak RSS (VmHWM) stay within 256 MiB of its
// idle size, for each bomb alone and for eight at once.
//
// FLOWD_BOMBS_BINARY names a prebuilt flowd to run instead of this tree's
// (to see an older build fail these tests; run such a build under a memory
// limit, it may take gigabytes).

const bombHeadroom = 256 << 20

// bombNode is a running `flowd serve` and its process id.
type bombNode struct {
	t   *testing.T
	url string
	pid int
}

// startBombNode starts bin with the bombs' definitions and returns it with
// its idle RSS.
func startBombNode(t *testing.T, bin string) (*bombNode, int64) {
	t.Helper()
	dir := t.TempDir()
	out := &syncBuffer{}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--db", "sqlite:"+filepath.Join(dir, "flowd.db"), "--log-level", "error")
	cmd.Dir = dir
	startProcess(t, cmd, out)
	n := &bombNode{t: t, pid: cmd.Process.Pid}
	deadline := time.Now().Add(30 * time.Second)
	for n.url == "" {
		if m := urlLine.FindStringSubmatch(out.String()); m != nil {
			n.url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("flowd serve printed no URL; output:\n%s", out.String())
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	for name, def := range bombDefinitions {
		ct := "application/json"
		if !strings.HasPrefix(def, "{") {
			ct = "application/yaml"
		}
		if code, body := n.do("PUT", "/v1/definitions/"+name, ct, def); code != 201 {
			t.Fatalf("PUT %s: %d %s", name, code, body)
		}
	}
	for i := range 3 { // warm up, then take the idle size
		n.do("POST", "/v1/workflows", "application/json", fmt.Sprintf(`{"id":"warm-%d"}`, i))
	}
	return n, n.memory("VmRSS")
}

// do sends a request and returns the status and body (0 and the error
// text when the node does not answer).
func (n *bombNode) do(method, path, contentType, body string) (int, string) {
	req, err := http.NewRequest(method, n.url+path, strings.NewReader(body))
	if err != nil {
		n.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", contentType)
	}
	client := &http.Client{Timeout: 60 * time.Second}
	res, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// memory reads a field of /proc/PID/status, in bytes.
func (n *bombNode) memory(field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.pid))
	if err != nil {
		n.t.Fatalf("the node is gone: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	n.t.Fatalf("no %s in /proc/%d/status", field, n.pid)
	return 0
}

// waitFailed polls an instance until it is FAILED and returns its JSON.
func (n *bombNode) waitFailed(id string) string {
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := n.do("GET", "/v1/workflows/"+id, "", "")
		if code == 200 && strings.Contains(body, `"status":"FAILED"`) {
			return body
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("not FAILED after 30s: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bomb is one hostile request and the answer it must get; check returns
// "" or what is wrong.
type bomb struct {
	name  string
	check func(n *bombNode, id string) string
}

// bombDefinitions are the definitions the bombs start.
var bombDefinitions = map[string]string{
	"when-x4": `{"name":"when-x4","steps":[{"id":"a","type":"task","handler":"h","when":"(\"x\"*1e9) as $a | ($a+$a+$a+$a)"}]}`,
	"when-2g": `{"name":"when-2g","steps":[{"id":"a","type":"task","handler":"h","when":"(\"x\" * 2147483000) | length > 0"}]}`,
	"map":     `{"name":"map","steps":[{"id":"a","type":"task","handler":"h","foreach":"[range(10000)] | map(\"x\"*100000)"}]}`,
	// Holds as much as an evaluation may: a recursion keeping a 4 MB string
	// at each level.
	"hold": `{"name":"hold","steps":[{"id":"a","type":"task","handler":"h","when":"def f($n): (\"x\"*4000000 + ($n|tostring)) as $a | if $n > 0 then f($n-1) else $a end; f(15) | length > 0"}]}`,
	"sw-1g": "document: {dsl: '1.0.0', namespace: test, name: sw-1g, version: '1.0.0'}\n" +
		"do:\n  - grow:\n      set:\n        n: '${ \"x\" * 1000000000 | length }'\n",
	// Read a large input: a `when` that needs nothing of it (the document
	// is decoded all the same), and one that needs all of it.
	"doc-true": `{"name":"doc-true","steps":[{"id":"a","type":"sleep","duration":"1ms","when":"true"}]}`,
	"doc-len":  `{"name":"doc-len","steps":[{"id":"a","type":"sleep","duration":"1ms","when":".input | length > 0"}]}`,
	// Reads its large input, then holds as much as an evaluation may.
	"doc-hold": `{"name":"doc-hold","steps":[{"id":"a","type":"sleep","duration":"1ms","when":"(.input.xs | length) as $l | def f($n): (\"x\"*4000000 + ($n|tostring)) as $a | if $n > 0 then f($n-1) else $a end; f(15) | length > $l"}]}`,
	"sw-int": "document: {dsl: '1.0.0', namespace: test, name: sw-int, version: '1.0.0'}\n" +
		"input:\n  schema:\n    format: json\n    document:\n      type: object\n      properties:\n        xs: {type: array, items: {type: integer}}\n" +
		"do:\n  - ok:\n      set:\n        ok: true\n",
}

// aliasBomb is a Serverless Workflow document of about 500 KB whose YAML
// aliases expand it to about 500 MB.
func aliasBomb() string {
	return "document: {dsl: '1.0.0', namespace: test, name: aliases, version: '1.0.0'}\n" +
		"do:\n  - big:\n      set:\n        s: &big \"" + strings.Repeat("x", 400_000) + "\"\n" +
		"        copies: [" + strings.Repeat("*big, ", 1249) + "*big]\n"
}

// startFails starts def and expects its instance to fail with an error
// containing one of wants.
func startFails(def string, wants ...string) func(n *bombNode, id string) string {
	return func(n *bombNode, id string) string {
		code, body := n.do("POST", "/v1/workflows", "application/json", `{"id":"`+id+`","definition":"`+def+`"}`)
		if code != 201 && code != 200 {
			return fmt.Sprintf("start: %d %.300s", code, body)
		}
		got := n.waitFailed(id)
		for _, want := range wants {
			if strings.Contains(got, want) {
				return ""
			}
		}
		return fmt.Sprintf("instance %.600s, want FAILED with one of %q", got, wants)
	}
}

// largeDocument is a start of def whose body is 1 MiB, its input
// {"xs": [{"a":1}, …]}: small objects, the shape whose decoded values cost
// the most (about 47 MB for the megabyte). It must be answered 201, and
// the instance complete (fail with an error containing want, when set):
// the node's gate on decoded documents makes such starts take turns, it
// fails none.
func largeDocument(def, want string) func(n *bombNode, id string) string {
	return func(n *bombNode, id string) string {
		head := `{"id":"` + id + `","definition":"` + def + `","input":{"xs":[`
		objects := ((1 << 20) - len(head) - 3) / 8
		body := head + strings.TrimSuffix(strings.Repeat(`{"a":1},`, objects), ",") + "]}}"
		if code, got := n.do("POST", "/v1/workflows", "application/json", body); code != 201 {
			return fmt.Sprintf("start: %d %.300s", code, got)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			// The history holds the versions' states, not the input.
			code, got := n.do("GET", "/v1/workflows/"+id+"/history", "", "")
			var h struct {
				Versions []struct{ Status string }
			}
			if code == 200 && json.Unmarshal([]byte(got), &h) == nil && len(h.Versions) > 0 {
				switch last := h.Versions[len(h.Versions)-1]; {
				case last.Status == "COMPLETED" && want == "":
					return ""
				case last.Status == "FAILED" && want != "" && strings.Contains(got, want):
					return ""
				case last.Status == "COMPLETED" || last.Status == "FAILED":
					return fmt.Sprintf("%s, want %q: %.600s", last.Status, cmp.Or(want, "COMPLETED"), got)
				}
			}
			if time.Now().After(deadline) {
				return fmt.Sprintf("not COMPLETED after 60s: %d %.600s", code, got)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func refused(method, path, contentType string, body func(id string) string, want string) func(n *bombNode, id string) string {
	return func(n *bombNode, id string) string {
		code, got := n.do(method, path, contentType, body(id))
		if code != 400 || !strings.Contains(got, want) {
			return fmt.Sprintf("%d %.300s, want 400 with %q", code, got, want)
		}
		return ""
	}
}

var bombs = []bomb{
	{"YAML aliases expanding a 500 KB PUT to 500 MB", refused("PUT", "/v1/definitions/aliases", "application/yaml",
		func(string) string { return aliasBomb() }, "the YAML document is too large: more than 4194304 bytes once its aliases are expanded")},
	{`when: ("x"*1e9) as $a | ($a+$a+$a+$a)`, startFails("when-x4",
		`when: expression \"(\\\"x\\\"*1e9) as $a | ($a+$a+$a+$a)\": `+"`*`"+` would build a value of 1000000002 bytes, over --max-state-bytes (4194304 bytes)`)},
	{`when: ("x" * 2147483000) | length > 0`, startFails("when-2g",
		"`*` would build a value of 2147483002 bytes, over --max-state-bytes (4194304 bytes)")},
	{`foreach: [range(10000)] | map("x"*100000)`, startFails("map",
		`foreach: expression \"[range(10000)] | map(\\\"x\\\"*100000)\": [...] would build a value larger than --max-state-bytes (4194304 bytes)`)},
	{`Serverless Workflow set: ${ "x" * 1000000000 | length }`, startFails("sw-1g",
		"`*` would build a value of 1000000002 bytes, over --max-state-bytes (4194304 bytes)")},
	{"2,000 x 1e999999 against an integer input schema", refused("POST", "/v1/workflows", "application/json",
		func(id string) string {
			return `{"id":"` + id + `","definition":"sw-int","input":{"xs":[` + strings.Repeat("1e999999,", 1999) + `1e999999]}}`
		}, "the number 1e999999 at /input/xs/0 is out of range (a float64 cannot hold its magnitude)")},
}

func TestBombsKeepTheNodeUp(t *testing.T) {
	t.Parallel()
	bin := os.Getenv("FLOWD_BOMBS_BINARY")
	if bin == "" {
		bin = buildFlowd(t)
	}
	// Each case on a node of its own, so that one that takes a node down
	// does not hide the others.
	run := func(name string, bs []bomb) {
		t.Run(name, func(t *testing.T) {
			n, idle := startBombNode(t, bin)
			healthz := n.watchHealthz()
			n.concurrently(t, bs, "b")
			worst := healthz()
			peak := n.memory("VmHWM")
			t.Logf("idle RSS %d MiB, peak %d MiB, /healthz at most %v", idle>>20, peak>>20, worst)
			if peak-idle > bombHeadroom {
				t.Errorf("peak RSS %d MiB, idle %d MiB: more than 256 MiB above", peak>>20, idle>>20)
			}
			if worst > time.Second {
				t.Errorf("/healthz took up to %v while the requests ran", worst)
			}
			if code, _ := n.do("GET", "/healthz", "", ""); code != 200 {
				t.Errorf("/healthz after the requests: %d", code)
			}
		})
	}
	for _, b := range bombs {
		run(b.name, []bomb{b})
	}
	run("three concurrent starts of the Serverless Workflow set", []bomb{bombs[4], bombs[4], bombs[4]})
	run("eight at once", append(append([]bomb{}, bombs...), bombs[4], bombs[2]))
	// On a loaded machine an evaluation may run out of its second before
	// it has built all it may hold: either bound ends it.
	holder := bomb{"holding what an evaluation may", startFails("hold",
		"would make the evaluation hold more than 16777216 bytes (4 × --max-state-bytes)", "took longer than 1s")}
	run("eight holding what they may at once", []bomb{holder, holder, holder, holder, holder, holder, holder, holder})
	// Each 1 MiB input decodes to about 47 MB: eight at once took 585 MB
	// before the documents took turns (674 MB holding what they may).
	docTrue := bomb{"a 1 MiB input of small objects, when: true", largeDocument("doc-true", "")}
	run("eight 1 MiB inputs read by a when at once", []bomb{docTrue, docTrue, docTrue, docTrue, docTrue, docTrue, docTrue, docTrue})
	docLen := bomb{"a 1 MiB input of small objects, when: .input | length > 0", largeDocument("doc-len", "")}
	run("eight 1 MiB inputs read whole by a when at once", []bomb{docLen, docLen, docLen, docLen, docLen, docLen, docLen, docLen})
	docHold := bomb{"a 1 MiB input, and a when holding what it may", largeDocument("doc-hold", "would make the evaluation hold more than 16777216 bytes (4 × --max-state-bytes)")}
	run("eight 1 MiB inputs and evaluations holding what they may at once", []bomb{docHold, docHold, docHold, docHold, docHold, docHold, docHold, docHold})
}

// concurrently runs bombs at once, instance ids prefixed with tag.
func (n *bombNode) concurrently(t *testing.T, bs []bomb, tag string) {
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Go(func() {
			if msg := b.check(n, fmt.Sprintf("%s-%d", tag, i)); msg != "" {
				t.Errorf("%s (%s): %s", b.name, tag, msg)
			}
		})
	}
	wg.Wait()
}

// watchHealthz asks /healthz every 20 ms (the first at once) until the
// returned function is called, which returns the longest answer time.
func (n *bombNode) watchHealthz() func() time.Duration {
	stop, done := make(chan struct{}), make(chan time.Duration)
	go func() {
		var worst time.Duration
		for {
			start := time.Now()
			n.do("GET", "/healthz", "", "")
			worst = max(worst, time.Since(start))
			select {
			case <-stop:
				done <- worst
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() time.Duration { close(stop); return <-done }
}
