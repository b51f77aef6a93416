package main

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/client"
)

// start names the definition it starts: one the server does not have is
// "not found" (exit 4) saying where to look; an instance without a
// definition, which never runs, takes --free-form.
func TestStartNeedsADefinitionOrFreeForm(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.golden("start-unknown-definition", exitNotFound, "", "start", "no-such-definition")
	b.golden("start-no-definition", exitUsage, "", "start", "--id", "inv-1", "--state", `{"variables":{"total":1}}`)
	b.golden("start-free-form-and-definition", exitUsage, "", "start", "order", "--free-form")
	if page, err := b.client.ListWorkflows(t.Context(), client.ListOptions{}); err != nil || len(page.Workflows) != 0 {
		t.Fatalf("the refused starts created %+v (%v)", page, err)
	}
	res := b.run("", nil, "start", "--free-form", "--id", "inv-1")
	if res.code != 0 || !strings.Contains(res.stdout, "workflow inv-1 created: PENDING, version 0") {
		t.Errorf("start --free-form: %+v", res)
	}
}

// start --search sets search attributes: numbers, booleans and JSON
// strings as written, other text as a string; list --where finds the
// instance by them. A malformed flag is a usage error that starts nothing.
func TestStartSearch(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	for _, tc := range []struct {
		flags []string
		msg   string
	}{
		{[]string{"customer"}, `--search "customer": want NAME=VALUE`},
		{[]string{"Customer=acme"}, "--search: "},
		{[]string{"customer=acme", "customer=other"}, "customer is given twice"},
	} {
		args := []string{"start", "--free-form"}
		for _, f := range tc.flags {
			args = append(args, "--search", f)
		}
		res := b.run("", nil, args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, tc.msg) {
			t.Errorf("start --search %q: exit %d, stderr %q; want %d with %q", tc.flags, res.code, res.stderr, exitUsage, tc.msg)
		}
	}
	if page, err := b.client.ListWorkflows(t.Context(), client.ListOptions{}); err != nil || len(page.Workflows) != 0 {
		t.Fatalf("the refused starts created %+v (%v)", page, err)
	}

	res := b.run("", nil, "start", "--free-form", "--id", "s-1", "--search", "customer=acme",
		"--search", "amount=120", "--search", `zip="01234"`, "--search", "vip=true", "--search", "note=a b=c")
	if res.code != 0 {
		t.Fatalf("start --search: %+v", res)
	}
	inst, err := b.client.GetWorkflow(t.Context(), "s-1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"customer": `"acme"`, "amount": `120`, "zip": `"01234"`, "vip": `true`, "note": `"a b=c"`}
	for name, v := range want {
		if got := string(inst.Search[name]); got != v {
			t.Errorf("search %s = %s, want %s", name, got, v)
		}
	}
	if len(inst.Search) != len(want) {
		t.Errorf("search attributes %v, want %v", inst.Search, want)
	}
	res = b.run("", nil, "list", "--where", "customer=acme", "--where", "amount=120")
	if res.code != 0 || !strings.Contains(res.stdout, "s-1") {
		t.Errorf("list --where customer=acme --where amount=120: %+v", res)
	}
}
