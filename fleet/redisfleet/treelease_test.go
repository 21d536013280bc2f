package redisfleet

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// What the tests' holdings and joined runs leave with.
var (
	plannerEnded = cascade.ParentEnded("planner", termination.TagCompleted)
	joinEnded    = cascade.ParentEnded("researcher", termination.TagCancelled)
)

// treeRun is a tree.SharedRun that records what a fleet does to it: the causes
// it is stopped with, the warnings it is given, the usage charged to it.
type treeRun struct {
	mu      sync.Mutex
	stops   []termination.Cause
	warns   []termination.Cause
	charged tree.Usage
	charges int
	held    termination.Cause // what HoldTree holds it at, until ReleaseTree
	holds   int               // HoldTree calls
}

func (r *treeRun) HoldTree(c termination.Cause) {
	r.mu.Lock()
	r.held = c
	r.holds++
	r.mu.Unlock()
}

func (r *treeRun) ReleaseTree() {
	r.mu.Lock()
	r.held = nil
	r.mu.Unlock()
}

func (r *treeRun) heldAt() termination.Cause {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

func (r *treeRun) StopTree(c termination.Cause) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stops = append(r.stops, c)
	return len(r.stops) == 1
}

func (r *treeRun) WarnTree(c termination.Cause) {
	r.mu.Lock()
	r.warns = append(r.warns, c)
	r.mu.Unlock()
}

func (r *treeRun) ChargeTree(u tree.Usage) {
	r.mu.Lock()
	r.charged = r.charged.Add(u)
	r.charges++
	r.mu.Unlock()
}

// runFuncs is a tree.SharedRun of functions; a nil one ignores the call.
type runFuncs struct {
	stop   func(termination.Cause) bool
	warn   func(termination.Cause)
	charge func(tree.Usage)
}

func (f runFuncs) StopTree(c termination.Cause) bool { return f.stop != nil && f.stop(c) }
func (f runFuncs) WarnTree(c termination.Cause) {
	if f.warn != nil {
		f.warn(c)
	}
}
func (f runFuncs) ChargeTree(u tree.Usage) {
	if f.charge != nil {
		f.charge(u)
	}
}
func (runFuncs) HoldTree(termination.Cause) {}
func (runFuncs) ReleaseTree()               {}

func (r *treeRun) stopped() termination.Cause {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.stops) == 0 {
		return nil
	}
	return r.stops[0]
}

func (r *treeRun) warnings() []termination.Cause {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]termination.Cause(nil), r.warns...)
}

func (r *treeRun) chargedUsage() tree.Usage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.charged
}

// treeFleets returns n Fleets on r under one prefix: n processes.
func treeFleets(t *testing.T, r deployment, n int, opts ...Option) []*Fleet {
	t.Helper()
	fs := make([]*Fleet, n)
	for i := range fs {
		o := opts
		if i > 0 {
			o = append([]Option{WithPrefix(fs[0].cfg.prefix)}, opts...)
		}
		fs[i] = newTestFleet(t, r, o...)
	}
	return fs
}

