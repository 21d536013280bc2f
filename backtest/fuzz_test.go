package backtest

import (
	"strings"
	"testing"
)

// FuzzLabels: a labels file either parses or fails with a one-line error
// naming a line; it never panics.
func FuzzLabels(f *testing.F) {
	for _, s := range []string{"run,label\na,good\n", `{"a": true, "b": "bad"}`, "{\n\"a\": 3}", "a,\"b\n", `{"a":"good"} x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte) (Labels, error){parseJSONLabels, parseCSVLabels} {
			l, err := parse(data)
			if err != nil {
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("a multi-line error: %q", err)
				}
				continue
			}
			for run, label := range l {
				if label != Good && label != Bad {
					t.Fatalf("run %q: label %d", run, label)
				}
			}
		}
	})
}
