package anthropicstop_test

import (
	"testing"

	anthropicstop "github.com/agentstop/agentstop/adapters/anthropic"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/termination"
)

// TestBetaEventsCompaction: the tokens of a server-side compaction, which
// the beta API reports only in usage.iterations ("a compaction entry's
// tokens are not included in the top-level usage fields"), are counted
// with the turn's, so a token budget sees what the request spent. The
// message entries are the top-level usage itself and are not added again.
// The numbers are those of Anthropic's "Compaction at a token threshold"
// example.
func TestBetaEventsCompaction(t *testing.T) {
	const head = `{"id":"m","type":"message","role":"assistant","model":"claude","stop_reason":"end_turn",` +
		`"content":[{"type":"compaction","content":"Summary of the conversation: ..."},{"type":"text","text":"Based on our conversation"}],`
	tests := []struct {
		name, usage string
		want        termination.Usage
	}{{
		name: "compaction",
		usage: `"usage":{"input_tokens":23000,"output_tokens":1000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"iterations":[` +
			`{"type":"compaction","input_tokens":180000,"output_tokens":3500,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},` +
			`{"type":"message","input_tokens":23000,"output_tokens":1000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}]}`,
		want: termination.Usage{InputTokens: 203000, OutputTokens: 4500},
	}, {
		name: "compaction with cached input",
		usage: `"usage":{"input_tokens":20,"output_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":1000,"iterations":[` +
			`{"type":"compaction","input_tokens":100,"output_tokens":30,"cache_creation_input_tokens":0,"cache_read_input_tokens":5000},` +
			`{"type":"message","input_tokens":20,"output_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":1000}]}`,
		want: termination.Usage{InputTokens: 20 + 5 + 1000 + 100 + 5000, OutputTokens: 40},
	}, {
		name: "no compaction",
		usage: `"usage":{"input_tokens":23000,"output_tokens":1000,"iterations":[` +
			`{"type":"message","input_tokens":23000,"output_tokens":1000}]}`,
		want: termination.Usage{InputTokens: 23000, OutputTokens: 1000},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := adaptertest.DecodeEvents(head+tt.usage+`}`, anthropicstop.BetaEvents)
			check(t, got, err, []termination.Event{{Kind: termination.KindFinal, Source: "claude", Text: "Based on our conversation", Usage: tt.want, Model: "claude"}})
		})
	}
}