// flushAll runs one sync round of each Fleet, in order.
func flushAll(t *testing.T, fs ...*Fleet) {
	t.Helper()
	for _, f := range fs {
		if err := f.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// treePair is a planner's tree held in one Fleet (process) and joined by
// a researcher in another, both synced once.
type treePair struct {
	a, b            *Fleet
	holder          string
	planner, worker *treeRun
	hm, jm          tree.Member
}

func newTreePair(t *testing.T, r deployment, limits termination.Limits) *treePair {
	t.Helper()
	fs := treeFleets(t, r, 2)
	p := &treePair{a: fs[0], b: fs[1], holder: runid.New(), planner: &treeRun{}, worker: &treeRun{}}
	p.hm = p.a.HoldTree(tree.Spec{Holder: p.holder, Stage: "planner", Limits: limits}, tree.Usage{}, p.planner)
	t.Cleanup(func() { p.hm.Leave(plannerEnded) })
	flushAll(t, p.a)
	p.jm = p.b.JoinTree(t.Context(), p.holder, p.worker)
	if p.jm == nil {
		t.Fatal("the joined process did not find the tree")
	}
	t.Cleanup(func() { p.jm.Leave(joinEnded) })
	flushAll(t, p.b, p.b)
	return p
}

// treeRecord reads the stored record of holder's tree.
func treeRecord(t *testing.T, r deployment, f *Fleet, holder string) map[string]string {
	t.Helper()
	h, err := rawClient(t, r).HGetAll(t.Context(), f.k.tree(escape(holder))).Result()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func recordFloat(h map[string]string, field string) float64 {
	v, _ := strconv.ParseFloat(h[field], 64)
	return v
}

func tokens(n int64) tree.Usage {
	return tree.Usage{Totals: termination.Totals{Tokens: termination.Usage{InputTokens: n}}}
}

// wantParentStop checks that a joined run's cause is Cancelled{reason:
// parent} naming the holder's stage and the tree cause's tag.
func wantParentStop(t *testing.T, what string, c termination.Cause, stage, tag string) {
	t.Helper()
	parentCancelled(t, what, c, stage+" ended: "+tag)
}

// TestTreeLeases (§8 across processes, through three Fleets on one server
// and on a cluster): a planner in process A holds total_tokens 10,000;
// researchers joined in B and C spend concurrently until the fleet stops
// them. The tree's settled usage ends within the limit plus the overshoot
// bound of the package documentation (a lease per process plus an event
// per spending run); the holder is stopped with the tree limit's cause,
// the joined runs (the spenders and an idle one) with Cancelled{parent};
// the holding is charged exactly what B and C settled.
func TestTreeLeases(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		fs := treeFleets(t, r, 3)
		a, b, c := fs[0], fs[1], fs[2]
		const (
			limit = 10000
			event = 37
			lease = limit / 100 // defaultLeaseFraction
			own   = 1000        // the planner's own: 500 before the holding, 500 through it
		)
		holder := runid.New()
		var planner treeRun
		hm := a.HoldTree(tree.Spec{Holder: holder, Stage: "planner",
			Limits: termination.Limits{Has: termination.LimitTotalTokens, TotalTokens: limit}}, tokens(500), &planner)
		defer hm.Leave(plannerEnded)
		for range 10 {
			if stop := hm.Spend(tokens(50)); stop != nil {
				t.Fatalf("the holding's own spend stopped: %v", stop)
			}
		}
		var idle treeRun
		im := b.JoinTree(t.Context(), holder, &idle)
		defer im.Leave(joinEnded)
		flushAll(t, a, b, c)

		var wg sync.WaitGroup
		causes := make([]termination.Cause, 2)
		spent := make([]int64, 2)
		for i, f := range []*Fleet{b, c} {
			var run treeRun
			m := f.JoinTree(t.Context(), holder, &run)
			defer m.Leave(joinEnded)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < 2*limit/event; n++ {
					spent[i] += event
					if stop := m.Spend(tree.Usage{Totals: termination.Totals{Iterations: 1, Tokens: termination.Usage{InputTokens: event / 2, OutputTokens: event - event/2}}}); stop != nil {
						causes[i] = stop
						return
					}
				}
			}()
		}
		wg.Wait()
		for i, cause := range causes {
			wantParentStop(t, "spending researcher "+strconv.Itoa(i), cause, "planner", termination.TagBudgetExhausted)
		}
		eventually(t, 3*time.Second, "the holder and the idle researcher are stopped", func() bool {
			return planner.stopped() != nil && idle.stopped() != nil
		})
		x, ok := planner.stopped().(termination.BudgetExhausted)
		if !ok || x.Resource != termination.ResourceTotalTokens || x.Limit != limit || x.Scope != termination.ScopeTree || x.Used < limit {
			t.Errorf("holder's cause = %#v, want BudgetExhausted{total_tokens, used >= %d, limit %d, scope tree}", planner.stopped(), limit, limit)
		}
		wantParentStop(t, "idle researcher", idle.stopped(), "planner", termination.TagBudgetExhausted)

		flushAll(t, b, c, a)
		h := treeRecord(t, r, a, holder)
		settled := recordFloat(h, "s3")
		bound := float64(lease*3 + event*2)
		t.Logf("settled %g tokens of a %d limit (overshoot %g, bound %g); B and C spent %v", settled, limit, settled-limit, bound, spent)
		if settled < limit || settled > limit+bound {
			t.Errorf("the tree's settled usage = %g, want in [%d, %g]", settled, limit, limit+bound)
		}
		if h["ex"] != "3" {
			t.Errorf("record ex = %q, want 3 (total_tokens)", h["ex"])
		}
		eventually(t, 3*time.Second, "the holding is charged what B and C settled", func() bool {
			_ = a.Flush(t.Context())
			u := planner.chargedUsage()
			return float64(u.Tokens.Total()) == settled-own
		})
		if u := planner.chargedUsage(); int64(u.Iterations) != int64(recordFloat(h, "s1")) || u.Tokens.Total() != int64(settled)-own {
			t.Errorf("charged %+v; the record settled %g iterations and %g tokens (the planner's own: %d)", u, recordFloat(h, "s1"), settled, own)
		}
	})
}

