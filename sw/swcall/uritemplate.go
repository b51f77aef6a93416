package swcall

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// expandTemplate performs RFC 6570 simple string expansion ({var}) with the
// top-level properties of vars, the only kind of template the DSL allows.
// The name between braces is taken verbatim ({pet.id} is the property
// "pet.id"); a missing or null value expands to the empty string; a value
// that is not a string, number or boolean is an expression error (400).
// Expanded values are percent-encoded except for unreserved characters, so a
// value can never add a path segment or a query parameter.
func expandTemplate(template string, vars json.RawMessage) (string, error) {
	if !strings.Contains(template, "{") {
		return template, nil
	}
	values, err := templateValues(vars)
	if err != nil {
		return "", err
	}
	return expandBraces(template, "URI template", func(name string) (string, error) {
		if name != "" && strings.ContainsRune("+#./;?&=,!@|", rune(name[0])) {
			return "", failure(TypeConfiguration, http.StatusBadRequest, "URI template %q: operator %q is not supported (only {name})", template, name[:1])
		}
		return templateValue(name, values[name])
	})
}

// expandBraces replaces each {name} of s with value(name), percent-encoded
// except for unreserved characters, so that a value can never add a path
// segment or a query parameter; what names s in the error of an unclosed
// brace.
func expandBraces(s, what string, value func(name string) (string, error)) (string, error) {
	var b strings.Builder
	rest := s
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return "", failure(TypeConfiguration, http.StatusBadRequest, "%s %q has an unclosed {", what, s)
		}
		v, err := value(rest[open+1 : open+end])
		if err != nil {
			return "", err
		}
		b.WriteString(rest[:open])
		b.WriteString(escapeUnreserved(v))
		rest = rest[open+end+1:]
	}
}

// templateValues reads the top-level properties of vars; anything but an
// object has none, so every variable expands to the empty string.
func templateValues(vars json.RawMessage) (map[string]json.RawMessage, error) {
	var values map[string]json.RawMessage
	if len(bytes.TrimSpace(vars)) == 0 || bytes.TrimSpace(vars)[0] != '{' {
		return values, nil
	}
	if err := json.Unmarshal(vars, &values); err != nil {
		return nil, failure(TypeRuntime, http.StatusInternalServerError, "malformed call request: vars: %s", err.Error())
	}
	return values, nil
}

// templateValue renders one variable as text.
func templateValue(name string, raw json.RawMessage) (string, error) {
	s, ok := scalarText(raw)
	if !ok {
		return "", failure(TypeExpression, http.StatusBadRequest, "URI template variable %q is not a string, number or boolean", name)
	}
	return s, nil
}

// scalarText renders a JSON scalar as text: a string as itself, a number
// without exponent or trailing zeros, a boolean as true/false, null or
// nothing as "". ok is false for arrays and objects.
func scalarText(raw json.RawMessage) (string, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "", true
	}
	switch t[0] {
	case '"':
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return "", false
		}
		return s, true
	case 'n':
		return "", true
	case 't', 'f':
		return string(t), true
	case '[', '{':
		return "", false
	}
	return numberText(string(t)), true
}

// numberText renders a JSON number in plain decimal. An integer literal is
// kept as written (no float rounding of large ids); others go through
// float64 ("1.50" → "1.5", "1e3" → "1000").
func numberText(n string) string {
	if !strings.ContainsAny(n, ".eE") {
		return n
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return n
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// escapeUnreserved percent-encodes every byte of s except the RFC 3986
// unreserved characters, as simple string expansion requires.
func escapeUnreserved(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// appendQuery adds query (encoded, keys sorted) after uri's own query.
func appendQuery(uri string, query map[string]string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", failure(TypeConfiguration, http.StatusBadRequest, "endpoint %q is not a valid URI: %s", uri, err.Error())
	}
	if !u.IsAbs() || u.Host == "" {
		return "", failure(TypeConfiguration, http.StatusBadRequest, "endpoint %q is not an absolute URI", uri)
	}
	if len(query) == 0 {
		return uri, nil
	}
	q := url.Values{}
	for k, v := range query {
		q.Set(k, v)
	}
	if u.RawQuery != "" {
		u.RawQuery += "&" + q.Encode()
	} else {
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}
