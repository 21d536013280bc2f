package genkitstop_test

import (
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	genkitstop "github.com/agentstop/agentstop/adapters/genkit"
)

// TestNilRun: with a nil run nothing is observed and the generation runs
// as genkit runs it (as a nil run reports nothing in the other adapters),
// instead of panicking inside genkit's model call.
func TestNilRun(t *testing.T) {
	for _, m := range []struct {
		name string
		gen  func(t *testing.T, g *genkit.Genkit) (string, error)
	}{
		{"Generate", func(t *testing.T, g *genkit.Genkit) (string, error) {
			resp, err := genkitstop.Generate(t.Context(), g, nil, options("what is it?")...)
			return resp.Text(), err
		}},
		{"GenerateStream", func(t *testing.T, g *genkit.Genkit) (string, error) {
			var text string
			for v, err := range genkitstop.GenerateStream(t.Context(), g, nil, options("what is it?")...) {
				if err != nil {
					return "", err
				}
				if v.Done {
					text = v.Response.Text()
				}
			}
			return text, nil
		}},
		{"Middleware", func(t *testing.T, g *genkit.Genkit) (string, error) {
			resp, err := genkit.Generate(t.Context(), g, append(options("what is it?"), ai.WithMiddleware(genkitstop.Middleware(nil)))...)
			if err != nil {
				return "", err
			}
			return resp.Text(), nil
		}},
	} {
		t.Run(m.name, func(t *testing.T) {
			g, _ := newGenkit(t.Context(), false,
				turn{calls: []call{{"search", `{"q":"a"}`}}, input: 100, output: 20},
				turn{text: "the answer is 42", input: 200, output: 30},
			)
			text, err := m.gen(t, g)
			if err != nil || text != "the answer is 42" {
				t.Errorf("answer = %q, %v; want the answer is 42", text, err)
			}
		})
	}
}