// TestTreeCountExact: a count limit n allows n and fires on the (n+1)-th,
// whichever process spends it, when the processes spend one at a time with
// a sync of each between.
func TestTreeCountExact(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		for _, last := range []string{"holder", "joined"} {
			t.Run("sixth by the "+last, func(t *testing.T) {
				p := newTreePair(t, r, termination.Limits{Has: termination.LimitIterations, Iterations: 5})
				a, b, planner, worker, hm, jm := p.a, p.b, p.planner, p.worker, p.hm, p.jm
				members := []tree.Member{hm, jm}
				order := []*Fleet{a, b}
				if last == "holder" {
					members[0], members[1], order[0], order[1] = jm, hm, b, a
				}
				for n := 1; n <= 6; n++ {
					i := (n - 1) % 2
					stop := members[i].Spend(tree.Usage{Totals: termination.Totals{Iterations: 1}})
					if n < 6 {
						if stop != nil {
							t.Fatalf("iteration %d of 5 stopped: %v", n, stop)
						}
						flushAll(t, order[i], order[1-i])
						continue
					}
					want := termination.MaxIterationsReached{Limit: 5, Count: 6, Scope: termination.ScopeTree}
					if last == "holder" {
						if stop != want {
							t.Errorf("the 6th iteration, by the holder: %#v, want %#v", stop, want)
						}
						eventually(t, 3*time.Second, "the joined run is stopped", func() bool { return worker.stopped() != nil })
						wantParentStop(t, "the joined run", worker.stopped(), "planner", termination.TagMaxIterations)
					} else {
						wantParentStop(t, "the 6th iteration, by the joined run", stop, "planner", termination.TagMaxIterations)
						eventually(t, 3*time.Second, "the holder is stopped", func() bool { return planner.stopped() != nil })
						if c := planner.stopped(); c != want {
							t.Errorf("the holder's cause = %#v, want %#v", c, want)
						}
					}
				}
			})
		}
	})
}

// TestTreeWarn: a warning the holding publishes (its tree pressure)
// reaches the joined runs of every other process, decoded as sent; the
// holding itself is not warned.
func TestTreeWarn(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		fs := treeFleets(t, r, 3)
		holder := runid.New()
		var planner, b1, c1 treeRun
		hm := fs[0].HoldTree(tree.Spec{Holder: holder, Stage: "planner",
			Limits: termination.Limits{Has: termination.LimitCost, Cost: 2}}, tree.Usage{}, &planner)
		defer hm.Leave(plannerEnded)
		for i, run := range []*treeRun{&b1, &c1} {
			m := fs[i+1].JoinTree(t.Context(), holder, run)
			defer m.Leave(joinEnded)
		}
		flushAll(t, fs...)
		w := termination.BudgetPressure{Resource: termination.ResourceCost, Threshold: 0.8, Used: 1.7, Limit: 2, Scope: termination.ScopeTree}
		hm.Warn(w)
		// One sync round of each process, in order, carries it (the poke
		// would too, at its own pace: under a loaded CI run with a cluster
		// that pace once passed 3s).
		flushAll(t, fs...)
		eventually(t, 3*time.Second, "both joined runs are warned", func() bool {
			return len(b1.warnings()) == 1 && len(c1.warnings()) == 1
		})
		for _, got := range [][]termination.Cause{b1.warnings(), c1.warnings()} {
			if got[0] != w {
				t.Errorf("warning = %#v, want %#v", got[0], w)
			}
		}
		if len(planner.warnings()) != 0 {
			t.Errorf("the holding was warned: %v", planner.warnings())
		}
	})
}

