package redisfleet

import (
	"strings"
	"testing"
	"time"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"acme", "acme"},
		{"a_b-c.d", "a_b-c.d"},
		{"", ""},
		{"a:b", "a%3Ab"},
		{"*", "%2A"},
		{"t?[x]\\", "t%3F%5Bx%5D%5C"},
		{"{tag}", "%7Btag%7D"},
		{"50%", "50%25"},
		{"ü", "%C3%BC"},
		{"a b", "a%20b"},
	} {
		if got := escape(tc.in); got != tc.want {
			t.Errorf("escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := unescape(escape(tc.in)); got != tc.in {
			t.Errorf("unescape(escape(%q)) = %q", tc.in, got)
		}
	}
}

func TestKeysNeverMix(t *testing.T) {
	k := keys{prefix: DefaultPrefix}
	// A label value with the separator cannot alias another budget.
	a := k.budgetPrefix() + budgetEsc2("label:tenant", "a:b")
	b := k.budgetPrefix() + budgetEsc2("label:tenant:a", "b")
	if a == b {
		t.Fatalf("two budgets share key %q", a)
	}
	if got := k.run("x*"); got != "agentstop:run:x%2A" {
		t.Errorf("run key = %q", got)
	}
}

func budgetEsc2(key, value string) string { return escape(key) + ":" + escape(value) }

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "acme", "a:b", "*?[]", "%41", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := escape(s)
		if strings.ContainsAny(e, ":*?[]\\{} \x00") {
			t.Fatalf("escape(%q) = %q holds a separator, glob or brace", s, e)
		}
		if u := unescape(e); u != s {
			t.Fatalf("unescape(escape(%q)) = %q", s, u)
		}
	})
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Option
		want string // "" valid, otherwise in the error
	}{
		{"default", nil, ""},
		{"prefix", WithPrefix("app:"), ""},
		{"empty prefix", WithPrefix(""), "prefix"},
		{"glob prefix", WithPrefix("a*:"), "prefix"},
		{"space prefix", WithPrefix("a b"), "prefix"},
		{"short lease", WithLease(time.Millisecond), "lease"},
		{"fraction", WithLeaseFraction(0), "lease fraction"},
		{"big fraction", WithLeaseFraction(0.9), "lease fraction"},
		{"tick", WithSyncInterval(time.Hour), "sync interval"},
		{"timeout", WithTimeout(0), "timeout"},
	} {
		_, err := newConfig([]Option{tc.opt})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}
