package lines

import "testing"

func TestLast(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 5, "a\nb\nc"},
		{"a\n\n\n", 1, "a"},
		{"", 3, ""},
		{"x\ny", 1, "y"},
	} {
		if got := Last(tc.s, tc.n); got != tc.want {
			t.Errorf("Last(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