// TestTreeUnknownHolder: JoinTree of a holder no process holds returns nil
// (the run then takes its propagated limits as its own) after looking for
// the record for at most a sync interval, stores nothing and counts no
// error; a join that comes before the holder's process has created the
// record (HoldTree, then at once a request) finds it. A joined tree whose
// record is gone (its TTL ran out) grants nothing and never stops the run;
// its usage is settled when the holder's process shares the tree again.
func TestTreeUnknownHolder(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		fs := treeFleets(t, r, 2)
		a, b := fs[0], fs[1]
		begin := time.Now()
		if m := b.JoinTree(t.Context(), runid.New(), nil); m != nil {
			t.Fatal("JoinTree of a holder no process holds returned a member")
		}
		if d := time.Since(begin); d > b.cfg.tick+b.cfg.opTimeout {
			t.Errorf("JoinTree of an unknown holder took %s", d)
		}
		if ks, _ := keysMatching(t.Context(), rawClient(t, r), a.cfg.prefix+"{tree:*"); len(ks) != 0 {
			t.Errorf("a joined process created %v", ks)
		}
		if !b.up.Load() {
			t.Error("an unknown holder counted as a failure")
		}

		// The race of HoldTree's sync against the request.
		holder := runid.New()
		var planner treeRun
		limits := termination.Limits{Has: termination.LimitTotalTokens, TotalTokens: 1_000_000}
		hm := a.HoldTree(tree.Spec{Holder: holder, Stage: "planner", Limits: limits}, tree.Usage{}, &planner)
		jm := b.JoinTree(t.Context(), holder, nil)
		if jm == nil {
			t.Fatal("a join right after HoldTree did not find the tree")
		}
		defer jm.Leave(joinEnded)

		// The record gone: nothing is granted, nothing stops the run.
		hm.Leave(plannerEnded)
		flushAll(t, a, b)
		if err := rawClient(t, r).Del(t.Context(), a.k.tree(escape(holder))).Err(); err != nil {
			t.Fatal(err)
		}
		for range 100 {
			if stop := jm.Spend(tokens(1000)); stop != nil {
				t.Fatalf("a join of a tree without a record stopped: %v", stop)
			}
		}
		flushAll(t, b, b)
		if ks, _ := keysMatching(t.Context(), rawClient(t, r), a.cfg.prefix+"{tree:*"); len(ks) != 0 {
			t.Errorf("a joined process created %v", ks)
		}
		if !b.up.Load() {
			t.Error("a missing record counted as a failure")
		}
		hm2 := a.HoldTree(tree.Spec{Holder: holder, Stage: "planner", Limits: limits}, tree.Usage{}, &planner)
		defer hm2.Leave(plannerEnded)
		eventually(t, 3*time.Second, "the join's usage reaches the holding", func() bool {
			flushAll(t, a, b, a)
			return planner.chargedUsage().Tokens.Total() == 100_000
		})
	})
}

// TestTreeHolderLeaves: the holding's Leave records the tree's end: a
// join after it is granted nothing (and a live join no more).
func TestTreeHolderLeaves(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		fs := treeFleets(t, r, 3)
		a, b, c := fs[0], fs[1], fs[2]
		holder := runid.New()
		var planner, live treeRun
		hm := a.HoldTree(tree.Spec{Holder: holder, Stage: "planner",
			Limits: termination.Limits{Has: termination.LimitTotalTokens, TotalTokens: 100_000}}, tree.Usage{}, &planner)
		lm := b.JoinTree(t.Context(), holder, &live)
		defer lm.Leave(joinEnded)
		flushAll(t, a, b, b)
		if h := treeRecord(t, r, a, holder); !strings.HasPrefix(h["L:"+b.proc], "0 0 1000 ") {
			t.Fatalf("the live join's lease = %q, want 1000 tokens", h["L:"+b.proc])
		}
		hm.Leave(plannerEnded)
		flushAll(t, a)
		h := treeRecord(t, r, a, holder)
		if h["end"] != "e"+plannerEnded.Detail {
			t.Fatalf("record after the holding left: %v, want end with %q", h, plannerEnded.Detail)
		}
		if _, ok := h["L:"+a.proc]; ok {
			t.Errorf("the holder's process still holds a lease: %v", h)
		}
		var late treeRun
		m := c.JoinTree(t.Context(), holder, &late)
		defer m.Leave(joinEnded)
		for range 3 {
			_ = m.Spend(tokens(600)) // past any lease: asks for one
			flushAll(t, c)
		}
		_ = lm.Spend(tokens(900))
		flushAll(t, b)
		h = treeRecord(t, r, a, holder)
		if _, ok := h["L:"+c.proc]; ok {
			t.Errorf("a join after the holder's end holds a lease: %v", h)
		}
		if v := h["L:"+b.proc]; !strings.HasPrefix(v, "0 0 100 ") {
			t.Errorf("the live join's lease after the end = %q, want what was left of it (100), not renewed", v)
		}
		if s := recordFloat(h, "s3"); s != 2700 {
			t.Errorf("settled after the end = %g, want 2700: usage is still settled", s)
		}
		if planner.stopped() != nil || live.stopped() != nil || late.stopped() != nil {
			t.Error("the end stopped a run: that is the cascade's (§8) work, through ended records")
		}
	})
}

// TestTreeSpendAllocs: a Spend on a lease allocates nothing, for the
// holding and for a joined run.
func TestTreeSpendAllocs(t *testing.T) {
	r := redistest.Start(t)
	fs := treeFleets(t, r, 2, WithLease(15*time.Second))
	holder := runid.New()
	hm := fs[0].HoldTree(tree.Spec{Holder: holder, Stage: "planner",
		Limits: termination.Limits{Has: termination.LimitTotalTokens | termination.LimitIterations | termination.LimitCost,
			TotalTokens: 1 << 50, Iterations: 1 << 40, Cost: 1e12}}, tree.Usage{}, nil)
	defer hm.Leave(plannerEnded)
	jm := fs[1].JoinTree(t.Context(), holder, nil)
	defer jm.Leave(joinEnded)
	flushAll(t, fs[0], fs[1], fs[1])
	u := tree.Usage{Totals: termination.Totals{Iterations: 1, Tokens: termination.Usage{InputTokens: 120, OutputTokens: 30}, Cost: 0.001}}
	for name, m := range map[string]tree.Member{"holding": hm, "join": jm} {
		if n := testing.AllocsPerRun(1000, func() { _ = m.Spend(u) }); n != 0 {
			t.Errorf("%s: Spend allocates %g times per event, want 0", name, n)
		}
	}
}

