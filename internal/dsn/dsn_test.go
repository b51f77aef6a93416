package dsn

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"postgres://u:secret@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgresql://u:s%40cr%2Fet@h/db", "postgresql://u:xxxxx@h/db"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://h/db?password=secret&sslmode=require", "postgres://h/db?password=xxxxx&sslmode=require"},
		{"postgres://u:secret@h/db?sslpassword=keypass", "postgres://u:xxxxx@h/db?sslpassword=xxxxx"},
		{"postgres://u:sec ret@h/db%zz", Unparsable},
		{"postgres:/u:secret@h/db", Unparsable},
		{"host=127.0.0.1 password=secret", "host=127.0.0.1 password=xxxxx"},
		{"host=127.0.0.1 password = secret dbname=x", "host=127.0.0.1 password = xxxxx dbname=x"},
		{"password='a b' host=h", "password=xxxxx host=h"},
		{`password='it\'s secret' user=u`, "password=xxxxx user=u"},
		{`password=back\ slash user=u`, "password=xxxxx user=u"},
		{"host=h PASSWORD=secret", "host=h PASSWORD=xxxxx"},
		{"host=h sslpassword=secret", "host=h sslpassword=xxxxx"},
		{"host=h password='unterminated", Unparsable},
		{"host=h password", Unparsable},
		{"host=h dbname=flowd", "host=h dbname=flowd"},
		{"sqlite:flowd.db", "sqlite:flowd.db"},
		{"sqlite:/data/a@b.db", "sqlite:/data/a@b.db"},
		{"mysql:u:secret@tcp(h)/db", Unparsable},
		{"flowd.db", "flowd.db"},
		{"", ""},
	}
	for _, c := range cases {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// No redacted address still holds its password, whatever its form.
func TestRedactLeavesNoSecret(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-Pw"
	forms := []string{
		"postgres://u:" + secret + "@h/db",
		"postgres://h/db?password=" + secret,
		"host=h password=" + secret,
		"host=h password='" + secret + " with space'",
		"password=" + secret,
		"postgres://u:" + secret + "@h/%zz",
		"user=u password='" + secret,
	}
	for _, f := range forms {
		if got := Redact(f); strings.Contains(got, secret) {
			t.Errorf("Redact(%q) = %q: the password is still there", f, got)
		}
	}
}

func TestRedactError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		addr, msg string
	}{
		{"postgres://u:secret@h/db", "cannot parse `postgres://u:secret@h/db`"},
		{"postgres://u:p%40ss@h/db", "password p@ss and p%40ss"},
		{"host=h password='a b'", "unknown address host=h password='a b': a b"},
		{"host=h password=plain", "bad: plain"},
	}
	for _, c := range cases {
		err := RedactError(fmt.Errorf("open: %s: %w", c.msg, fs.ErrNotExist), c.addr)
		for _, sec := range []string{"secret", "p@ss", "p%40ss", "a b", "plain"} {
			if strings.Contains(c.addr, sec) && strings.Contains(err.Error(), sec) {
				t.Errorf("RedactError(%q): %q still shows %q", c.addr, err, sec)
			}
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("RedactError(%q) lost the wrapped error: %v", c.addr, err)
		}
	}
	plain := errors.New("connection refused")
	if got := RedactError(plain, "postgres://u:secret@h/db"); got != plain {
		t.Errorf("an error without the secret was rewrapped: %v", got)
	}
	if RedactError(nil, "postgres://u:secret@h/db") != nil {
		t.Error("RedactError(nil) is not nil")
	}
}
