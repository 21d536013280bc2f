package backtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUniqueNames(t *testing.T) {
	p := func(name, source string) Policy { return Policy{Name: name, Source: source} }
	for _, tc := range []struct {
		name string
		in   []Policy
		want []string
	}{
		{"unique names are kept", []Policy{p("a.yaml", "x/a.yaml"), p("b.yaml", "x/b.yaml")}, []string{"a.yaml", "b.yaml"}},
		{"two files of one name", []Policy{p("p.yaml", "x1/p.yaml"), p("p.yaml", "x2/p.yaml")}, []string{"x1/p.yaml", "x2/p.yaml"}},
		{"the shortest suffix that differs", []Policy{p("p.yaml", "runs/a/v1/p.yaml"), p("p.yaml", "runs/b/v1/p.yaml"), p("q.yaml", "q.yaml")},
			[]string{"a/v1/p.yaml", "b/v1/p.yaml", "q.yaml"}},
		{"one path a suffix of the other", []Policy{p("p.yaml", "x1/p.yaml"), p("p.yaml", "a/x1/p.yaml")}, []string{"x1/p.yaml", "a/x1/p.yaml"}},
		{"paths cleaned", []Policy{p("p.yaml", "./x1//p.yaml"), p("p.yaml", "x2/p.yaml")}, []string{"x1/p.yaml", "x2/p.yaml"}},
		{"two -policies dirs", []Policy{p("policies", "a/policies/"), p("policies", "b/policies")}, []string{"a/policies", "b/policies"}},
		{"the same file twice", []Policy{p("p.yaml", "x/p.yaml"), p("p.yaml", "x/p.yaml")}, []string{"p.yaml", "p.yaml (2)"}},
		{"no source", []Policy{p("p", ""), p("p", ""), p("p", "")}, []string{"p", "p (2)", "p (3)"}},
		{"a number already taken", []Policy{p("p", ""), p("p (2)", ""), p("p", "")}, []string{"p", "p (2)", "p (3)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]Policy(nil), tc.in...)
			out := uniqueNames(in)
			var got []string
			for _, q := range out {
				got = append(got, q.Name)
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.in, in, "the input is not changed")
		})
	}
}