// TestTreeOvershootBound: three processes spending far faster than a
// reserve's round trip (interleaved, microseconds apart) stop with the
// tree's usage past its limit within the documented bound: lease size ×
// processes + one event in flight per run.
func TestTreeOvershootBound(t *testing.T) {
	srv := redistest.Start(t)
	fs := treeFleets(t, srv, 3, WithLeaseFraction(0.1))
	const (
		limit = 1000
		event = 100
		lease = limit / 10
	)
	holder := runid.New()
	hm := fs[0].HoldTree(tree.Spec{Holder: holder, Stage: "planner",
		Limits: termination.Limits{Has: termination.LimitTotalTokens, TotalTokens: limit}}, tree.Usage{}, nil)
	defer hm.Leave(plannerEnded)
	members := []tree.Member{hm}
	for _, f := range fs[1:] {
		m := f.JoinTree(t.Context(), holder, nil)
		defer m.Leave(joinEnded)
		members = append(members, m)
	}
	flushAll(t, fs[0], fs[1], fs[2], fs[1], fs[2]) // each holds its lease
	spent := 0
	live := []bool{true, true, true}
	for n := 0; n < 1000; n++ {
		any := false
		for i, m := range members {
			if !live[i] {
				continue
			}
			any = true
			spent += event // the event that finds the limit is spent too
			if stop := m.Spend(tokens(event)); stop != nil {
				live[i] = false
			}
		}
		if !any {
			break
		}
	}
	bound := lease*3 + event*3
	t.Logf("spent %d of %d: overshoot %d, bound %d", spent, limit, spent-limit, bound)
	if over := spent - limit; over > bound {
		t.Errorf("spent %d tokens of a %d limit: overshoot %d, bound %d", spent, limit, over, bound)
	}
	if spent < limit {
		t.Errorf("spent %d tokens of a %d limit: stopped before the limit", spent, limit)
	}
}

// causeOf decodes the cause JSON a child printed.
func causeOf(t *testing.T, js string) termination.Cause {
	t.Helper()
	c, err := codec.UnmarshalCause([]byte(js))
	if err != nil {
		t.Fatalf("cause %s: %v", js, err)
	}
	return c
}

// leases returns the processes holding a lease in a tree's record.
// heldTokens sums the total tokens (the third amount) of the leases in a
// tree's record.
func heldTokens(h map[string]string) float64 {
	var sum float64
	for f, v := range h {
		if strings.HasPrefix(f, "L:") {
			if fs := strings.Fields(v); len(fs) > 2 {
				a, _ := strconv.ParseFloat(fs[2], 64)
				sum += a
			}
		}
	}
	return sum
}

func leases(h map[string]string) []string {
	var out []string
	for f := range h {
		if p, ok := strings.CutPrefix(f, "L:"); ok {
			out = append(out, p)
		}
	}
	return out
}

