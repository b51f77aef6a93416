package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/flowd/flowd/workflow/instance"
)

var (
	// ErrInvalidTemplate is matched by every *TemplateError.
	ErrInvalidTemplate = errors.New("invalid template")
	// ErrMissingReference: a reference names something that is not there (no
	// such key, a step without output, a key looked up in a non-object). The
	// step fails at once, without retry.
	ErrMissingReference = errors.New("missing reference")
)

// TemplateError lists every problem found while compiling a template.
type TemplateError struct {
	Problems []TemplateProblem
}

// TemplateProblem is one template problem. Path is where it is in the template
// tree: "" for the root, ".sku", "[0].name", `["a b"]`.
type TemplateProblem struct {
	Path    string
	Message string
}

func (e *TemplateError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		if p.Path == "" {
			parts[i] = p.Message
		} else {
			parts[i] = strings.TrimPrefix(p.Path, ".") + ": " + p.Message
		}
	}
	return ErrInvalidTemplate.Error() + ": " + strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrInvalidTemplate) true.
func (e *TemplateError) Is(target error) bool { return target == ErrInvalidTemplate }

// Reference is one compiled reference.
type Reference struct {
	Path string   // where in the template tree the string holding it is ("" for the root)
	Step string   // the referenced step; "" for .input, .item and .index
	Keys []string // the keys looked up inside the value
	// Item and Index: the reference is to the item (.item…) or the index
	// (.index) of a foreach step's iteration.
	Item, Index bool
}

// String writes r in its normal form, e.g. "{{ .steps.reserve.output.sku }}".
func (r Reference) String() string {
	var b strings.Builder
	b.WriteString("{{ ")
	switch {
	case r.Item:
		b.WriteString(".item")
	case r.Index:
		b.WriteString(".index")
	case r.Step == "":
		b.WriteString(".input")
	default:
		b.WriteString(".steps." + r.Step + ".output")
	}
	for _, k := range r.Keys {
		b.WriteString("." + k)
	}
	b.WriteString(" }}")
	return b.String()
}

// Template is a compiled step input template. It is immutable
// and safe for concurrent use.
//
// A template is any JSON value. Strings in it (not object keys) may hold
// references in double braces:
//
//	{{ .input }}                      the workflow input
//	{{ .input.K1.K2 }}                a key inside it
//	{{ .steps.STEP.output }}          the output of step STEP
//	{{ .steps.STEP.output.K1.K2 }}    a key inside it
//	{{ .item }}, {{ .item.K1 }}       the item of a foreach iteration, a key inside it
//	{{ .index }}                      the index of a foreach iteration (from 0)
//
// .item and .index compile only for a step with foreach (CompileIteration…):
// anywhere else there is no item to render them from.
//
// Keys are one or more of [A-Za-z0-9_-] and always name object members (there
// is no array indexing); spaces and tabs inside the braces are optional. A
// string that is exactly one reference takes the referenced JSON value with its
// type; in any other string each reference is written as text: a string value
// as it is, anything else as compact JSON. There is no escape for a literal
// "{{": every "{{" must open a valid reference.
//
// Step ids may contain dots, and "output" may also be a key, so the end of STEP
// is found this way: each split of the path at an ".output" segment whose left
// side is a valid step id and whose right side is a valid key path is a
// candidate, and the candidate whose step id is a step of the definition wins.
// `.steps.a.b.output.c` is step "a.b" with key "c"; `.steps.a.output.b.output`
// is step "a" with keys "b" and "output" when the definition has a step "a",
// step "a.output.b" when it has that one, and ambiguous (an error) when it has
// both. No known candidate is an "unknown step" error. Without a list of step
// ids (stepIDs nil) the shortest candidate, up to the first ".output", wins.
type Template struct {
	root *tnode
	refs []Reference
}

type nodeKind uint8

const (
	nodeLiteral nodeKind = iota // a value without references, already encoded
	nodeObject
	nodeArray
	nodeRef  // a string that is exactly one reference: takes the value's type
	nodeText // a string with references written as text
)

type tnode struct {
	kind  nodeKind
	raw   []byte     // nodeLiteral: its JSON
	str   *string    // nodeLiteral of a string: its value
	keys  [][]byte   // nodeObject: the encoded keys
	kids  []*tnode   // nodeObject values, nodeArray elements
	ref   int        // nodeRef: index into Template.refs
	parts []textPart // nodeText
}

// textPart is literal text (ref < 0) or a reference.
type textPart struct {
	lit string
	ref int
}

