package genkitstop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
)

// call is one scripted tool call.
type call struct{ name, args string }

// turn is one scripted model response.
type turn struct {
	text          string
	calls         []call
	input, output int
	finish        ai.FinishReason
	served        string // the model the response names, as compat_oai does in Custom
}

// scripted is a genkit model, registered with genkit.DefineModel, that
// answers its n-th call with turns[n] (the last turn again once they run
// out, when repeat is set), streaming the text in two chunks when asked to.
// Its tools, registered with genkit.DefineTool, echo their input; "fail"
// fails.
type scripted struct {
	turns  []turn
	repeat bool

	mu    sync.Mutex
	calls int
}

// newGenkit returns a genkit instance with the scripted model "scripted/model"
// and the tools "search", "echo" and "fail". ctx bounds the instance (genkit.Init
// watches it for signals).
func newGenkit(ctx context.Context, repeat bool, turns ...turn) (*genkit.Genkit, *scripted) {
	g := genkit.Init(ctx)
	s := &scripted{turns: turns, repeat: repeat}
	genkit.DefineModel(g, "scripted/model", &ai.ModelOptions{
		Supports: &ai.ModelSupports{Tools: true, Multiturn: true, SystemRole: true},
	}, s.generate)
	for _, name := range []string{"search", "echo", "fail"} {
		genkit.DefineTool(g, name, "echoes its input", func(_ *ai.ToolContext, in map[string]any) (map[string]any, error) {
			if name == "fail" {
				return nil, fmt.Errorf("tool %s failed", name)
			}
			return in, nil
		})
	}
	return g, s
}

func (s *scripted) modelCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *scripted) generate(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	s.mu.Lock()
	n := s.calls
	s.calls++
	s.mu.Unlock()
	if n >= len(s.turns) && !s.repeat {
		return nil, fmt.Errorf("script exhausted")
	}
	tr := s.turns[min(n, len(s.turns)-1)]
	var parts []*ai.Part
	if tr.text != "" {
		parts = append(parts, ai.NewTextPart(tr.text))
		if cb != nil {
			half := len(tr.text) / 2
			for _, piece := range []string{tr.text[:half], tr.text[half:]} {
				if err := cb(ctx, &ai.ModelResponseChunk{Role: ai.RoleModel, Content: []*ai.Part{ai.NewTextPart(piece)}}); err != nil {
					return nil, err
				}
			}
		}
	}
	for i, c := range tr.calls {
		var in map[string]any
		if err := json.Unmarshal([]byte(c.args), &in); err != nil {
			return nil, err
		}
		parts = append(parts, ai.NewToolRequestPart(&ai.ToolRequest{Name: c.name, Input: in, Ref: fmt.Sprintf("call_%d_%d", n, i)}))
	}
	finish := tr.finish
	if finish == "" {
		finish = ai.FinishReasonStop
	}
	var custom any
	if tr.served != "" {
		// The shape of compat_oai's Custom (plugins/compat_oai/generate.go, genkit v1.4.0).
		custom = map[string]any{"systemFingerprint": "fp_1", "model": tr.served, "id": "chatcmpl-1"}
	}
	return &ai.ModelResponse{
		Custom:       custom,
		Request:      req,
		Message:      ai.NewModelMessage(parts...),
		FinishReason: finish,
		Usage:        &ai.GenerationUsage{InputTokens: tr.input, OutputTokens: tr.output},
	}, nil
}
