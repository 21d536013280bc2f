package anthropicstop_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	anthropicstop "github.com/agentstop/agentstop/adapters/anthropic"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/termination"
)

func TestEvents(t *testing.T) {
	const usage = `"usage":{"input_tokens":9,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":4}`
	u := termination.Usage{InputTokens: 1109, OutputTokens: 4}
	msg := func(stop, content string) string {
		return `{"id":"m","type":"message","role":"assistant","model":"claude","stop_reason":"` + stop + `","content":[` + content + `],` + usage + `}`
	}
	text := `{"type":"text","text":"hello"},{"type":"text","text":"world"}`
	tool := `{"type":"tool_use","id":"t1","name":"search","input":{"q":"x"}}`
	server := `{"type":"server_tool_use","id":"s1","name":"web_search","input":{"query":"y"}}`
	tests := []struct {
		name string
		json string
		want []termination.Event
	}{{
		name: "end_turn",
		json: msg("end_turn", text),
		want: []termination.Event{{Kind: termination.KindFinal, Source: "claude", Text: "hello\nworld", Usage: u, Model: "claude"}},
	}, {
		name: "stop_sequence",
		json: msg("stop_sequence", text),
		want: []termination.Event{{Kind: termination.KindFinal, Source: "claude", Text: "hello\nworld", Usage: u, Model: "claude"}},
	}, {
		name: "tool_use",
		json: msg("tool_use", text+","+tool+","+tool),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "claude", Text: "hello\nworld", Usage: u, Model: "claude"},
			{Kind: termination.KindToolCall, Tool: "search", Args: json.RawMessage(`{"q":"x"}`), CallID: "t1"},
			{Kind: termination.KindToolCall, Tool: "search", Args: json.RawMessage(`{"q":"x"}`), CallID: "t1"},
		},
	}, {
		name: "server tool in a final turn",
		json: msg("end_turn", server+","+text),
		want: []termination.Event{
			{Kind: termination.KindFinal, Source: "claude", Text: "hello\nworld", Usage: u, Model: "claude"},
			{Kind: termination.KindToolCall, Tool: "web_search", Args: json.RawMessage(`{"query":"y"}`), CallID: "s1"},
		},
	}, {
		name: "pause_turn",
		json: msg("pause_turn", server),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "claude", Usage: u, Model: "claude"},
			{Kind: termination.KindToolCall, Tool: "web_search", Args: json.RawMessage(`{"query":"y"}`), CallID: "s1"},
		},
	}, {
		name: "max_tokens with a cut-off tool call",
		json: msg("max_tokens", text+","+tool),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "claude", Text: "hello\nworld", Usage: u, Model: "claude"},
			{Kind: termination.KindError, Source: "claude", Err: "stop_reason max_tokens: the response was cut off at the token limit"},
		},
	}, {
		name: "model_context_window_exceeded",
		json: msg("model_context_window_exceeded", text),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "claude", Text: "hello\nworld", Usage: u, Model: "claude"},
			{Kind: termination.KindError, Source: "claude", Err: "stop_reason model_context_window_exceeded: the response was cut off at the context window"},
		},
	}, {
		name: "refusal",
		json: `{"id":"m","type":"message","role":"assistant","model":"claude","stop_reason":"refusal",
			"stop_details":{"type":"refusal","category":"cyber","explanation":"not allowed"},"content":[],` + usage + `}`,
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "claude", Usage: u, Model: "claude"},
			{Kind: termination.KindError, Source: "claude", Err: "stop_reason refusal: the model refused: not allowed"},
		},
	}, {
		name: "refusal without details",
		json: msg("refusal", ""),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "claude", Usage: u, Model: "claude"},
			{Kind: termination.KindError, Source: "claude", Err: "stop_reason refusal: the model refused"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := adaptertest.DecodeEvents(tt.json, anthropicstop.Events)
			check(t, got, err, tt.want)
			// The beta API's messages map the same way.
			got, err = adaptertest.DecodeEvents(tt.json, anthropicstop.BetaEvents)
			check(t, got, err, tt.want)
		})
	}
	anthropicstop.Events(nil, func(ev termination.Event) { t.Errorf("nil message emitted %+v", ev) })
	anthropicstop.BetaEvents(nil, func(ev termination.Event) { t.Errorf("nil message emitted %+v", ev) })
}

func check(t *testing.T, got []termination.Event, err error, want []termination.Event) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if err := adaptertest.DiffEvents(got, want); err != nil {
		t.Error(err)
	}
}

func TestToolResultEvent(t *testing.T) {
	call := anthropic.ToolUseBlock{ID: "t1", Name: "search"}
	if err := adaptertest.CheckToolResultEvent(func(out string, err error) termination.Event {
		return anthropicstop.ToolResultEvent(call, out, err)
	}); err != nil {
		t.Error(err)
	}
}

