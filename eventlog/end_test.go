package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/internal/testutil"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// TestEndRecord: each run's first line carries its stage (and parent),
// and its end is one end record of the contract's shape, written when the
// run stopped: before its child's cascade.
func TestEndRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	w, err := New(path)
	require.NoError(t, err)
	p := termination.MustParsePolicy("max_iterations: 1")
	planner, err := middleware.New("planner", middleware.WithPolicy(p), middleware.WithParticipant(w))
	require.NoError(t, err)
	analyst, err := middleware.New("analyst", middleware.WithCondition(termination.ToolCallLimits{Limit: 9}), middleware.WithParticipant(w))
	require.NoError(t, err)
	ctx, parent := planner.Start(context.Background())
	_, child := analyst.Start(ctx)
	child.Observe(termination.Event{Kind: termination.KindToolCall, Tool: "search"})
	parent.Observe(termination.Event{Kind: termination.KindMessage})
	_, stop := parent.Observe(termination.Event{Kind: termination.KindMessage})
	require.True(t, stop)
	// Finish in the "wrong" order: the child's loop returns first.
	child.Finish(nil)
	parent.Finish(nil)
	require.NoError(t, w.Close())

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 5)
	assert.Contains(t, lines[0], `"stage":"analyst"`)
	assert.Contains(t, lines[0], `"parent":"`+parent.ID()+`"`)
	assert.Contains(t, lines[1], `"stage":"planner"`)
	assert.NotContains(t, lines[2], `"stage"`, "stage on a run's first line only")
	var end map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(lines[3]), &end))
	keys := []string{}
	for k := range end {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{"kind", "run", "stage", "time", "cause", "outcome", "stopped_at", "events", "policy"}, keys)
	assert.JSONEq(t, `"end"`, string(end["kind"]))
	assert.JSONEq(t, `"`+parent.ID()+`"`, string(end["run"]))
	assert.JSONEq(t, `{"$kind":"MaxIterationsReached","limit":1,"count":2}`, string(end["cause"]))
	assert.JSONEq(t, `"failed"`, string(end["outcome"]))
	assert.JSONEq(t, `2`, string(end["stopped_at"]))
	assert.JSONEq(t, `2`, string(end["events"]))
	assert.JSONEq(t, `"`+p.Hash()+`"`, string(end["policy"]))
	// The child's end comes after its parent's: the cascade.
	assert.Contains(t, lines[4], `"kind":"end","run":"`+child.ID()+`","parent":"`+parent.ID()+`","stage":"analyst"`)
	assert.Contains(t, lines[4], `"policy":"code"`)
	assert.Contains(t, lines[4], `"cause":{"$kind":"Cancelled","reason":"parent","detail":"planner ended: max_iterations"}`)

	// The log decodes, records and all.
	d := codec.NewDecoder(strings.NewReader(string(data)))
	n := 0
	for {
		_, err := d.NextEntry()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, 5, n)
}

// TestEndRecordNeverDropped: with the buffer full, events are dropped but
// the end record waits beside it, after the run's events, and says how
// many were dropped.
func TestEndRecordNeverDropped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	w, err := newWriter(path, []Option{WithBuffer(2)})
	require.NoError(t, err)
	_, rec := w.startRun(context.Background(), middleware.RunInfo{RunID: "r", Stage: "s", Policy: "code"})
	for range 4 {
		ev := termination.Event{Kind: termination.KindMessage, Time: time.Now()}
		rec.Event(&ev)
	}
	rec.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded, Totals: termination.Totals{Events: 4}})
	go w.loop()
	require.NoError(t, w.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 3)
	assert.Contains(t, lines[2], `"kind":"end"`)
	assert.Contains(t, lines[2], `"events":4`)
	assert.Contains(t, lines[2], `"dropped":2`)
	assert.Equal(t, int64(2), w.Dropped())
}

