package adaptertest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// toyStep is what the toy framework's loop emits.
type toyStep struct {
	Kind   string // "turn", "call", "result", "answer"
	Text   string
	Tool   string
	Args   string
	Usage  termination.Usage
	CallID string // of a call and its result
	Model  string // of a turn and an answer
	Err    string // of a result: the tool "fail" fails
}

// toyModel is the name the toy framework reports with its model's turns.
const toyModel = "toy-model"

// toyLoop is a tiny ReAct framework: it calls the scripted model, runs the
// tools it asks for, and repeats until the model answers without tools.
// Its model gives every tool call an id and its name with every turn; the
// tool "fail" fails and the loop hands its error back to the model. It
// honours ctx between every step.
func toyLoop(ctx context.Context, script adaptertest.Script, modelCalls *atomic.Int64) <-chan toyStep {
	out := make(chan toyStep)
	go func() {
		defer close(out)
		toyRun(ctx, script, modelCalls, func(s toyStep) bool {
			select {
			case out <- s:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	return out
}

// toyRun is toyLoop's loop, handing every step to send in turn, until send
// returns false or ctx ends.
func toyRun(ctx context.Context, script adaptertest.Script, modelCalls *atomic.Int64, send func(toyStep) bool) {
	for i := 0; ctx.Err() == nil; i++ {
		modelCalls.Add(1)
		turn, ok := script.TurnAt(i)
		if !ok {
			return
		}
		if len(turn.ToolCalls) == 0 {
			send(toyStep{Kind: "answer", Text: turn.Text, Usage: turn.Usage, Model: toyModel})
			return
		}
		if !send(toyStep{Kind: "turn", Text: turn.Text, Usage: turn.Usage, Model: toyModel}) {
			return
		}
		for j, tc := range turn.ToolCalls {
			id := fmt.Sprintf("call_%d_%d", i, j)
			result := toyStep{Kind: "result", Tool: tc.Name, Text: "42", CallID: id}
			if tc.Name == "fail" {
				result.Text, result.Err = "", "tool failed"
			}
			if !send(toyStep{Kind: "call", Tool: tc.Name, Args: tc.Args, CallID: id}) || !send(result) {
				return
			}
		}
	}
}

// decodeToy is the toy framework's adapter.
func decodeToy(s toyStep) termination.Event {
	switch s.Kind {
	case "turn":
		return termination.Event{Kind: termination.KindMessage, Source: "assistant", Text: s.Text, Usage: s.Usage, Model: s.Model}
	case "call":
		return termination.Event{Kind: termination.KindToolCall, Source: "assistant", Tool: s.Tool, Args: []byte(s.Args), CallID: s.CallID}
	case "result":
		return termination.Event{Kind: termination.KindToolResult, Tool: s.Tool, Text: s.Text, CallID: s.CallID, Err: s.Err}
	case "answer":
		return termination.Event{Kind: termination.KindFinal, Source: "assistant", Text: s.Text, Usage: s.Usage, Model: s.Model}
	}
	return termination.Event{}
}

func harness(decode func(toyStep) termination.Event) adaptertest.Harness {
	return adaptertest.Harness{Timeout: 5 * time.Second, CallIDs: true, Model: toyModel, Run: func(t *testing.T, stage *middleware.Stage, script adaptertest.Script) adaptertest.Report {
		var calls atomic.Int64
		ctx, run := stage.Start(context.Background())
		for range middleware.Forward(run, toyLoop(ctx, script, &calls), decode) {
		}
		res := run.Wait()
		return adaptertest.Report{Result: res, ModelCalls: int(calls.Load())}
	}}
}

// syncHarness is the toy framework with an adapter that observes every step
// before the loop goes on (as a tool wrapper does): a stop on a
// tool_result ends the loop before its next model call.
func syncHarness(decode func(toyStep) termination.Event) adaptertest.Harness {
	h := harness(decode)
	h.ToolErrorsGoOn = true
	h.Run = func(t *testing.T, stage *middleware.Stage, script adaptertest.Script) adaptertest.Report {
		var calls atomic.Int64
		ctx, run := stage.Start(context.Background())
		toyRun(ctx, script, &calls, func(s toyStep) bool {
			_, stop := run.Observe(decode(s))
			return !stop
		})
		return adaptertest.Report{Result: run.Finish(nil), ModelCalls: int(calls.Load())}
	}
	return h
}

// TestToyAdapterConforms: a correct adapter passes the suite, with the
// framework's call ids and model, and without (an adapter of a framework
// that gives none declares none).
func TestToyAdapterConforms(t *testing.T) {
	t.Run("CallIDs", func(t *testing.T) { adaptertest.Run(t, harness(decodeToy)) })
	t.Run("Sync", func(t *testing.T) { adaptertest.Run(t, syncHarness(decodeToy)) })
	t.Run("NoCallIDs", func(t *testing.T) {
		h := harness(func(s toyStep) termination.Event {
			ev := decodeToy(s)
			ev.CallID, ev.Model = "", ""
			return ev
		})
		h.CallIDs, h.Model = false, ""
		adaptertest.Run(t, h)
	})
}

// Broken adapters, each run by the suite in a child process, which must
// fail with the suite's diagnosis.
var broken = map[string]struct {
	harness adaptertest.Harness
	want    string
}{
	"usage counted twice": {harness(func(s toyStep) termination.Event {
		ev := decodeToy(s)
		if s.Kind == "turn" {
			ev.Usage = ev.Usage.Add(s.Usage)
		}
		return ev
	}), "usage must be counted exactly once"},
	"tool calls dropped": {harness(func(s toyStep) termination.Event {
		if s.Kind == "call" {
			return termination.Event{}
		}
		return decodeToy(s)
	}), "event kinds ="},
	"tool call ids dropped": {harness(func(s toyStep) termination.Event {
		ev := decodeToy(s)
		ev.CallID = ""
		return ev
	}), "do not reach the spans"},
	"result call ids dropped": {harness(func(s toyStep) termination.Event {
		ev := decodeToy(s)
		if s.Kind == "result" {
			ev.CallID = ""
		}
		return ev
	}), "is on no execute_tool span"},
	"model dropped": {harness(func(s toyStep) termination.Event {
		ev := decodeToy(s)
		ev.Model = ""
		return ev
	}), "gen_ai.request.model"},
	"tool errors dropped": {syncHarness(func(s toyStep) termination.Event {
		ev := decodeToy(s)
		ev.Err = ""
		return ev
	}), "want Failed{error_threshold}"},
	"stop ignored": {adaptertest.Harness{Run: func(t *testing.T, stage *middleware.Stage, script adaptertest.Script) adaptertest.Report {
		// The loop runs under a context the stage does not control: the
		// stop never reaches it.
		var calls atomic.Int64
		loopCtx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, run := stage.Start(context.Background())
		steps := toyLoop(loopCtx, script, &calls)
		after := 0
		for s := range steps {
			if _, stop := run.Observe(decodeToy(s)); stop {
				if after++; after > 20 {
					break
				}
			}
		}
		return adaptertest.Report{Result: run.Finish(nil), ModelCalls: int(calls.Load())}
	}}, "the stop did not reach the framework's loop"},
}

const brokenEnv = "ADAPTERTEST_BROKEN"

func init() {
	for name, b := range broken {
		b.harness.Timeout = 300 * time.Millisecond // a broken loop may never end
		broken[name] = b
	}
}

// TestBrokenAdapterHelper runs the suite against the broken adapter named
// by $ADAPTERTEST_BROKEN; it runs only in the child process.
func TestBrokenAdapterHelper(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("runs in a child process of TestBrokenAdaptersAreCaught")
	}
	adaptertest.Run(t, broken[name].harness)
}

func TestBrokenAdaptersAreCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for name, b := range broken {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenAdapterHelper$", "-test.v")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the suite must fail a broken adapter; output:\n%s", out)
			assert.Contains(t, string(out), b.want, "the failure names the problem")
			assert.Contains(t, string(out), "--- FAIL: TestBrokenAdapterHelper")
		})
	}
}
