package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/redisfleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func runFleetCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runFleet(args[0], args[1:], &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

// noLeaks checks, after every other cleanup of t, that t started no
// goroutine that is still running.
func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

const testPassword = "s3cret-pw"

// withPassword adds the test password to a redistest URL (one server's or
// a cluster's: the cluster's nodes share it).
func withPassword(url string) string {
	return strings.Replace(url, "redis://", "redis://:"+testPassword+"@", 1)
}

// TestFleetCommands drives every fleet command against a real redis-server
// and a real three-master cluster (with a password, which no output may
// show) and a live fleet.
func TestFleetCommands(t *testing.T) {
	noLeaks(t)
	redistest.Each(t, testFleetCommands, "--requirepass", testPassword)
}

func testFleetCommands(t *testing.T, srv redistest.Redis) {
	url := withPassword(srv.URL())
	env := map[string]string{"AGENTSTOP_REDIS_URL": url}
	f, err := redisfleet.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	s, err := middleware.New("research", middleware.WithParticipant(fleet.Membership(f)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, run := s.Start(context.Background(), middleware.WithLabels(map[string]string{"tenant": "acme"}))
	defer run.Finish(nil)
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	check := func(code int, stdout, stderr string) string {
		t.Helper()
		if code != 0 || stderr != "" {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		if strings.Contains(stdout, testPassword) {
			t.Fatalf("output shows the password: %s", stdout)
		}
		return stdout
	}

	out := check(runFleetCLI(t, env, "runs"))
	if !strings.Contains(out, run.ID()) || !strings.Contains(out, "tenant=acme") || !strings.Contains(out, "1 live run") {
		t.Errorf("runs:\n%s", out)
	}
	var rs []fleet.RunInfo
	if err := json.Unmarshal([]byte(check(runFleetCLI(t, nil, "runs", "-redis", url, "-json", "-stage", "research"))), &rs); err != nil || len(rs) != 1 || rs[0].ID != run.ID() {
		t.Errorf("runs -json = %+v, %v", rs, err)
	}
	out = check(runFleetCLI(t, env, "runs", "-label", "tenant=globex"))
	if !strings.Contains(out, "0 live runs") {
		t.Errorf("runs -label tenant=globex:\n%s", out)
	}

	out = check(runFleetCLI(t, env, "block", "-stage", "research", "-reason", "incident 7", "-by", "ops@host", "-expire", "1h"))
	if !strings.Contains(out, "blocked -stage research until ") || !strings.Contains(out, "incident 7 (by ops@host)") {
		t.Errorf("block: %s", out)
	}
	out = check(runFleetCLI(t, env, "blocks"))
	if !strings.Contains(out, "-stage research") || !strings.Contains(out, "ops@host") || !strings.Contains(out, "1 active block") {
		t.Errorf("blocks:\n%s", out)
	}
	var bs []fleet.Block
	if err := json.Unmarshal([]byte(check(runFleetCLI(t, env, "blocks", "-json"))), &bs); err != nil || len(bs) != 1 || bs[0].Reason != "incident 7" {
		t.Errorf("blocks -json = %+v, %v", bs, err)
	}
	if c, _ := run.Cause(); c != nil {
		t.Fatalf("a block stopped a live run: %v", c)
	}
	out = check(runFleetCLI(t, env, "unblock", "-stage", "research"))
	if !strings.Contains(out, "unblocked -stage research") {
		t.Errorf("unblock: %s", out)
	}
	out = check(runFleetCLI(t, env, "unblock", "-stage", "research"))
	if !strings.Contains(out, "no block on -stage research") {
		t.Errorf("second unblock: %s", out)
	}

	out = check(runFleetCLI(t, env, "stop", "-label", "tenant=acme", "-reason", "runaway", "-by", "ops@host"))
	if !strings.HasPrefix(out, "stopped 1 run (1 matched, 0 already ended, 0 unconfirmed") {
		t.Errorf("stop: %s", out)
	}
	var c termination.Cancelled
	if !errors.As(context.Cause(ctx), &c) || c.Reason != termination.CancelExternal || c.Detail != "runaway (by ops@host)" {
		t.Errorf("the run's cause = %v", context.Cause(ctx))
	}
	var rep fleet.StopReport
	if err := json.Unmarshal([]byte(check(runFleetCLI(t, env, "stop", "-all", "-reason", "again", "-wait", "200ms", "-json"))), &rep); err != nil || rep.Stopped != 0 {
		t.Errorf("stop -all -json = %+v, %v", rep, err)
	}
	var budgets []fleet.Budget
	if err := json.Unmarshal([]byte(check(runFleetCLI(t, env, "budgets", "-json"))), &budgets); err != nil || len(budgets) != 0 {
		t.Errorf("budgets -json = %+v, %v", budgets, err)
	}
	shared, err := middleware.New("writer", middleware.WithParticipant(fleet.Membership(f)),
		middleware.WithFleetBudget(termination.FleetBudget{Key: "label:tenant", Window: time.Hour, TotalTokens: 1000, Pressure: 0.5}))
	if err != nil {
		t.Fatal(err)
	}
	_, spender := shared.Start(context.Background(), middleware.WithLabels(map[string]string{"tenant": "acme"}))
	defer spender.Finish(nil)
	spender.Observe(termination.Event{Kind: termination.KindMessage, Text: "x", Usage: termination.Usage{InputTokens: 500, OutputTokens: 20}})
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	out = check(runFleetCLI(t, env, "budgets"))
	if !strings.Contains(out, "label:tenant") || !strings.Contains(out, "acme") || !strings.Contains(out, "total_tokens 520/1000") ||
		!strings.Contains(out, "pressure") || !strings.Contains(out, "1 shared budget") {
		t.Errorf("budgets:\n%s", out)
	}
	if err := json.Unmarshal([]byte(check(runFleetCLI(t, env, "budgets", "-json"))), &budgets); err != nil || len(budgets) != 1 || budgets[0].Used.Total() != 520 || budgets[0].Runs != 1 {
		t.Errorf("budgets -json = %+v, %v", budgets, err)
	}
	code, stdout, _ := runFleetCLI(t, env, "stop", "-h")
	if code != 0 || !strings.Contains(stdout, "-reason") || !strings.Contains(stdout, "-wait") {
		t.Errorf("stop -h: %d %s", code, stdout)
	}
}

// TestFleetCommandErrors: bad selectors, a missing URL, a wrong password
// and unreachable servers are one line on stderr and exit 2 within 10 s.
func TestFleetCommandErrors(t *testing.T) {
	noLeaks(t)
	srv := redistest.Start(t, "--requirepass", testPassword)
	good := map[string]string{"AGENTSTOP_REDIS_URL": "redis://:" + testPassword + "@" + srv.Addr}
	wrong := map[string]string{"AGENTSTOP_REDIS_URL": "redis://app:wrong-" + testPassword + "@" + srv.Addr}
	cl := redistest.StartCluster(t, "--requirepass", testPassword)
	wrongCluster := map[string]string{"AGENTSTOP_REDIS_URL": strings.Replace(cl.URL(), "redis://", "redis://app:wrong-"+testPassword+"@", 1)}
	refusedCluster := map[string]string{"AGENTSTOP_REDIS_URL": "redis://127.0.0.1:1?addr=127.0.0.1:2"}
	refused := map[string]string{"AGENTSTOP_REDIS_URL": "redis://127.0.0.1:1"}
	// A server that accepts connections and never answers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	silent := map[string]string{"AGENTSTOP_REDIS_URL": "redis://" + l.Addr().String()}

	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no url", nil, []string{"runs"}, "-redis URL (or AGENTSTOP_REDIS_URL) is required"},
		{"malformed url", map[string]string{"AGENTSTOP_REDIS_URL": "http://x"}, []string{"blocks"}, "malformed redis URL"},
		{"stop without selector", good, []string{"stop", "-reason", "x"}, "a selector is required"},
		{"stop without reason", good, []string{"stop", "-stage", "s"}, "-reason TEXT is required"},
		{"block without selector", good, []string{"block", "-reason", "x"}, "a selector is required"},
		{"unblock without selector", good, []string{"unblock"}, "a selector is required"},
		{"malformed label", good, []string{"stop", "-label", "tenant", "-reason", "x"}, "must be NAME=VALUE"},
		{"bad label name", good, []string{"runs", "-label", "Tenant=x"}, "snake_case"},
		{"bad run id", good, []string{"stop", "-run", "nope", "-reason", "x"}, "not 32 lowercase hex digits"},
		{"all and stage", good, []string{"stop", "-all", "-stage", "s", "-reason", "x"}, "-all cannot be combined with -run, -stage or -label"},
		{"all and label, block", good, []string{"block", "-all", "-label", "a=b", "-reason", "x"}, "-all cannot be combined with -stage or -label"},
		{"block a run", good, []string{"block", "-run", runid.New(), "-reason", "x"}, "flag provided but not defined: -run"},
		{"extra argument", good, []string{"blocks", "extra"}, `unexpected argument "extra"`},
		{"wrong password", wrong, []string{"blocks"}, "cannot use redis at " + srv.Addr},
		{"wrong password, cluster", wrongCluster, []string{"blocks"}, "cannot use redis at " + cl.Nodes[0].Addr},
		{"refused cluster", refusedCluster, []string{"runs"}, "cannot use redis at 127.0.0.1:1,127.0.0.1:2"},
		{"malformed cluster url", map[string]string{"AGENTSTOP_REDIS_URL": "redis://:" + testPassword + "@127.0.0.1:1?addr=nope"}, []string{"runs"}, "malformed redis URL: unable to parse addr param"},
		{"cluster url with a database", map[string]string{"AGENTSTOP_REDIS_URL": "redis://127.0.0.1:1/3?addr=127.0.0.1:2"}, []string{"runs"}, "a Redis Cluster has no database"},
		{"refused", refused, []string{"stop", "-all", "-reason", "x"}, "cannot use redis at 127.0.0.1:1"},
		{"silent server", silent, []string{"runs"}, "cannot use redis at " + l.Addr().String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, stdout, stderr := runFleetCLI(t, tc.env, tc.args...)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %s, want < 10s", d)
			}
			if code != 2 || stdout != "" {
				t.Errorf("exit %d, stdout %q; want 2 and nothing", code, stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) || !strings.HasPrefix(stderr, "agentstop "+tc.args[0]+": ") {
				t.Errorf("stderr = %q, want one line with %q", stderr, tc.want)
			}
			if strings.Contains(stderr, testPassword) {
				t.Errorf("stderr shows the password: %q", stderr)
			}
		})
	}
}
