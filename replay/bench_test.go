package replay_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/internal/benchlog"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

const benchEvents = 10_000

// BenchmarkReplay decodes and evaluates a 10k-event log per iteration.
func BenchmarkReplay(b *testing.B) {
	benchReplay(b, benchlog.ReAct(benchEvents), benchEvents)
}

// benchReplay replays log, of n events, under benchlog.Policy once an
// iteration, failing b unless it reads all n without firing, and reports
// MB/s and events/s.
func benchReplay(b *testing.B, log []byte, n int) {
	b.Helper()
	cond := termination.MustParsePolicy(benchlog.Policy).Condition()
	b.SetBytes(int64(len(log)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := replay.Log(cond, bytes.NewReader(log))
		if err != nil || res.Events != n {
			b.Fatalf("replay: %v, %d events (%v)", err, res.Events, res.Cause)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

const realSizedEvents = 3000

// BenchmarkReplayRealSized is replay (decode and evaluate, the full policy
// with text_mention) of real-sized events: about 1 KiB of code-like text or
// args each, escapes and non-ASCII included. It reports MB/s (contract §6:
// at least 400 per core) and events/s.
func BenchmarkReplayRealSized(b *testing.B) {
	benchReplay(b, benchlog.RealSized(realSizedEvents), realSizedEvents)
}

// TestRealSizedLog: the corpus is what the benchmark says: about 1 KiB of
// text or args an event, with escapes and non-ASCII, decoded as written,
// and no condition fires on it.
func TestRealSizedLog(t *testing.T) {
	log := benchlog.RealSized(300)
	lines := bytes.Split(bytes.TrimSuffix(log, []byte("\n")), []byte("\n"))
	if len(lines) != 300 {
		t.Fatalf("%d lines", len(lines))
	}
	if avg := len(log) / len(lines); avg < 1024 || avg > 2048 {
		t.Errorf("%d bytes an event, want about 1 KiB of content each", avg)
	}
	for _, esc := range []string{`\n`, `\t`, `\"`, `\\`, `\u003c`, `\u00e9`, "é", "日本語"} {
		if !bytes.Contains(log, []byte(esc)) {
			t.Errorf("the corpus has no %s", esc)
		}
	}
	d := codec.NewDecoder(bytes.NewReader(log))
	for i := range 3 {
		ev, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := json.Unmarshal(lines[i], &want); err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case termination.KindMessage, termination.KindToolResult:
			if ev.Text != want["text"] || len(ev.Text) < 1024 {
				t.Errorf("event %d: text decoded as %q", i+1, ev.Text)
			}
		case termination.KindToolCall:
			var args map[string]any
			if err := json.Unmarshal(ev.Args, &args); err != nil || args["content"] != want["args"].(map[string]any)["content"] {
				t.Errorf("event %d: args decoded as %s", i+1, ev.Args)
			}
		}
	}
	res, err := replay.Log(termination.MustParsePolicy(benchlog.Policy).Condition(), bytes.NewReader(log))
	if err != nil || res.Events != 300 || res.StoppedAt != 0 {
		t.Fatalf("replay: %v, %d events, stopped at %d (%v)", err, res.Events, res.StoppedAt, res.Cause)
	}
}

// TestReplayHashesArgsWhileDecoding: replay hashes tool calls' args from
// the raw bytes as it decodes them; canonically equal args still match
// whatever their escapes, key order and number forms, including args the
// decoder leaves to be hashed later (duplicate keys).
func TestReplayHashesArgsWhileDecoding(t *testing.T) {
	cond := termination.MustParsePolicy("stall: {repeats: 4}").Condition()
	log := `{"kind":"tool_call","tool":"grep","args":{"q":"é\n","n":1}}
{"kind":"tool_call","tool":"grep","args":{"n":1.0,"q":"\u00e9\u000a"}}
{"kind":"tool_call","tool":"grep","args":{ "q" : "\u00E9\n" , "n" : 1e0 }}
{"kind":"tool_call","tool":"grep","args":{"q":"x","n":1,"q":"é\n"}}
`
	res, err := replay.Log(cond, strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedAt != 4 || res.Tag() != termination.TagStall {
		t.Fatalf("stopped at %d with %v, want a stall at 4", res.StoppedAt, res.Cause)
	}
	different := strings.Replace(log, `"q":"é\n"}}`, `"q":"e\n"}}`, 1)
	if res, err := replay.Log(cond, strings.NewReader(different)); err != nil || res.StoppedAt != 0 {
		t.Fatalf("different args: stopped at %d with %v (%v)", res.StoppedAt, res.Cause, err)
	}
}
