package swcall

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestExpandTemplate(t *testing.T) {
	t.Parallel()
	vars := json.RawMessage(`{"petId": 1, "name": "Milou le chien/2", "price": 1.50, "big": 1e3,
		"huge": 12345678901234567890, "ok": true, "none": null, "pet.id": "dotted", "utf": "é", "mark": "a?b&c=d#e"}`)
	cases := []struct{ template, want string }{
		{"https://petstore.swagger.io/v2/pet/{petId}", "https://petstore.swagger.io/v2/pet/1"},
		{"https://h/pets/{name}", "https://h/pets/Milou%20le%20chien%2F2"},
		{"https://h/p?price={price}&big={big}", "https://h/p?price=1.5&big=1000"},
		{"https://h/{huge}", "https://h/12345678901234567890"},
		{"https://h/{ok}/{none}/{missing}", "https://h/true//"},
		{"https://h/{pet.id}", "https://h/dotted"},
		{"https://h/{utf}", "https://h/%C3%A9"},
		{"https://h/find?q={mark}", "https://h/find?q=a%3Fb%26c%3Dd%23e"},
		{"https://h/no/placeholders}", "https://h/no/placeholders}"},
	}
	for _, c := range cases {
		got, err := expandTemplate(c.template, vars)
		if err != nil || got != c.want {
			t.Errorf("expandTemplate(%q) = %q, %v; want %q", c.template, got, err, c.want)
		}
	}
}

func TestExpandTemplateWithoutObjectVars(t *testing.T) {
	t.Parallel()
	for _, vars := range []string{``, `null`, `[1,2]`, `"text"`} {
		got, err := expandTemplate("https://h/{a}/x", json.RawMessage(vars))
		if err != nil || got != "https://h//x" {
			t.Errorf("vars %s: got %q, %v; want https://h//x", vars, got, err)
		}
	}
}

func TestExpandTemplateErrors(t *testing.T) {
	t.Parallel()
	vars := json.RawMessage(`{"obj": {"a": 1}, "arr": [1], "s": "x"}`)
	cases := []struct {
		template, typ string
		status        int
	}{
		{"https://h/{obj}", TypeExpression, 400},
		{"https://h/{arr}", TypeExpression, 400},
		{"https://h/{s", TypeConfiguration, 400},
		{"https://h/{+s}", TypeConfiguration, 400},
		{"https://h{?s}", TypeConfiguration, 400},
	}
	for _, c := range cases {
		_, err := expandTemplate(c.template, vars)
		var ce *callError
		if !errors.As(err, &ce) || ce.typ != c.typ || ce.status != c.status {
			t.Errorf("expandTemplate(%q) error = %v; want %s %d", c.template, err, c.typ, c.status)
		}
	}
	if _, err := expandTemplate("https://h/{s}", json.RawMessage(`{"s": `)); err == nil {
		t.Error("malformed vars: want an error")
	}
}
