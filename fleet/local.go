package fleet

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/agentstop/agentstop/fleet/internal/account"
	"github.com/agentstop/agentstop/fleet/internal/fleetmetrics"
	"github.com/agentstop/agentstop/internal/label"
	"github.com/agentstop/agentstop/internal/operator"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Local is the in-process fleet, the embedded default: the runs of every
// stage that uses it in this process form the fleet, with no server. It
// implements both [Fleet] and [Control]: registry, stops (confirmed and
// counted at once), blocks with expiry, and shared budgets per window,
// accounted exactly. It starts no goroutines; expiries and windows are
// applied when they are next looked at: each spend of a run with a fleet
// budget reads the clock once (time.Now, or WithClock's) and is charged to
// the budget window that holds that reading (the first spend at or past a
// window's end starts the next window), which is what exact windows cost
// per event: one clock read. The zero value is not usable; use
// [NewLocal].
type Local struct {
	host    string
	pid     int
	now     func() time.Time
	metrics *fleetmetrics.Metrics

	mu       sync.Mutex
	runs     map[string]*localMember
	blocks   map[string]Block // by Selector.String()
	accounts map[BudgetID]*account.Account
	swept    time.Time // when accounts were last swept of past windows

	tree localTrees // tree.Sharer (localtree.go), under a lock of their own
}

// sweepEvery is how often Join drops the accounts of past windows that no
// run shares any more, so that a process serving many tenants does not
// keep one account per tenant forever.
const sweepEvery = time.Minute

// Option configures a Local fleet.
type Option interface{ apply(*localConfig) }

type optionFunc func(*localConfig)

func (f optionFunc) apply(c *localConfig) { f(c) }

type localConfig struct {
	mp  metric.MeterProvider
	now func() time.Time
}

// WithMeterProvider records the fleet's metrics ([Metrics]) through mp.
// Default: the global MeterProvider. nil is ignored.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *localConfig) {
		if mp != nil {
			c.mp = mp
		}
	})
}

// WithClock makes the fleet read the time from now (block expiries,
// budget windows, start times), for tests. Default: time.Now. nil is
// ignored.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *localConfig) {
		if now != nil {
			c.now = now
		}
	})
}

// NewLocal returns an in-process fleet.
func NewLocal(opts ...Option) *Local {
	c := localConfig{now: time.Now}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	host, _ := os.Hostname()
	return &Local{host: host, pid: os.Getpid(), now: c.now, metrics: fleetmetrics.New(c.mp),
		runs: map[string]*localMember{}, blocks: map[string]Block{}, accounts: map[BudgetID]*account.Account{}}
}

// localMember is a run that joined a Local fleet.
type localMember struct {
	f    *Local
	info RunInfo         // immutable after Join
	run  Run             // nil for a run that gives its figures to Progress
	acct *account.Member // nil without a fleet budget

	mu   sync.Mutex
	prog termination.Totals
	left bool
}

// Participant implements Fleet: Membership(l).
func (l *Local) Participant() middleware.Participant { return Membership(l) }

// Join implements Fleet.
func (l *Local) Join(_ context.Context, run RunInfo, budget *termination.FleetBudget, r Run) (Member, termination.Cause) {
	m, c := l.join(run, budget, r)
	if c != nil {
		l.metrics.Rejected(c)
		return nil, c
	}
	return m, nil
}

func (l *Local) join(run RunInfo, budget *termination.FleetBudget, r Run) (*localMember, termination.Cause) {
	if run.ID == "" {
		return nil, invalidInput("fleet: Join: the run has no id")
	}
	if err := label.ValidateLabels(run.Labels); err != nil {
		return nil, invalidInput("fleet: Join: " + err.Error())
	}
	if budget != nil {
		if err := budget.Validate(); err != nil {
			return nil, invalidInput("fleet: Join: " + err.Error())
		}
	}
	now := l.now()
	run.Host, run.PID = l.host, l.pid
	if run.Started.IsZero() {
		run.Started = now
	}
	run.Labels, run.Trees = maps.Clone(run.Labels), slices.Clone(run.Trees)
	m := &localMember{f: l, info: run, run: r}

	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) >= sweepEvery {
		l.sweepLocked(now)
	}
	if _, dup := l.runs[run.ID]; dup {
		return nil, invalidInput(fmt.Sprintf("fleet: Join: run id %s has already joined", run.ID))
	}
	if b, ok := l.blockingLocked(run, now); ok {
		return nil, b.Cause()
	}
	if budget != nil {
		id, c := run.BudgetID(budget)
		if c != nil {
			return nil, c
		}
		a := l.accountLocked(id, *budget, now)
		if c := id.MismatchCause(*budget, a.Spec()); c != nil {
			return nil, c
		}
		am, c := a.Join(accountHooks(r))
		if c != nil {
			return nil, c
		}
		m.acct = am
	}
	l.runs[run.ID] = m
	return m, nil
}

