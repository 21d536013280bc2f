package genkitstop_test

import (
	"context"

	"github.com/firebase/genkit/go/genkit"
)

// runawayGenkit returns the genkit instance of Example: its model
// "scripted/model" calls the search tool on every turn, 120 input and 15
// output tokens a turn, and its tool "search" echoes its input. It returns
// the model too, which counts its calls. In your code the instance is
// genkit.Init(ctx, genkit.WithPlugins(...)) with your model plugin, and
// your tools come from genkit.DefineTool.
func runawayGenkit(ctx context.Context) (*genkit.Genkit, *scripted) {
	return newGenkit(ctx, true, turn{calls: []call{{"search", `{"q":"agentstop"}`}}, input: 120, output: 15})
}
