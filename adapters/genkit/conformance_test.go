package genkitstop_test

import (
	"testing"

	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
)

// harness runs genkit's own tool loop with the scripted model, wrapped in
// one of the modes.
func harness(m mode) adaptertest.Harness {
	return adaptertest.Harness{Run: func(t *testing.T, stage *middleware.Stage, s adaptertest.Script) adaptertest.Report {
		turns := make([]turn, len(s.Turns))
		for i, st := range s.Turns {
			turns[i] = turn{text: st.Text, input: int(st.Usage.InputTokens), output: int(st.Usage.OutputTokens)}
			for _, c := range st.ToolCalls {
				turns[i].calls = append(turns[i].calls, call{c.Name, c.Args})
			}
		}
		g, model := newGenkit(t.Context(), s.Repeat, turns...)
		ctx, run := stage.Start(t.Context())
		res, _ := m.run(ctx, g, run, s.Input)
		return adaptertest.Report{Result: res, ModelCalls: model.modelCalls()}
	}, CallIDs: true, Model: "scripted/model"} // named by WithModel: genkit does not give the middleware the model's name
}

func TestConformance(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { adaptertest.Run(t, harness(m)) })
	}
}
