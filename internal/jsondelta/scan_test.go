package jsondelta

import "testing"

// skipString ends a string at the first quote after an even run of
// backslashes, and fails on a string that does not end.
func TestSkipString(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int // -1: an error
	}{
		{`"" tail`, 2},
		{`"abc",`, 5},
		{`"a\"b",`, 6},
		{`"a\\",`, 5},
		{`"a\\\"b",`, 8},
		{`"\\\\"x`, 6},
		{`"\u0022"`, 8},
		{`"no end`, -1},
		{`"escaped end\"`, -1},
		{`"`, -1},
	} {
		got, err := skipString([]byte(c.in), 0)
		if c.want < 0 {
			if err == nil {
				t.Errorf("skipString(%s) = %d, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("skipString(%s) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}
