package redisfleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/internal/tree"

	"go.opentelemetry.io/otel/propagation"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// The multi-process tests re-execute the test binary as child processes
// (childEnv set): each child joins the fleet and obeys line commands on
// stdin, reporting on stdout:
//
//	start NAME STAGE LABELS BUDGET   → started NAME ID | ended NAME CAUSEJSON
//	child NAME STAGE PARENTID [FLAG…] → as start, a child of run PARENTID (middleware.WithParent);
//	                                   keep: a stopped run is not finished until "finish NAME";
//	                                   prop: the parent comes from a request's headers
//	                                   (middleware.Propagator) instead of WithParent
//	sub NAME STAGE PARENTNAME        → as start, a child of this process's run PARENTNAME (by its context)
//	spend NAME IN OUT                → spent NAME
//	burn NAME N IN OUT               → burnt NAME EVENTS (up to N message events of IN and OUT
//	                                   tokens, until one stops the run)
//	finish NAME                      → finished NAME TAG
//	pchild NAME STAGE HEADERS        → as start, from a request whose headers (a JSON
//	                                   object, from middleware.Propagator) name its parent
//	                                   and the trees it joins
//	tjoin NAME HOLDERID              → tjoined NAME (Fleet.JoinTree; its hooks print
//	                                   "tstopped NAME CAUSEJSON" and "twarned NAME CAUSEJSON")
//	tspend NAME N TOKENS             → tspent NAME EVENTS CAUSEJSON|- (up to N events of one
//	                                   iteration and TOKENS input tokens, until a Spend stops it)
//	tleave NAME                      → tleft NAME
//	raise NAME N                     → raised NAME ok|ERROR (Run.Raise by N iterations)
//	flush                            → flushed (Fleet.Flush)
//	quit                             → (exits)
//
// LABELS is k=v,k=v or "-"; BUDGET is TOTAL (a fleet_budget keyed by label
// tenant, window 1h) or "-". Whenever a run ends, the child prints
// "ended NAME CAUSEJSON".
const childEnv = "REDISFLEET_TEST_CHILD"

func childMain() int {
	lease, _ := time.ParseDuration(os.Getenv("REDISFLEET_TEST_LEASE"))
	opts := []Option{WithPrefix(os.Getenv("REDISFLEET_TEST_PREFIX")), WithLease(lease)}
	f, err := New(context.Background(), os.Getenv("REDISFLEET_TEST_URL"), opts...)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	c := &childState{f: f, out: &lockedWriter{w: os.Stdout}, stages: map[string]*middleware.Stage{},
		runs: map[string]*middleware.Run{}, ctxs: map[string]context.Context{}, trees: map[string]tree.Member{}}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fs := strings.Fields(in.Text())
		if len(fs) == 0 {
			continue
		}
		if fs[0] == "quit" {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_ = f.Close(ctx)
			cancel()
			return 0
		}
		c.do(fs)
	}
	return 0
}

// childState is a child process's side: its fleet, where it reports, and
// its stages, runs (and their contexts) and tree members by name.
type childState struct {
	f      *Fleet
	out    *lockedWriter
	stages map[string]*middleware.Stage
	runs   map[string]*middleware.Run
	ctxs   map[string]context.Context
	trees  map[string]tree.Member
}

