package swcall

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/flowd/flowd/workflow"
	"go.yaml.in/yaml/v2"
)

// MaxDocumentBody bounds the OpenAPI document a call fetches.
const MaxDocumentBody = 8 << 20

// apiDocument is the part of a Swagger 2.0 or OpenAPI 3.x document needed to
// build a request. YAML decoding reads JSON documents as well.
type apiDocument struct {
	Swagger    string                  `yaml:"swagger"`
	OpenAPI    string                  `yaml:"openapi"`
	Host       string                  `yaml:"host"`
	BasePath   string                  `yaml:"basePath"`
	Schemes    []string                `yaml:"schemes"`
	Servers    []apiServer             `yaml:"servers"`
	Paths      map[string]apiPathItem  `yaml:"paths"`
	Parameters map[string]apiParameter `yaml:"parameters"`
	Components struct {
		Parameters map[string]apiParameter `yaml:"parameters"`
	} `yaml:"components"`
}

type apiServer struct {
	URL       string `yaml:"url"`
	Variables map[string]struct {
		Default string `yaml:"default"`
	} `yaml:"variables"`
}

type apiPathItem struct {
	Parameters []apiParameter `yaml:"parameters"`
	Servers    []apiServer    `yaml:"servers"`
	Get        *apiOperation  `yaml:"get"`
	Put        *apiOperation  `yaml:"put"`
	Post       *apiOperation  `yaml:"post"`
	Delete     *apiOperation  `yaml:"delete"`
	Options    *apiOperation  `yaml:"options"`
	Head       *apiOperation  `yaml:"head"`
	Patch      *apiOperation  `yaml:"patch"`
	Trace      *apiOperation  `yaml:"trace"`
}

type apiOperation struct {
	OperationID string         `yaml:"operationId"`
	Parameters  []apiParameter `yaml:"parameters"`
	Servers     []apiServer    `yaml:"servers"`
	Schemes     []string       `yaml:"schemes"`
	RequestBody *struct {
		Required bool `yaml:"required"`
	} `yaml:"requestBody"`
}

type apiParameter struct {
	Ref              string `yaml:"$ref"`
	Name             string `yaml:"name"`
	In               string `yaml:"in"`
	Required         bool   `yaml:"required"`
	CollectionFormat string `yaml:"collectionFormat"` // Swagger 2
	Style            string `yaml:"style"`            // OpenAPI 3
	Explode          *bool  `yaml:"explode"`          // OpenAPI 3
}

// openAPIBodyParameter names the parameter that holds an OpenAPI 3 request
// body (Swagger 2 names its body parameter itself).
const openAPIBodyParameter = "body"

