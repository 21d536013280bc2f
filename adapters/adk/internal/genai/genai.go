// Package genai is a stand-in for the parts of google.golang.org/genai that
// ADK's events use, with the same names and shapes, so that the recipe in
// this module's README compiles unchanged against the real packages.
package genai

// Content is a message: a role and its parts.
type Content struct {
	Role  string
	Parts []*Part
}

// Part is one piece of a Content: text, a function call or its response.
type Part struct {
	Text             string
	Thought          bool
	FunctionCall     *FunctionCall
	FunctionResponse *FunctionResponse
}

// FunctionCall is a tool call requested by the model.
type FunctionCall struct {
	ID   string
	Name string
	Args map[string]any
}

// FunctionResponse is a tool's result.
type FunctionResponse struct {
	ID       string
	Name     string
	Response map[string]any
}

// GenerateContentResponseUsageMetadata is a response's token usage.
type GenerateContentResponseUsageMetadata struct {
	PromptTokenCount        int32
	CandidatesTokenCount    int32
	ThoughtsTokenCount      int32
	ToolUsePromptTokenCount int32
	CachedContentTokenCount int32
	TotalTokenCount         int32
}

// NewContentFromText returns a Content of one text part.
func NewContentFromText(text, role string) *Content {
	return &Content{Role: role, Parts: []*Part{{Text: text}}}
}
