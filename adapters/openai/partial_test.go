package openaistop_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	openaistop "github.com/agentstop/agentstop/adapters/openai"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/termination"
)

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

// cutSSE returns a stream of chat completion chunks whose connection is
// lost after the given data lines (no [DONE]).
func cutSSE(lines ...string) *ssestream.Stream[openai.ChatCompletionChunk] {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("data: " + l + "\n\n")
	}
	res := &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(cutReader{strings.NewReader(b.String())}),
	}
	return ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(res), nil)
}

func brief(evs []termination.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %s %q %v %s", ev.Kind, ev.Model, ev.Text, ev.Usage, ev.Err))
	}
	return out
}

// A stream that fails midway: Accumulate returns the partial completion
// with the error, and ObserveStreamError reports it as a message (never a
// final) with the tokens it holds, then the error; run.Finish(err) then
// ends the run with those tokens counted.
func TestObserveStreamError(t *testing.T) {
	const head = `{"id":"c1","object":"chat.completion.chunk","model":"m",`
	first := head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"4"}}],"usage":null}`
	for _, tc := range []struct {
		name   string
		lines  []string
		want   []string
		tokens termination.Usage
	}{{
		name:   "running totals on every chunk (vLLM continuous_usage_stats)",
		lines:  []string{head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"4"}}],"usage":{"prompt_tokens":900,"completion_tokens":1,"total_tokens":901}}`},
		want:   []string{`message m "4" {900 1} `, `error  "" {0 0} unexpected EOF`},
		tokens: termination.Usage{InputTokens: 900, OutputTokens: 1},
	}, {
		name:  "usage on the last chunk (OpenAI): none before it",
		lines: []string{first},
		want:  []string{`message m "4" {0 0} `, `error  "" {0 0} unexpected EOF`},
	}, {
		name:  "an error event mid-stream",
		lines: []string{first, `{"error":{"message":"overloaded","type":"server_error"}}`},
		want:  []string{`message m "4" {0 0} `, `error  "" {0 0} received error while streaming: {"message":"overloaded","type":"server_error"}`},
	}, {
		name: "a tool call cut off is not a tool_call",
		lines: []string{head + `"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function",` +
			`"function":{"name":"search","arguments":"{\"q\":"}}]}}],"usage":{"prompt_tokens":50,"completion_tokens":3,"total_tokens":53}}`},
		want:   []string{`message m "" {50 3} `, `error  "" {0 0} unexpected EOF`},
		tokens: termination.Usage{InputTokens: 50, OutputTokens: 3},
	}, {
		name: "failed before the first chunk",
		want: []string{`error  "" {0 0} unexpected EOF`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			stage, rec := adaptertest.NewStage(t, "openai_test", "max_iterations: 10")
			_, run := stage.Start(context.Background())
			c, err := openaistop.Accumulate(cutSSE(tc.lines...), nil)
			if err == nil {
				t.Fatal("Accumulate of a cut stream returned no error")
			}
			if _, stop := openaistop.ObserveStreamError(run, &c, err); stop {
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

// The partial turn's tokens count for a budget: run.Finish(err) alone
// would end the run with none counted, as a stream error.
func TestObserveStreamErrorBudget(t *testing.T) {
	const chunk = `{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"4"}}],` +
		`"usage":{"prompt_tokens":900,"completion_tokens":1,"total_tokens":901}}`
	for _, observe := range []bool{false, true} {
		t.Run(fmt.Sprint("observe=", observe), func(t *testing.T) {
			stage, _ := adaptertest.NewStage(t, "openai_test", "token_budget: {total: 500}")
			_, run := stage.Start(context.Background())
			c, err := openaistop.Accumulate(cutSSE(chunk), nil)
			if observe {
				if _, stop := openaistop.ObserveStreamError(run, &c, err); !stop {
					t.Error("the partial turn's 901 tokens did not stop a run with a budget of 500")
				}
			}
			res := run.Finish(err)
			var exhausted termination.BudgetExhausted
			if got := errors.As(res.Cause, &exhausted); got != observe {
				t.Errorf("cause = %#v; BudgetExhausted %v, want %v", res.Cause, got, observe)
			}
			if want := (res.Tokens.InputTokens == 900); want != observe {
				t.Errorf("tokens = %v, counted %v, want %v", res.Tokens, want, observe)
			}
		})
	}
}

// A nil run is told nothing; a nil partial completion reports the error
// alone; a nil error reports the completion as Observe does.
func TestObserveStreamErrorEdges(t *testing.T) {
	if _, stop := openaistop.ObserveStreamError(nil, nil, errors.New("x")); stop {
		t.Error("a nil run stopped")
	}
	stage, rec := adaptertest.NewStage(t, "openai_test", "max_iterations: 10")
	_, run := stage.Start(context.Background())
	openaistop.ObserveStreamError(run, nil, errors.New("connection reset"))
	done := openai.ChatCompletion{ID: "c2", Model: "m", Choices: []openai.ChatCompletionChoice{{Message: openai.ChatCompletionMessage{Content: "42"}, FinishReason: "stop"}}}
	openaistop.ObserveStreamError(run, &done, nil)
	run.Finish(nil)
	want := []string{`error  "" {0 0} connection reset`, `final m "42" {0 0} `}
	if got := brief(rec.All()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %q, want %q", got, want)
	}
}
