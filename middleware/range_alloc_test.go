//go:build !race

// The race detector allocates on its own account: allocation counts are
// checked without it.

package middleware_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Range allocates nothing per item: a run of 1000 items allocates what a
// run of 100 does (the policy's windows fill during the first few dozen
// events).
func TestRangeNoAllocsPerItem(t *testing.T) {
	stage := mustStage(t, "range", benchLikePolicy(t))
	perRun := func(n int) float64 {
		ins := make([]chan termination.Event, 20)
		for i := range ins {
			ins[i] = filled(n)
		}
		i := 0
		return testing.AllocsPerRun(len(ins)-1, func() {
			_, run := stage.Start(context.Background())
			for range middleware.Range(run, ins[i], identity) {
			}
			if res := run.Wait(); res.Events != n {
				t.Errorf("%d events evaluated, want %d", res.Events, n)
			}
			i++
		})
	}
	assert.Equal(t, perRun(100), perRun(1000), "allocations of a run of 100 items and of 1000")
}
