package openaistop_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	openaistop "github.com/agentstop/agentstop/adapters/openai"
	"github.com/agentstop/agentstop/termination"
)

// sse returns a stream of chat completion chunks read from data lines, as
// the SDK reads a server's response.
func sse(chunks ...string) *ssestream.Stream[openai.ChatCompletionChunk] {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	res := &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(strings.NewReader(b.String())),
	}
	return ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(res), nil)
}

// TestAccumulate: a streamed completion is reported as the same completion
// delivered whole, its usage counted once, whichever way an
// OpenAI-compatible server streams the usage; a chunk the SDK's
// accumulator rejects is an error, never a silently shorter answer.
func TestAccumulate(t *testing.T) {
	const head = `{"id":"c1","object":"chat.completion.chunk","model":"m",`
	tests := []struct {
		name    string
		chunks  []string
		want    termination.Event
		wantErr string
	}{{
		name: "usage on a last chunk without choices (OpenAI, include_usage)",
		chunks: []string{
			head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"4"}}],"usage":null}`,
			head + `"choices":[{"index":0,"delta":{"content":"2"},"finish_reason":"stop"}],"usage":null}`,
			head + `"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`,
		},
		want: termination.Event{Kind: termination.KindFinal, Source: "m", Model: "m", Text: "42", Usage: termination.Usage{InputTokens: 9, OutputTokens: 2}},
	}, {
		name: "running totals on every chunk (vLLM continuous_usage_stats)",
		chunks: []string{
			head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"4"}}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`,
			head + `"choices":[{"index":0,"delta":{"content":"2"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`,
		},
		want: termination.Event{Kind: termination.KindFinal, Source: "m", Model: "m", Text: "42", Usage: termination.Usage{InputTokens: 9, OutputTokens: 2}},
	}, {
		name: "a chunk of another id (llama.cpp, Foundry Local)",
		chunks: []string{
			head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"4"}}]}`,
			`{"id":"c2","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"2"},"finish_reason":"stop"}],` +
				`"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`,
		},
		wantErr: `openaistop: chunk 2 was not accumulated: its id "c2" is not the completion's "c1" (the completion is incomplete)`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks := 0
			c, err := openaistop.Accumulate(sse(tt.chunks...), func(openai.ChatCompletionChunk) { chunks++ })
			if chunks != len(tt.chunks) {
				t.Errorf("onChunk saw %d chunks, want %d", chunks, len(tt.chunks))
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []termination.Event
			openaistop.Events(&c, func(ev termination.Event) { got = append(got, ev) })
			if len(got) != 1 || got[0].Kind != tt.want.Kind || got[0].Source != tt.want.Source || got[0].Model != tt.want.Model ||
				got[0].Text != tt.want.Text || got[0].Usage != tt.want.Usage {
				t.Errorf("events %+v, want one %+v", got, tt.want)
			}
		})
	}
}
