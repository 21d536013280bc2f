package backtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// benchCorpus writes the benchmark's corpus to dir: runs of real-sized
// events (about 1 KiB of code-like text and args each, escapes included,
// about one tool_call in three events), as a coding agent logs them. It
// returns the corpus's size in bytes.
func benchCorpus(tb testing.TB, dir string, runs, events int) int64 {
	tb.Helper()
	rng := rand.New(rand.NewPCG(6, 25))
	code := `func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if err := s.auth(r); err != nil {
		http.Error(w, "forbidden: \"token\" missing", http.StatusForbidden)
		return
	}
	for i, item := range s.items {	// walk the items
		fmt.Fprintf(w, "%d\t%s\n", i, item.Name)
	}
}
`
	var total int64
	for k := range runs {
		var b bytes.Buffer
		at := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
		for i := range events {
			at = at.Add(time.Duration(200+rng.IntN(3000)) * time.Millisecond)
			text := code[:rng.IntN(len(code)/2)] + strings.Repeat(code, 4)[:500+rng.IntN(400)]
			var ev termination.Event
			switch i % 3 {
			case 0:
				ev = termination.Event{Kind: termination.KindMessage, Source: "agent", Text: text, Model: "gpt-4o",
					Usage: termination.Usage{InputTokens: int64(2000 + rng.IntN(4000)), OutputTokens: int64(100 + rng.IntN(400))}, Cost: 0.002}
			case 1:
				args, _ := json.Marshal(map[string]string{"path": fmt.Sprintf("internal/server/handler_%d.go", rng.IntN(50)), "content": text})
				ev = termination.Event{Kind: termination.KindToolCall, Tool: "write_file", Args: args, CallID: fmt.Sprintf("call_%d", i)}
			default:
				ev = termination.Event{Kind: termination.KindToolResult, Tool: "write_file", CallID: fmt.Sprintf("call_%d", i-1), Text: text}
			}
			ev.Time = at
			line, err := json.Marshal(ev)
			if err != nil {
				tb.Fatal(err)
			}
			b.Write(line)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("run-%03d.jsonl", k)), b.Bytes(), 0o644); err != nil {
			tb.Fatal(err)
		}
		total += int64(b.Len())
	}
	return total
}

// benchPolicies returns n variants of the contract's full policy, with
// limits a normal run stays under (so that every policy evaluates the
// whole run, the costly case).
func benchPolicies(tb testing.TB, n int) []Policy {
	out := make([]Policy, n)
	for i := range n {
		text := fmt.Sprintf(`
max_iterations: {limit: %d, pressure: 0.8}
max_tool_calls: {limit: %d, per_tool: {bash: 40}}
timeout: %dh
token_budget: {total: %d000000, pressure: 0.8, grace: 1}
cost_budget: {limit: %d}
stall: {repeats: %d, window: 8, cycle: 3, same_result: true}
errors: {consecutive: 3, total: 10}
text_mention: {text: TERMINATE-%d}
function_call: [approve]
handoff: [user]
stop_message: true
`, 500+i, 500+i, 2+i, 10+i, 100+i, 4+i%3, i)
		p, err := termination.ParsePolicy(text)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = Policy{Name: fmt.Sprintf("p%d.yaml", i), Policy: p}
	}
	return out
}

// BenchmarkBacktest backtests a generated corpus of real-sized events
// (§6): policies=1 against policies=10 on one worker (the corpus is
// decoded once per run, so ten policies cost at most 3 × one), and
// workers=1 against workers=2 with one policy (two workers give at least
// 1.7 × the throughput of one). Bytes/s is the corpus's size over the
// time. It runs with the command's garbage-collector setting,
// BatchGCPercent.
func BenchmarkBacktest(b *testing.B) {
	// As the command runs (BatchGCPercent).
	defer debug.SetGCPercent(debug.SetGCPercent(BatchGCPercent))
	dir := b.TempDir()
	size := benchCorpus(b, dir, 24, 300)
	sources, err := find([]string{dir})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name     string
		policies int
		workers  int
	}{
		{"policies=1", 1, 1},
		{"policies=10", 10, 1},
		{"workers=1", 1, 1},
		{"workers=2", 1, 2},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := Config{Policies: benchPolicies(b, bc.policies), Workers: bc.workers}
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				rep, err := evaluate(context.Background(), sources, cfg)
				if err != nil {
					b.Fatal(err)
				}
				if rep.Outcomes[0].Result.Events != 300 {
					b.Fatalf("a policy stopped a run at event %d: the benchmark wants whole runs", rep.Outcomes[0].Result.Events)
				}
			}
		})
	}
}
