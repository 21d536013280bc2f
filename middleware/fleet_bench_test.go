package middleware_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/testutil"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// BenchmarkFleetBudget: the per-event cost of a budget shared through the
// in-process fleet against the same budget held by the run alone
// (contract §7: target <= 1.1x), on the benchmark stream, through Forward
// (one event per op, as BenchmarkForward) and Observe.
func BenchmarkFleetBudget(b *testing.B) {
	const limit = 1 << 50 // never reached by the stream
	own := termination.MustParsePolicy("token_budget: {total: 1125899906842624, pressure: 0.9}\ncost_budget: {limit: 1e12, pressure: 0.9}")
	shared := termination.FleetBudget{Key: "label:tenant", Window: time.Hour, TotalTokens: limit, Cost: 1e12, Pressure: 0.9}
	cases := []struct {
		name string
		opts func() []middleware.Option
	}{
		{"own", func() []middleware.Option { return []middleware.Option{middleware.WithPolicy(own)} }},
		{"fleet", func() []middleware.Option {
			return []middleware.Option{middleware.WithParticipant(fleet.Membership(fleet.NewLocal())), middleware.WithFleetBudget(shared)}
		}},
	}
	labels := middleware.WithLabels(map[string]string{"tenant": "acme"})
	evs := benchEvents()
	for _, c := range cases {
		stage, err := middleware.New("bench", c.opts()...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("forward/"+c.name, func(b *testing.B) {
			testutil.BenchForward(b, stage, evs, labels)
		})
		b.Run("observe/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			_, run := stage.Start(context.Background(), labels)
			b.ResetTimer()
			for i := range b.N {
				run.Observe(evs[i%len(evs)])
			}
			b.StopTimer()
			if res := run.Finish(nil); res.Tag() != termination.TagNaturalCompletion {
				b.Fatalf("cause %v", res.Cause)
			}
		})
	}
}
