package testutil

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { fmt.Fprint(&b, "ab"); _ = b.String() })
	}
	wg.Wait()
	if got := b.String(); got != "abababab" {
		t.Fatalf("String() = %q, want four writes of ab", got)
	}
}

func TestCaptureErrors(t *testing.T) {
	sink := CaptureErrors(t)
	otel.Handle(errors.New("one"))
	otel.Handle(errors.New("two"))
	if got := sink.All(); got == nil || got.Error() != "one\ntwo" {
		t.Fatalf("All() = %v, want one and two", got)
	}
	if l := sink.List(); len(l) != 2 {
		t.Fatalf("List() has %d errors, want 2", len(l))
	}
}

func TestObserveStopsAtTheStoppingEvent(t *testing.T) {
	st, err := middleware.New("t", middleware.WithCondition(termination.ToolCallLimits{Limit: 1}))
	if err != nil {
		t.Fatal(err)
	}
	res := Observe(st, Msg("a", "x", 1, 2), Call("s", `{}`), Result("s", "boom"), Call("s", `{}`), Call("s", `{}`))
	if _, ok := res.Cause.(termination.MaxToolCallsReached); !ok || res.ToolCalls != 2 || res.StoppedAt != 4 {
		t.Fatalf("result = %+v, want MaxToolCallsReached on the second call, event 4", res)
	}
}
