package anthropicstop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	anthropicstop "github.com/agentstop/agentstop/adapters/anthropic"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/termination"
)

// orderedTool is echo whose run with the input first returns only after
// the other call's tool_result has been reported (answered), so that two
// parallel calls finish in the reverse of their order in the message.
// Waiting for the other call's return alone would not do: the adapter
// reports a result after the tool returns, so both reports could race.
type orderedTool struct {
	first    string
	answered func() bool // whether the other call's tool_result has been reported
}

func (orderedTool) Name() string        { return "echo" }
func (orderedTool) Description() string { return "echoes its input" }
func (orderedTool) InputSchema() anthropic.BetaToolInputSchemaParam {
	return anthropic.BetaToolInputSchemaParam{Properties: map[string]any{}}
}

func (t orderedTool) Execute(ctx context.Context, input json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	if string(input) == t.first {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		timeout := time.After(10 * time.Second)
		for !t.answered() {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-timeout:
				return nil, fmt.Errorf("the other call of echo did not run in parallel")
			}
		}
	}
	return []anthropic.BetaToolResultBlockParamContentUnion{{OfText: &anthropic.BetaTextBlockParam{Text: string(input)}}}, nil
}

// Two calls of one tool in one turn run in parallel; each tool_result of
// the tool runner carries the id of the tool_use block it answers, matched
// by the tool's input, even when they finish in the reverse order, and
// when their inputs are the same, each gets an id of its own.
func TestToolsParallelCallIDs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a, b   string // the inputs of the two calls
		byText bool   // the results' texts tell which call they answer (the second returns first)
	}{
		{"different inputs", `{"q":"a"}`, `{"q":"b"}`, true},
		{"same input", `{"q":"a"}`, `{"q":"a"}`, false},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				m := api.Serve(t, false,
					adaptertest.NewTurn("", 10, 2, "echo", tc.a, "echo", tc.b),
					adaptertest.NewTurn("done", 10, 2))
				stage, rec := adaptertest.NewStage(t, "anthropic_parallel", "{}")
				ctx, run := stage.Start(t.Context())
				c := client(m)
				var tool anthropic.BetaTool = echoTool{"echo"}
				if tc.byText {
					tool = orderedTool{first: tc.a, answered: func() bool {
						return slices.ContainsFunc(rec.All(), func(ev termination.Event) bool { return ev.Kind == termination.KindToolResult })
					}}
				}
				tools := anthropicstop.Tools(run, tool)
				params := anthropic.BetaToolRunnerParams{BetaMessageNewParams: anthropic.BetaMessageNewParams{
					Model: "scripted", MaxTokens: 1024,
					Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))},
				}}
				if stream {
					runner := c.Beta.Messages.NewToolRunnerStreaming(tools, params)
					for events, err := range anthropicstop.AllStreaming(run, runner.AllStreaming(ctx)) {
						if err != nil {
							t.Fatal(err)
						}
						for _, err := range events {
							if err != nil {
								t.Fatal(err)
							}
						}
					}
				} else {
					runner := c.Beta.Messages.NewToolRunner(tools, params)
					for _, err := range anthropicstop.All(run, runner.All(ctx)) {
						if err != nil {
							t.Fatal(err)
						}
					}
				}
				if res := run.Wait(); res.Cause != (termination.NaturalCompletion{}) {
					t.Fatalf("cause = %#v, want NaturalCompletion", res.Cause)
				}

				var results []termination.Event
				for _, ev := range rec.All() {
					if ev.Kind == termination.KindToolResult {
						results = append(results, ev)
					}
				}
				if len(results) != 2 {
					t.Fatalf("%d tool_result events, want 2: %+v", len(results), results)
				}
				ids := []string{results[0].CallID, results[1].CallID}
				slices.Sort(ids)
				if want := []string{callID(0, 0), callID(0, 1)}; !slices.Equal(ids, want) {
					t.Fatalf("tool_result call ids = %q, want one each of %q", ids, want)
				}
				if !tc.byText {
					return
				}
				// The call with input b returns first.
				if results[0].Text != tc.b || results[0].CallID != callID(0, 1) ||
					results[1].Text != tc.a || results[1].CallID != callID(0, 0) {
					t.Errorf("results (text, call id) = (%s, %s), (%s, %s); want (%s, %s), (%s, %s)",
						results[0].Text, results[0].CallID, results[1].Text, results[1].CallID,
						tc.b, callID(0, 1), tc.a, callID(0, 0))
				}
				if err := adaptertest.CheckCallIDs(rec.All()); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// Tools wrapped for a run whose runner is not wrapped by All or
// AllStreaming report results without call ids; a nil run reports nothing.
func TestToolsWithoutAll(t *testing.T) {
	stage, rec := adaptertest.NewStage(t, "anthropic_tools_only", "{}")
	_, run := stage.Start(t.Context())
	tools := anthropicstop.Tools(run, echoTool{"echo"}, nil)
	if tools[1] != nil {
		t.Errorf("a nil tool became %v", tools[1])
	}
	if _, err := tools[0].Execute(t.Context(), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	run.Finish(nil)
	ev := rec.All()
	if len(ev) != 1 || ev[0].Kind != termination.KindToolResult || ev[0].CallID != "" || ev[0].Text != `{}` {
		t.Errorf("events = %+v, want one tool_result without a call id", ev)
	}
	if _, err := anthropicstop.Tools(nil, echoTool{"echo"})[0].Execute(t.Context(), json.RawMessage(`{}`)); err != nil {
		t.Error(err)
	}
}
