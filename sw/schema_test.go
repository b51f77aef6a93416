package sw

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// validationFault is the validation error raised at instance with detail.
func validationFault(instance, detail string) Error {
	return Error{Type: ErrorType(KindValidation), Status: 400, Title: "Schema validation failed", Detail: detail, Instance: instance}
}

func TestWorkflowInputSchema(t *testing.T) {
	// The schema sees the raw input: input.from turns it into something
	// the schema would refuse.
	doc := ctkHead + `input:
  schema:
    format: json
    document:
      type: object
      required: [name]
      properties:
        name:
          type: string
  from: '{ greeting: ("hello " + .name) }'
do:
  - echo:
      set: ${ . }
`
	d := newDriver(t, doc)
	d.run(`{"name":"ada"}`)
	d.wantOutput(`{"greeting":"hello ada"}`)

	d = newDriver(t, doc)
	d.run(`{"name":7}`)
	d.wantFault(validationFault("/input/schema", "input.schema: at /name: got number, want string"))
	d.wantCauses("workflow faulted")
	if len(d.items) != 0 {
		t.Errorf("items started: %+v", d.items)
	}
}

func TestTaskInputSchema(t *testing.T) {
	// Checked after if (a skipped task's input is not checked) and before
	// input.from, on the raw input.
	doc := ctkHead + `do:
  - check:
      if: .run
      input:
        schema:
          document:
            type: object
            required: [n]
            properties:
              n: {type: integer}
        from: '{ doubled: (.n * 2) }'
      set: ${ . }
`
	d := newDriver(t, doc)
	d.run(`{"run":true,"n":4}`)
	d.wantOutput(`{"doubled":8}`)

	d = newDriver(t, doc)
	d.run(`{"run":false,"n":"four"}`)
	d.wantOutput(`{"run":false,"n":"four"}`)
	d.wantCauses("workflow started", "task /do/0/check skipped")

	d = newDriver(t, doc)
	d.run(`{"run":true}`)
	d.wantFault(validationFault("/do/0/check", "input.schema: missing property 'n'"))
	d.wantCauses("workflow started", "task /do/0/check faulted: Schema validation failed: input.schema: missing property 'n'")

	// A task that is not a pure leaf (it would start at once) fails its
	// input schema in a version of its own, as an expression failure.
	d = newDriver(t, ctkHead+`do:
  - work:
      input:
        schema:
          document: {type: array}
      call: handler
`)
	d.run(`{}`)
	d.wantFault(validationFault("/do/0/work", "input.schema: got object, want array"))
	d.wantCauses("workflow started", "task /do/0/work faulted: Schema validation failed: input.schema: got object, want array")
	if len(d.items) != 1 || d.items[0].Kind != ItemTick {
		t.Errorf("items %+v, want one tick", d.items)
	}
}

func TestTaskOutputSchema(t *testing.T) {
	// Checked on the output transformed by output.as.
	doc := ctkHead + `do:
  - make:
      set:
        raw: ${ .v }
      output:
        as: '{ value: .raw }'
        schema:
          format: json:2020-12
          document:
            type: object
            required: [value]
            additionalProperties: false
            properties:
              value: {$ref: '#/$defs/positive'}
            $defs:
              positive: {type: number, exclusiveMinimum: 0}
  - next:
      set:
        got: ${ .value }
`
	d := newDriver(t, doc)
	d.run(`{"v":2.5}`)
	d.wantOutput(`{"got":2.5}`)

	d = newDriver(t, doc)
	d.run(`{"v":-0.5}`)
	d.wantFault(validationFault("/do/0/make", "output.schema: at /value: must be > 0, got -0.5"))
	d.wantCauses("workflow started", "task /do/0/make faulted: Schema validation failed: output.schema: at /value: must be > 0, got -0.5")
}

func TestExportSchema(t *testing.T) {
	// Checked on the new context made by export.as; a context that fails is
	// not kept: the catch sees the context as it was.
	doc := ctkHead + `do:
  - guarded:
      try:
        - count:
            set:
              n: ${ .n }
            export:
              as: '{ count: .n }'
              schema:
                document:
                  type: object
                  properties:
                    count: {type: integer, maximum: 10}
      catch:
        errors:
          with:
            type: https://serverlessworkflow.io/spec/1.0.0/errors/validation
        as: failure
        do:
          - report:
              set:
                context: ${ $context }
                detail: ${ $failure.detail }
  - after:
      set:
        context: ${ $context }
`
	d := newDriver(t, doc)
	d.run(`{"n":3}`)
	d.wantOutput(`{"context":{"count":3}}`)

	d = newDriver(t, doc)
	d.run(`{"n":11}`)
	d.wantOutput(`{"context":{}}`)
	d.wantCauses("workflow started", "task /do/0/guarded/try/0/count faulted: Schema validation failed: export.schema: at /count: must be <= 10, got 11",
		"task /do/0/guarded/catch/do/0/report completed", "task /do/0/guarded completed", "task /do/1/after completed")

	// Without export.as the schema checks the context unchanged.
	d = newDriver(t, ctkHead+`do:
  - a:
      set: {x: 1}
      export:
        schema:
          document:
            required: [user]
`)
	d.run(`{}`)
	d.wantFault(validationFault("/do/0/a", "export.schema: missing property 'user'"))
}

