package codec_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentstop/agentstop/codec"
)

// Read an event log line by line. A bad line is a *DecodeError that names
// the line, the field and the form the field must have.
func ExampleDecoder() {
	log := "\uFEFF" + // a byte-order mark at the start of the file is skipped
		`{"kind":"message","source":"assistant","model":"gpt-5","usage":{"input_tokens":120,"output_tokens":40}}
{"kind":"tool_call","tool":"search","call_id":"call_1","args":{"q":"Acme CEO"}}

{"kind":"message","usage":{"input_token":90}}
`
	dec := codec.NewDecoder(strings.NewReader(log))
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(err)
			break
		}
		fmt.Println(dec.Line(), ev.Kind, ev.Model, ev.CallID, ev.Usage.Total())
	}
	// Output:
	// 1 message gpt-5  160
	// 2 tool_call  call_1 0
	// line 4: usage: unknown key "input_token" (want input_tokens or output_tokens)
}
