package eino_test

import (
	"github.com/cloudwego/eino/components/model"

	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/termination"
)

// runawayModel returns the scripted model of ExampleForward: it calls the
// search tool on every turn, 50 input and 5 output tokens a turn (the
// conformance kit's runaway script). In your code it is your
// model.ToolCallingChatModel (one of eino-ext's models, say).
func runawayModel() model.ToolCallingChatModel {
	return &scriptedModel{script: adaptertest.Runaway}
}

// answeringModel returns the scripted model of ExampleHandler: it answers
// "Paris." at once, with 12 input and 2 output tokens.
func answeringModel() model.ToolCallingChatModel {
	return &scriptedModel{script: adaptertest.Script{Turns: []adaptertest.Turn{
		{Text: "Paris.", Usage: termination.Usage{InputTokens: 12, OutputTokens: 2}},
	}}}
}
