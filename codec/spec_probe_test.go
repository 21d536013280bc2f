package codec_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/termination"
)

// TestSpecProbeCaseSensitiveFields: JSON keys are case-sensitive, so "Text"
// or "Kind" are unknown top-level fields (ignored, §1) and "Input_Tokens"
// is an unknown usage key (an error), on the fast and the slow decoding
// path alike (an escaped string sends a line down the slow path).
func TestSpecProbeCaseSensitiveFields(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       termination.Event
		err        string
	}{
		{"Text is ignored", `{"kind":"message","text":"ok","Text":"TERMINATE"}`, termination.Event{Kind: termination.KindMessage, Text: "ok"}, ""},
		{"Text is ignored on the slow path", `{"kind":"message","text":"o\u006b","Text":"TERMINATE"}`, termination.Event{Kind: termination.KindMessage, Text: "ok"}, ""},
		{"Kind is ignored", `{"kind":"message","Kind":"final"}`, termination.Event{Kind: termination.KindMessage}, ""},
		{"Kind alone is a missing kind", `{"Kind":"message"}`, termination.Event{}, "missing kind"},
		{"an escaped exact key is the key", `{"\u006bind":"final"}`, termination.Event{Kind: termination.KindFinal}, ""},
		{"Usage is ignored", `{"kind":"message","Usage":{"input_tokens":7}}`, termination.Event{Kind: termination.KindMessage}, ""},
		{"Input_Tokens is an unknown usage key", `{"kind":"message","usage":{"Input_Tokens":7}}`, termination.Event{},
			`usage: unknown key "Input_Tokens"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := codec.NewDecoder(strings.NewReader(tc.line + "\n")).Next()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind != tc.want.Kind || got.Text != tc.want.Text || got.Usage != tc.want.Usage {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A live event and a replayed line with the same bad amount are rejected in
// the same words: the decoder checks amounts with termination's
// Event.Validate.
func TestValidateAndDecodeWordAmountsAlike(t *testing.T) {
	for _, tc := range []struct{ name, line, want string }{
		{"negative input tokens", `{"kind":"message","usage":{"input_tokens":-5}}`, "usage.input_tokens: must be >= 0, got -5"},
		{"negative output tokens", `{"kind":"message","usage":{"output_tokens":-1}}`, "usage.output_tokens: must be >= 0, got -1"},
		{"negative cost", `{"kind":"message","cost":-0.5}`, "cost: must be a finite amount >= 0, got -0.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev termination.Event
			if err := json.Unmarshal([]byte(tc.line), &ev); err != nil {
				t.Fatal(err)
			}
			live := ev.Validate()
			if live == nil || live.Error() != tc.want {
				t.Fatalf("Validate: %v, want %q", live, tc.want)
			}
			_, err := codec.DecodeEvent([]byte(tc.line))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeEvent: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
