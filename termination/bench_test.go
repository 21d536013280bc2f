package termination

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/agentstop/agentstop/internal/benchlog"
)

const benchEvents = 10_000

// BenchmarkEvaluate is the evaluating half of replay's BenchmarkReplay:
// decoded events through an Evaluator, per event.
func BenchmarkEvaluate(b *testing.B) {
	var events []Event
	for _, line := range bytes.Split(bytes.TrimSpace(benchlog.ReAct(benchEvents)), []byte("\n")) {
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			b.Fatal(err)
		}
		events = append(events, e)
	}
	cond := MustParsePolicy(benchlog.Policy).Condition()
	b.ReportAllocs()
	for b.Loop() {
		ev := NewEvaluator(cond, time.Time{})
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
	cond := MustParsePolicy(benchlog.Policy).Condition()
	var events []Event
	for i := range 24 { // 24 different calls and texts: no stall within a window of 8
		tool := []string{"web_search", "fetch_page", "calculator"}[i%3]
		events = append(events,
			msg("assistant", fmt.Sprintf("%s, step %d", tool, i)).used(int64(900+100*(i%3)), 40).costs(0.001),
			call(tool, fmt.Sprintf(`{"query":"x","limit":5,"page":%d}`, i)),
			result(tool, "").withText("ok"))
	}
	ev := NewEvaluator(cond, time.Time{})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, stop := ev.Observe(events[i%len(events)]); stop {
			b.Fatalf("stopped at event %d: %v", i, ev.Result().Cause)
		}
		i++
		if i == 240_000 { // under max_iterations: 100000
			ev, i = NewEvaluator(cond, time.Time{}), 0
		}
	}
}