// do obeys one command (fs: its fields) but quit.
func (c *childState) do(fs []string) {
	switch fs[0] {
	case "start":
		c.start(fs[1], fs[2], fs[3], fs[4])
	case "child":
		c.child(fs[1], fs[2], fs[3], strings.Join(fs[4:], " "))
	case "pchild":
		var headers map[string]string
		if s := c.plain(fs[2]); s != nil && json.Unmarshal([]byte(strings.Join(fs[3:], " ")), &headers) == nil {
			req := middleware.Propagator().Extract(context.Background(), propagation.MapCarrier(headers))
			ctx, run := s.Start(req)
			c.watch(fs[1], ctx, run)
		}
	case "sub":
		if s, pctx := c.plain(fs[2]), c.ctxs[fs[3]]; s != nil && pctx != nil {
			ctx, run := s.Start(pctx)
			c.watch(fs[1], ctx, run)
		}
	case "many":
		c.many(fs[1], fs[2])
	case "spend":
		in, _ := strconv.ParseInt(fs[2], 10, 64)
		o, _ := strconv.ParseInt(fs[3], 10, 64)
		if r := c.runs[fs[1]]; r != nil {
			r.Observe(termination.Event{Kind: termination.KindMessage, Source: "agent", Text: "working " + fs[2],
				Usage: termination.Usage{InputTokens: in, OutputTokens: o}})
		}
		c.out.println("spent", fs[1])
	case "burn":
		c.burn(fs[1], fs[2], fs[3], fs[4])
	case "finish":
		if r := c.runs[fs[1]]; r != nil {
			res := r.Finish(nil)
			c.out.println("finished", fs[1], res.TerminationCause)
		}
	case "tjoin":
		c.tjoin(fs[1], fs[2])
	case "tspend":
		c.tspend(fs[1], fs[2], fs[3])
	case "tleave":
		if m := c.trees[fs[1]]; m != nil {
			m.Leave(cascade.ParentEnded("researcher", termination.TagCancelled))
		}
		c.out.println("tleft", fs[1])
	case "held":
		c.held(fs[1])
	case "raise":
		n, _ := strconv.Atoi(fs[2])
		res := "ok"
		if r := c.runs[fs[1]]; r == nil {
			res = "unknown"
		} else if err := r.Raise(termination.Limits{Iterations: n, Has: termination.LimitIterations}); err != nil {
			res = strings.ReplaceAll(err.Error(), " ", "_")
		}
		c.out.println("raised", fs[1], res)
	case "flush":
		_ = c.f.Flush(context.Background())
		c.out.println("flushed")
	}
}

// watch reports run name started, and ended (with its cause) once it is
// done; unless keep, a stopped run is finished (it leaves the fleet).
func (c *childState) watch(name string, ctx context.Context, run *middleware.Run, keep ...bool) {
	c.runs[name], c.ctxs[name] = run, ctx
	c.out.println("started", name, run.ID())
	go func() {
		<-run.Done()
		if len(keep) == 0 {
			run.Finish(nil) // the run ends when stopped: it leaves the fleet
		}
		cause, _ := run.Cause()
		c.out.println("ended", name, causeJSON(cause))
	}()
}

func causeJSON(c termination.Cause) string {
	b, _ := codec.MarshalCause(c)
	return string(b)
}

// plain returns the stage named stage of the fleet, with no budget.
func (c *childState) plain(stage string) *middleware.Stage {
	s := c.stages[stage+"/-"]
	if s == nil {
		var err error
		s, err = middleware.New(stage, middleware.WithParticipant(fleet.Membership(c.f)))
		if err != nil {
			c.out.println("error", err.Error())
			return nil
		}
		c.stages[stage+"/-"] = s
	}
	return s
}

// start: "start NAME STAGE LABELS BUDGET".
func (c *childState) start(name, stage, labels, budget string) {
	key := stage + "/" + budget
	s := c.stages[key]
	if s == nil {
		opts := []middleware.Option{middleware.WithParticipant(fleet.Membership(c.f))}
		if budget != "-" {
			total, _ := strconv.ParseInt(budget, 10, 64)
			opts = append(opts, middleware.WithFleetBudget(termination.FleetBudget{Key: "label:tenant", Window: time.Hour, TotalTokens: total}))
		}
		var err error
		s, err = middleware.New(stage, opts...)
		if err != nil {
			c.out.println("error", err.Error())
			return
		}
		c.stages[key] = s
	}
	lm := map[string]string{}
	if labels != "-" {
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			lm[k] = v
		}
	}
	ctx, run := s.Start(context.Background(), middleware.WithLabels(lm))
	c.watch(name, ctx, run)
}

// child: "child NAME STAGE PARENTID [FLAG…]".
func (c *childState) child(name, stage, parent, flags string) {
	s := c.plain(stage)
	if s == nil {
		return
	}
	var ctx context.Context
	var run *middleware.Run
	if strings.Contains(flags, "prop") {
		req := middleware.Propagator().Extract(context.Background(), propagation.MapCarrier{middleware.RunHeader: parent})
		ctx, run = s.Start(req)
	} else {
		ctx, run = s.Start(context.Background(), middleware.WithParent(parent))
	}
	if strings.Contains(flags, "keep") {
		c.watch(name, ctx, run, true)
	} else {
		c.watch(name, ctx, run)
	}
}

