package termination_test

import (
	"testing"

	"github.com/agentstop/agentstop/termination"
)

// ParsePolicy and MustParsePolicy take the same argument: a string or a
// []byte.
func TestParsePolicyTextTypes(t *testing.T) {
	const src = "max_tool_calls: 3"
	fromString, err := termination.ParsePolicy(src)
	if err != nil {
		t.Fatal(err)
	}
	fromBytes, err := termination.ParsePolicy([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []termination.Policy{fromString, fromBytes, termination.MustParsePolicy(src), termination.MustParsePolicy([]byte(src))} {
		if got := p.Condition().String(); got != fromString.Condition().String() {
			t.Errorf("condition = %s, want %s", got, fromString.Condition().String())
		}
	}
	if _, err := termination.ParsePolicy("max_tool_calls: -1"); err == nil {
		t.Error("ParsePolicy(string) accepted max_tool_calls: -1")
	}
}
