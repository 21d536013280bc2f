package anthropicstop_test

import (
	"testing"

	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
)

// harness drives one of the loops against the scripted server.
func harness(l loop) adaptertest.Harness {
	return adaptertest.Harness{Run: func(t *testing.T, stage *middleware.Stage, s adaptertest.Script) adaptertest.Report {
		m := api.Serve(t, s.Repeat, s.Turns...)
		ctx, run := stage.Start(t.Context())
		res := l.run(ctx, run, client(m), s.Input)
		return adaptertest.Report{Result: res, ModelCalls: m.Requests()}
	}, CallIDs: true, Model: "scripted", ToolErrorsGoOn: true}
}

func TestConformance(t *testing.T) {
	for _, l := range loops {
		t.Run(l.name, func(t *testing.T) { adaptertest.Run(t, harness(l)) })
	}
}
