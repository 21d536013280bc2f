package eventlog

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/internal/testutil"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const policyText = `
max_tool_calls: 6
stall: {repeats: 3, same_result: true}
token_budget: {total: 5000}
errors: {consecutive: 3}
`

// loop is a recorded agent loop: a task, then turns that search, the same
// search three times at the end, with the same result but for loop 0,
// whose results differ (it runs to its final answer).
func loop(i int) []termination.Event {
	evs := []termination.Event{{Kind: termination.KindInput, Source: "user", Text: fmt.Sprintf("task %d", i)}}
	for k := range 5 {
		q := fmt.Sprintf(`{"q": "step %d"}`, k)
		if k >= 2 {
			q = `{"q":"same"}` // written differently from the others: compared canonically
		}
		evs = append(evs,
			termination.Event{Kind: termination.KindMessage, Source: "agent", Text: fmt.Sprintf("thinking %d", k), Usage: termination.Usage{InputTokens: 100 * int64(i+1), OutputTokens: 10}},
			termination.Event{Kind: termination.KindToolCall, Tool: "search", Args: []byte(q), CallID: fmt.Sprintf("c%d", k)},
			termination.Event{Kind: termination.KindToolResult, Tool: "search", CallID: fmt.Sprintf("c%d", k), Text: "result " + strings.Repeat("x", min(k, 2+k*(1-min(i, 1))))},
		)
	}
	return append(evs, termination.Event{Kind: termination.KindFinal, Source: "agent", Text: "done"})
}

// recordRuns runs three runs through a stage that records to a Writer,
// their events interleaved (one event of each in turn, as concurrent runs
// log them); the third is a child of the first. It returns the live
// results by run id.
func recordRuns(t *testing.T, path string, opts ...Option) map[string]termination.Result {
	t.Helper()
	w, err := New(path, opts...)
	require.NoError(t, err)
	stage, err := middleware.New("recorded", middleware.WithPolicy(termination.MustParsePolicy(policyText)), middleware.WithParticipant(w))
	require.NoError(t, err)
	ctx0, first := stage.Start(context.Background())
	_, second := stage.Start(context.Background())
	_, child := stage.Start(ctx0)
	runs := []*middleware.Run{first, second, child}
	stopped := make([]bool, len(runs))
	for k := range len(loop(0)) {
		for i, run := range runs {
			if !stopped[i] {
				_, stopped[i] = run.Observe(loop(i)[k])
			}
		}
	}
	live := map[string]termination.Result{}
	for _, run := range runs {
		live[run.ID()] = run.Finish(nil)
	}
	require.NoError(t, w.Close())
	require.NoError(t, w.Close(), "Close is idempotent")
	assert.Zero(t, w.Dropped())
	return live
}

// TestReplayGivesTheLiveResult: replaying the recorded log gives each live
// run's result, with and without content.
func TestReplayGivesTheLiveResult(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{{"with content", nil}, {"without content", []Option{WithoutContent()}}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			live := recordRuns(t, path, tc.opts...)
			events := testutil.DecodeFile(t, path)
			policy := termination.MustParsePolicy(policyText)
			replayed := replay.Runs(&policy, events)
			require.Len(t, replayed, 3)
			tags := map[string]int{}
			for _, res := range live {
				tags[res.Tag()]++
			}
			require.Equal(t, map[string]int{"stall": 2, "natural_completion": 1}, tags,
				"two runs stop on their repeated result, the child before its parent completes")
			children := 0
			for _, got := range replayed {
				if got.Parent != "" {
					children++
					assert.Contains(t, live, got.Parent, "the parent is a live run of the log")
				}
			}
			assert.Equal(t, 1, children, "the child's parent link is in the log")
			for _, got := range replayed {
				want, ok := live[got.Run]
				require.True(t, ok, "run %s is a live run", got.Run)
				assert.Equal(t, want.Parent, got.Parent, "parent")
				assert.Equal(t, want.Cause, got.Cause, got.Run)
				assert.Equal(t, want.Fired, got.Fired)
				assert.Equal(t, want.Warnings, got.Warnings)
				assert.Equal(t, want.StoppedAt, got.StoppedAt)
				assert.Equal(t, want.Events, got.Events)
				assert.Equal(t, want.Iterations, got.Iterations)
				assert.Equal(t, want.ToolCalls, got.ToolCalls)
				assert.Equal(t, want.Tokens, got.Tokens)
				assert.Equal(t, want.Evidence, got.Evidence)
			}
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			if tc.opts != nil {
				for _, secret := range []string{"task 1", "thinking", `"q"`, "result x", `"text"`, `"args"`} {
					assert.NotContains(t, string(data), secret)
				}
				assert.Contains(t, string(data), `"args_hash"`)
				assert.Contains(t, string(data), `"text_hash"`)
			} else {
				assert.Contains(t, string(data), `"text":"thinking 0"`)
			}
		})
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	w, err := New(path, WithMaxBytes(400), WithMaxFiles(2))
	require.NoError(t, err)
	_, rec := w.startRun(context.Background(), middleware.RunInfo{RunID: "r1"})
	for k := range 20 {
		ev := termination.Event{Kind: termination.KindMessage, Text: fmt.Sprintf("message %02d", k), Time: time.Date(2026, 11, 24, 9, 0, k, 0, time.UTC)}
		rec.Event(&ev)
	}
	require.NoError(t, w.Close())
	files, err := filepath.Glob(path + "*")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{path, path + ".1", path + ".2"}, files, "two rotated files are kept")
	var lines []string
	for _, f := range []string{path + ".2", path + ".1", path} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(b), 400)
		assert.True(t, bytes.HasSuffix(b, []byte("\n")), "lines are never split")
		lines = append(lines, strings.Split(strings.TrimSpace(string(b)), "\n")...)
	}
	// The newest files hold the last events, in order.
	assert.Contains(t, lines[len(lines)-1], "message 19")
	for i := 1; i < len(lines); i++ {
		assert.Less(t, lines[i-1], lines[i])
	}
	assert.Contains(t, lines[0], `"run":"r1"`)
}

// TestDropsNeverBlock fills the buffer while nothing writes: the events
// beyond it are dropped at once, counted on the metric and reported.
func TestDropsNeverBlock(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	handled := captureHandled(t)

	path := filepath.Join(t.TempDir(), "events.jsonl")
	w, err := newWriter(path, []Option{WithBuffer(2), WithMeterProvider(mp)})
	require.NoError(t, err)
	_, rec := w.startRun(context.Background(), middleware.RunInfo{RunID: "r", ParentRunID: "p"})
	start := time.Now()
	for k := range 5 {
		ev := termination.Event{Kind: termination.KindToolCall, Tool: "t", Args: []byte(fmt.Sprintf(`{"k":%d}`, k))}
		rec.Event(&ev)
	}
	assert.Less(t, time.Since(start), time.Second, "Event never waits")
	assert.Equal(t, int64(3), w.Dropped())
	go w.loop()
	for len(w.queue) > 0 {
		time.Sleep(time.Millisecond)
	}
	// Room again: the next event says how many of its run's were lost.
	ev := termination.Event{Kind: termination.KindMessage, Text: "after the drops"}
	rec.Event(&ev)
	require.NoError(t, w.Close())

	events := testutil.DecodeFile(t, path)
	require.Len(t, events, 3, "what was buffered is written")
	assert.Equal(t, "p", events[0].Logged().Parent)
	assert.JSONEq(t, `{"k":1}`, string(events[1].Args), "args were copied when recorded")
	assert.Equal(t, "after the drops", events[2].Text)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	assert.NotContains(t, lines[1], "dropped")
	assert.True(t, strings.HasSuffix(lines[2], `,"dropped":3}`), lines[2])

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	sum := rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Sum[int64])
	assert.Equal(t, "agentstop.eventlog.dropped", rm.ScopeMetrics[0].Metrics[0].Name)
	assert.Equal(t, int64(3), sum.DataPoints[0].Value)
	assert.Contains(t, strings.Join(handled(), "\n"), "eventlog: dropped 3 events")

	// After Close, events are dropped, not written.
	ev = termination.Event{Kind: termination.KindMessage}
	rec.Event(&ev)
	assert.Equal(t, int64(4), w.Dropped())
}

func TestOptions(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		opt Option
		err string
	}{
		{WithMaxBytes(0), "WithMaxBytes: 0: want a positive number of bytes"},
		{WithMaxFiles(0), "WithMaxFiles: 0: want at least 1"},
		{WithBuffer(-1), "WithBuffer: -1: want a positive number of events"},
	} {
		_, err := New(filepath.Join(dir, "x.jsonl"), tc.opt)
		assert.ErrorContains(t, err, tc.err)
	}
	_, err := New("")
	assert.ErrorContains(t, err, "empty path")
	_, err = New(filepath.Join(dir, "missing", "x.jsonl"))
	assert.ErrorContains(t, err, "cannot open the log")
	w, err := New(filepath.Join(dir, "ok.jsonl"), nil, WithMeterProvider(nil))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "ok.jsonl"), w.Path())
	require.NoError(t, w.Close())
}

// TestHideContent pins the fields a log without content keeps.
func TestHideContent(t *testing.T) {
	ev := termination.Event{Kind: termination.KindToolResult, Tool: "bash", Text: " out ", Err: "exit 1"}
	hideContent(&ev)
	assert.Equal(t, termination.Event{Kind: termination.KindToolResult, Tool: "bash", Err: "error", Log: &termination.LogFields{TextHash: codec.ResultHash("out", "exit 1")}}, ev)
	ev = termination.Event{Kind: termination.KindToolCall, Tool: "bash", Args: []byte(`{"b":1, "a":2}`)}
	hideContent(&ev)
	assert.Equal(t, codec.ArgsHash([]byte(`{"a":2,"b":1}`)), ev.Logged().ArgsHash)
	assert.Nil(t, ev.Args)
	ev = termination.Event{Kind: termination.KindMessage, Text: "hi"}
	hideContent(&ev)
	assert.Equal(t, codec.TextHash("hi"), ev.Logged().TextHash)
	assert.Empty(t, ev.Text)
}

// TestCloseWhileRecording: events recorded by many runs while Close runs
// are either written or counted as dropped, never lost silently.
func TestCloseWhileRecording(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	w, err := New(path, WithBuffer(64))
	require.NoError(t, err)
	const runs, each = 8, 500
	var wg sync.WaitGroup
	for i := range runs {
		_, rec := w.startRun(context.Background(), middleware.RunInfo{RunID: fmt.Sprintf("r%d", i)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				ev := termination.Event{Kind: termination.KindToolCall, Tool: "t", Args: []byte(fmt.Sprintf(`{"k":%d}`, k))}
				rec.Event(&ev)
			}
		}()
	}
	time.Sleep(time.Millisecond)
	require.NoError(t, w.Close())
	wg.Wait()
	written := len(testutil.DecodeFile(t, path))
	assert.Equal(t, int64(runs*each), int64(written)+w.Dropped(), "written %d, dropped %d", written, w.Dropped())
}

// captureHandled makes otel.Handle collect its errors until the test ends,
// and returns what it has collected so far.
func captureHandled(t *testing.T) func() []string {
	var handled []string
	var mu sync.Mutex
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		handled = append(handled, err.Error())
		mu.Unlock()
	}))
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(handled)
	}
}

// TestArgsThatAreNotJSON: a model's malformed tool arguments (cut off at its
// output limit, a quote left unescaped), which a live run takes as they
// are, are written as their args_hash, as without content: the event stays
// in the log, and replay compares the calls as the live run did.
func TestArgsThatAreNotJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	w, err := New(path)
	require.NoError(t, err)
	policy := termination.MustParsePolicy("stall: {repeats: 3, window: 5}")
	stage, err := middleware.New("coder", middleware.WithPolicy(policy), middleware.WithParticipant(w))
	require.NoError(t, err)
	_, run := stage.Start(context.Background())
	run.Observe(termination.Event{Kind: termination.KindMessage, Text: "listing the files"})
	for _, args := range []string{`{"command": "ls -la`, `{"command": "ls -la`, `{"command": "ls"}`, ` {"command": "ls -la `} {
		run.Observe(termination.Event{Kind: termination.KindToolCall, Tool: "bash", Args: []byte(args)})
	}
	live := run.Finish(nil)
	require.Equal(t, termination.StallDetected{Signal: termination.SignalRepeatedToolCall, Repeats: 3}, live.Cause)
	require.Equal(t, []int{2, 3, 5}, live.Evidence, "the same malformed args, spaces around them or not")
	require.NoError(t, w.Close())

	events := testutil.DecodeFile(t, path)
	require.Len(t, events, live.Events, "every evaluated event is in the log")
	assert.Equal(t, codec.ArgsHash([]byte(`{"command": "ls -la`)), events[1].Logged().ArgsHash)
	assert.Nil(t, events[1].Args)
	assert.JSONEq(t, `{"command": "ls"}`, string(events[3].Args), "valid args are written as they are")
	replayed := replay.Runs(&policy, events)
	require.Len(t, replayed, 1)
	assert.Equal(t, live.Cause, replayed[0].Cause)
	assert.Equal(t, live.StoppedAt, replayed[0].StoppedAt)
	assert.Equal(t, live.Evidence, replayed[0].Evidence)
}
