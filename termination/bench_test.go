package termination

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// benchLog is a generated JSON Lines log of n events shaped like a ReAct run:
// message, tool_call, tool_result, with usage, cost and times.
func benchLog(n int) []byte {
	var buf bytes.Buffer
	tools := []string{"web_search", "fetch_page", "calculator"}
	for i := 0; i < n; i++ {
		ts := t0.Add(time.Duration(i) * 1500 * time.Millisecond).Format(time.RFC3339Nano)
		tool := tools[i/3%len(tools)]
		switch i % 3 {
		case 0:
			fmt.Fprintf(&buf, `{"kind":"message","source":"assistant","model":"gpt-5","text":"Step %d: I will use %s to check the next fact.","usage":{"input_tokens":%d,"output_tokens":%d},"cost":0.0012,"time":%q}`+"\n",
				i/3, tool, 900+i%97, 40+i%13, ts)
		case 1:
			fmt.Fprintf(&buf, `{"kind":"tool_call","source":"assistant","tool":%q,"call_id":"call_%d","args":{"query":"fact number %d","limit":5,"lang":["en","fr"]},"time":%q}`+"\n",
				tool, i/3, i/3, ts)
		default:
			fmt.Fprintf(&buf, `{"kind":"tool_result","source":%q,"tool":%q,"call_id":"call_%d","text":"Result for fact %d: 42 (source: example.org)","time":%q}`+"\n",
				tool, tool, i/3, i/3, ts)
		}
	}
	return buf.Bytes()
}

// benchPolicy never fires on benchLog, so every event is decoded and
// evaluated by every condition.
const benchPolicy = `
max_iterations: {limit: 100000, pressure: 0.8}
max_tool_calls: {limit: 100000, pressure: 0.8, per_tool: {search: 100000}}
timeout: 1000h
token_budget: {total: 1000000000, pressure: 0.8, grace: 1}
cost_budget: {limit: 1000000, pressure: 0.9}
stall: {repeats: 3, window: 8, warn_at: 2, cycle: 3, token_tolerance: 0.0001}
errors: {consecutive: 3, total: 100}
text_mention: {text: TERMINATE, sources: [critic]}
function_call: [approve]
handoff: [user]
source_match: [critic]
stop_message: true
`

const benchEvents = 10_000

// BenchmarkReplay decodes and evaluates a 10k-event log per iteration.
func BenchmarkReplay(b *testing.B) {
	benchReplay(b, benchLog(benchEvents), benchEvents)
}

// benchReplay replays log, of n events, under benchPolicy once an
// iteration, failing b unless it reads all n without firing, and reports
// MB/s and events/s.
func benchReplay(b *testing.B, log []byte, n int) {
	b.Helper()
	cond := MustParsePolicy(benchPolicy).Condition()
	b.SetBytes(int64(len(log)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := Replay(cond, bytes.NewReader(log))
		if err != nil || res.Events != n {
			b.Fatalf("replay: %v, %d events (%v)", err, res.Events, res.Cause)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkDecode is the decoding half of BenchmarkReplay.
func BenchmarkDecode(b *testing.B) {
	log := benchLog(benchEvents)
	b.SetBytes(int64(len(log)))
	b.ReportAllocs()
	for b.Loop() {
		d := NewDecoder(bytes.NewReader(log))
		for {
			if _, err := d.Next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkEvaluate is the evaluating half: decoded events through an
// Evaluator, per event.
func BenchmarkEvaluate(b *testing.B) {
	var events []Event
	d := NewDecoder(bytes.NewReader(benchLog(benchEvents)))
	for {
		e, err := d.Next()
		if err != nil {
			break
		}
		events = append(events, e)
	}
	cond := MustParsePolicy(benchPolicy).Condition()
	b.ReportAllocs()
	for b.Loop() {
		ev := NewEvaluator(cond, EventClock)
		for i := range events {
			ev.Observe(events[i])
		}
	}
	b.ReportMetric(float64(len(events))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkObserve reports the per-event cost and allocations of Observe
// alone. The events rotate tools, texts and usage so that no condition
// fires; the evaluator is renewed before its budgets could run out.
func BenchmarkObserve(b *testing.B) {
	cond := MustParsePolicy(benchPolicy).Condition()
	var events []Event
	for i := range 24 { // 24 different calls and texts: no stall within a window of 8
		tool := []string{"web_search", "fetch_page", "calculator"}[i%3]
		events = append(events,
			msg("assistant", fmt.Sprintf("%s, step %d", tool, i)).used(int64(900+100*(i%3)), 40).costs(0.001),
			call(tool, fmt.Sprintf(`{"query":"x","limit":5,"page":%d}`, i)),
			result(tool, "").withText("ok"))
	}
	ev := NewEvaluator(cond, EventClock)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, stop := ev.Observe(events[i%len(events)]); stop {
			b.Fatalf("stopped at event %d: %v", i, ev.Result().Cause)
		}
		i++
		if i == 240_000 { // under max_iterations: 100000
			ev, i = NewEvaluator(cond, EventClock), 0
		}
	}
}
