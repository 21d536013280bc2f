package openaistop_test

import (
	"testing"

	"github.com/agentstop/agentstop/adaptertest"
	"github.com/agentstop/agentstop/middleware"
)

// harness drives the hand-written tool loop (agentLoop) against the
// scripted server.
func harness(stream bool) adaptertest.Harness {
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
		res := agentLoop(ctx, run, m.client(), stream, s.Input)
		return adaptertest.Report{Result: res, ModelCalls: m.calls()}
	}, CallIDs: true, Model: "scripted"}
}

func TestConformance(t *testing.T) {
	t.Run("json", func(t *testing.T) { adaptertest.Run(t, harness(false)) })
	t.Run("stream", func(t *testing.T) { adaptertest.Run(t, harness(true)) })
}
