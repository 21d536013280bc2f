package langchaingo_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tmc/langchaingo/schema"

	"github.com/agentstop/agentstop/adapters/langchaingo"
	"github.com/agentstop/agentstop/termination"
)

// slowTool answers "out " and its input after d.
type slowTool struct {
	name string
	d    time.Duration
}

func (t slowTool) Name() string        { return t.name }
func (t slowTool) Description() string { return "slow" }
func (t slowTool) Call(_ context.Context, in string) (string, error) {
	time.Sleep(t.d)
	return "out " + in, nil
}

// TestToolsParallelCallIDs (found by a review): two calls of one wrapped
// tool run in parallel (the case call_id exists for, §1), the second
// returning first: each result carries its own call's id. They carried the
// last action's.
func TestToolsParallelCallIDs(t *testing.T) {
	stage, seen := newStage(t, "max_tool_calls: 10")
	ctx, run := stage.Start(context.Background())
	h := langchaingo.NewHandler(run)
	slow := langchaingo.Tools(h, slowTool{name: "search", d: 60 * time.Millisecond})[0]
	fast := langchaingo.Tools(h, slowTool{name: "search"})[0]
	for _, a := range []schema.AgentAction{{Tool: "search", ToolInput: "a", ToolID: "c1"}, {Tool: "search", ToolInput: "b", ToolID: "c2"}} {
		h.HandleAgentAction(ctx, a)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = slow.Call(ctx, "a") }()
	go func() { defer wg.Done(); time.Sleep(10 * time.Millisecond); _, _ = fast.Call(ctx, "b") }()
	wg.Wait()
	run.Finish(nil)
	got := map[string]string{}
	for _, ev := range seen.All() {
		if ev.Kind == termination.KindToolResult {
			got[ev.Text] = ev.CallID
		}
	}
	want := map[string]string{"out a": "c1", "out b": "c2"}
	if len(got) != 2 || got["out a"] != want["out a"] || got["out b"] != want["out b"] {
		t.Errorf("results' call ids = %v, want %v", got, want)
	}
}

// TestToolErrorHidesNoLaterLoopError (found by a review): a wrapped tool's
// short error ("EOF") is its failed result, and the same error travelling
// up the chains is not reported again; a later, different error whose text
// contains it (the model's "unexpected EOF") still is.
func TestToolErrorHidesNoLaterLoopError(t *testing.T) {
	stage, seen := newStage(t, "max_tool_calls: 10")
	ctx, run := stage.Start(context.Background())
	h := langchaingo.NewHandler(run)
	eof := errors.New("EOF")
	fetch := langchaingo.Tools(h, plainTool{name: "fetch", err: eof})[0]
	h.HandleAgentAction(ctx, schema.AgentAction{Tool: "fetch", ToolInput: "x", ToolID: "c1"})
	_, _ = fetch.Call(ctx, "x")
	h.HandleChainError(ctx, eof) // the executor's copy of the tool's error
	h.HandleLLMError(ctx, errors.New("openai: unexpected EOF reading the response body"))
	run.Finish(nil)
	var errs []string
	failed := 0
	for _, ev := range seen.All() {
		switch {
		case ev.Kind == termination.KindError:
			errs = append(errs, ev.Err)
		case ev.Kind == termination.KindToolResult && ev.Err == "EOF":
			failed++
		}
	}
	if failed != 1 || len(errs) != 1 || errs[0] != "openai: unexpected EOF reading the response body" {
		t.Errorf("failed results %d, error events %q: want 1 and the model's failure only", failed, errs)
	}
}
