package httpapi

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/flowd/flowd/store"
)

// maxTokenName bounds a token's name, which every history row it writes
// records.
const maxTokenName = 64

// reservedActors are the actors flowd records on its own: no token may
// pass for one of them.
var reservedActors = []string{store.ActorEngine, store.ActorAnonymous, store.ActorUnknown}

// ParseTokens reads a token file: one token a line, `TOKEN` (role admin)
// or `TOKEN ROLE [NAME]`, fields separated by spaces or tabs; blank lines
// and lines starting with # are skipped. A token without a name gets
// DefaultTokenName. Errors name the line (never its token) and say what is
// wrong with it; a text without any token is an error too.
func ParseTokens(text string) ([]Token, error) {
	var tokens []Token
	var errs []error
	seen := map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		t, err := parseTokenLine(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			continue
		}
		if first, dup := seen[t.Secret]; dup {
			errs = append(errs, fmt.Errorf("line %d: the same token as line %d", n, first))
			continue
		}
		seen[t.Secret] = n
		tokens = append(tokens, t)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, errors.New("holds no token (one a line: TOKEN, or TOKEN ROLE [NAME])")
	}
	return tokens, nil
}

// parseTokenLine reads one line that is not blank or a comment. Its
// messages never quote the line: a field that is not what it should be may
// be part of a secret (a token with a space in it).
func parseTokenLine(line string) (Token, error) {
	f := strings.Fields(line)
	if len(f) > 3 {
		return Token{}, fmt.Errorf("%d fields; a line is TOKEN, or TOKEN ROLE [NAME]", len(f))
	}
	t := Token{Secret: f[0], Role: RoleAdmin}
	if len(f) > 1 {
		t.Role = Role(f[1])
		if !slices.Contains(Roles, t.Role) {
			return Token{}, fmt.Errorf("the second field is not a role: write admin, operator, worker or reader")
		}
	}
	if len(f) > 2 {
		t.Name = f[2]
		if err := checkTokenName(t.Name); err != nil {
			return Token{}, err
		}
	} else {
		t.Name = DefaultTokenName(t.Secret, t.Role)
	}
	return t, nil
}

// checkTokenName requires a name that reads well in a history and passes
// for none of flowd's own actors.
func checkTokenName(name string) error {
	if len(name) > maxTokenName {
		return fmt.Errorf("the name is %d bytes long; at most %d", len(name), maxTokenName)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._:@-", c)) {
			return fmt.Errorf("the name %q has %q: a name is letters, digits and . _ : @ -", name, c)
		}
	}
	if slices.Contains(reservedActors, name) {
		return fmt.Errorf("the name %q is flowd's own actor; choose another", name)
	}
	return nil
}

// checkTokens checks tokens given to NewServer (from ParseTokens, or a
// program's own).
func checkTokens(tokens []Token) error {
	seen := map[string]bool{}
	for i, t := range tokens {
		switch {
		case t.Secret == "" || strings.ContainsAny(t.Secret, " \t\r\n"):
			return fmt.Errorf("token %d: a token is a non-empty word without spaces", i+1)
		case !slices.Contains(Roles, t.Role):
			return fmt.Errorf("token %d (%s): role %q is not admin, operator, worker or reader", i+1, t.Name, t.Role)
		case seen[t.Secret]:
			return fmt.Errorf("token %d (%s): the same token twice", i+1, t.Name)
		}
		if err := checkTokenName(t.Name); err != nil {
			return fmt.Errorf("token %d: %w", i+1, err)
		}
		seen[t.Secret] = true
	}
	return nil
}
