package openaistop_test

import (
	"testing"

	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
)

// harness drives the hand-written tool loop (agentLoop) against the
// scripted server.
func harness(stream bool) adaptertest.Harness {
	return adaptertest.Harness{Run: func(t *testing.T, stage *middleware.Stage, s adaptertest.Script) adaptertest.Report {
		m := api.Serve(t, s.Repeat, s.Turns...)
		ctx, run := stage.Start(t.Context())
		res := agentLoop(ctx, run, client(m), stream, s.Input)
		return adaptertest.Report{Result: res, ModelCalls: m.Requests()}
	}, CallIDs: true, Model: "scripted", ToolErrorsGoOn: true}
}

func TestConformance(t *testing.T) {
	t.Run("json", func(t *testing.T) { adaptertest.Run(t, harness(false)) })
	t.Run("stream", func(t *testing.T) { adaptertest.Run(t, harness(true)) })
}
