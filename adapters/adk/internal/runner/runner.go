// Package runner is a stand-in for an ADK runner driving one LLM agent: its
// Run has the shape of google.golang.org/adk/runner.Runner.Run (an
// iter.Seq2[*session.Event, error]) and its loop behaves like ADK's: model
// turn, function calls, function responses, again, until a response without
// calls; exit_loop escalates, transfer_to_agent transfers.
package runner

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/agentstop/agentstop/adapters/adk/internal/genai"
	"github.com/agentstop/agentstop/adapters/adk/internal/model"
	"github.com/agentstop/agentstop/adapters/adk/internal/session"
)

// LLM answers the i-th model call of an invocation.
type LLM func(ctx context.Context, i int) (*model.LLMResponse, error)

// Runner runs one agent.
type Runner struct {
	Agent     string
	Model     LLM
	Streaming bool // yield partial text chunks before each response

	mu    sync.Mutex
	calls int
}

// Calls returns how many times the model was called.
func (r *Runner) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// Run runs the agent on msg until it answers, fails, or ctx ends.
func (r *Runner) Run(ctx context.Context, userID, sessionID string, msg *genai.Content) iter.Seq2[*session.Event, error] {
	return func(yield func(*session.Event, error) bool) {
		for i := 0; ; i++ {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			r.mu.Lock()
			r.calls++
			r.mu.Unlock()
			resp, err := r.Model(ctx, i)
			if err != nil {
				yield(nil, err)
				return
			}
			if r.Streaming && resp.Content != nil {
				for _, p := range resp.Content.Parts {
					for _, w := range strings.SplitAfter(p.Text, " ") {
						if w == "" {
							continue
						}
						chunk := &session.Event{Author: r.Agent, LLMResponse: model.LLMResponse{Partial: true,
							Content: genai.NewContentFromText(w, "model")}}
						if !yield(chunk, nil) {
							return
						}
					}
				}
			}
			if !yield(&session.Event{Author: r.Agent, LLMResponse: *resp}, nil) {
				return
			}
			var calls []*genai.FunctionCall
			if resp.Content != nil {
				for _, p := range resp.Content.Parts {
					if p.FunctionCall != nil {
						calls = append(calls, p.FunctionCall)
					}
				}
			}
			if len(calls) == 0 {
				return
			}
			ev := &session.Event{Author: r.Agent, LLMResponse: model.LLMResponse{Content: &genai.Content{Role: "user"}}}
			for _, c := range calls {
				out := map[string]any{"result": "Paris is the capital of France."}
				switch c.Name {
				case "exit_loop":
					ev.Actions.Escalate, ev.Actions.SkipSummarization = true, true
					out = map[string]any{}
				case "transfer_to_agent":
					ev.Actions.TransferToAgent = fmt.Sprint(c.Args["agent_name"])
					out = map[string]any{}
				case "broken":
					out = map[string]any{"error": "backend down"}
				}
				ev.Content.Parts = append(ev.Content.Parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: c.ID, Name: c.Name, Response: out}})
			}
			if !yield(ev, nil) {
				return
			}
			if ev.Actions.Escalate || ev.Actions.TransferToAgent != "" {
				return
			}
		}
	}
}
