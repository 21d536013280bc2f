package runid

import "testing"

func TestNewIsValidAndFresh(t *testing.T) {
	a, b := New(), New()
	if !Valid(a) || !Valid(b) || a == b {
		t.Fatalf("New() = %q, %q", a, b)
	}
	for _, bad := range []string{"", "x", a[:31], a + "0", "0123456789ABCDEF0123456789abcdef", "0123456789abcdef0123456789abcdeg"} {
		if Valid(bad) {
			t.Errorf("Valid(%q) = true", bad)
		}
	}
}
