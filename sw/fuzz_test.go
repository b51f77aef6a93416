package sw

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseAndRun: no document, valid or not, makes Parse panic, and a
// valid one runs (every item answered with its own input) without panic.
func FuzzParseAndRun(f *testing.F) {
	files, _ := filepath.Glob("testdata/examples/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(tryDoc("404")))
	f.Add([]byte(retryDoc))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := Parse(data)
		if err != nil {
			return
		}
		env := Env{Now: t0, WorkflowID: "wf"}
		rt, st, err := w.Start(env, json.RawMessage(`{}`))
		if err != nil {
			return
		}
		for i := 0; i < 50 && !st.Completed && st.Fault == nil; i++ {
			p := rt.Pending()
			if len(p) == 0 {
				t.Fatalf("stuck: nothing pending, not ended")
			}
			it := p[0]
			res := Result{Output: it.Input}
			if it.Kind == ItemListen {
				res.Output = json.RawMessage(`{"type":"x","data":1}`)
			}
			if st, err = w.Resume(env, rt, it.ID, res); err != nil {
				t.Fatalf("Resume: %v", err)
			}
		}
	})
}
