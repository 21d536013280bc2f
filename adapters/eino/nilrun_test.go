package eino_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/agentstop/agentstop/adapters/eino"
)

// TestHandlerNilRun: a Handler of a nil run reports nothing, Finish
// included, as its callbacks already do, instead of panicking at the end.
func TestHandlerNilRun(t *testing.T) {
	ctx := context.Background()
	h := eino.NewHandler(nil)
	h.OnEnd(ctx, &callbacks.RunInfo{Component: components.ComponentOfChatModel}, &model.CallbackOutput{Message: schema.AssistantMessage("42", nil)})
	h.OnError(ctx, &callbacks.RunInfo{Component: components.ComponentOfTool, Name: "search"}, errors.New("boom"))
	if res := h.Finish(nil); res.Cause != nil || res.Iterations != 0 {
		t.Errorf("Finish of a nil run = %+v, want the zero result", res)
	}
}
