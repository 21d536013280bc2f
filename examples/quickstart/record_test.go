package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/internal/testutil"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// liveEnds records every run's live result, by run id.
type liveEnds struct {
	mu   sync.Mutex
	ends map[string]termination.Result
}

func (l *liveEnds) Join(ctx context.Context, run *middleware.Run) (context.Context, middleware.Part) {
	info := run.Info()
	return ctx, &liveEnd{l: l, id: info.RunID}
}

type liveEnd struct {
	l  *liveEnds
	id string
}

func (e *liveEnd) Event(*termination.Event)  {}
func (e *liveEnd) Warning(termination.Cause) {}
func (e *liveEnd) Error(error)               {}
func (e *liveEnd) End(res *termination.Result) {
	e.l.mu.Lock()
	e.l.ends[e.id] = *res
	e.l.mu.Unlock()
}

// replayRecording replays dir/events.jsonl with dir/policies as
// agentstop replay -policies does (cmd/agentstop/replay_runs.go).
func replayRecording(t *testing.T, dir string) []termination.Result {
	t.Helper()
	out, left := replayWith(t, dir, filepath.Join(dir, "policies"))
	require.Empty(t, left, "every stage has its policy file")
	return out
}

// replayWith replays dir/events.jsonl with the per-stage policies of
// pdir, and returns the results and the runs left out by stage.
func replayWith(t *testing.T, dir, pdir string) ([]termination.Result, map[string]int) {
	t.Helper()
	pols := map[string]*termination.Policy{}
	entries, err := os.ReadDir(pdir)
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(pdir, e.Name()))
		require.NoError(t, err)
		p, err := termination.ParsePolicy(data)
		require.NoError(t, err)
		pols[e.Name()[:len(e.Name())-len(".yaml")]] = &p
	}
	f, err := os.Open(filepath.Join(dir, "events.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	return testutil.ReplayLog(t, f, nil, replay.WithPolicies(func(s string) (*termination.Policy, bool) {
		p, ok := pols[s]
		return p, ok
	}))
}

// TestRecordReplaysAsLive runs the quickstart with -record for a few
// seconds (its trees, fleet stops, blocks, fleet budgets and timeouts)
// and replays the recording with the policies it wrote: every run gets
// exactly its live cause, stopped_at and events.
func TestRecordReplaysAsLive(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet for a few seconds")
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER",
		"OTEL_METRICS_EXPORTER", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	live := &liveEnds{ends: map[string]termination.Result{}}
	o := options{listen: "127.0.0.1:0", duration: 6 * time.Second, refresh: time.Second, drain: 5 * time.Second, feed: 8,
		record: dir, recorders: []middleware.Participant{live}}
	require.NoError(t, run(context.Background(), o, &testutil.SyncBuffer{}))

	for _, s := range stages {
		_, err := os.Stat(filepath.Join(dir, "policies", s.name+".yaml"))
		require.NoError(t, err)
	}
	results := replayRecording(t, dir)
	live.mu.Lock()
	defer live.mu.Unlock()
	require.Len(t, results, len(live.ends), "one result per recorded run")
	tags := map[string]bool{}
	byRun := map[string]termination.Result{}
	for _, res := range results {
		byRun[res.Run] = res
	}
	for _, res := range results {
		want, ok := live.ends[res.Run]
		require.True(t, ok, "run %s replayed but not run live", res.Run)
		if want.Events != res.Events || want.StoppedAt != res.StoppedAt {
			lj, _ := json.Marshal(want)
			rj, _ := json.Marshal(res)
			pj, _ := json.Marshal(byRun[res.Parent])
			plj, _ := json.Marshal(live.ends[res.Parent])
			t.Logf("live %s\nreplay %s\nparent live %s\nparent replay %s", lj, rj, plj, pj)
		}
		wantCause, _ := codec.MarshalCause(want.Cause)
		gotCause, _ := codec.MarshalCause(res.Cause)
		require.JSONEq(t, string(wantCause), string(gotCause), "run %s (%s): cause", res.Run, res.Stage)
		require.Equal(t, want.StoppedAt, res.StoppedAt, "run %s (%s): stopped_at", res.Run, res.Stage)
		require.Equal(t, want.Events, res.Events, "run %s (%s): events", res.Run, res.Stage)
		require.Equal(t, termination.Tag(want.Cause, nil), res.Live, "run %s: live", res.Run)
		tags[res.TerminationCause] = true
	}
	b, _ := json.Marshal(tags)
	t.Logf("%d runs replayed as live; causes %s", len(results), b)
	for _, tag := range []string{"budget_exhausted", "cancelled", "skipped", "timeout"} {
		require.True(t, tags[tag], "the recording holds no %s run", tag)
	}
	checkShadowVerdicts(t, dir, live.ends)
}

// checkShadowVerdicts replays the recording with each shadow policy's
// directory, DIR/shadow/NAME (§5.2), and checks that every run of a stage
// with that shadow gets exactly its live verdict: the candidate's own stop
// (cause and stopped_at) where the verdict has one, the recorded end
// (from_record) where the verdict is null.
func checkShadowVerdicts(t *testing.T, dir string, live map[string]termination.Result) {
	t.Helper()
	names, err := os.ReadDir(filepath.Join(dir, "shadow"))
	require.NoError(t, err)
	require.NotEmpty(t, names, "the quickstart runs a shadow candidate")
	for _, n := range names {
		results, _ := replayWith(t, dir, filepath.Join(dir, "shadow", n.Name()))
		stopped := 0
		for _, res := range results {
			want, ok := live[res.Run]
			require.True(t, ok, "run %s replayed but not run live", res.Run)
			v, has := want.Shadow[n.Name()]
			require.True(t, has, "run %s (%s): no live verdict of shadow %s", res.Run, res.Stage, n.Name())
			if v == nil {
				require.True(t, res.FromRecord, "run %s (%s): shadow %s would not have stopped it live, but its replay stops it: %s at %d", res.Run, res.Stage, n.Name(), res.TerminationCause, res.StoppedAt)
				continue
			}
			stopped++
			require.False(t, res.FromRecord, "run %s (%s): shadow %s stopped it live at %d, replay gives the recorded end", res.Run, res.Stage, n.Name(), v.StoppedAt)
			wantCause, _ := codec.MarshalCause(v.Cause)
			gotCause, _ := codec.MarshalCause(res.Cause)
			require.JSONEq(t, string(wantCause), string(gotCause), "run %s (%s): shadow %s cause", res.Run, res.Stage, n.Name())
			require.Equal(t, v.StoppedAt, res.StoppedAt, "run %s (%s): shadow %s stopped_at", res.Run, res.Stage, n.Name())
		}
		t.Logf("shadow %s: %d runs replayed, %d stopped as live", n.Name(), len(results), stopped)
		require.NotZero(t, stopped, "shadow %s stopped no run of the recording", n.Name())
	}
}