// TestTreeProcesses: the holder in this process, researchers in two OS
// processes. The holder's warning reaches both; the researchers spend
// concurrently until the fleet stops them with Cancelled{parent}; the
// holder is stopped with the tree limit's cause and charged their usage;
// the tree's usage ends within the overshoot bound. Then a process killed
// with SIGKILL while holding a lease: its lease goes back to the tree one
// lease period later.
func TestTreeProcesses(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		a := newTestFleet(t, r, WithLease(time.Second))
		prefix := a.cfg.prefix
		cs := []*child{startChild(t, r.URL(), prefix, time.Second), startChild(t, r.URL(), prefix, time.Second)}
		const (
			limit = 20000
			event = 50
			lease = limit / 100
		)
		holder := runid.New()
		var planner treeRun
		hm := a.HoldTree(tree.Spec{Holder: holder, Stage: "planner",
			Limits: termination.Limits{Has: termination.LimitTotalTokens, TotalTokens: limit}}, tree.Usage{}, &planner)
		defer hm.Leave(plannerEnded)
		flushAll(t, a)
		for _, c := range cs {
			c.send("tjoin r " + holder)
			c.expect("tjoined r", 5*time.Second)
			c.send("flush")
			c.expect("flushed", 5*time.Second)
		}
		w := termination.BudgetPressure{Resource: termination.ResourceTotalTokens, Threshold: 0.5, Used: 0, Limit: limit, Scope: termination.ScopeTree}
		hm.Warn(w)
		for i, c := range cs {
			l := c.expect("twarned r ", 3*time.Second)
			if got := causeOf(t, strings.TrimPrefix(l, "twarned r ")); got != w {
				t.Errorf("process %d: warned with %#v, want %#v", i, got, w)
			}
		}

		for _, c := range cs {
			c.send("tspend r 100000 " + strconv.Itoa(event))
		}
		for i, c := range cs {
			fs := strings.SplitN(c.expect("tspent r ", 10*time.Second), " ", 4)
			wantParentStop(t, "researcher "+strconv.Itoa(i), causeOf(t, fs[3]), "planner", termination.TagBudgetExhausted)
		}
		eventually(t, 3*time.Second, "the holder is stopped", func() bool { return planner.stopped() != nil })
		if x, ok := planner.stopped().(termination.BudgetExhausted); !ok || x.Scope != termination.ScopeTree || x.Limit != limit {
			t.Errorf("holder's cause = %#v", planner.stopped())
		}
		for _, c := range cs {
			c.send("flush")
			c.expect("flushed", 5*time.Second)
		}
		h := treeRecord(t, r, a, holder)
		settled := recordFloat(h, "s3")
		bound := float64(lease*3 + event*2)
		if settled < limit || settled > limit+bound {
			t.Errorf("the tree's settled usage = %g, want in [%d, %g]", settled, limit, limit+bound)
		}
		eventually(t, 3*time.Second, "the holding is charged the researchers' usage", func() bool {
			_ = a.Flush(t.Context())
			return float64(planner.chargedUsage().Tokens.Total()) == settled
		})

		// A dead process's lease.
		for _, c := range cs {
			c.send("tleave r")
			c.expect("tleft r", 5*time.Second)
		}
		holder2 := runid.New()
		hm2 := a.HoldTree(tree.Spec{Holder: holder2, Stage: "planner",
			Limits: termination.Limits{Has: termination.LimitTotalTokens, TotalTokens: limit}}, tree.Usage{}, nil)
		defer hm2.Leave(plannerEnded)
		flushAll(t, a)
		cs[0].send("tjoin r2 " + holder2)
		cs[0].expect("tjoined r2", 5*time.Second)
		cs[0].send("tspend r2 1 10")
		cs[0].expect("tspent r2 1 -", 5*time.Second)
		cs[0].send("flush")
		cs[0].expect("flushed", 5*time.Second)
		// Each process holds a lease, the 10 are settled, and committed =
		// settled + held. (Whether the child's 10 came before its first
		// lease, which it then holds whole, or out of it, leaving it 190,
		// depends on the scheduler; both are right.)
		h = treeRecord(t, r, a, holder2)
		if n := len(leases(h)); n != 2 || recordFloat(h, "s3") != 10 || recordFloat(h, "c3")-heldTokens(h) != 10 {
			t.Fatalf("before the kill: %v, want two leases and 10 settled", h)
		}
		if err := cs[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-cs[0].done
		time.Sleep(1100 * time.Millisecond)
		eventually(t, 3*time.Second, "the dead process's lease goes back", func() bool {
			_ = a.Flush(t.Context())
			h = treeRecord(t, r, a, holder2)
			return len(leases(h)) == 1 && recordFloat(h, "c3") == lease+10
		})
		if l := leases(h); l[0] != a.proc {
			t.Errorf("lease left = %v, want this process's", l)
		}
	})
}

// TestTreeClose: Close settles the usage and returns the leases of its
// trees.
func TestTreeClose(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		fs := treeFleets(t, r, 2)
		a, b := fs[0], fs[1]
		holder := runid.New()
		hm := a.HoldTree(tree.Spec{Holder: holder, Stage: "planner",
			Limits: termination.Limits{Has: termination.LimitToolCalls, ToolCalls: 1000}}, tree.Usage{}, nil)
		defer hm.Leave(plannerEnded)
		jm := b.JoinTree(t.Context(), holder, nil)
		flushAll(t, a, b, b)
		_ = jm.Spend(tree.Usage{Totals: termination.Totals{ToolCalls: 3}})
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		h := treeRecord(t, r, a, holder)
		if _, ok := h["L:"+b.proc]; ok || recordFloat(h, "s2") != 3 || recordFloat(h, "c2") != 3+10 {
			t.Errorf("after Close: %v, want 3 tool calls settled, only the holder's lease (10) left", h)
		}
	})
}

