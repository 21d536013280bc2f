package replay_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// Replay a recorded run against a policy: the agent repeats the same search,
// so the stall guard stops it on the third identical call.
func ExampleLog() {
	policy, err := termination.ParsePolicy([]byte(`
max_tool_calls: 10
stall: {repeats: 3}
text_mention: {text: TERMINATE}
`))
	if err != nil {
		panic(err)
	}
	log := `{"kind":"input","source":"user","text":"Find the CEO of Acme. Say TERMINATE when done."}
{"kind":"tool_call","tool":"search","args":{"q":"Acme CEO","limit":5}}
{"kind":"tool_result","tool":"search","text":"No results."}
{"kind":"tool_call","tool":"search","args":{"limit":5,"q":"Acme CEO"}}
{"kind":"tool_result","tool":"search","text":"No results."}
{"kind":"tool_call","tool":"search","args":{"q":"Acme CEO","limit":5.0}}
{"kind":"tool_result","tool":"search","text":"No results."}
`
	res, err := replay.Log(policy.Condition(), strings.NewReader(log))
	if err != nil {
		panic(err)
	}
	cause, _ := codec.MarshalCause(res.Cause)
	fmt.Println(res.Tag(), res.Outcome)
	fmt.Println(string(cause))
	fmt.Println("stopped at event", res.StoppedAt, "of", res.Events)
	// Output:
	// stall failed
	// {"$kind":"StallDetected","signal":"repeated_tool_call","repeats":3}
	// stopped at event 6 of 6
}

// Replay a log whose last line was cut off when the agent was killed.
// Strict, it is an error that says so; lenient, the events before the cut
// are evaluated and the result is marked truncated.
func ExampleWithLenient() {
	log := `{"kind":"input","text":"Find the CEO of Acme.","time":"2026-11-20T09:00:00Z"}
{"kind":"tool_call","tool":"search","args":{"q":"Acme CEO"},"time":"2026-11-20T09:00:02Z"}
{"kind":"tool_result","tool":"search","text":"no results","time":"2026-11-20T09:00:41Z"}
{"kind":"message","text":"Let me try ag`
	cond := termination.ToolCallLimits{Limit: 5}

	_, err := replay.Log(cond, strings.NewReader(log))
	fmt.Println(err)
	fmt.Println(errors.Is(err, codec.ErrTruncated))

	res, err := replay.Log(cond, strings.NewReader(log), replay.WithLenient())
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Tag(), res.Events, res.Duration, res.Truncated)
	// Output:
	// the log looks truncated at line 4: its last line ends inside an event, with no newline after it (was the agent stopped while writing?)
	// true
	// natural_completion 3 41s true
}

// Describe the events that made each run's cause, for people: describe is
// called once for each result, before the replay returns it, with the
// result and its evidence events in Evidence's order.
func ExampleWithEvidence() {
	log := `{"kind":"tool_call","run":"a","tool":"search","args":{"q":"Acme CEO"},"text":"searching for the CEO of Acme"}
{"kind":"tool_result","run":"a","tool":"search","text":"No results."}
{"kind":"tool_call","run":"b","tool":"fetch","args":{"url":"https://acme.example"}}
{"kind":"tool_call","run":"a","tool":"search","args":{"q":"Acme CEO"}}
{"kind":"final","run":"b","text":"Jane Roe"}
`
	policy := termination.MustParsePolicy("stall: {repeats: 2}")
	describe := func(res termination.Result, events []replay.EvidenceEvent) {
		fmt.Println("run", res.Run, res.Tag())
		for _, x := range events {
			fmt.Printf("  #%d %s %s %q\n", x.At, x.Kind, x.Tool, x.Text)
		}
	}
	results, _, err := replay.NewRunner(&policy, replay.WithEvidence(describe)).Log(strings.NewReader(log))
	if err != nil {
		panic(err)
	}
	fmt.Println(len(results), "results")
	// Output:
	// run a stall
	//   #1 tool_call search "searching for the CEO of Acme"
	//   #3 tool_call search ""
	// run b natural_completion
	// 2 results
}
