package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/redisfleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestRunsTree: runs -tree lists each run under its parent, depth first,
// keeping the listed order within a level; a run whose parent is not
// listed starts a tree; a cycle of parents cannot loop.
func TestRunsTree(t *testing.T) {
	id := func(c byte) string { return strings.Repeat(string(c), 32) }
	now := time.Now()
	rs := []fleet.RunInfo{
		{ID: id('a'), Stage: "planner", Started: now, Updated: now},
		{ID: id('b'), Stage: "lone", Parent: id('f'), Started: now, Updated: now}, // parent elsewhere
		{ID: id('c'), Stage: "researcher", Parent: id('a'), Started: now, Updated: now},
		{ID: id('d'), Stage: "researcher", Parent: id('a'), Started: now, Updated: now},
		{ID: id('e'), Stage: "fetcher", Parent: id('c'), Started: now, Updated: now},
		{ID: id('1'), Stage: "loop", Parent: id('2'), Started: now, Updated: now},
		{ID: id('2'), Stage: "loop", Parent: id('1'), Started: now, Updated: now},
	}
	got := treeOrder(rs)
	var order []string
	for _, r := range got {
		order = append(order, r.ID[:1])
	}
	assert.Equal(t, []string{"a", "c", "e", "d", "b", "1", "2"}, order)

	var b bytes.Buffer
	runsTableOf(&b, got, true)
	lines := strings.Split(b.String(), "\n")
	assert.True(t, strings.HasPrefix(lines[0], "RUN "), lines[0])
	assert.Equal(t, []string{id('a'), "-", "planner"}, strings.Fields(lines[1])[:3], lines[1])
	assert.True(t, strings.HasPrefix(lines[2], "└ "+id('c')), lines[2])
	assert.True(t, strings.HasPrefix(lines[3], "  └ "+id('e')), lines[3])
	assert.True(t, strings.HasPrefix(lines[4], "└ "+id('d')), lines[4])
	assert.True(t, strings.HasPrefix(lines[5], id('b')+" "), "a parent not listed: a root, its parent shown: %s", lines[5])
	assert.Contains(t, lines[5], id('f'))
	assert.Equal(t, "7 live runs", lines[len(lines)-2])

	// Without -tree: the order given, no indentation, the parent column.
	b.Reset()
	runsTable(&b, rs)
	assert.NotContains(t, b.String(), "└")
	assert.Contains(t, b.String(), "PARENT")
}

// TestFleetTreeCommands: against a real redis-server and a real cluster,
// runs shows each run's parent, runs -tree draws the tree, and stop -run
// of the root reports the descendants it ended, which end with
// Cancelled{parent, "planner ended: cancelled"}.
func TestFleetTreeCommands(t *testing.T) {
	noLeaks(t)
	redistest.Each(t, func(t *testing.T, srv redistest.Redis) {
		env := map[string]string{"AGENTSTOP_REDIS_URL": srv.URL()}
		f, err := redisfleet.New(context.Background(), srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close(context.Background())
		stage := func(name string) *middleware.Stage {
			s, err := middleware.New(name, middleware.WithParticipant(fleet.Membership(f)))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		pctx, plan := stage("planner").Start(context.Background())
		defer plan.Finish(nil)
		rctx, res := stage("researcher").Start(pctx)
		defer res.Finish(nil)
		fctx, fetch := stage("fetcher").Start(rctx)
		defer fetch.Finish(nil)
		if err := f.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}

		code, out, stderr := runFleetCLI(t, env, "runs", "-tree")
		if code != 0 || stderr != "" {
			t.Fatalf("runs -tree: exit %d, %s", code, stderr)
		}
		lines := strings.Split(out, "\n")
		if len(lines) < 5 || !strings.HasPrefix(lines[1], plan.ID()) || !strings.HasPrefix(lines[2], "└ "+res.ID()) ||
			!strings.HasPrefix(lines[3], "  └ "+fetch.ID()) || !strings.Contains(lines[3], res.ID()) {
			t.Errorf("runs -tree:\n%s", out)
		}
		var rs []fleet.RunInfo
		code, out, _ = runFleetCLI(t, env, "runs", "-json", "-stage", "fetcher")
		if err := json.Unmarshal([]byte(out), &rs); code != 0 || err != nil || len(rs) != 1 || rs[0].Parent != res.ID() {
			t.Errorf("runs -json -stage fetcher = %+v, %v", rs, err)
		}

		code, out, stderr = runFleetCLI(t, env, "stop", "-run", plan.ID(), "-reason", "runaway", "-by", "ops@host")
		if code != 0 || stderr != "" || !strings.HasPrefix(out, "stopped 1 run (1 matched") ||
			!strings.Contains(out, "and 2 descendants under them (cancelled: parent)") {
			t.Errorf("stop -run planner: exit %d, %s%s", code, out, stderr)
		}
		for _, ctx := range []context.Context{rctx, fctx} {
			var c termination.Cancelled
			if !errors.As(context.Cause(ctx), &c) || c.Reason != termination.CancelParent || c.Detail != "planner ended: cancelled" {
				t.Errorf("a descendant's cause = %v", context.Cause(ctx))
			}
		}
	})
}
