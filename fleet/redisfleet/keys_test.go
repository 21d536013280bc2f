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
	a := k.budget(budgetEsc2("label:tenant", "a:b"), 0)
	b := k.budget(budgetEsc2("label:tenant:a", "b"), 0)
	if a == b {
		t.Fatalf("two budgets share key %q", a)
	}
	if got := k.run("x*"); got != "agentstop:{runs}:x%2A" {
		t.Errorf("run key = %q", got)
	}
	// A value with braces cannot form a hash tag of its own.
	if got := k.run("{stops}"); got != "agentstop:{runs}:%7Bstops%7D" {
		t.Errorf("run key = %q", got)
	}
	esc, ws, ok := k.budgetOf(k.budget(budgetEsc2("label:tenant", "a}:b"), 1234))
	if !ok || esc != budgetEsc2("label:tenant", "a}:b") || ws != 1234 {
		t.Errorf("budgetOf = %q, %d, %v", esc, ws, ok)
	}
}

// TestHashTags: the keys one script touches share a slot, and the
// families spread: each budget's windows have a slot of their own.
func TestHashTags(t *testing.T) {
	k := keys{prefix: DefaultPrefix}
	same := [][]string{
		{k.runs(), k.run("a"), k.run("b%2F")},
		{k.stops(), k.stop("a"), k.stopAck("a")},
		{k.blocks(), k.block("a")},
		{k.budget("stage:x", 0), k.budget("stage:x", 3600000)},
	}
	for _, group := range same {
		for _, key := range group[1:] {
			if slot(key) != slot(group[0]) {
				t.Errorf("%q (slot %d) and %q (slot %d) differ", key, slot(key), group[0], slot(group[0]))
			}
		}
	}
	if slot(k.budget("stage:x", 0)) == slot(k.budget("stage:y", 0)) && slot(k.budget("stage:y", 0)) == slot(k.budget("stage:z", 0)) {
		t.Errorf("three budgets share a slot: their tags are not their own")
	}
}

// slot is Redis Cluster's key slot: CRC16 (XMODEM) of the hash tag (or
// the whole key) mod 16384.
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
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
