package sw

import (
	"encoding/json"
	"strings"
	"time"
)

// Workflow is a parsed, valid document, ready to run.
type Workflow struct {
	Name, Namespace, Version, DSL string
	JSON                          json.RawMessage // the document as canonical JSON (what is stored)
	Timeout                       time.Duration   // document timeout.after, 0 = none

	doc       any
	root      *taskList
	tasks     map[string]*node     // by pointer
	lists     map[string]*taskList // by pointer
	inputFrom any
	outputAs  any
	// inputSchema and outputSchema check the workflow's raw input and its
	// transformed output; nil when none.
	inputSchema, outputSchema *schema
	exprs                     compiler
}

// IsDocument reports whether data (YAML or JSON) is a Serverless Workflow
// document: a top-level mapping whose document.dsl is a string starting
// "1.0".
func IsDocument(data []byte) bool {
	j, err := documentJSON(data)
	if err != nil {
		return false
	}
	var probe struct {
		Document struct {
			DSL any `json:"dsl"`
		} `json:"document"`
	}
	if json.Unmarshal(j, &probe) != nil {
		return false
	}
	s, ok := probe.Document.DSL.(string)
	return ok && strings.HasPrefix(s, "1.0")
}

// Parse parses and validates a document. An invalid one returns *Problems
// listing every problem, each "<json pointer>: <what>"; unsupported
// constructs are problems named by their pointer.
func Parse(data []byte) (*Workflow, error) {
	j, err := documentJSON(data)
	if err != nil {
		return nil, &Problems{List: []string{"/: " + err.Error()}}
	}
	doc, err := decodeJSON(j)
	if err != nil {
		return nil, &Problems{List: []string{"/: " + err.Error()}}
	}
	w := &Workflow{doc: doc, tasks: map[string]*node{}, lists: map[string]*taskList{}}
	v := &validator{w: w}
	m, ok := doc.(map[string]any)
	if !ok {
		v.add("", "a document must be a mapping with document and do, not %s", describe(doc))
		return nil, &Problems{List: v.problems}
	}
	v.document(m)
	if len(v.problems) > 0 {
		return nil, &Problems{List: v.problems}
	}
	if w.JSON, err = encodeJSON(doc); err != nil {
		return nil, &Problems{List: []string{"/: " + err.Error()}}
	}
	return w, nil
}

func (v *validator) document(m map[string]any) {
	w := v.w
	v.keys("", m, "document", "input", "use", "do", "timeout", "output", "schedule", "evaluate", "metadata")
	if d, ok := v.object("/document", m["document"], "document"); ok {
		dsl, _ := d["dsl"].(string)
		if !strings.HasPrefix(dsl, "1.0") {
			v.add("/document/dsl", "dsl must be a version 1.0.x")
		}
		w.DSL = dsl
		w.Name, _ = v.str("/document/name", d["name"], "name")
		w.Namespace, _ = v.str("/document/namespace", d["namespace"], "namespace")
		w.Version, _ = v.str("/document/version", d["version"], "version")
	}
	if _, ok := m["schedule"]; ok {
		v.add("/schedule", "schedules in the document are not supported (use a flowd schedule)")
	}
	if e, ok := m["evaluate"]; ok {
		if em, ok := v.object("/evaluate", e, "evaluate"); ok {
			if l, ok := em["language"]; ok && l != "jq" {
				v.add("/evaluate/language", "only jq expressions are supported")
			}
		}
	}
	if u, ok := m["use"]; ok {
		if um, ok := v.object("/use", u, "use"); ok {
			v.use = um
			v.useSection(um)
		}
	}
	if x, ok := m["input"]; ok {
		if in, ok := v.object("/input", x, "input"); ok {
			v.keys("/input", in, "from", "schema")
			if f, ok := in["from"]; ok {
				w.inputFrom = v.valueField("/input/from", f, nil)
			}
			if s, ok := in["schema"]; ok {
				w.inputSchema = v.schema("/input/schema", s, "input.schema")
			}
		}
	}
	w.outputAs, w.outputSchema = v.transform("/output", m["output"], nil)
	if x, ok := m["timeout"]; ok {
		w.Timeout = v.timeout("/timeout", x)
	}
	w.root = v.list("/do", m["do"], nil)
}

// useSection checks the reusable components flowd supports.
func (v *validator) useSection(um map[string]any) {
	v.keys("/use", um, "authentications", "errors", "extensions", "functions", "retries", "secrets", "timeouts", "catalogs")
	for _, k := range []string{"catalogs", "extensions"} {
		if _, ok := um[k]; ok {
			v.add("/use/"+k, "%s are not supported", k)
		}
	}
	if a, ok := um["authentications"].(map[string]any); ok {
		for _, name := range sortedKeys(a) {
			if m, ok := v.object(join("/use/authentications", name), a[name], "authentication"); ok {
				v.authPolicy(join("/use/authentications", name), m, nil)
			}
		}
	}
	if e, ok := um["errors"].(map[string]any); ok {
		for _, name := range sortedKeys(e) {
			v.errorDef(join("/use/errors", name), e[name], nil)
		}
	}
}