// many: "many N STAGE": N runs; each prints "cancelled ID UNIXNANO" when
// stopped.
func (c *childState) many(count, stage string) {
	n, _ := strconv.Atoi(count)
	s, err := middleware.New(stage, middleware.WithParticipant(fleet.Membership(c.f)))
	if err != nil {
		c.out.println("error", err.Error())
		return
	}
	for range n {
		ctx, run := s.Start(context.Background())
		go func() {
			<-ctx.Done()
			at := time.Now().UnixNano()
			run.Finish(nil)
			c.out.println("cancelled", run.ID(), strconv.FormatInt(at, 10))
		}()
	}
	c.out.println("many", count)
}

// burn: "burn NAME N IN OUT".
func (c *childState) burn(name, count, input, output string) {
	n, _ := strconv.Atoi(count)
	in, _ := strconv.ParseInt(input, 10, 64)
	o, _ := strconv.ParseInt(output, 10, 64)
	events := 0
	if r := c.runs[name]; r != nil {
		for events < n {
			events++
			if _, stop := r.Observe(termination.Event{Kind: termination.KindMessage, Source: "agent", Text: "working",
				Usage: termination.Usage{InputTokens: in, OutputTokens: o}}); stop {
				break
			}
		}
	}
	c.out.println("burnt", name, strconv.Itoa(events))
}

// tjoin: "tjoin NAME HOLDERID".
func (c *childState) tjoin(name, holder string) {
	var once sync.Once
	c.trees[name] = c.f.JoinTree(context.Background(), holder, runFuncs{
		stop: func(cause termination.Cause) bool {
			stopped := false
			once.Do(func() { stopped = true; c.out.println("tstopped", name, causeJSON(cause)) })
			return stopped
		},
		warn: func(cause termination.Cause) { c.out.println("twarned", name, causeJSON(cause)) },
	})
	c.out.println("tjoined", name)
}

// tspend: "tspend NAME N TOKENS".
func (c *childState) tspend(name, count, tokens string) {
	n, _ := strconv.Atoi(count)
	tok, _ := strconv.ParseInt(tokens, 10, 64)
	m := c.trees[name]
	events, cause := 0, "-"
	for m != nil && events < n {
		events++
		if stop := m.Spend(tree.Usage{Totals: termination.Totals{Iterations: 1, Tokens: termination.Usage{InputTokens: tok}}}); stop != nil {
			cause = causeJSON(stop)
			break
		}
	}
	c.out.println("tspent", name, strconv.Itoa(events), cause)
}

// held: "held NAME": a run held at max_tool_calls 1; prints "released
// NAME going|stopped" once raised and its next call evaluated.
func (c *childState) held(name string) {
	s, err := middleware.New("raise", middleware.WithParticipant(fleet.Membership(c.f)),
		middleware.WithPolicy(termination.MustParsePolicy("max_tool_calls: 1\nhold: {timeout: 30s}")))
	if err != nil {
		c.out.println("error", err.Error())
		return
	}
	ctx, run := s.Start(context.Background())
	c.watch(name, ctx, run, true)
	call := termination.Event{Kind: termination.KindToolCall, Tool: "search"}
	run.Observe(call)
	run.Observe(call) // the second call reaches the limit: held
	c.out.println("heldat", name)
	go func() {
		_, stop := run.Observe(call) // blocks while held; evaluated once raised
		res := "going"
		if stop {
			res = "stopped"
		}
		c.out.println("released", name, res)
	}()
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) println(a ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.w, strings.Join(a, " "))
}

// child is a test's handle on one child process.
type child struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	pid   int
	ids   map[string]string
	done  chan struct{}
}

func startChild(t *testing.T, url, prefix string, lease time.Duration) *child {
	t.Helper()
	return startChildTB(t, url, prefix, lease)
}