// openAPIRequest fetches the document, finds the operation and builds its
// request from the parameters: path parameters substituted, query
// parameters appended, header and cookie parameters set, the body parameter (Swagger
// 2 `in: body`, or "body" for an OpenAPI 3 requestBody) sent as JSON, form
// parameters (Swagger 2 `in: formData`) sent url-encoded. Parameters the
// operation does not declare are ignored.
func openAPIRequest(ctx context.Context, client *http.Client, req *Request) (*outgoing, error) {
	if req.Operation == "" {
		return nil, failure(TypeConfiguration, http.StatusBadRequest, "call: openapi needs an operationId")
	}
	docURL, err := url.Parse(req.Document)
	if err != nil || !docURL.IsAbs() || docURL.Host == "" {
		return nil, failure(TypeConfiguration, http.StatusBadRequest, "OpenAPI document endpoint %q is not an absolute URI", req.Document)
	}
	doc, err := documents.fetch(ctx, client, docURL)
	if err != nil {
		return nil, err
	}
	path, method, item, op := doc.find(req.Operation)
	if op == nil {
		return nil, failure(TypeConfiguration, http.StatusBadRequest, "OpenAPI document %s has no operation %q", req.Document, req.Operation)
	}
	base, err := doc.baseURL(docURL, item, op)
	if err != nil {
		return nil, err
	}
	params, err := doc.parameters(item, op)
	if err != nil {
		return nil, err
	}
	out := &outgoing{method: method, header: http.Header{}}
	pathValues := map[string]string{}
	query := url.Values{}
	form := url.Values{}
	var cookies []string
	for _, p := range params {
		raw, ok := req.Parameters[p.Name]
		if !ok || string(raw) == "null" {
			if p.Required || p.In == "path" {
				return nil, failure(TypeValidation, http.StatusBadRequest, "operation %q requires parameter %q (in %s)", req.Operation, p.Name, p.In)
			}
			continue
		}
		if p.In == "body" {
			out.body = raw
			continue
		}
		values, ok := parameterValues(raw)
		if !ok {
			return nil, failure(TypeValidation, http.StatusBadRequest, "parameter %q of operation %q must be a scalar or an array of scalars", p.Name, req.Operation)
		}
		switch p.In {
		case "path":
			pathValues[p.Name] = strings.Join(values, ",")
		case "header":
			out.header.Set(p.Name, strings.Join(values, ","))
		case "query":
			if sep, repeat := p.querySeparator(doc.OpenAPI != ""); repeat {
				query[p.Name] = append(query[p.Name], values...)
			} else {
				query.Add(p.Name, strings.Join(values, sep))
			}
		case "formData":
			form[p.Name] = append(form[p.Name], values...)
		case "cookie":
			cookies = append(cookies, (&http.Cookie{Name: p.Name, Value: strings.Join(values, ",")}).String())
		}
	}
	if op.RequestBody != nil {
		raw, ok := req.Parameters[openAPIBodyParameter]
		switch {
		case ok && string(raw) != "null":
			out.body = raw
		case op.RequestBody.Required:
			return nil, failure(TypeValidation, http.StatusBadRequest, "operation %q requires a request body (parameter %q)", req.Operation, openAPIBodyParameter)
		}
	}
	switch {
	case out.body != nil:
		out.header.Set("Content-Type", "application/json")
	case len(form) > 0:
		out.body = []byte(form.Encode())
		out.header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if len(cookies) > 0 {
		out.header.Set("Cookie", strings.Join(cookies, "; "))
	}
	expanded, err := substitutePath(path, pathValues)
	if err != nil {
		return nil, err
	}
	out.uri = strings.TrimSuffix(base, "/") + expanded
	if len(query) > 0 {
		out.uri += "?" + query.Encode()
	}
	return out, nil
}

// fetch returns the document at docURL, from the cache while it is fresh.
func (c *documentCache) fetch(ctx context.Context, client *http.Client, docURL *url.URL) (*apiDocument, error) {
	key := documentKey{client: client, url: docURL.String()}
	if doc, ok := c.get(key); ok {
		return doc, nil
	}
	doc, err := fetchDocument(ctx, client, docURL)
	if err != nil {
		return nil, err
	}
	c.put(key, doc)
	return doc, nil
}

func fetchDocument(ctx context.Context, client *http.Client, docURL *url.URL) (*apiDocument, error) {
	get := &outgoing{method: http.MethodGet, uri: docURL.String(), header: http.Header{}}
	get.header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.1")
	_, body, err := exchange(ctx, client, get, MaxDocumentBody)
	if err != nil {
		return nil, err
	}
	var doc apiDocument
	if err := workflow.CheckYAMLExpansion(body, workflow.MaxExpandedDocumentBytes); err != nil {
		return nil, failure(TypeConfiguration, http.StatusBadRequest, "OpenAPI document %s cannot be read: %s", docURL, err.Error())
	}
	if err := yaml.Unmarshal(body, &doc); err != nil {
		return nil, failure(TypeConfiguration, http.StatusBadRequest, "OpenAPI document %s cannot be read: %s", docURL, err.Error())
	}
	if !strings.HasPrefix(doc.Swagger, "2.") && !strings.HasPrefix(doc.OpenAPI, "3.") {
		return nil, failure(TypeConfiguration, http.StatusBadRequest, "%s is neither a Swagger 2.0 nor an OpenAPI 3 document", docURL)
	}
	return &doc, nil
}

// find returns the operation with id: its path template, method, path item.
// Paths are searched in sorted order so a document that repeats an id
// always resolves the same way.
func (d *apiDocument) find(id string) (string, string, *apiPathItem, *apiOperation) {
	paths := make([]string, 0, len(d.Paths))
	for p := range d.Paths {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		item := d.Paths[p]
		for _, m := range []struct {
			method string
			op     *apiOperation
		}{
			{http.MethodGet, item.Get}, {http.MethodPut, item.Put}, {http.MethodPost, item.Post},
			{http.MethodDelete, item.Delete}, {http.MethodOptions, item.Options}, {http.MethodHead, item.Head},
			{http.MethodPatch, item.Patch}, {http.MethodTrace, item.Trace},
		} {
			if m.op != nil && m.op.OperationID == id {
				return p, m.method, &item, m.op
			}
		}
	}
	return "", "", nil, nil
}

// baseURL is where the operation's paths are rooted. Swagger 2: scheme, host
// and basePath, the scheme being the document's own when the API lists it
// (the document was reachable that way), else the first listed, the host
// the document's when none is given. OpenAPI 3: the first server of the
// operation, else of its path, else of the document (variables at their
// defaults), resolved against the document's URL; no server means the
// document's origin.
func (d *apiDocument) baseURL(docURL *url.URL, item *apiPathItem, op *apiOperation) (string, error) {
	if d.Swagger != "" {
		schemes := op.Schemes
		if len(schemes) == 0 {
			schemes = d.Schemes
		}
		scheme := docURL.Scheme
		if len(schemes) > 0 && !slices.Contains(schemes, docURL.Scheme) {
			scheme = schemes[0]
		}
		host := d.Host
		if host == "" {
			host = docURL.Host
		}
		return scheme + "://" + host + "/" + strings.TrimPrefix(d.BasePath, "/"), nil
	}
	servers := op.Servers
	if len(servers) == 0 {
		servers = item.Servers
	}
	if len(servers) == 0 {
		servers = d.Servers
	}
	server := "/"
	if len(servers) > 0 {
		server = servers[0].URL
		for name, v := range servers[0].Variables {
			server = strings.ReplaceAll(server, "{"+name+"}", v.Default)
		}
	}
	ref, err := url.Parse(server)
	if err != nil {
		return "", failure(TypeConfiguration, http.StatusBadRequest, "OpenAPI server URL %q is not a URI: %s", server, err.Error())
	}
	return docURL.ResolveReference(ref).String(), nil
}

// parameters are the operation's parameters, references resolved, those of
// the path item included unless the operation redefines them.
func (d *apiDocument) parameters(item *apiPathItem, op *apiOperation) ([]apiParameter, error) {
	var out []apiParameter
	seen := map[[2]string]bool{}
	for _, list := range [][]apiParameter{op.Parameters, item.Parameters} {
		for _, p := range list {
			p, err := d.resolve(p)
			if err != nil {
				return nil, err
			}
			key := [2]string{p.Name, p.In}
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, p)
		}
	}
	return out, nil
}