func invalidInput(msg string) termination.Failed {
	return termination.Failed{Reason: termination.FailInvalidInput, Err: msg}
}

// blockingLocked returns the first active block (by selector order) that
// matches run, dropping expired blocks.
func (l *Local) blockingLocked(run RunInfo, now time.Time) (Block, bool) {
	l.expireLocked(now)
	for _, k := range slices.Sorted(maps.Keys(l.blocks)) {
		if b := l.blocks[k]; b.Selector.MatchesRun(run.ID, run.Stage, run.Labels) {
			return b, true
		}
	}
	return Block{}, false
}

func (l *Local) expireLocked(now time.Time) {
	for k, b := range l.blocks {
		if !b.Expires.IsZero() && !now.Before(b.Expires) {
			delete(l.blocks, k)
		}
	}
}

// accountLocked returns the account of id for the window holding now,
// creating it (with spec as its stored limits) when there is none, or when
// its window is over and no run shares it any more; a window that is over
// while runs still share it is rolled forward.
func (l *Local) accountLocked(id BudgetID, spec termination.FleetBudget, now time.Time) *account.Account {
	a, ok := l.accounts[id]
	if ok {
		start, end := a.Window()
		switch {
		case now.Before(end):
			return a
		case a.Members() == 0:
			ok = false
		default:
			if s := account.WindowStart(now, a.Spec().Window); s.After(start) {
				a.Roll(s)
			}
			return a
		}
	}
	a = account.New(id.Key, id.Value, spec, account.WindowStart(now, spec.Window), l.metrics, nil)
	l.accounts[id] = a
	return a
}

// sweepLocked drops the accounts whose window is over and that no run
// shares.
func (l *Local) sweepLocked(now time.Time) {
	l.swept = now
	for id, a := range l.accounts {
		if _, end := a.Window(); !now.Before(end) && a.Members() == 0 {
			delete(l.accounts, id)
		}
	}
}

// Spend implements Member. It reads the clock once: the spend is charged
// to the budget window that holds that reading (account.Member.SpendAt), so
// a spend made after a window's end starts the next window, however late
// anything else notices the end.
func (m *localMember) Spend(u termination.Usage, cost float64) (warning, stop termination.Cause) {
	if m.acct == nil || (u.IsZero() && cost == 0) {
		return nil, nil
	}
	return m.acct.SpendAt(m.f.now(), u, cost)
}

// Progress implements Member.
func (m *localMember) Progress(p termination.Totals) {
	m.mu.Lock()
	m.prog = p
	m.mu.Unlock()
}

// Leave implements Member.
func (m *localMember) Leave(*termination.Result) {
	m.mu.Lock()
	if m.left {
		m.mu.Unlock()
		return
	}
	m.left = true
	m.mu.Unlock()
	l := m.f
	l.mu.Lock()
	if l.runs[m.info.ID] == m {
		delete(l.runs, m.info.ID)
	}
	l.mu.Unlock()
	if m.acct != nil {
		m.acct.Leave()
	}
}

func (m *localMember) snapshot(now time.Time) RunInfo {
	r := m.info
	r.Labels, r.Trees = maps.Clone(r.Labels), slices.Clone(r.Trees)
	if m.run != nil {
		r.SetProgress(m.run.Progress())
	} else {
		m.mu.Lock()
		r.SetProgress(m.prog)
		m.mu.Unlock()
	}
	r.SetHeld(m.run)
	// The process holds the live figures: they are current as of now.
	r.Updated = now
	return r
}

// members returns the live runs s matches.
func (l *Local) members(s Selector) []*localMember {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*localMember
	for _, m := range l.runs {
		if s.Matches(m.info) {
			out = append(out, m)
		}
	}
	return out
}

// Runs implements Control.
func (l *Local) Runs(ctx context.Context, sel Selector) ([]RunInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !sel.IsZero() {
		if err := sel.Validate(); err != nil {
			return nil, err
		}
	}
	now := l.now()
	ms := l.members(sel)
	out := make([]RunInfo, len(ms))
	for i, m := range ms {
		out[i] = m.snapshot(now)
	}
	slices.SortFunc(out, RunInfo.Compare)
	return out, nil
}

// Compare orders runs by start time, then id, as Control.Runs lists them:
// slices.SortFunc(runs, RunInfo.Compare).
func (r RunInfo) Compare(o RunInfo) int {
	if c := r.Started.Compare(o.Started); c != 0 {
		return c
	}
	return cmp.Compare(r.ID, o.ID)
}

