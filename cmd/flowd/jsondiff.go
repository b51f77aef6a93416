package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"

	"github.com/flowd/flowd/store"
)

// versionChange is one difference between two versions of a workflow: an
// operation of a JSON Patch (RFC 6902) that turns the first into the second,
// with the value it replaces or removes as Old (JSON Patch tools ignore
// members they do not know). Path is a JSON Pointer (RFC 6901) into the
// version document {"status": …, "state": …}.
type versionChange struct {
	Op    string          `json:"op"` // add, remove or replace
	Path  string          `json:"path"`
	Old   json.RawMessage `json:"old,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// diffVersions lists what changed from a to b: the status, and every value
// of the state added, removed or replaced, objects compared member by member
// and everything else (arrays included) as a whole.
func diffVersions(a, b store.HistoryEntry) ([]versionChange, error) {
	da, err := versionDocument(a)
	if err != nil {
		return nil, err
	}
	db, err := versionDocument(b)
	if err != nil {
		return nil, err
	}
	var out []versionChange
	for _, k := range []string{"status", "state"} {
		diffJSON("/"+k, da[k], db[k], &out)
	}
	return out, nil
}

// versionDocument is the part of a version that changes: its status and
// its state, decoded with numbers as their text.
func versionDocument(v store.HistoryEntry) (map[string]any, error) {
	raw, err := json.Marshal(struct {
		Status any `json:"status"`
		State  any `json:"state"`
	}{v.Status, v.State})
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	return doc, dec.Decode(&doc)
}

func diffJSON(path string, a, b any, out *[]versionChange) {
	oa, aObj := a.(map[string]any)
	ob, bObj := b.(map[string]any)
	if aObj && bObj {
		for _, k := range unionKeys(oa, ob) {
			va, inA := oa[k]
			vb, inB := ob[k]
			p := path + "/" + pointerEscaper.Replace(k)
			switch {
			case !inA:
				*out = append(*out, versionChange{Op: "add", Path: p, Value: rawJSON(vb)})
			case !inB:
				*out = append(*out, versionChange{Op: "remove", Path: p, Old: rawJSON(va)})
			default:
				diffJSON(p, va, vb, out)
			}
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, versionChange{Op: "replace", Path: path, Old: rawJSON(a), Value: rawJSON(b)})
	}
}

var (
	pointerEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
	pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

func rawJSON(v any) json.RawMessage {
	raw, err := marshalNoEscape(v)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return raw
}

// plainKey matches the keys a dotted path shows as they are.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// dottedPath writes a JSON Pointer as people read paths:
// /state/steps/approve/status → state.steps.approve.status, and a key that
// is not a plain name in brackets: state.steps["v1.2"].
func dottedPath(pointer string) string {
	var b strings.Builder
	for i, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = pointerUnescaper.Replace(tok)
		switch {
		case !plainKey.MatchString(tok):
			b.WriteString("[" + jsonText(tok) + "]")
		case i > 0:
			b.WriteString("." + tok)
		default:
			b.WriteString(tok)
		}
	}
	return b.String()
}
