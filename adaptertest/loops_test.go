package adaptertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentstop/agentstop/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// toyAPI answers with a turn's text, stop reason, usage and first tool.
var toyAPI = adaptertest.API{Path: "/v1/toy", Respond: func(w http.ResponseWriter, _ map[string]any, _ int, turn adaptertest.Turn) {
	tool := ""
	if len(turn.ToolCalls) > 0 {
		tool = turn.ToolCalls[0].Name
	}
	_ = json.NewEncoder(w).Encode(toyReply{turn.Text, turn.Stop, tool, turn.Usage.InputTokens, turn.Usage.OutputTokens})
}}

type toyReply struct {
	Text, Stop, Tool string
	In, Out          int64
}

// toyAPILoop is a tool loop over toyAPI. With honest unset it sends its
// requests under a context the run does not control and ignores stop
// reasons.
func toyAPILoop(honest bool) adaptertest.Loop {
	return func(ctx context.Context, run *middleware.Run, s *adaptertest.Server, prompt string) termination.Result {
		if !honest {
			ctx = context.Background()
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
			ev := termination.Event{Kind: termination.KindFinal, Source: "toy", Text: r.Text, Usage: termination.Usage{InputTokens: r.In, OutputTokens: r.Out}}
			if r.Tool != "" || (honest && r.Stop != "") {
				ev.Kind = termination.KindMessage
			}
			if _, stop := run.Observe(ev); stop && honest {
				return run.Finish(nil)
			}
			if honest && r.Stop != "" {
				run.Observe(termination.Event{Kind: termination.KindError, Source: "toy", Err: "stop " + r.Stop})
				return run.Finish(nil)
			}
			if r.Tool == "" {
				return run.Finish(nil)
			}
			if _, stop := run.Observe(termination.Event{Kind: termination.KindToolCall, Tool: r.Tool}); stop && honest {
				return run.Finish(nil)
			}
			if !honest {
				return run.Finish(nil) // one request is enough to be caught
			}
		}
	}
}

func TestCheckStopCancelsLoop(t *testing.T) {
	if err := adaptertest.CheckStopCancelsLoop(t, toyAPI, toyAPILoop(true)); err != nil {
		t.Errorf("a loop under the run's context: %v", err)
	}
	err := adaptertest.CheckStopCancelsLoop(t, toyAPI, toyAPILoop(false))
	if err == nil || !strings.Contains(err.Error(), "model calls = 1") {
		t.Errorf("a loop the stop does not reach: err = %v, want one about its model call", err)
	}
}

func TestCheckTruncatedAnswer(t *testing.T) {
	events, err := adaptertest.CheckTruncatedAnswer(t, toyAPI, "length", "stop length", toyAPILoop(true))
	if err != nil {
		t.Errorf("a loop that reports the cut-off turn: %v", err)
	}
	if got := fmt.Sprint(events.Kinds()); got != "[message error]" {
		t.Errorf("events = %s, want [message error]", got)
	}
	if _, err := adaptertest.CheckTruncatedAnswer(t, toyAPI, "length", "stop max_tokens", toyAPILoop(true)); err == nil || !strings.Contains(err.Error(), "want Failed{stream_error") {
		t.Errorf("another error text: err = %v, want one naming the expected cause", err)
	}
	if _, err := adaptertest.CheckTruncatedAnswer(t, toyAPI, "length", "stop length", toyAPILoop(false)); err == nil {
		t.Error("a loop that takes a cut-off turn for an answer passed")
	}
}
