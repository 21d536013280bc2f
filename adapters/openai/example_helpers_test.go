package openaistop_test

import (
	"github.com/openai/openai-go/v3"

	"github.com/agentstop/agentstop/internal/adaptertest"
)

// runawayAPI starts the scripted Chat Completions API of Example on
// 127.0.0.1: its model calls the search tool on every turn, 50 input and 5
// output tokens a turn (the conformance kit's runaway script). It returns a
// client that talks to it only, and the server, which counts the requests;
// the caller closes the server. In your code the client is
// openai.NewClient() and talks to the real API.
func runawayAPI() (openai.Client, *adaptertest.Server) {
	s, err := api.Start(adaptertest.Runaway)
	if err != nil {
		panic("scripted Chat Completions API: " + err.Error())
	}
	return client(s), s
}

// runawayResponsesAPI is [runawayAPI] for the Responses API: its model
// calls the search tool on every turn, 50 input and 5 output tokens a turn.
func runawayResponsesAPI() (openai.Client, *adaptertest.Server) {
	s, err := responsesAPI.Start(adaptertest.Runaway)
	if err != nil {
		panic("scripted Responses API: " + err.Error())
	}
	return client(s), s
}