func (d *apiDocument) resolve(p apiParameter) (apiParameter, error) {
	if p.Ref == "" {
		return p, nil
	}
	var (
		found apiParameter
		ok    bool
	)
	switch {
	case strings.HasPrefix(p.Ref, "#/parameters/"):
		found, ok = d.Parameters[strings.TrimPrefix(p.Ref, "#/parameters/")]
	case strings.HasPrefix(p.Ref, "#/components/parameters/"):
		found, ok = d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
	}
	if !ok || found.Ref != "" {
		return apiParameter{}, failure(TypeConfiguration, http.StatusBadRequest, "OpenAPI parameter reference %q cannot be resolved (only local #/parameters and #/components/parameters)", p.Ref)
	}
	return found, nil
}

// querySeparator says how an array goes into the query: repeated (Swagger 2
// collectionFormat multi; OpenAPI 3 form style exploded, its default) or
// joined with the separator of the format or style (comma by default).
func (p apiParameter) querySeparator(openAPI3 bool) (sep string, repeat bool) {
	if openAPI3 {
		switch p.Style {
		case "spaceDelimited":
			return " ", false
		case "pipeDelimited":
			return "|", false
		}
		return ",", p.Explode == nil || *p.Explode
	}
	switch p.CollectionFormat {
	case "multi":
		return ",", true
	case "ssv":
		return " ", false
	case "tsv":
		return "\t", false
	case "pipes":
		return "|", false
	}
	return ",", false
}

// parameterValues renders a parameter as text values: one for a scalar, one
// per element for an array of scalars. ok is false for anything else.
func parameterValues(raw json.RawMessage) ([]string, bool) {
	if s, ok := scalarText(raw); ok {
		return []string{s}, true
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, false
	}
	values := make([]string, 0, len(elems))
	for _, e := range elems {
		s, ok := scalarText(e)
		if !ok {
			return nil, false
		}
		values = append(values, s)
	}
	return values, true
}

// substitutePath replaces each {name} of an OpenAPI path with its value,
// percent-encoded so that it stays one segment.
func substitutePath(path string, values map[string]string) (string, error) {
	return expandBraces(path, "OpenAPI path", func(name string) (string, error) {
		v, ok := values[name]
		if !ok {
			return "", failure(TypeConfiguration, http.StatusBadRequest, "OpenAPI path %q uses {%s}, which no path parameter declares", path, name)
		}
		return v, nil
	})
}
