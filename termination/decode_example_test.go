package termination_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentstop/agentstop/termination"
)

// Read an event log line by line. A bad line is a *DecodeError that names
// the line, the field and the form the field must have.
func ExampleDecoder() {
	log := "\uFEFF" + // a byte-order mark at the start of the file is skipped
		`{"kind":"message","source":"assistant","model":"gpt-5","usage":{"input_tokens":120,"output_tokens":40}}
{"kind":"tool_call","tool":"search","call_id":"call_1","args":{"q":"Acme CEO"}}

{"kind":"message","usage":{"input_token":90}}
`
	dec := termination.NewDecoder(strings.NewReader(log))
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

// Replay a log whose last line was cut off when the agent was killed.
// Strict, it is an error that says so; lenient, the events before the cut
// are evaluated and the result is marked truncated.
func ExampleReplayWith() {
	log := `{"kind":"input","text":"Find the CEO of Acme.","time":"2026-11-20T09:00:00Z"}
{"kind":"tool_call","tool":"search","args":{"q":"Acme CEO"},"time":"2026-11-20T09:00:02Z"}
{"kind":"tool_result","tool":"search","text":"no results","time":"2026-11-20T09:00:41Z"}
{"kind":"message","text":"Let me try ag`
	cond := termination.MaxToolCalls(5)

	_, err := termination.Replay(cond, strings.NewReader(log))
	fmt.Println(err)
	fmt.Println(errors.Is(err, termination.ErrTruncated))

	res, err := termination.ReplayWith(cond, strings.NewReader(log), termination.WithLenient())
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Tag(), res.Events, res.Duration, res.Truncated)
	// Output:
	// the log looks truncated at line 4: its last line ends inside an event, with no newline after it (was the agent stopped while writing?)
	// true
	// natural_completion 3 41s true
}