// TestRotationRepeatsStage: a run's first line in each file carries its
// stage and parent, so each file decodes on its own, end record and all.
func TestRotationRepeatsStage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	w, err := New(path, WithMaxBytes(500), WithMaxFiles(5))
	require.NoError(t, err)
	_, rec := w.startRun(context.Background(), middleware.RunInfo{RunID: "r1", ParentRunID: "p", Stage: "coder", Policy: "code"})
	for k := range 12 {
		ev := termination.Event{Kind: termination.KindMessage, Text: fmt.Sprintf("message %02d", k)}
		rec.Event(&ev)
	}
	rec.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded, Totals: termination.Totals{Events: 12}})
	require.NoError(t, w.Close())
	files, err := filepath.Glob(path + "*")
	require.NoError(t, err)
	require.Greater(t, len(files), 1)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		first, _, _ := strings.Cut(string(data), "\n")
		assert.Contains(t, first, `"parent":"p"`, f)
		assert.Contains(t, first, `"stage":"coder"`, f)
		d := codec.NewDecoder(strings.NewReader(string(data)))
		for {
			_, err := d.NextEntry()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, f)
		}
	}
}

// TestRaiseAndShadowRecords: a raise of a held run is a raise record
// written before the run's next event, and the end record carries the
// stage's shadow verdicts (§1, §3 hold, §5.2); replayed with the policy
// it ran under, the recording gives the run its live end.
func TestRaiseAndShadowRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	w, err := New(path)
	require.NoError(t, err)
	p := termination.MustParsePolicy("max_iterations: 1\nhold: {timeout: 1m}")
	st, err := middleware.New("coder", middleware.WithPolicy(p), middleware.WithParticipant(w),
		middleware.WithShadowPolicy("strict", termination.MustParsePolicy("max_iterations: 2")),
		middleware.WithShadowPolicy("loose", termination.MustParsePolicy("max_iterations: 9")))
	require.NoError(t, err)
	_, run := st.Start(context.Background())
	msg := termination.Event{Kind: termination.KindMessage}
	run.Observe(msg)
	run.Observe(msg) // reaches the limit: held
	_, _, held := run.Held()
	require.True(t, held)
	require.NoError(t, run.Raise(termination.Limits{Has: termination.LimitIterations, Iterations: 2}))
	run.Observe(msg)
	run.Observe(msg) // count 4 of 3: held again
	run.Stop("nobody raises it")
	res := run.Finish(nil)
	require.NoError(t, w.Close())
	require.Equal(t, termination.MaxIterationsReached{Limit: 3, Count: 4}, res.Cause)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 6, "four events, one raise record, one end record")
	assert.Contains(t, lines[2], `"kind":"raise"`)
	assert.Contains(t, lines[2], `"limits":{"iterations":2}`)
	assert.Contains(t, lines[5], `"kind":"end"`)
	assert.Contains(t, lines[5], `"shadow":{"loose":null,"strict":{"cause":{"$kind":"MaxIterationsReached","limit":2,"count":3},"stopped_at":3}}`)

	out, _ := testutil.ReplayLog(t, strings.NewReader(string(data)), &p, replay.WithStage("coder"))
	require.Len(t, out, 1)
	assert.Equal(t, res.Cause, out[0].Cause)
	assert.Equal(t, res.StoppedAt, out[0].StoppedAt)
	assert.Equal(t, res.Events, out[0].Events)
}

// TestLinesAfterClose: a run that goes on after its log's Close loses
// its later lines, end record included; they are counted, and the first
// is reported to otel.Handle naming the run, never silently.
func TestLinesAfterClose(t *testing.T) {
	handled := captureHandled(t)

	path := filepath.Join(t.TempDir(), "events.jsonl")
	w, err := New(path)
	require.NoError(t, err)
	_, rec := w.startRun(context.Background(), middleware.RunInfo{RunID: "late", Stage: "s", Policy: "code"})
	ev := termination.Event{Kind: termination.KindMessage, Time: time.Now()}
	rec.Event(&ev)
	require.NoError(t, w.Close())
	rec.Event(&ev)
	rec.Event(&ev)
	rec.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded, Totals: termination.Totals{Events: 3}})

	assert.Equal(t, int64(3), w.Dropped(), "two events and the end record")
	got := handled()
	require.Len(t, got, 1, "reported once: %q", got)
	assert.Contains(t, got[0], "run late")
	assert.Contains(t, got[0], "after Close")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(data), "\n"), "only the event before Close is in the log")
}
