package anthropicstop_test

import (
	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentstop/agentstop/internal/adaptertest"
)

// runawayAPI starts the scripted Messages API of ExampleAll on 127.0.0.1:
// its model calls the search tool on every turn, 50 input and 5 output
// tokens a turn (the conformance kit's runaway script). It returns a client
// that talks to it only, and the server, which counts the requests; the
// caller closes the server. In your code the client is anthropic.NewClient()
// and talks to the real API.
func runawayAPI() (anthropic.Client, *adaptertest.Server) {
	s, err := api.Start(adaptertest.Runaway)
	if err != nil {
		panic("scripted Messages API: " + err.Error())
	}
	return client(s), s
}
