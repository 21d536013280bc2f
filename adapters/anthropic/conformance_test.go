package anthropicstop_test

import (
	"testing"

	"github.com/agentstop/agentstop/adaptertest"
	"github.com/agentstop/agentstop/middleware"
)

// harness drives one of the loops against the scripted server.
func harness(l loop) adaptertest.Harness {
	return adaptertest.Harness{Run: func(t *testing.T, stage *middleware.Stage, s adaptertest.Script) adaptertest.Report {
		turns := make([]turn, len(s.Turns))
		for i, st := range s.Turns {
			turns[i] = turn{text: st.Text, input: st.Usage.InputTokens, output: st.Usage.OutputTokens}
			for _, c := range st.ToolCalls {
				turns[i].calls = append(turns[i].calls, call{c.Name, c.Args})
			}
		}
		m := newModel(t, s.Repeat, turns...)
		ctx, run := stage.Start(t.Context())
		res := l.run(ctx, run, m.client(), s.Input)
		return adaptertest.Report{Result: res, ModelCalls: m.calls()}
	}, CallIDs: !l.runner, Model: "scripted"} // the tool runner does not give tools their call's id
}

func TestConformance(t *testing.T) {
	for _, l := range loops {
		t.Run(l.name, func(t *testing.T) { adaptertest.Run(t, harness(l)) })
	}
}