// CompileTemplate compiles a JSON template tree. It checks the syntax of every
// reference and, when stepIDs is not nil, that each referenced step exists
// (Definition.Validate also requires it to be an ancestor of the step using it).
// It returns a *TemplateError listing every problem. An empty tree compiles to
// a template that renders JSON null.
func CompileTemplate(tree json.RawMessage, stepIDs func(string) bool) (*Template, error) {
	return compileTree(tree, &compiler{stepIDs: stepIDs})
}

// CompileIterationTemplate is CompileTemplate for a step with foreach: the
// template may also use .item and .index (see RenderIteration).
func CompileIterationTemplate(tree json.RawMessage, stepIDs func(string) bool) (*Template, error) {
	return compileTree(tree, &compiler{stepIDs: stepIDs, iteration: true})
}

func compileTree(tree json.RawMessage, c *compiler) (*Template, error) {
	if len(bytes.TrimSpace(tree)) == 0 {
		return &Template{}, nil
	}
	return c.compile(tree)
}

// compile compiles a JSON template tree that is not empty.
func (c *compiler) compile(tree json.RawMessage) (*Template, error) {
	// json.Valid also bounds the nesting depth, which keeps the recursion of
	// value shallow.
	if !json.Valid(tree) {
		return nil, &TemplateError{Problems: []TemplateProblem{{Message: "not valid JSON"}}}
	}
	dec := json.NewDecoder(bytes.NewReader(tree))
	dec.UseNumber()
	root, err := c.value(dec, "")
	if err != nil {
		return nil, &TemplateError{Problems: []TemplateProblem{{Message: "not valid JSON: " + err.Error()}}}
	}
	return c.template(root)
}

// CompileStringTemplate compiles one string, such as an http step's URL or a
// header value, for RenderString.
func CompileStringTemplate(s string, stepIDs func(string) bool) (*Template, error) {
	c := &compiler{stepIDs: stepIDs}
	return c.template(c.str(s, ""))
}

// CompileIterationStringTemplate is CompileStringTemplate for a step with
// foreach: the string may also use .item and .index.
func CompileIterationStringTemplate(s string, stepIDs func(string) bool) (*Template, error) {
	c := &compiler{stepIDs: stepIDs, iteration: true}
	return c.template(c.str(s, ""))
}

// Iteration is what a foreach step's template renders one iteration with:
// its item and its index.
type Iteration struct {
	Item  json.RawMessage
	Index int
}

// References returns every reference of t, in template order.
func (t *Template) References() []Reference {
	if t == nil {
		return nil
	}
	refs := make([]Reference, len(t.refs))
	for i, r := range t.refs {
		r.Keys = append([]string(nil), r.Keys...)
		refs[i] = r
	}
	return refs
}

// Render fills in the references: input is the workflow input (empty means
// {}), outputs maps each completed step to its output (see StepOutputs). It
// returns compact JSON; numbers keep their exact text. A reference to
// something missing returns an error wrapping ErrMissingReference that names
// the reference. A template names each value as many times as it likes, so
// what it renders is bounded: past max bytes (--max-state-bytes; 0 for the
// default 4 MiB) it stops with an error wrapping ErrRenderTooLarge.
func (t *Template) Render(input json.RawMessage, outputs map[string]json.RawMessage, max int) (json.RawMessage, error) {
	return t.RenderIteration(input, outputs, nil, max)
}

// RenderIteration is Render for one iteration of a foreach step: .item and
// .index are it's (it nil: a reference to them is missing).
func (t *Template) RenderIteration(input json.RawMessage, outputs map[string]json.RawMessage, it *Iteration, max int) (json.RawMessage, error) {
	if t == nil || t.root == nil {
		return json.RawMessage("null"), nil
	}
	r := newRenderer(t, input, outputs, it, max)
	out, err := r.node(nil, t.root)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RenderString renders a template whose root is a string (see
// CompileStringTemplate) as text: every reference, even one standing alone, is
// written as text. It is for URLs and header values, which are strings whatever
// the referenced value is; it does not escape anything for its destination.
// Past max bytes it stops, as Render does.
func (t *Template) RenderString(input json.RawMessage, outputs map[string]json.RawMessage, max int) (string, error) {
	return t.RenderStringIteration(input, outputs, nil, max)
}

// RenderStringIteration is RenderString for one iteration of a foreach
// step (see RenderIteration).
func (t *Template) RenderStringIteration(input json.RawMessage, outputs map[string]json.RawMessage, it *Iteration, max int) (string, error) {
	if t == nil || t.root == nil {
		return "", errors.New("the template is empty")
	}
	r := newRenderer(t, input, outputs, it, max)
	switch n := t.root; n.kind {
	case nodeLiteral:
		if n.str != nil {
			return *n.str, nil
		}
	case nodeRef:
		return r.text([]textPart{{ref: n.ref}})
	case nodeText:
		return r.text(n.parts)
	}
	return "", errors.New("the template is not a string")
}

// StepOutputs returns the outputs of the COMPLETED steps, for Render, and
// null for the SKIPPED ones: a skipped step's output is null, so a
// reference to it renders null and a key looked up inside it is missing.
func StepOutputs(steps map[string]*StepState) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(steps))
	for id, st := range steps {
		if st == nil || st.Status != StepCompleted && st.Status != StepSkipped {
			continue
		}
		o := st.Output
		if len(o) == 0 || st.Status == StepSkipped {
			o = json.RawMessage("null")
		}
		out[id] = o
	}
	return out
}