func TestObserveError(t *testing.T) {
	if err := adaptertest.CheckObserveError(anthropicstop.ObserveError); err != nil {
		t.Error(err)
	}
}

// A consumer that leaves the runner's iteration early stops the run as
// Cancelled{external}, like middleware.ForwardSeq.
func TestConsumerLeaves(t *testing.T) {
	forEachLoop(t, func(t *testing.T, l loop) {
		if !l.runner {
			t.Skip("hand-written loops have no iterator")
		}
		m := api.Serve(t, true, adaptertest.NewTurn("", 1, 1, "search", `{}`))
		stage, _ := adaptertest.NewStage(t, "anthropic_test", "{}")
		ctx, run := stage.Start(t.Context())
		client := client(m)
		tools := anthropicstop.Tools(run, echoTool{"search"})
		params := anthropic.BetaToolRunnerParams{BetaMessageNewParams: anthropic.BetaMessageNewParams{
			Model: "scripted", MaxTokens: 10,
			Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))},
		}}
		if l.name == "toolrunner" {
			for range anthropicstop.All(run, client.Beta.Messages.NewToolRunner(tools, params).All(ctx)) {
				break
			}
		} else {
			for events := range anthropicstop.AllStreaming(run, client.Beta.Messages.NewToolRunnerStreaming(tools, params).AllStreaming(ctx)) {
				for range events {
				}
				break
			}
		}
		res := run.Wait()
		var c termination.Cancelled
		if !errors.As(res.Cause, &c) || c.Reason != termination.CancelExternal {
			t.Fatalf("cause = %#v, want Cancelled{external}", res.Cause)
		}
		if got := m.Requests(); got != 1 {
			t.Errorf("model calls = %d, want 1", got)
		}
	})
}

// A consumer that leaves the runner's iteration on an error pair, or right
// after the final answer, ends the run as the stream would have ended
// (Failed{stream_error}, NaturalCompletion), like middleware.ForwardSeq: the
// SDK's own example returns on the first error without calling run.Finish.
func TestConsumerLeavesOnErrorOrAfterFinal(t *testing.T) {
	forEachLoop(t, func(t *testing.T, l loop) {
		if !l.runner {
			t.Skip("hand-written loops have no iterator")
		}
		for _, tc := range []struct {
			name  string
			turns []adaptertest.Turn
			check func(termination.Cause) bool
		}{
			// The second request fails: the script is exhausted (HTTP 500).
			{"error", []adaptertest.Turn{adaptertest.NewTurn("", 1, 1, "search", `{}`)}, func(c termination.Cause) bool {
				var f termination.Failed
				return errors.As(c, &f) && f.Reason == termination.FailStreamError
			}},
			{"final", []adaptertest.Turn{adaptertest.NewTurn("done", 1, 1)}, func(c termination.Cause) bool {
				return c == termination.NaturalCompletion{}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				m := api.Serve(t, false, tc.turns...)
				stage, _ := adaptertest.NewStage(t, "anthropic_test", "{}")
				ctx, run := stage.Start(t.Context())
				client := client(m)
				tools := anthropicstop.Tools(run, echoTool{"search"})
				params := anthropic.BetaToolRunnerParams{BetaMessageNewParams: anthropic.BetaMessageNewParams{
					Model: "scripted", MaxTokens: 10,
					Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))},
				}}
				func() {
					if l.name == "toolrunner" {
						for msg, err := range anthropicstop.All(run, client.Beta.Messages.NewToolRunner(tools, params).All(ctx)) {
							if err != nil || msg.StopReason == anthropic.BetaStopReasonEndTurn {
								return
							}
						}
						return
					}
					for events, err := range anthropicstop.AllStreaming(run, client.Beta.Messages.NewToolRunnerStreaming(tools, params).AllStreaming(ctx)) {
						if err != nil {
							return
						}
						final := false
						for ev, err := range events {
							if err != nil {
								return
							}
							if ev.Type == "message_delta" && ev.Delta.StopReason == anthropic.BetaStopReasonEndTurn {
								final = true
							}
						}
						if final {
							return
						}
					}
				}()
				if res := run.Wait(); !tc.check(res.Cause) {
					t.Fatalf("cause = %#v", res.Cause)
				}
			})
		}
	})
}

// Tools with no run reports nothing and does not panic; a nil tool stays nil.
func TestToolsNilRun(t *testing.T) {
	tools := anthropicstop.Tools(nil, echoTool{"search"}, nil)
	if tools[1] != nil {
		t.Errorf("nil tool wrapped: %#v", tools[1])
	}
	if _, err := tools[0].Execute(t.Context(), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
}
