// Package dsn hides the secrets of database addresses before they are
// printed. Every message, log line and error that may show a database
// address passes it through Redact, or an error through RedactError: the
// address reaches flowd from an operator's command line or environment and
// may carry a password in either of PostgreSQL's forms, a URL
// (postgres://user:secret@host/db, ?password=secret) or key=value pairs
// (host=h password=secret, password='a b').
//
// The package only rewrites text; it opens nothing.
package dsn

import (
	neturl "net/url"
	"strings"
)

// Mask replaces a secret in a redacted address.
const Mask = "xxxxx"

// Unparsable stands for an address too malformed to tell its secret from
// the rest: nothing of it is shown.
const Unparsable = "(unparsable database address)"

// isSecret reports whether a parameter's value is a secret (in either form).
func isSecret(key string) bool {
	switch strings.ToLower(key) {
	case "password", "sslpassword":
		return true
	}
	return false
}

// Redact returns s with its passwords replaced by Mask. An SQLite address
// holds no secret and is returned as it is; an address that cannot be
// parsed but may hold a secret is replaced whole by Unparsable.
func Redact(s string) string {
	switch {
	case strings.HasPrefix(s, "sqlite:"):
		return s
	case strings.Contains(s, "://"):
		return redactURL(s)
	case looksLikeKeyValue(s):
		pairs, ok := parseKeyValue(s)
		if !ok && mayHoldSecret(s) {
			return Unparsable
		}
		var b strings.Builder
		last := 0
		for _, p := range pairs {
			if isSecret(p.key) {
				b.WriteString(s[last:p.start])
				b.WriteString(Mask)
				last = p.end
			}
		}
		b.WriteString(s[last:])
		return b.String()
	case mayHoldSecret(s):
		return Unparsable
	}
	return s
}

// redactURL masks the password of the user info and the secret query
// parameters.
func redactURL(s string) string {
	u, err := neturl.Parse(s)
	if err != nil {
		if mayHoldSecret(s) {
			return Unparsable
		}
		return s
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = neturl.UserPassword(u.User.Username(), Mask)
		}
	}
	if u.RawQuery != "" && mayHoldSecret(u.RawQuery) {
		q, err := neturl.ParseQuery(u.RawQuery)
		if err != nil {
			return Unparsable
		}
		for k := range q {
			if isSecret(k) {
				q[k] = []string{Mask}
			}
		}
		u.RawQuery = q.Encode()
	}
	if u.Opaque != "" && mayHoldSecret(u.Opaque) {
		return Unparsable
	}
	return u.String()
}

// mayHoldSecret reports whether s could carry a password somewhere: a user
// info separator or the name of a secret parameter.
func mayHoldSecret(s string) bool {
	l := strings.ToLower(s)
	return strings.Contains(l, "@") || strings.Contains(l, "password")
}

// looksLikeKeyValue reports whether s starts as a libpq key=value string
// ("host=…", "password = …").
func looksLikeKeyValue(s string) bool {
	i := skipSpace(s, 0)
	j := skipKey(s, i)
	return j > i && skipSpace(s, j) < len(s) && s[skipSpace(s, j)] == '='
}

// pair is one key=value of a key=value string: s[start:end] is the value
// as written (quotes included), value the value as libpq reads it.
type pair struct {
	key        string
	start, end int
	value      string
}

// parseKeyValue splits s as libpq does: pairs separated by spaces, spaces
// allowed around '=', a value either quoted with ' (in which \' and \\ are
// escapes) or running to the next space (in which \ escapes the next
// character). ok is false when s does not parse: the pairs read until then
// are returned.
func parseKeyValue(s string) (pairs []pair, ok bool) {
	i := skipSpace(s, 0)
	for i < len(s) {
		k := i
		i = skipKey(s, i)
		key := s[k:i]
		i = skipSpace(s, i)
		if key == "" || i >= len(s) || s[i] != '=' {
			return pairs, false
		}
		i = skipSpace(s, i+1)
		p := pair{key: key, start: i}
		var v strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			closed := false
			for i < len(s) && !closed {
				switch {
				case s[i] == '\\' && i+1 < len(s):
					v.WriteByte(s[i+1])
					i += 2
				case s[i] == '\'':
					closed = true
					i++
				default:
					v.WriteByte(s[i])
					i++
				}
			}
			if !closed {
				return pairs, false
			}
		} else {
			for i < len(s) && !isSpace(s[i]) {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				v.WriteByte(s[i])
				i++
			}
		}
		p.end, p.value = i, v.String()
		pairs = append(pairs, p)
		i = skipSpace(s, i)
	}
	return pairs, true
}

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

func skipKey(s string, i int) int {
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= '0' && s[i] <= '9' || s[i] == '_') {
		i++
	}
	return i
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'
}

// secrets returns the passwords s holds, in every form a message may show
// them: as typed, decoded, and escaped as a URL would.
func secrets(s string) []string {
	var out []string
	add := func(vs ...string) {
		for _, v := range vs {
			if v != "" && v != Mask {
				out = append(out, v)
			}
		}
	}
	switch {
	case strings.HasPrefix(s, "sqlite:"):
	case strings.Contains(s, "://"):
		u, err := neturl.Parse(s)
		if err != nil {
			return nil
		}
		if u.User != nil {
			if p, ok := u.User.Password(); ok {
				add(p, neturl.QueryEscape(p), neturl.PathEscape(p))
			}
		}
		for k, vs := range u.Query() {
			if isSecret(k) {
				for _, v := range vs {
					add(v, neturl.QueryEscape(v))
				}
			}
		}
	default:
		pairs, _ := parseKeyValue(s)
		for _, p := range pairs {
			if isSecret(p.key) {
				add(s[p.start:p.end], p.value)
			}
		}
	}
	return out
}

// RedactError returns err with every password of address s taken out of
// its message, whatever printed it there (a driver's error may quote the
// address it was given); errors.Is and errors.As still see what err wraps.
// A nil err stays nil.
func RedactError(err error, s string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := msg
	for _, sec := range secrets(s) {
		clean = strings.ReplaceAll(clean, sec, Mask)
	}
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

// redactedError is an error shown without its secrets.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
