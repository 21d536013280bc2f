package anthropicstop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	anthropicstop "github.com/agentstop/agentstop/adapters/anthropic"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/termination"
)

// The events of a streamed turn, as the Messages API sends them, up to the
// point where the tests cut it: message_start carries the input tokens
// (and the prompt-cache tokens) and a provisional output count.
var (
	sseStart = sseEvent(map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "scripted", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 800, "output_tokens": 1, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 0},
	}})
	sseText = sseEvent(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}) +
		sseEvent(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "Let me"}})
	sseToolUse = sseEvent(map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{
		"type": "tool_use", "id": "toolu_1", "name": "search", "input": map[string]any{}}}) +
		sseEvent(map[string]any{"type": "content_block_delta", "index": 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{"q":`}})
	sseOverloaded = "event: error\ndata: " + `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n"
)

func sseEvent(v map[string]any) string {
	b, _ := json.Marshal(v)
	return fmt.Sprintf("event: %s\ndata: %s\n\n", v["type"], b)
}

// cutReader reads r, then fails with io.ErrUnexpectedEOF where r ends: a
// connection lost mid-stream.
type cutReader struct{ r io.Reader }

func (c cutReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func cutStream(body string) *ssestream.Stream[anthropic.MessageStreamEventUnion] {
	res := &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(cutReader{strings.NewReader(body)}),
	}
	return ssestream.NewStream[anthropic.MessageStreamEventUnion](ssestream.NewDecoder(res), nil)
}

func brief(evs []termination.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %s %q %v %s", ev.Kind, ev.Model, ev.Text, ev.Usage, ev.Err))
	}
	return out
}

// A stream that fails midway: Accumulate returns the partial message with
// the error, and ObserveStreamError reports it as a message (never a final)
// with the tokens message_start reported, then the error; run.Finish(err)
// then ends the run with those tokens counted.
func TestObserveStreamError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		want   []string
		tokens termination.Usage
	}{{
		name:   "connection lost in the text",
		body:   sseStart + sseText,
		want:   []string{`message scripted "Let me" {900 1} `, `error  "" {0 0} unexpected EOF`},
		tokens: termination.Usage{InputTokens: 900, OutputTokens: 1},
	}, {
		name:   "overloaded error event",
		body:   sseStart + sseText + sseOverloaded,
		want:   []string{`message scripted "Let me" {900 1} `, `error  "" {0 0} received error while streaming: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n"},
		tokens: termination.Usage{InputTokens: 900, OutputTokens: 1},
	}, {
		name:   "a tool_use cut off is not a tool_call",
		body:   sseStart + sseText + sseToolUse,
		want:   []string{`message scripted "Let me" {900 1} `, `error  "" {0 0} unexpected EOF`},
		tokens: termination.Usage{InputTokens: 900, OutputTokens: 1},
	}, {
		name: "failed before message_start",
		body: "",
		want: []string{`error  "" {0 0} unexpected EOF`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			stage, rec := adaptertest.NewStage(t, "anthropic_test", "max_iterations: 10")
			_, run := stage.Start(context.Background())
			m, err := anthropicstop.Accumulate(cutStream(tc.body), nil)
			if err == nil {
				t.Fatal("Accumulate of a cut stream returned no error")
			}
			if _, stop := anthropicstop.ObserveStreamError(run, &m, err); stop {
				t.Fatal("stopped")
			}
			res := run.Finish(err)
			if got := brief(rec.All()); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if f, ok := res.Cause.(termination.Failed); !ok || f.Reason != termination.FailStreamError {
				t.Errorf("cause = %#v, want Failed{stream_error}", res.Cause)
			}
			if res.Tokens != tc.tokens {
				t.Errorf("tokens = %v, want %v", res.Tokens, tc.tokens)
			}
		})
	}
}

// The partial turn's prompt counts for a budget: run.Finish(err) alone
// would end the run with none counted, as a stream error.
func TestObserveStreamErrorBudget(t *testing.T) {
	for _, observe := range []bool{false, true} {
		t.Run(fmt.Sprint("observe=", observe), func(t *testing.T) {
			stage, _ := adaptertest.NewStage(t, "anthropic_test", "token_budget: {total: 500}")
			_, run := stage.Start(context.Background())
			m, err := anthropicstop.Accumulate(cutStream(sseStart+sseText), nil)
			if observe {
				if _, stop := anthropicstop.ObserveStreamError(run, &m, err); !stop {
					t.Error("the partial turn's 901 tokens did not stop a run with a budget of 500")
				}
			}
			res := run.Finish(err)
			var exhausted termination.BudgetExhausted
			if got := errors.As(res.Cause, &exhausted); got != observe {
				t.Errorf("cause = %#v; BudgetExhausted %v, want %v", res.Cause, got, observe)
			}
			if counted := res.Tokens.InputTokens == 900; counted != observe {
				t.Errorf("tokens = %v, counted %v, want %v", res.Tokens, counted, observe)
			}
		})
	}
}

// A nil run is told nothing; a nil partial message reports the error
// alone; a nil error reports the message as Observe does.
func TestObserveStreamErrorEdges(t *testing.T) {
	if _, stop := anthropicstop.ObserveStreamError(nil, nil, errors.New("x")); stop {
		t.Error("a nil run stopped")
	}
	stage, rec := adaptertest.NewStage(t, "anthropic_test", "max_iterations: 10")
	_, run := stage.Start(context.Background())
	anthropicstop.ObserveStreamError(run, nil, errors.New("connection reset"))
	done := anthropic.Message{ID: "msg_2", Model: "scripted", StopReason: anthropic.StopReasonEndTurn,
		Content: []anthropic.ContentBlockUnion{{Type: "text", Text: "42"}}}
	anthropicstop.ObserveStreamError(run, &done, nil)
	run.Finish(nil)
	want := []string{`error  "" {0 0} connection reset`, `final scripted "42" {0 0} `}
	if got := brief(rec.All()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// The streaming tool runner: a turn that fails midway is reported as the
// turn so far, with its tokens, then the error.
func TestAllStreamingCutTurn(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sseStart+sseText+sseOverloaded)
	}))
	defer srv.Close()
	c := anthropic.NewClient(option.WithBaseURL(srv.URL+"/"), option.WithAPIKey("test-key"),
		option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
	stage, rec := adaptertest.NewStage(t, "anthropic_test", "max_iterations: 10")
	ctx, run := stage.Start(context.Background())
	res, err := runnerLoop(ctx, run, c, true, "go")
	if err == nil {
		t.Fatal("the runner's turn did not fail")
	}
	var got []string
	for _, ev := range rec.All() {
		if ev.Kind != termination.KindError {
			got = append(got, brief([]termination.Event{ev})...)
		}
	}
	if want := []string{`message scripted "Let me" {900 1} `}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events but errors %q, want %q", got, want)
	}
	if res.Tokens != (termination.Usage{InputTokens: 900, OutputTokens: 1}) {
		t.Errorf("tokens = %v, want {900 1}", res.Tokens)
	}
	if f, ok := res.Cause.(termination.Failed); !ok || f.Reason != termination.FailStreamError {
		t.Errorf("cause = %#v, want Failed{stream_error}", res.Cause)
	}
}
