package adaptertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// toyAPI answers with a turn's text, stop reason, usage and tools, and
// the request's number.
var toyAPI = adaptertest.API{Path: "/v1/toy", Respond: func(w http.ResponseWriter, _ map[string]any, n int, turn adaptertest.Turn) {
	r := toyReply{N: n, Text: turn.Text, Stop: turn.Stop, In: turn.Usage.InputTokens, Out: turn.Usage.OutputTokens}
	for _, c := range turn.ToolCalls {
		r.Tools = append(r.Tools, c.Name)
		r.Args = append(r.Args, c.Args)
	}
	_ = json.NewEncoder(w).Encode(r)
}}

type toyReply struct {
	N           int
	Text, Stop  string
	Tools, Args []string
	In, Out     int64
}

func toyCallID(n, i int) string { return fmt.Sprintf("t_%d_%d", n, i) }

// apiLoop is how a toy tool loop over toyAPI behaves; the zero apiLoop is
// a correct one.
type apiLoop struct {
	ignoresStop bool // requests under a context the run does not control, stop reasons ignored
	noInput     bool // no input event
	noIDs       bool // no call ids
}

func (l apiLoop) run(ctx context.Context, run *middleware.Run, s *adaptertest.Server, prompt string) termination.Result {
	honest := !l.ignoresStop
	if !honest {
		ctx = context.Background()
	}
	if !l.noInput {
		run.Observe(termination.Event{Kind: termination.KindInput, Source: "user", Text: prompt})
	}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+toyAPI.Path, strings.NewReader(`{}`))
		resp, err := s.HTTPClient().Do(req)
		if err != nil {
			return run.Finish(err)
		}
		var r toyReply
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil {
			return run.Finish(err)
		}
		ev := termination.Event{Kind: termination.KindFinal, Source: "toy", Model: "toy", Text: r.Text, Usage: termination.Usage{InputTokens: r.In, OutputTokens: r.Out}}
		if len(r.Tools) > 0 || (honest && r.Stop != "") {
			ev.Kind = termination.KindMessage
		}
		if _, stop := run.Observe(ev); stop && honest {
			return run.Finish(nil)
		}
		if honest && r.Stop != "" {
			run.Observe(termination.Event{Kind: termination.KindError, Source: "toy", Err: "stop " + r.Stop})
			return run.Finish(nil)
		}
		if len(r.Tools) == 0 {
			return run.Finish(nil)
		}
		id := func(i int) string {
			if l.noIDs {
				return ""
			}
			return toyCallID(r.N, i)
		}
		for i, tool := range r.Tools {
			run.Observe(termination.Event{Kind: termination.KindToolCall, Tool: tool, Args: []byte(r.Args[i]), CallID: id(i)})
		}
		for i, tool := range r.Tools {
			res := termination.Event{Kind: termination.KindToolResult, Tool: tool, Text: r.Args[i], CallID: id(i)}
			if tool == "fail" {
				res.Err = "tool fail failed"
			}
			if _, stop := run.Observe(res); stop && honest {
				return run.Finish(nil)
			}
		}
		if !honest {
			return run.Finish(nil) // one request is enough to be caught
		}
	}
}

func TestCheckNaturalCompletion(t *testing.T) {
	traits := adaptertest.LoopTraits{Model: "toy", Input: true, CallID: toyCallID, ResultIDs: true}
	if err := toyAPI.CheckNaturalCompletion(t, apiLoop{}.run, traits); err != nil {
		t.Errorf("a correct loop: %v", err)
	}
	if err := toyAPI.CheckNaturalCompletion(t, apiLoop{noIDs: true, noInput: true}.run, adaptertest.LoopTraits{Model: "toy"}); err != nil {
		t.Errorf("a loop without input event and call ids, expected so: %v", err)
	}
	for _, tc := range []struct {
		name   string
		loop   apiLoop
		traits adaptertest.LoopTraits
		want   string
	}{
		{"InputMissing", apiLoop{noInput: true}, traits, "events = [message"},
		{"IDsMissing", apiLoop{noIDs: true}, traits, `event 1 (tool_call) call_id = "", want "t_0_0"`},
		{"ResultIDsUnexpected", apiLoop{}, adaptertest.LoopTraits{Model: "toy", Input: true, CallID: toyCallID}, `event 3 (tool_result) call_id = "t_0_0", want ""`},
		{"OtherModel", apiLoop{}, adaptertest.LoopTraits{Model: "scripted", Input: true}, "model of the turns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := toyAPI.CheckNaturalCompletion(t, tc.loop.run, tc.traits)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckStopCancelsLoop(t *testing.T) {
	if err := toyAPI.CheckStopCancelsLoop(t, apiLoop{}.run); err != nil {
		t.Errorf("a loop under the run's context: %v", err)
	}
	err := toyAPI.CheckStopCancelsLoop(t, apiLoop{ignoresStop: true}.run)
	if err == nil || !strings.Contains(err.Error(), "model calls = 1") {
		t.Errorf("a loop the stop does not reach: err = %v, want one about its model call", err)
	}
}

func TestCheckTruncatedAnswer(t *testing.T) {
	events, err := toyAPI.CheckTruncatedAnswer(t, "length", "stop length", apiLoop{}.run)
	if err != nil {
		t.Errorf("a loop that reports the cut-off turn: %v", err)
	}
	if got := fmt.Sprint(events.Kinds()); got != "[input message error]" {
		t.Errorf("events = %s, want [input message error]", got)
	}
	if _, err := toyAPI.CheckTruncatedAnswer(t, "length", "stop max_tokens", apiLoop{}.run); err == nil || !strings.Contains(err.Error(), "want Failed{stream_error") {
		t.Errorf("another error text: err = %v, want one naming the expected cause", err)
	}
	if _, err := toyAPI.CheckTruncatedAnswer(t, "length", "stop length", apiLoop{ignoresStop: true}.run); err == nil {
		t.Error("a loop that takes a cut-off turn for an answer passed")
	}
}