// startChildren starts n child processes on srv under prefix, each with a
// 3 s run lease.
func startChildren(t *testing.T, srv redistest.Redis, prefix string, n int) []*child {
	t.Helper()
	cs := make([]*child, n)
	for i := range cs {
		cs[i] = startChild(t, srv.URL(), prefix, 3*time.Second)
	}
	return cs
}

func startChildTB(t testing.TB, url, prefix string, lease time.Duration) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "REDISFLEET_TEST_URL="+url,
		"REDISFLEET_TEST_PREFIX="+prefix, "REDISFLEET_TEST_LEASE="+lease.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 1024), pid: cmd.Process.Pid, ids: map[string]string{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_, _ = io.WriteString(stdin, "quit\n")
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

func (c *child) send(cmd string) {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		c.t.Fatalf("child %d: %v", c.pid, err)
	}
}

// expect waits for a line starting with prefix and returns it; other lines
// are kept for later expectations.
func (c *child) expect(prefix string, timeout time.Duration) string {
	c.t.Helper()
	var held []string
	defer func() {
		for _, l := range held {
			c.lines <- l
		}
	}()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-c.lines:
			if strings.HasPrefix(l, prefix) {
				return l
			}
			held = append(held, l)
		case <-deadline:
			c.t.Fatalf("child %d: no %q within %s (held %q)", c.pid, prefix, timeout, held)
			return ""
		}
	}
}

// child starts run name as a child of run parent (an id, of any process)
// and returns its id.
func (c *child) child(name, stage, parent string, keep ...string) string {
	c.t.Helper()
	c.send(strings.Join(append([]string{"child", name, stage, parent}, keep...), " "))
	l := c.expect("started "+name+" ", 5*time.Second)
	id := strings.Fields(l)[2]
	c.ids[name] = id
	return id
}

// sub starts run name as a child of this process's run parent (by name)
// and returns its id.
func (c *child) sub(name, stage, parent string) string {
	c.t.Helper()
	c.send(strings.Join([]string{"sub", name, stage, parent}, " "))
	l := c.expect("started "+name+" ", 5*time.Second)
	id := strings.Fields(l)[2]
	c.ids[name] = id
	return id
}

// start starts run name and returns its id.
func (c *child) start(name, stage, labels, budget string) string {
	c.t.Helper()
	c.send(strings.Join([]string{"start", name, stage, labels, budget}, " "))
	l := c.expect("started "+name+" ", 5*time.Second)
	id := strings.Fields(l)[2]
	c.ids[name] = id
	return id
}

// ended waits for run name's end and returns its cause.
func (c *child) ended(name string, timeout time.Duration) termination.Cause {
	c.t.Helper()
	l := c.expect("ended "+name+" ", timeout)
	js := strings.SplitN(l, " ", 3)[2]
	cause, err := codec.UnmarshalCause(json.RawMessage(js))
	if err != nil {
		c.t.Fatalf("child %d: cause %s: %v", c.pid, js, err)
	}
	return cause
}

func (c *child) spend(name string, in, out int64) {
	c.t.Helper()
	c.send(fmt.Sprintf("spend %s %d %d", name, in, out))
	c.expect("spent "+name, 5*time.Second)
}

// burn spends up to n message events of in and out tokens in run name,
// until one stops it, and returns how many it spent.
func (c *child) burn(name string, n int, in, out int64) int {
	c.t.Helper()
	c.send(fmt.Sprintf("burn %s %d %d %d", name, n, in, out))
	l := c.expect("burnt "+name+" ", 30*time.Second)
	events, err := strconv.Atoi(strings.Fields(l)[2])
	if err != nil {
		c.t.Fatalf("child %d: %q", c.pid, l)
	}
	return events
}

// notEnded checks that run name has not reported its end.
func (c *child) notEnded(name string) {
	c.t.Helper()
	var held []string
	defer func() {
		for _, l := range held {
			c.lines <- l
		}
	}()
	for {
		select {
		case l := <-c.lines:
			held = append(held, l)
			if strings.HasPrefix(l, "ended "+name+" ") {
				c.t.Errorf("child %d: run %s ended: %s", c.pid, name, l)
			}
		default:
			return
		}
	}
}

var _ = fleet.Selector{}