func TestExportSchemaDetailInCatch(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - guarded:
      try:
        - count:
            set:
              n: 11
            export:
              as: '{ count: .n }'
              schema:
                document:
                  properties:
                    count: {maximum: 10}
      catch:
        as: failure
        do:
          - report:
              set: ${ $failure }
`)
	d.run(`{}`)
	d.wantOutput(`{"type":"https://serverlessworkflow.io/spec/1.0.0/errors/validation","status":400,
		"title":"Schema validation failed","detail":"export.schema: at /count: must be <= 10, got 11",
		"instance":"/do/0/guarded/try/0/count"}`)
}

func TestWorkflowOutputSchema(t *testing.T) {
	doc := ctkHead + `output:
  as: '{ total: .sum }'
  schema:
    document:
      type: object
      required: [total]
      properties:
        total: {type: integer}
do:
  - add:
      set:
        sum: ${ .a + .b }
`
	d := newDriver(t, doc)
	d.run(`{"a":1,"b":2}`)
	d.wantOutput(`{"total":3}`)

	d = newDriver(t, doc)
	d.run(`{"a":1,"b":0.5}`)
	d.wantFault(validationFault("/output/schema", "output.schema: at /total: got number, want integer"))
	d.wantCauses("workflow started", "task /do/0/add completed")
}

func TestCatchValidationErrorByType(t *testing.T) {
	// The conformance tests' spelling of the type catches it too.
	for _, typ := range []string{ErrorType(KindValidation), "https://serverlessworkflow.io/dsl/errors/types/validation"} {
		d := newDriver(t, ctkHead+`do:
  - guarded:
      try:
        - strict:
            input:
              schema:
                document: {type: object, required: [id]}
            set: {ok: true}
      catch:
        errors:
          with:
            type: `+typ+`
            status: 400
        do:
          - fallback:
              set:
                ok: false
                error: ${ $error.instance }
`)
		d.run(`{}`)
		d.wantOutput(`{"ok":false,"error":"/do/0/guarded/try/0/strict"}`)
	}

	// Another type does not catch it.
	d := newDriver(t, ctkHead+`do:
  - guarded:
      try:
        - strict:
            input:
              schema:
                document: {type: object, required: [id]}
            set: {ok: true}
      catch:
        errors:
          with:
            type: https://serverlessworkflow.io/spec/1.0.0/errors/runtime
`)
	d.run(`{}`)
	d.wantFault(validationFault("/do/0/guarded/try/0/strict", "input.schema: missing property 'id'"))
}

func TestSchemaNumbers(t *testing.T) {
	// Numbers keep their text (json.Number): a large integer is an exact
	// integer for the schema, 1.0 is an integer too.
	doc := ctkHead + `input:
  schema:
    document:
      type: array
      items: {type: integer, minimum: 10, multipleOf: 5}
do:
  - echo:
      set: ${ . }
`
	d := newDriver(t, doc)
	d.run(`[12345678901234567890, 10.0, 15]`)
	d.wantOutput(`[12345678901234567890, 10.0, 15]`)

	d = newDriver(t, doc)
	d.run(`[12345678901234567891, 1.5]`)
	d.wantFault(validationFault("/input/schema",
		"input.schema: at /0: must be a multiple of 5, got 12345678901234567891; at /1: got number, want integer"))
}

func TestSchemaDetailIsBounded(t *testing.T) {
	d := newDriver(t, ctkHead+`input:
  schema:
    document:
      type: array
      items: {type: string}
do:
  - echo:
      set: ${ . }
`)
	d.run(`[` + strings.Repeat(`1,`, 500) + `1]`)
	if d.last.Fault == nil {
		t.Fatal("no fault")
	}
	detail := d.last.Fault.Detail
	if utf8.RuneCountInString(detail) > maxDetail+1 || !strings.HasSuffix(detail, "…") || !utf8.ValidString(detail) {
		t.Errorf("detail (%d bytes) = %q", len(detail), detail)
	}
	if !strings.HasPrefix(detail, "input.schema: at /0: got number, want string; at /1: ") {
		t.Errorf("detail = %.100q", detail)
	}
}

func TestSchemaParseProblems(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"invalid schema document", ctkHead + `input:
  schema:
    document:
      type: 5
do:
  - a:
      set: {a: 1}
      output:
        schema:
          document:
            pattern: '(?<=a)'
`, []string{
			"/input/schema/document: not a valid JSON Schema: at /type: got number, want array; at /type: value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'",
			"/do/0/a/output/schema/document: not a valid JSON Schema: at /pattern: '(?<=a)' is not valid regex: error parsing regexp: invalid named capture: `(?<=a)`",
		}},
		{"external schema", ctkHead + `do:
  - a:
      set: {a: 1}
      input:
        schema:
          format: json
          resource:
            endpoint: https://example.com/schema.json
`, []string{
			"/do/0/a/input/schema/resource: external schemas are not supported (flowd does not fetch them): give the schema inline under document",
		}},
		{"references outside the document", ctkHead + `output:
  schema:
    document:
      $ref: https://example.com/schema.json
do:
  - a:
      set: {a: 1}
      export:
        schema:
          document:
            properties:
              x: {$ref: 'other.json#/$defs/x'}
  - b:
      set: {a: 1}
      output:
        schema:
          document:
            $schema: https://example.com/meta-schema
  - c:
      set: {a: 1}
      output:
        schema:
          document:
            $ref: '#/$defs/missing'
`, []string{
			`/output/schema/document: the schema refers to "https://example.com/schema.json": only references inside the schema document are supported`,
			`/do/0/a/export/schema/document: the schema refers to "other.json": only references inside the schema document are supported`,
			`/do/1/b/output/schema/document: the schema refers to "https://example.com/meta-schema": only references inside the schema document are supported`,
			`/do/2/c/output/schema/document: json-pointer in "#/$defs/missing" not found`,
		}},
		{"formats and shapes", ctkHead + `input:
  schema:
    format: avro
    document: {}
do:
  - a:
      set: {a: 1}
      input:
        schema:
          format: json:draft-03
          document: {}
  - b:
      set: {a: 1}
      output:
        schema:
          format: json
  - c:
      set: {a: 1}
      output:
        schema:
          document: string
  - d:
      set: {a: 1}
      export:
        schema: {type: object}
  - e:
      set: {a: 1}
      export:
        schema: object
`, []string{
			`/input/schema/format: schema format must be json (optionally json:<version>), not "avro"`,
			`/do/0/a/input/schema/format: JSON Schema version "draft-03" is not supported (supported: 2020-12, 2019-09, draft-07, draft-06, draft-04)`,
			"/do/1/b/output/schema: a schema needs its document (the JSON Schema, inline)",
			"/do/2/c/output/schema/document: a JSON Schema must be an object or a boolean, not a string",
			`/do/3/d/export/schema/type: unknown field "type" (allowed: format, document, resource)`,
			"/do/3/d/export/schema: a schema needs its document (the JSON Schema, inline)",
			"/do/4/e/export/schema: schema must be an object, not a string",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse: %v, want *Problems", err)
			}
			if got := strings.Join(ps.List, "\n"); got != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", got, strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestSchemaDraftFromFormatAndSchemaKeyword(t *testing.T) {
	// Draft 4 reads exclusiveMaximum as a boolean modifier of maximum; 2020-12
	// as a number. The format's version, or the document's own $schema,
	// says which.
	for _, tc := range []struct{ name, schema string }{
		{"format version", "format: json:draft-04\n    document: {maximum: 10, exclusiveMaximum: true}"},
		{"$schema", "document: {$schema: 'http://json-schema.org/draft-04/schema#', maximum: 10, exclusiveMaximum: true}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, ctkHead+"input:\n  schema:\n    "+tc.schema+"\ndo:\n  - a:\n      set: ${ . }\n")
			d.run(`9`)
			d.wantOutput(`9`)
			d = newDriver(t, ctkHead+"input:\n  schema:\n    "+tc.schema+"\ndo:\n  - a:\n      set: ${ . }\n")
			d.run(`10`)
			d.wantFault(validationFault("/input/schema", "input.schema: must be < 10, got 10"))
		})
	}
	if _, err := Parse([]byte(ctkHead + "input:\n  schema:\n    document: {maximum: 10, exclusiveMaximum: true}\ndo:\n  - a:\n      set: ${ . }\n")); err == nil {
		t.Error("a boolean exclusiveMaximum is no 2020-12 schema, yet Parse accepted it")
	}
}

func TestSchemaCountMessages(t *testing.T) {
	// Counts and bounds are written plainly (no thousands separators), and
	// the failures come in order of place whatever order the library found
	// them in (map order: hence several runs).
	for range 5 {
		schemaCounts(t)
	}
}

func schemaCounts(t *testing.T) {
	t.Helper()
	d := newDriver(t, ctkHead+`input:
  schema:
    document:
      type: object
      properties:
        s: {minLength: 1200}
        t: {maxLength: 1}
        a: {minItems: 2}
        b: {maxItems: 1}
        o: {minProperties: 2}
        p: {maxProperties: 0}
        n: {minimum: 1000000}
do:
  - a:
      set: ${ . }
`)
	d.run(`{"s":"abc","t":"ab","a":[1],"b":[1,2],"o":{"x":1},"p":{"x":1},"n":999999.5}`)
	if d.last.Fault == nil {
		t.Fatal("no fault")
	}
	got := strings.Split(strings.TrimPrefix(d.last.Fault.Detail, "input.schema: "), "; ")
	want := []string{
		"at /a: must have at least 2 items, got 1",
		"at /b: must have at most 1 items, got 2",
		"at /n: must be >= 1000000, got 999999.5",
		"at /o: must have at least 2 properties, got 1",
		"at /p: must have at most 0 properties, got 1",
		"at /s: must be at least 1200 characters long, got 3",
		"at /t: must be at most 1 characters long, got 2",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("detail:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