// TestTreeServerRestart: while the server is unreachable a tree's members
// spend what they have without waiting and nothing stops them
// (fail-open; agent.fleet.errors counts the failed reserves); when it
// comes back empty, the holder's process creates the record again from
// the usage it last saw settled, every process settles what it spent
// meanwhile, and the holding is charged the rest.
func TestTreeServerRestart(t *testing.T) {
	srv := redistest.Start(t)
	reader := sdkmetric.NewManualReader()
	a := newTestFleet(t, srv, WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	b := newTestFleet(t, srv, WithPrefix(a.cfg.prefix))
	holder := runid.New()
	var planner treeRun
	hm := a.HoldTree(tree.Spec{Holder: holder, Stage: "planner",
		Limits: termination.Limits{Has: termination.LimitTotalTokens, TotalTokens: 1_000_000}}, tree.Usage{}, &planner)
	defer hm.Leave(plannerEnded)
	jm := b.JoinTree(t.Context(), holder, nil)
	defer jm.Leave(joinEnded)
	flushAll(t, a, b, b)
	for _, m := range []tree.Member{hm, jm} {
		if stop := m.Spend(tokens(100)); stop != nil {
			t.Fatal(stop)
		}
	}
	flushAll(t, a, b, a)

	srv.Kill()
	eventually(t, 5*time.Second, "the failed reserves are counted", func() bool {
		return fleetErrors(t, reader) > 0
	})
	begin := time.Now()
	for range 50 { // 5000 tokens each: half of a lease
		for _, m := range []tree.Member{hm, jm} {
			if stop := m.Spend(tokens(100)); stop != nil {
				t.Fatalf("a spend stopped while the server is away: %v", stop)
			}
		}
	}
	if d := time.Since(begin); d > 100*time.Millisecond {
		t.Errorf("100 spends took %s while the server is away: they wait on the network", d)
	}
	srv.Restart()
	eventually(t, 10*time.Second, "the record is back with every process's usage", func() bool {
		_ = a.Flush(t.Context())
		_ = b.Flush(t.Context())
		h, err := rawClient(t, srv).HGetAll(t.Context(), a.k.tree(escape(holder))).Result()
		return err == nil && h["s3"] == "10200"
	})
	eventually(t, 3*time.Second, "the holding is charged the joined process's usage", func() bool {
		_ = a.Flush(t.Context())
		return planner.chargedUsage().Tokens.Total() == 5100
	})
}

// TestTreeFinalNeverFires: what final events spent counts but never fires
// a tree limit (§3), in the process that spent it or through the store;
// the next other event anywhere in the tree fires it.
func TestTreeFinalNeverFires(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		p := newTreePair(t, r, termination.Limits{Has: termination.LimitTotalTokens, TotalTokens: 1000})
		a, b, holder, planner, worker, hm, jm := p.a, p.b, p.holder, p.planner, p.worker, p.hm, p.jm
		final := tree.UsageOf(&termination.Event{Kind: termination.KindFinal, Usage: termination.Usage{OutputTokens: 1500}})
		if stop := jm.Spend(final); stop != nil {
			t.Fatalf("a final's usage fired the tree limit: %v", stop)
		}
		flushAll(t, b, a, b)
		if h := treeRecord(t, r, a, holder); h["s3"] != "1500" || h["ex"] != "" {
			t.Fatalf("record after the final: %v, want 1500 settled and no exhaustion", h)
		}
		if planner.stopped() != nil || worker.stopped() != nil {
			t.Fatalf("a final's usage stopped a run: %v, %v", planner.stopped(), worker.stopped())
		}
		if u := planner.chargedUsage(); u.Iterations != 1 || u.Final.Iterations != 1 || u.Tokens.OutputTokens != 1500 || u.Final.Tokens.OutputTokens != 1500 {
			t.Errorf("the holding was charged %+v, want the final's iteration and 1500 tokens, as a final's", u)
		}
		stop := hm.Spend(tokens(1))
		want := termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 1501, Limit: 1000, Scope: termination.ScopeTree}
		if stop != want {
			t.Errorf("the next event: %#v, want %#v", stop, want)
		}
		eventually(t, 3*time.Second, "the joined run is stopped", func() bool { return worker.stopped() != nil })
		wantParentStop(t, "the joined run", worker.stopped(), "planner", termination.TagBudgetExhausted)
	})
}