type compiler struct {
	stepIDs func(string) bool
	// checkRef, when set, judges each syntactically valid reference as it is
	// found and returns a problem message or "". Its problems land among the
	// syntax problems in template order, and a bad reference does not stop
	// the ones after it from being judged.
	checkRef func(Reference) string
	// iteration: the template belongs to a step with foreach, so .item and
	// .index are defined.
	iteration bool
	refs      []Reference
	problems  []TemplateProblem
}

func (c *compiler) template(root *tnode) (*Template, error) {
	if len(c.problems) > 0 {
		return nil, &TemplateError{Problems: c.problems}
	}
	return &Template{root: root, refs: c.refs}, nil
}

func (c *compiler) problem(path, msg string) {
	c.problems = append(c.problems, TemplateProblem{Path: path, Message: msg})
}

// value compiles the next JSON value of dec; path is its place in the tree.
func (c *compiler) value(dec *json.Decoder, path string) (*tnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &tnode{kind: nodeObject}
		if t == '[' {
			n.kind = nodeArray
		}
		seen := map[string]bool{}
		for i := 0; dec.More(); i++ {
			kp := path + "[" + strconv.Itoa(i) + "]"
			if n.kind == nodeObject {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				kp = path + keyPath(k)
				if seen[k] {
					c.problem(kp, fmt.Sprintf("duplicate key %q", truncate(k)))
				}
				seen[k] = true
				n.keys = append(n.keys, encodeString(k))
			}
			kid, err := c.value(dec, kp)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, kid)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return c.str(t, path), nil
	case json.Number:
		return &tnode{kind: nodeLiteral, raw: []byte(t)}, nil
	case bool:
		return &tnode{kind: nodeLiteral, raw: []byte(strconv.FormatBool(t))}, nil
	case nil:
		return &tnode{kind: nodeLiteral, raw: []byte("null")}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// str compiles one string of the tree. It returns nil after recording a
// problem.
func (c *compiler) str(s, path string) *tnode {
	if !strings.Contains(s, "{{") {
		return &tnode{kind: nodeLiteral, raw: encodeString(s), str: &s}
	}
	var parts []textPart
	var lit strings.Builder
	ok := true
	off := 0
	for {
		i := strings.Index(s[off:], "{{")
		if i < 0 {
			lit.WriteString(s[off:])
			break
		}
		start := off + i
		lit.WriteString(s[off:start])
		j := strings.Index(s[start+2:], "}}")
		if j < 0 {
			c.problem(path, fmt.Sprintf(`unterminated "{{" at offset %d (no closing "}}")`, start))
			ok = false
			break
		}
		end := start + 2 + j + 2
		ref, err := c.parseRef(s[start+2 : end-2])
		ref.Path = path
		var msg string
		if err == nil && c.checkRef != nil {
			msg = c.checkRef(ref)
		}
		switch {
		case err != nil:
			c.problem(path, fmt.Sprintf("invalid reference %q: %v", truncateRef(s[start:end]), err))
			ok = false
		case msg != "":
			c.problem(path, msg)
			ok = false
		default:
			if lit.Len() > 0 {
				parts = append(parts, textPart{lit: lit.String(), ref: -1})
				lit.Reset()
			}
			c.refs = append(c.refs, ref)
			parts = append(parts, textPart{ref: len(c.refs) - 1})
		}
		off = end
	}
	if !ok {
		return nil
	}
	if lit.Len() > 0 {
		parts = append(parts, textPart{lit: lit.String(), ref: -1})
	}
	if len(parts) == 1 && parts[0].ref >= 0 {
		return &tnode{kind: nodeRef, ref: parts[0].ref}
	}
	return &tnode{kind: nodeText, parts: parts}
}

// parseRef parses what is between "{{" and "}}".
func (c *compiler) parseRef(inner string) (Reference, error) {
	t := strings.Trim(inner, " \t")
	switch {
	case t == "":
		return Reference{}, errors.New("empty reference")
	case t[0] != '.':
		return Reference{}, errors.New("a reference starts with a dot: .input… or .steps.STEP.output…")
	case t == ".input" || strings.HasPrefix(t, ".input."):
		keys, err := parseKeys(t[len(".input"):])
		return Reference{Keys: keys}, err
	case t == ".steps" || t == ".steps.":
		return Reference{}, errors.New("want .steps.STEP.output")
	case strings.HasPrefix(t, ".steps."):
		return c.parseStepRef(t[len(".steps."):])
	case t == ".item" || strings.HasPrefix(t, ".item.") || t == ".index":
		if !c.iteration {
			return Reference{}, errors.New(".item and .index are only defined in a step with foreach")
		}
		if t == ".index" {
			return Reference{Index: true}, nil
		}
		keys, err := parseKeys(t[len(".item"):])
		return Reference{Item: true, Keys: keys}, err
	}
	root, _, _ := strings.Cut(t[1:], ".")
	want := ".input or .steps.STEP.output"
	if c.iteration {
		want = ".input, .steps.STEP.output, .item or .index"
	}
	return Reference{}, fmt.Errorf("unknown root %q (want %s)", "."+truncate(root), want)
}

// parseStepRef parses "STEP.output.K1…" (what follows ".steps."), choosing STEP
// by the rule in the package comment above.
func (c *compiler) parseStepRef(rest string) (Reference, error) {
	const output = ".output"
	var cands []Reference
	var firstStep string
	var keyErr error
	sawOutput := false
	for i := 0; i+len(output) <= len(rest); i++ {
		if !strings.HasPrefix(rest[i:], output) {
			continue
		}
		after := rest[i+len(output):]
		if after != "" && after[0] != '.' {
			continue
		}
		step := rest[:i]
		if !sawOutput {
			sawOutput, firstStep = true, step
		}
		if instance.ValidateName(step) != nil {
			continue
		}
		keys, err := parseKeys(after)
		if err != nil {
			if keyErr == nil {
				keyErr = err
			}
			continue
		}
		cands = append(cands, Reference{Step: step, Keys: keys})
	}
	switch {
	case !sawOutput:
		return Reference{}, errors.New(`want .steps.STEP.output: no ".output" after the step id`)
	case len(cands) == 0 && keyErr != nil:
		return Reference{}, keyErr
	case len(cands) == 0:
		return Reference{}, errors.New("step id " + idProblem(instance.ValidateName(firstStep)))
	case c.stepIDs == nil:
		return cands[0], nil
	}
	var known []Reference
	for _, r := range cands {
		if c.stepIDs(r.Step) {
			known = append(known, r)
		}
	}
	switch len(known) {
	case 0:
		return Reference{}, fmt.Errorf("unknown step %q", truncate(cands[0].Step))
	case 1:
		return known[0], nil
	}
	return Reference{}, fmt.Errorf("ambiguous: it could name step %q or step %q", known[0].Step, known[1].Step)
}

// parseKeys parses "" or ".K1.K2…".
func parseKeys(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	keys := strings.Split(strings.TrimPrefix(s, "."), ".")
	for _, k := range keys {
		if k == "" {
			return nil, errors.New("empty key (two dots in a row or a trailing dot)")
		}
		for _, r := range k {
			if r >= 0x80 || !isKeyByte(byte(r)) {
				return nil, fmt.Errorf("key %q has character %q (keys are [A-Za-z0-9_-])", truncate(k), r)
			}
		}
	}
	return keys, nil
}

func truncateRef(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func encodeString(s string) []byte {
	b, _ := marshalNoEscape(s) // a string always encodes
	return b
}

type renderer struct {
	refs    []Reference
	input   json.RawMessage
	outputs map[string]json.RawMessage
	it      *Iteration
	max     int // bytes rendered at most
}

// ErrRenderTooLarge is matched by the error of a template that would
// render more than its bound.
var ErrRenderTooLarge = errors.New("the template renders too much")

func newRenderer(t *Template, input json.RawMessage, outputs map[string]json.RawMessage, it *Iteration, max int) renderer {
	if max <= 0 {
		max = defaultExprStateBytes
	}
	return renderer{refs: t.refs, input: input, outputs: outputs, it: it, max: max}
}

// fits refuses to go on past r.max bytes.
func (r *renderer) fits(n int) error {
	if n > r.max {
		return fmt.Errorf("%w: more than %d bytes (--max-state-bytes)", ErrRenderTooLarge, r.max)
	}
	return nil
}

func (r *renderer) node(dst []byte, n *tnode) ([]byte, error) {
	var err error
	switch n.kind {
	case nodeLiteral:
		return append(dst, n.raw...), nil
	case nodeObject, nodeArray:
		open, closing := byte('{'), byte('}')
		if n.kind == nodeArray {
			open, closing = '[', ']'
		}
		dst = append(dst, open)
		for i, kid := range n.kids {
			if i > 0 {
				dst = append(dst, ',')
			}
			if n.kind == nodeObject {
				dst = append(dst, n.keys[i]...)
				dst = append(dst, ':')
			}
			if dst, err = r.node(dst, kid); err != nil {
				return nil, err
			}
		}
		return append(dst, closing), nil
	case nodeRef:
		ref := r.refs[n.ref]
		v, err := r.resolve(ref)
		if err != nil {
			return nil, err
		}
		if err := r.fits(len(dst) + len(v)); err != nil {
			return nil, err
		}
		buf := bytes.NewBuffer(dst)
		if err := json.Compact(buf, v); err != nil {
			return nil, fmt.Errorf("%s: the referenced value is not valid JSON: %w", ref, err)
		}
		return buf.Bytes(), nil
	case nodeText:
		s, err := r.text(n.parts)
		if err != nil {
			return nil, err
		}
		if err := r.fits(len(dst) + len(s)); err != nil {
			return nil, err
		}
		return append(dst, encodeString(s)...), nil
	}
	return nil, fmt.Errorf("unknown template node kind %d", n.kind)
}

// text writes parts as text: a string value as it is, any other value as
// compact JSON.
func (r *renderer) text(parts []textPart) (string, error) {
	var b strings.Builder
	for _, p := range parts {
		if p.ref < 0 {
			b.WriteString(p.lit)
			continue
		}
		ref := r.refs[p.ref]
		v, err := r.resolve(ref)
		if err != nil {
			return "", err
		}
		if err := r.fits(b.Len() + len(v)); err != nil {
			return "", err
		}
		if v = bytes.TrimSpace(v); len(v) > 0 && v[0] == '"' {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return "", fmt.Errorf("%s: the referenced value is not valid JSON: %w", ref, err)
			}
			b.WriteString(s)
			continue
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return "", fmt.Errorf("%s: the referenced value is not valid JSON: %w", ref, err)
		}
		b.Write(buf.Bytes())
	}
	return b.String(), nil
}

// resolve finds the value ref names.
func (r *renderer) resolve(ref Reference) (json.RawMessage, error) {
	missing := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrMissingReference, ref, fmt.Sprintf(format, args...))
	}
	var cur json.RawMessage
	var where string
	switch {
	case (ref.Item || ref.Index) && r.it == nil:
		return nil, missing("there is no foreach iteration")
	case ref.Index:
		return json.RawMessage(strconv.Itoa(r.it.Index)), nil
	case ref.Item:
		cur, where = r.it.Item, ".item"
		if len(bytes.TrimSpace(cur)) == 0 {
			cur = json.RawMessage("null")
		}
	case ref.Step == "":
		cur, where = r.input, ".input"
		if len(bytes.TrimSpace(cur)) == 0 {
			cur = json.RawMessage("{}")
		}
	default:
		out, ok := r.outputs[ref.Step]
		if !ok || len(bytes.TrimSpace(out)) == 0 {
			return nil, missing("step %q has no output (it has not completed)", ref.Step)
		}
		cur, where = out, ".steps."+ref.Step+".output"
	}
	for i, k := range ref.Keys {
		b := bytes.TrimSpace(cur)
		if len(b) == 0 || b[0] != '{' {
			return nil, missing("%s is %s, not an object", where, describeJSON(b))
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("%s: %s is not valid JSON: %w", ref, where, err)
		}
		v, ok := m[k]
		if !ok {
			if i == 0 {
				return nil, missing("key %q not found", k)
			}
			return nil, missing("key %q not found in %s", k, where)
		}
		cur, where = v, where+"."+k
	}
	return cur, nil
}