// Stop implements Control. Every matching run is stopped before Stop
// returns, so none is unconfirmed.
func (l *Local) Stop(ctx context.Context, req StopRequest) (StopReport, error) {
	if err := req.Validate(); err != nil {
		return StopReport{}, err
	}
	if err := ctx.Err(); err != nil {
		return StopReport{}, err
	}
	if req.By == "" {
		req.By = operator.Name()
	}
	cause := req.Cause()
	ms := l.members(req.Selector)
	all := l.members(Selector{All: true}) // the live runs, for the descendants ended with them
	rep := StopReport{Matched: len(ms)}
	var stopped []string
	for _, m := range ms {
		if m.run != nil && m.run.StopWith(cause) {
			rep.Stopped++
			stopped = append(stopped, m.info.ID)
		} else {
			rep.AlreadyEnded++
		}
	}
	rep.Descendants = descendants(all, ms, stopped)
	l.metrics.Stopped(rep.Stopped)
	return rep, nil
}

// descendants counts the runs of all under the runs with the given ids (at
// any depth) that are not in matched: a stopped run's stage ends its live
// descendants with it (the middleware's cascade, in this process, before
// Run.StopWith returns).
func descendants(all, matched []*localMember, ids []string) int {
	if len(ids) == 0 {
		return 0
	}
	children := map[string][]*localMember{}
	for _, m := range all {
		if m.info.Parent != "" {
			children[m.info.Parent] = append(children[m.info.Parent], m)
		}
	}
	seen := map[*localMember]bool{}
	for _, m := range matched {
		seen[m] = true
	}
	n := 0
	for len(ids) > 0 {
		id := ids[len(ids)-1]
		ids = ids[:len(ids)-1]
		for _, c := range children[id] {
			if !seen[c] {
				seen[c] = true
				n++
				ids = append(ids, c.info.ID)
			}
		}
	}
	return n
}

// Block implements Control.
func (l *Local) Block(ctx context.Context, req BlockRequest) (Block, error) {
	if err := req.Validate(); err != nil {
		return Block{}, err
	}
	if err := ctx.Err(); err != nil {
		return Block{}, err
	}
	if req.By == "" {
		req.By = operator.Name()
	}
	now := l.now()
	b := Block{Selector: req.Selector, Reason: req.Reason, By: req.By, Created: now}
	b.Selector.Labels = maps.Clone(b.Selector.Labels)
	if req.Expire > 0 {
		b.Expires = now.Add(req.Expire)
	}
	l.mu.Lock()
	l.blocks[b.Selector.String()] = b
	l.mu.Unlock()
	return b, nil
}

// Unblock implements Control.
func (l *Local) Unblock(ctx context.Context, sel Selector) (int, error) {
	if err := sel.Validate(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	k := sel.String()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expireLocked(l.now())
	if _, ok := l.blocks[k]; !ok {
		return 0, nil
	}
	delete(l.blocks, k)
	return 1, nil
}

// Blocks implements Control.
func (l *Local) Blocks(ctx context.Context) ([]Block, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expireLocked(l.now())
	out := make([]Block, 0, len(l.blocks))
	for _, k := range slices.Sorted(maps.Keys(l.blocks)) {
		b := l.blocks[k]
		b.Selector.Labels = maps.Clone(b.Selector.Labels)
		out = append(out, b)
	}
	return out, nil
}

// Budgets implements Control: the shared budgets whose window holds now,
// or that live runs still share.
func (l *Local) Budgets(ctx context.Context) ([]Budget, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := l.now()
	l.mu.Lock()
	l.sweepLocked(now)
	var out []Budget
	for id, a := range l.accounts {
		if _, end := a.Window(); !now.Before(end) {
			a.Roll(account.WindowStart(now, a.Spec().Window)) // live runs share the next window
		}
		out = append(out, budgetOf(id, a))
	}
	l.mu.Unlock()
	slices.SortFunc(out, Budget.Compare)
	return out, nil
}

// budgetOf returns account a of budget id as Budgets lists it.
func budgetOf(id BudgetID, a *account.Account) Budget {
	st := a.Status()
	return Budget{Key: id.Key, Value: id.Value, Policy: a.Spec(), WindowStart: st.Start, WindowEnd: st.End,
		Used: termination.Usage{InputTokens: int64(st.Used[1]), OutputTokens: int64(st.Used[2])},
		Cost: st.Used[3], Pressure: st.Pressure, Exhausted: st.Exhausted, Runs: st.Runs}
}

// Compare orders budgets by key, then value, as Control.Budgets lists
// them: slices.SortFunc(budgets, Budget.Compare).
func (b Budget) Compare(o Budget) int {
	if c := cmp.Compare(b.Key, o.Key); c != 0 {
		return c
	}
	return cmp.Compare(b.Value, o.Value)
}

var (
	_ Fleet   = (*Local)(nil)
	_ Control = (*Local)(nil)
	_ Member  = (*localMember)(nil)
)

// accountHooks are how a shared budget's account reaches run: none for a
// nil run.
func accountHooks(run Run) account.Hooks {
	if run == nil {
		return account.Hooks{}
	}
	return account.Hooks{Stop: run.StopWith, Warn: run.Warn}
}