// TestTreeChargeMayEndHolder: the holding's Charge may end the holder
// (its evaluator fires the tree limit) and so call the holding's Leave,
// and its Stop may do the same, from the fleet's goroutines: no lock of
// the fleet is held then.
func TestTreeChargeMayEndHolder(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		fs := treeFleets(t, r, 2)
		a, b := fs[0], fs[1]
		holder := runid.New()
		var hm tree.Member
		var mu sync.Mutex
		ended := make(chan struct{})
		var once sync.Once
		end := func() {
			once.Do(func() {
				mu.Lock()
				m := hm
				mu.Unlock()
				m.Leave(plannerEnded)
				close(ended)
			})
		}
		mu.Lock()
		hm = a.HoldTree(tree.Spec{Holder: holder, Stage: "planner",
			Limits: termination.Limits{Has: termination.LimitToolCalls, ToolCalls: 1000}}, tree.Usage{},
			runFuncs{
				charge: func(tree.Usage) { end() },
				stop:   func(termination.Cause) bool { end(); return true },
			})
		mu.Unlock()
		jm := b.JoinTree(t.Context(), holder, nil)
		defer jm.Leave(joinEnded)
		flushAll(t, b, b)
		_ = jm.Spend(tree.Usage{Totals: termination.Totals{ToolCalls: 1}})
		flushAll(t, b, a)
		select {
		case <-ended:
		case <-time.After(3 * time.Second):
			t.Fatal("the holding was not charged")
		}
		flushAll(t, a, b)
		if h := treeRecord(t, r, a, holder); h["end"] != "eplanner ended: completed" {
			t.Errorf("record after the holder left from Charge: %v, want end with planner ended: completed", h)
		}
	})
}

// TestTreeThroughMiddlewareAcrossProcesses: the whole path, with real
// processes. A planner in this process holds tree: {token_budget: 2000};
// the Propagator's headers start researchers in two child processes, which
// join the planner's tree through the fleet. Their events are charged to
// the planner as they are spent; when together with the planner's they
// reach the budget, the planner ends with BudgetExhausted{scope: tree} and
// the researchers with Cancelled{parent} naming it.
func TestTreeThroughMiddlewareAcrossProcesses(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		a := newTestFleet(t, r)
		cs := []*child{startChild(t, r.URL(), a.cfg.prefix, 2*time.Second), startChild(t, r.URL(), a.cfg.prefix, 2*time.Second)}
		stage, err := middleware.New("planner", middleware.WithParticipant(fleet.Membership(a)),
			middleware.WithPolicy(termination.MustParsePolicy("tree: {token_budget: {total: 2000}}")))
		if err != nil {
			t.Fatal(err)
		}
		ctx, planner := stage.Start(t.Context())
		defer planner.Finish(nil)
		if _, stop := planner.Observe(termination.Event{Kind: termination.KindMessage, Source: "planner", Text: "plan",
			Usage: termination.Usage{InputTokens: 200}}); stop {
			t.Fatal("the planner stopped at once")
		}
		carrier := propagation.MapCarrier{}
		middleware.Propagator().Inject(ctx, carrier)
		if carrier[middleware.TreeHeader] != planner.ID() {
			t.Fatalf("the request names trees %q, want the planner's", carrier[middleware.TreeHeader])
		}
		headers, _ := json.Marshal(map[string]string(carrier))
		for _, c := range cs {
			c.send("pchild res researcher " + string(headers))
			c.expect("started res ", 5*time.Second)
		}
		for range 3 {
			for _, c := range cs {
				c.spend("res", 250, 50) // 300 tokens each: 200 + 6 × 300 = 2000
			}
		}
		eventually(t, 5*time.Second, "the planner is stopped by its tree budget", func() bool {
			_, ok := planner.Cause()
			return ok
		})
		c, _ := planner.Cause()
		x, ok := c.(termination.BudgetExhausted)
		if !ok || x.Scope != termination.ScopeTree || x.Limit != 2000 || x.Used < 2000 {
			t.Errorf("the planner's cause = %#v, want BudgetExhausted{total_tokens, >= 2000 of 2000, tree}", c)
		}
		for i, ch := range cs {
			wantParentStop(t, "researcher "+strconv.Itoa(i), ch.ended("res", 5*time.Second), "planner", termination.TagBudgetExhausted)
		}
	})
}

// TestTreeForgedExhaustion: a tree exhaustion published by hand, which the
// tree's record does not show, stops nothing.
func TestTreeForgedExhaustion(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		p := newTreePair(t, r, termination.Limits{Has: termination.LimitTotalTokens, TotalTokens: 1000})
		a, holder, planner, worker, jm := p.a, p.holder, p.planner, p.worker, p.jm
		if err := rawClient(t, r).Publish(t.Context(), a.k.ctl(), "tex "+escape(holder)+" splanner 3 5000 1000").Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if planner.stopped() != nil || worker.stopped() != nil {
			t.Errorf("a forged exhaustion stopped runs: %v, %v", planner.stopped(), worker.stopped())
		}
		if stop := jm.Spend(tokens(10)); stop != nil {
			t.Errorf("a spend after a forged exhaustion: %v", stop)
		}
	})
}
