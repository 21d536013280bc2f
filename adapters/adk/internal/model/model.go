// Package model is a stand-in for google.golang.org/adk/model's
// LLMResponse, with the same names and shapes.
package model

import "github.com/agentstop/agentstop/adapters/adk/internal/genai"

// LLMResponse is a model response as ADK's events embed it.
type LLMResponse struct {
	Content       *genai.Content
	UsageMetadata *genai.GenerateContentResponseUsageMetadata
	// Partial marks a streamed chunk; the non-partial event that follows
	// carries the whole response.
	Partial      bool
	TurnComplete bool
	Interrupted  bool
	ErrorCode    string
	ErrorMessage string
}
