package adaptertest_test

import (
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// toyStep is what the toy framework's loop emits.
type toyStep struct {
	Kind  string // "turn", "call", "result", "answer"
	Text  string
	Tool  string
	Args  string
	Usage termination.Usage
}

// toyLoop is a tiny ReAct framework: it calls the scripted model, runs the
// tools it asks for, and repeats until the model answers without tools.
// It honours ctx between every step.
func toyLoop(ctx context.Context, script adaptertest.Script, modelCalls *atomic.Int64) <-chan toyStep {
	out := make(chan toyStep)
	go func() {
		defer close(out)
		send := func(s toyStep) bool {
			select {
			case out <- s:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for i := 0; ctx.Err() == nil; i++ {
			modelCalls.Add(1)
			turn, ok := script.TurnAt(i)
			if !ok {
				return
			}
			if len(turn.ToolCalls) == 0 {
				send(toyStep{Kind: "answer", Text: turn.Text, Usage: turn.Usage})
				return
			}
			if !send(toyStep{Kind: "turn", Text: turn.Text, Usage: turn.Usage}) {
				return
			}
			for _, tc := range turn.ToolCalls {
				if !send(toyStep{Kind: "call", Tool: tc.Name, Args: tc.Args}) ||
					!send(toyStep{Kind: "result", Tool: tc.Name, Text: "42"}) {
					return
				}
			}
		}
	}()
	return out
}

// decodeToy is the toy framework's adapter.
func decodeToy(s toyStep) termination.Event {
	switch s.Kind {
	case "turn":
		return termination.Event{Kind: termination.KindMessage, Source: "assistant", Text: s.Text, Usage: s.Usage}
	case "call":
		return termination.Event{Kind: termination.KindToolCall, Source: "assistant", Tool: s.Tool, Args: []byte(s.Args)}
	case "result":
		return termination.Event{Kind: termination.KindToolResult, Tool: s.Tool, Text: s.Text}
	case "answer":
		return termination.Event{Kind: termination.KindFinal, Source: "assistant", Text: s.Text, Usage: s.Usage}
	}
	return termination.Event{}
}

func harness(decode func(toyStep) termination.Event) adaptertest.Harness {
	return adaptertest.Harness{Timeout: 5 * time.Second, Run: func(t *testing.T, stage *middleware.Stage, script adaptertest.Script) adaptertest.Report {
		var calls atomic.Int64
		ctx, run := stage.Start(context.Background())
		for range middleware.Forward(run, toyLoop(ctx, script, &calls), decode) {
		}
		res := run.Wait()
		return adaptertest.Report{Result: res, ModelCalls: int(calls.Load())}
	}}
}

// TestToyAdapterConforms: a correct adapter passes the suite.
func TestToyAdapterConforms(t *testing.T) {
	adaptertest.Run(t, harness(decodeToy))
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
