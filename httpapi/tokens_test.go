package httpapi

import (
	"strings"
	"testing"
)

func TestParseTokens(t *testing.T) {
	t.Parallel()
	got, err := ParseTokens("# the ops team\n  plain-token  \n\nop-tok operator ops-alice\nw-tok\tworker\nr-tok reader auditor@example.com\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []Token{
		{Secret: "plain-token", Role: RoleAdmin, Name: DefaultTokenName("plain-token", RoleAdmin)},
		{Secret: "op-tok", Role: RoleOperator, Name: "ops-alice"},
		{Secret: "w-tok", Role: RoleWorker, Name: DefaultTokenName("w-tok", RoleWorker)},
		{Secret: "r-tok", Role: RoleReader, Name: "auditor@example.com"},
	}
	if len(got) != len(want) {
		t.Fatalf("ParseTokens = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("token %d = %+v, want %+v", i+1, got[i], want[i])
		}
	}
	// A default name tells tokens apart and never shows the token.
	if n := got[0].Name; !strings.HasPrefix(n, "admin-") || len(n) != len("admin-")+8 || strings.Contains(n, "plain") {
		t.Errorf("default name %q, want admin- and 8 hex digits", n)
	}
	if DefaultTokenName("a", RoleAdmin) == DefaultTokenName("b", RoleAdmin) {
		t.Error("two tokens got one default name")
	}
}

// Bad lines are refused with their line number, and no message repeats a
// field of the line (it may be part of a token).
func TestParseTokensErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ text, want string }{
		{"ok\n\nsecret-one superuser\n", "line 3: the second field is not a role: write admin, operator, worker or reader"},
		{"a b c d\n", "line 1: 4 fields; a line is TOKEN, or TOKEN ROLE [NAME]"},
		{"tok reader name with-space\n", "line 1: 4 fields"},
		{"tok-a admin\n# x\ntok-a reader\n", "line 3: the same token as line 1"},
		{"tok reader engine\n", `line 1: the name "engine" is flowd's own actor`},
		{"tok reader anonymous\n", `the name "anonymous" is flowd's own actor`},
		{"tok reader na/me\n", `line 1: the name "na/me" has '/'`},
		{"tok reader " + strings.Repeat("n", 65) + "\n", "line 1: the name is 65 bytes long; at most 64"},
		{"# only comments\n\n", "holds no token"},
		{"", "holds no token"},
	} {
		_, err := ParseTokens(tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseTokens(%q) = %v, want an error with %q", tc.text, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "superuser") {
			t.Errorf("the error repeats a field of the line: %v", err)
		}
	}
	// Every bad line is reported at once.
	_, err := ParseTokens("a superuser\nb c d e\n")
	if err == nil || !strings.Contains(err.Error(), "line 1:") || !strings.Contains(err.Error(), "line 2:") {
		t.Errorf("two bad lines: %v, want both named", err)
	}
}
