// Schemas: input.schema, output.schema and export.schema are JSON Schemas
// compiled once at Parse and checked while the workflow runs; a value that
// fails its schema raises a validation error.

package sw

import (
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schema is a compiled schema with the field it came from ("input.schema",
// …), which the validation error's detail names; valid decides validity
// alone, stopping at the first failure, and parts is the document's size
// (see schema_bounds.go).
type schema struct {
	field    string
	compiled *jsonschema.Schema
	valid    *jsonschema.Schema
	parts    int64
}

// schemaBase is the URL the inline document is compiled under. Nothing is
// ever fetched from it: it only gives relative references something to
// resolve against, so that they are recognised as outside the document.
const schemaBase = "https://schema.flowd.invalid/document.json"

// schemaDrafts are the versions a format "json:<version>" may name; they set
// the draft of a document without $schema. Plain "json" is 2020-12.
var schemaDrafts = map[string]*jsonschema.Draft{
	"2020-12":  jsonschema.Draft2020,
	"2019-09":  jsonschema.Draft2019,
	"draft-07": jsonschema.Draft7,
	"draft-06": jsonschema.Draft6,
	"draft-04": jsonschema.Draft4,
}

// refuseLoader refuses every document outside the one being compiled: the
// package does no I/O, so an external $ref or $schema cannot be followed.
// The drafts' own metaschemas are built into the library and never reach
// a loader.
type refuseLoader struct{}

var errRemoteRef = errors.New("only references inside the schema document are supported")

func (refuseLoader) Load(string) (any, error) { return nil, errRemoteRef }

// schema compiles the schema object at ptr ({format, document}) for field.
// An external schema (resource) is refused: fetching it would be I/O.
func (v *validator) schema(ptr string, x any, field string) *schema {
	m, ok := v.object(ptr, x, "schema")
	if !ok {
		return nil
	}
	v.keys(ptr, m, "format", "document", "resource")
	draft := jsonschema.Draft2020
	if f, ok := m["format"]; ok {
		format, _ := f.(string)
		name, version, hasVersion := strings.Cut(format, ":")
		if name != "json" {
			v.add(ptr+"/format", "schema format must be json (optionally json:<version>), not %s", quoteOr(f))
			return nil
		}
		if hasVersion {
			d, ok := schemaDrafts[version]
			if !ok {
				v.add(ptr+"/format", "JSON Schema version %q is not supported (supported: 2020-12, 2019-09, draft-07, draft-06, draft-04)", version)
				return nil
			}
			draft = d
		}
	}
	if _, ok := m["resource"]; ok {
		v.add(ptr+"/resource", "external schemas are not supported (flowd does not fetch them): give the schema inline under document")
		return nil
	}
	doc, ok := m["document"]
	if !ok {
		v.add(ptr, "a schema needs its document (the JSON Schema, inline)")
		return nil
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		v.add(ptr+"/document", "a JSON Schema must be an object or a boolean, not %s", describe(doc))
		return nil
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	c.UseRegexpEngine(boundedRegexp)
	c.DefaultDraft(draft)
	if err := c.AddResource(schemaBase, doc); err != nil {
		v.add(ptr+"/document", "%s", bounded(schemaProblem(err)))
		return nil
	}
	compiled, err := c.Compile(schemaBase)
	if err != nil {
		v.add(ptr+"/document", "%s", bounded(schemaProblem(err)))
		return nil
	}
	valid := compiled
	if _, isObject := doc.(map[string]any); isObject {
		if valid, err = failFast(c); err != nil {
			v.add(ptr+"/document", "%s", bounded(schemaProblem(err)))
			return nil
		}
	}
	return &schema{field: field, compiled: compiled, valid: valid, parts: schemaParts(doc)}
}

// quoteOr quotes a string and describes anything else.
func quoteOr(x any) string {
	if s, ok := x.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return describe(x)
}

// schemaProblem says in one line why a schema document does not compile.
func schemaProblem(err error) string {
	var invalid *jsonschema.SchemaValidationError
	if errors.As(err, &invalid) {
		return "not a valid JSON Schema: " + validationMessage(invalid.Err)
	}
	var load *jsonschema.LoadURLError
	if errors.As(err, &load) {
		return fmt.Sprintf("the schema refers to %s: %s", outsideRef(load.URL), errRemoteRef.Error())
	}
	return oneLine(strings.ReplaceAll(err.Error(), schemaBase, ""))
}

// outsideRef names a reference the way the document wrote it: relative ones
// were resolved against schemaBase.
func outsideRef(u string) string {
	dir := schemaBase[:strings.LastIndex(schemaBase, "/")+1]
	if r, ok := strings.CutPrefix(u, dir); ok {
		return fmt.Sprintf("%q", r)
	}
	return fmt.Sprintf("%q", u)
}

// check validates value v against s; a failure is the validation error of
// the DSL raised at instance. A value too large to validate within the
// bounds of schema_bounds.go fails too, saying so; the failures of a large
// value are not listed one by one.
func (s *schema) check(v any, instance string) *Error {
	fail := func(detail string) *Error {
		return &Error{
			Type:     ErrorType(KindValidation),
			Status:   400,
			Title:    "Schema validation failed",
			Detail:   bounded(s.field + ": " + detail),
			Instance: instance,
		}
	}
	parts, err := valueParts(v)
	if err != nil {
		return fail(err.Error())
	}
	if work := parts * s.parts; work > maxSchemaWork {
		return fail(fmt.Sprintf("the value is %v: %d parts against a schema of %d (a product of at most %d)", errTooLarge, parts, s.parts, maxSchemaWork))
	}
	if s.valid.Validate(v) == nil {
		return nil
	}
	if parts*s.parts > maxSchemaDetail {
		return fail(fmt.Sprintf("the value (%d parts) does not match the schema; failures are listed for smaller values only", parts))
	}
	err = s.compiled.Validate(v)
	if err == nil { // cannot be: valid said otherwise
		return fail("the value does not match the schema")
	}
	return fail(validationMessage(err))
}

// maxDetail bounds the detail of a validation error (and the problem of a
// schema that does not compile): a large value can fail a schema in as many
// places as it has members.
const maxDetail = 1000

func bounded(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	cut := maxDetail
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

var schemaPrinter = message.NewPrinter(language.English)

// validationMessage lists the failures of a validation in one line: each
// is where in the value it happened (a JSON pointer; none for the value
// itself) and what failed there. They are sorted by place, then text: the
// library finds them in map order, and the same value must always give the
// same error.
func validationMessage(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return oneLine(err.Error())
	}
	type failure struct{ at, what string }
	var found []failure
	var leaves func(e *jsonschema.ValidationError)
	leaves = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				leaves(c)
			}
			return
		}
		at := ""
		for _, tok := range e.InstanceLocation {
			at += "/" + pointerToken(tok)
		}
		found = append(found, failure{at, kindMessage(e.ErrorKind)})
	}
	leaves(ve)
	sort.Slice(found, func(i, j int) bool {
		if found[i].at != found[j].at {
			return found[i].at < found[j].at
		}
		return found[i].what < found[j].what
	})
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.what
		if f.at != "" {
			out[i] = "at " + f.at + ": " + f.what
		}
	}
	return strings.Join(out, "; ")
}

// kindMessage says what failed in one line. The library's printer writes
// numbers for a reader (float64 with a ×10ⁿ exponent, which loses large
// integers; thousands separators); the bounds and counts are written here
// plainly and exactly, as the document and the value wrote them.
func kindMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d characters long, got %d", k.Want, k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long, got %d", k.Want, k.Got)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %d items, got %d", k.Want, k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d items, got %d", k.Want, k.Got)
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %d properties, got %d", k.Want, k.Got)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %d properties, got %d", k.Want, k.Got)
	case *kind.Minimum:
		return fmt.Sprintf("must be >= %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.Maximum:
		return fmt.Sprintf("must be <= %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be > %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be < %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.MultipleOf:
		return fmt.Sprintf("must be a multiple of %s, got %s", ratText(k.Want), ratText(k.Got))
	}
	return oneLine(k.LocalizedString(schemaPrinter))
}

// ratText writes r in decimal: exactly when it has a finite expansion
// (every number read from JSON has), else to 17 places.
func ratText(r *big.Rat) string {
	if r == nil {
		return "null"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	if n, exact := r.FloatPrec(); exact {
		return r.FloatString(n)
	}
	return r.FloatString(17)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
