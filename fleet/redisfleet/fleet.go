package redisfleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/internal/account"
	"github.com/agentstop/agentstop/fleet/internal/fleetmetrics"
	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Fleet is a fleet shared through Redis: it implements fleet.Fleet for the
// stages of this process (middleware.WithFleet(f)), the sharing of tree
// limits with descendants in other processes (its HoldTree, JoinTree and
// TreesOf, which the middleware calls) and fleet.Control.
//
// Join, Spend and Progress do not wait on the network (but for the
// one-lease cap on spending past the leases, see the package
// documentation): they work on local
// state that two goroutines keep in step with the server — a subscriber
// that receives stops, blocks and budget news as they are published, and a
// sync loop that registers, renews and removes runs, reserves and settles
// budget leases, and re-reads stored stops, blocks and raises every second
// and after every reconnect. Close stops both.
type Fleet struct {
	*Control

	host string
	pid  int
	proc string // this Fleet's id in budget leases

	offset atomic.Int64 // server clock − local clock, µs
	bound  atomic.Int64 // the offset's error bound, ns (ClockBound)
	up     atomic.Bool  // the last call to the server succeeded
	wake   chan struct{}

	roundMu sync.Mutex
	round   chan struct{} // closed when the sync loop ends a round; then replaced
	flush   chan chan struct{}

	mu        sync.Mutex
	runs      map[string]*member    // by escaped id
	removed   []string              // escaped ids to deregister
	ended     []*member             // ended runs whose records (P{runs}:end:ID) are not written yet
	blocks    map[string]record     // by block id
	stops     map[string]int64      // stop ids applied → when to forget them (server ms)
	raises    map[string]int64      // raise ids applied or answered → when to forget them (server ms)
	budgets   map[string]*shared    // by escaped budget id
	trees     map[string]*treeShare // by escaped holder id
	exhausted map[string]exhaustion
	idle      map[string]*shared // budgets dropped with no local run, until their window ends (dropBudget)
	resync    bool               // re-read stops, blocks and raises, re-register runs at the next tick

	// used by the sync loop only (and by New and Close around it)
	lastRenew, lastRead time.Time
	clockAt             time.Time // when the clock was last estimated; zero: estimate at the next round

	cancel context.CancelFunc
	bgDone <-chan struct{} // closed when the background work is told to stop
	wg     sync.WaitGroup
	closed atomic.Bool
}

var (
	_ fleet.Fleet   = (*Fleet)(nil)
	_ fleet.Control = (*Fleet)(nil)
)

// exhaustion records a shared budget exhausted until its window ends.
type exhaustion struct {
	we    int64 // window end, server ms
	cause termination.BudgetExhausted
}

// New returns a Fleet on the server at url and starts its background work.
// It tries to reach the server within ctx (and the operation timeout) so
// that blocks are known before the first run; when it cannot, it still
// returns a working Fleet (fail-open: runs go on; WithFailClosed: runs are
// skipped) that keeps trying. Close releases it.
func New(ctx context.Context, url string, opts ...Option) (*Fleet, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	ctl, err := newControl(url, cfg)
	if err != nil {
		return nil, err
	}
	host := cfg.host
	if host == "" {
		host, _ = os.Hostname()
	}
	f := &Fleet{
		Control:   ctl,
		host:      host,
		pid:       os.Getpid(),
		proc:      runid.New(),
		wake:      make(chan struct{}, 1),
		flush:     make(chan chan struct{}),
		runs:      map[string]*member{},
		blocks:    map[string]record{},
		stops:     map[string]int64{},
		raises:    map[string]int64{},
		budgets:   map[string]*shared{},
		trees:     map[string]*treeShare{},
		exhausted: map[string]exhaustion{},
		idle:      map[string]*shared{},
	}
	f.sync(ctx, true) // a first sync: the server's clock, blocks and stops
	bg, cancel := context.WithCancel(context.Background())
	f.cancel, f.bgDone = cancel, bg.Done()
	ps := f.client.Subscribe(bg, f.k.ctl())
	f.wg.Add(2)
	go f.subscribe(bg, ps)
	go f.loop(bg)
	return f, nil
}

// Close stops the background work, removes this process's remaining runs
// from the registry, settles and returns its unused budget and tree leases, and closes the
// connections. It waits at most ctx's deadline (or the operation timeout)
// for the server.
func (f *Fleet) Close(ctx context.Context) error {
	if !f.closed.CompareAndSwap(false, true) {
		return nil
	}
	f.cancel()
	f.wg.Wait()
	f.mu.Lock()
	for esc, m := range f.runs {
		delete(f.runs, esc)
		if m.registered {
			f.removed = append(f.removed, esc)
		}
		if m.acct != nil {
			m.acct.Leave()
		}
	}
	for _, sh := range f.trees {
		for m := range sh.members {
			m.left.Store(true)
		}
		clear(sh.members) // their leases are returned below
		sh.holding = nil
	}
	f.mu.Unlock()
	f.sync(ctx, false)
	return f.client.Close()
}

// serverNow is the server's clock, as this process estimates it, in ms
// since the Unix epoch.
func (f *Fleet) serverNow() int64 { return (time.Now().UnixMicro() + f.offset.Load()) / 1000 }

// clockInterval is how often a Fleet estimates the server's clock again.
const clockInterval = 10 * time.Second

// clockSamples is how many round trips one estimate takes.
const clockSamples = 5

// ClockBound returns how far the Fleet's estimate of the server's clock
// may be from the server's clock: half the round trip of the estimate's
// best sample, plus 1 ms for the millisecond the fleet works in. Block
// expiries and budget windows checked without a round trip (a run's start,
// a new window) follow the server's clock to within this bound. It is
// measured, not assumed: a loaded machine widens it, and it narrows again
// at the next estimate (every clockInterval). Before the first estimate
// (the server unreachable since New) it is one hour: the process's own
// clock is all there is.
func (f *Fleet) ClockBound() time.Duration {
	b := f.bound.Load()
	if b == 0 {
		return time.Hour
	}
	return time.Duration(b)
}

// estimateClock estimates the server's clock: clockSamples round trips,
// one after the other, each reading the server's TIME (microseconds); the
// sample with the smallest round trip wins, its offset taken at the
// middle of the round trip. The server read its clock at some instant
// within the round trip, so the estimate is off by at most half of it;
// the other samples, slowed by the network, the scheduler or a busy
// server, are worse and dropped. It reports whether a sample was taken.
func (f *Fleet) estimateClock(ctx context.Context) bool {
	best := time.Duration(-1)
	var offset int64
	for range clockSamples {
		cctx, cancel := f.timeout(ctx)
		sent := time.Now()
		t, err := clockScript.RunRO(cctx, f.scripts, []string{f.k.runs()}).StringSlice()
		rtt := time.Since(sent)
		cancel()
		if err != nil || len(t) != 2 {
			break
		}
		sec, err1 := strconv.ParseInt(t[0], 10, 64)
		usec, err2 := strconv.ParseInt(t[1], 10, 64)
		if err1 != nil || err2 != nil {
			break
		}
		if best < 0 || rtt < best {
			best = rtt
			offset = sec*1_000_000 + usec - sent.Add(rtt/2).UnixMicro()
		}
	}
	if best < 0 {
		return false
	}
	f.offset.Store(offset)
	f.bound.Store(int64(best/2 + time.Millisecond))
	f.clockAt = time.Now()
	return true
}

// nextRound returns a channel closed when the sync loop ends its current
// (or next) round.
func (f *Fleet) nextRound() <-chan struct{} {
	f.roundMu.Lock()
	defer f.roundMu.Unlock()
	if f.round == nil {
		f.round = make(chan struct{})
	}
	return f.round
}

// endRound wakes the Spends waiting for the end of a sync round.
func (f *Fleet) endRound() {
	f.roundMu.Lock()
	if f.round != nil {
		close(f.round)
		f.round = nil
	}
	f.roundMu.Unlock()
}

func (f *Fleet) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// fail records a failed call: the server is unreachable until a call
// succeeds again.
func (f *Fleet) fail(op string) {
	f.refresh()
	f.metrics.Error(op)
	f.up.Store(false)
}

// Flush waits until the sync loop has done one round of its work from
// now: runs started before it are registered, ended runs removed, budget
// usage settled, and every shared tree's usage settled and read back
// (when the server is reachable). It returns ctx's error if
// ctx ends first.
func (f *Fleet) Flush(ctx context.Context) error {
	if f.closed.Load() {
		return errClosed
	}
	done := make(chan struct{})
	select {
	case f.flush <- done:
	case <-f.bgDone:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-f.bgDone:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Budgets implements fleet.Control: like Control.Budgets, after settling
// this process's usage.
func (f *Fleet) Budgets(ctx context.Context) ([]fleet.Budget, error) {
	fctx, cancel := f.timeout(ctx)
	_ = f.Flush(fctx)
	cancel()
	return f.Control.Budgets(ctx)
}

// Participant implements fleet.Fleet: fleet.Membership(f).
func (f *Fleet) Participant() middleware.Participant { return fleet.Membership(f) }

// Join implements fleet.Fleet. It answers from local state, but for a
// child whose parent is not a live run of this Fleet: it reads the
// parent's ended record (one GET, within ctx and the operation timeout;
// skipped while the server is unreachable) and refuses the child with
// Skipped{reason: parent_ended} when the parent has ended.
func (f *Fleet) Join(ctx context.Context, run fleet.RunInfo, budget *termination.FleetBudget, r fleet.Run) (fleet.Member, termination.Cause) {
	reject := func(c termination.Cause) (fleet.Member, termination.Cause) {
		f.metrics.Rejected(c)
		return nil, c
	}
	if f.closed.Load() {
		return reject(termination.Skipped{Reason: termination.SkipFleetUnavailable, Detail: "the fleet is closed"})
	}
	if f.cfg.failClosed && !f.up.Load() {
		return reject(termination.Skipped{Reason: termination.SkipFleetUnavailable, Detail: "redis at " + f.addr + " is unreachable"})
	}
	if run.ID == "" {
		run.ID = runid.New()
	}
	if run.Started.IsZero() {
		run.Started = time.Now()
	}
	run.Host, run.PID = f.host, f.pid
	now := f.serverNow()
	m := &member{f: f, info: run, esc: escape(run.ID), run: r, start: (run.Started.UnixMicro() + f.offset.Load()) / 1000}

	f.mu.Lock()
	for _, b := range f.blocks {
		if (b.Expires == 0 || now < b.Expires) && b.Selector.MatchesRun(run.ID, run.Stage, run.Labels) {
			f.mu.Unlock()
			return reject(b.block().Cause())
		}
	}
	if budget != nil {
		id, c := run.BudgetID(budget)
		if c != nil {
			f.mu.Unlock()
			return reject(c)
		}
		esc := budgetEsc(id)
		if ex, ok := f.exhausted[esc]; ok {
			if now < ex.we {
				f.mu.Unlock()
				return reject(termination.Skipped{Reason: termination.SkipFleetBudgetExhausted,
					Detail: fmt.Sprintf("shared budget %s=%s: %s %g of %g until %s", id.Key, id.Value,
						ex.cause.Resource, ex.cause.Used, ex.cause.Limit, time.UnixMilli(ex.we).UTC().Format(time.RFC3339))})
			}
			delete(f.exhausted, esc)
		}
		sh := f.budgets[esc]
		if sh == nil {
			sh = f.takeIdleLocked(esc, *budget, now)
			if sh == nil {
				sh = f.newShared(id, esc, *budget, now)
			}
			f.budgets[esc] = sh
		} else if c := id.MismatchCause(*budget, sh.spec); c != nil {
			f.mu.Unlock()
			return reject(c)
		}
		if c := sh.mismatch; c != nil { // read under f.mu: the sync loop sets it
			f.mu.Unlock()
			return reject(c)
		}
		m.acct = sh.acct.Add(accountHooks(r))
		sh.pending.Store(true)
		m.sh = sh
	}
	f.runs[m.esc] = m
	_, parentHere := f.runs[escape(run.Parent)]
	lookup := run.Parent != "" && !parentHere && f.up.Load()
	// Until the lookup below has answered, the sync loop does not register
	// the run: a refused child never shows in the registry.
	m.joining = lookup
	f.mu.Unlock()
	// A child of a run of another process (§8): refused when that run has
	// ended. The run is in f.runs first, so an end announced from now on
	// reaches it (checkParents) whatever this lookup found.
	if lookup {
		rec, ended := f.endedRecord(ctx, run.Parent)
		f.mu.Lock()
		m.joining = false
		m.refused = ended // it leaves no ended record
		f.mu.Unlock()
		if ended {
			m.Leave(nil)
			return reject(termination.Skipped{Reason: termination.SkipParentEnded, Detail: rec.Skip})
		}
	}
	f.poke()
	return m, nil
}

// takeIdleLocked takes up the budget esc this process dropped (dropBudget)
// when its window still holds now (server ms) and its limits are spec.
// f.mu is held.
func (f *Fleet) takeIdleLocked(esc string, spec termination.FleetBudget, now int64) *shared {
	sh, ok := f.idle[esc]
	if !ok {
		return nil
	}
	delete(f.idle, esc)
	if _, end := sh.acct.Window(); now >= end.UnixMilli() || sh.spec != spec {
		return nil
	}
	sh.mismatch = nil
	return sh
}

// endRecord is a stored ended run (P{runs}:end:ID): what its children in
// other processes end with (Cascade: the detail of their Cancelled{reason:
// parent}) or are refused with (Skip: the detail of Skipped{reason:
// parent_ended}), and the fleet stop that ended it, if one did (its
// children's processes confirm them to that stop as descendants).
type endRecord struct {
	Stop    string `json:"stop,omitempty"`
	Cascade string `json:"cascade"`
	Skip    string `json:"skip"`
}

// endRecordOf is the record of run m that ended with res (nil: unknown).
// As in one process, a cascade names the run whose end started it (a
// grandchild names the planner, not the researcher between them), and a
// late child names its own parent.
func endRecordOf(m *member, res *termination.Result) endRecord {
	tag := "ended"
	if res != nil {
		tag = res.Tag()
	}
	r := endRecord{Skip: cascade.ParentEnded(m.info.Stage, tag).Detail}
	r.Cascade = r.Skip
	if res != nil {
		if c, ok := res.Cause.(termination.Cancelled); ok && c.Reason == termination.CancelParent {
			r.Cascade = c.Detail
		}
	}
	return r
}

// queueEndLocked queues run m's ended record for the next sync, once: when
// the fleet stopped the run (at once, before its loop finishes it) or when
// it leaves. f.mu is held.
func (f *Fleet) queueEndLocked(m *member, rec endRecord) {
	if m.endQueued {
		return
	}
	m.end, m.endQueued = rec, true
	f.ended = append(f.ended, m)
}

// queueStopped queues the ended records of runs the fleet just stopped
// with cause, and of their descendants in this process, which the
// middleware ended with them (subtrees[i] under roots[i]) with
// Cancelled{reason: parent}: their children in other processes end now,
// not when the loops get round to finishing them. detail is what the
// roots' children end with ("" for the roots' own "STAGE ended: TAG").
func (f *Fleet) queueStopped(roots []*member, subtrees [][]*member, cause termination.Cause, detail string) {
	if len(roots) == 0 {
		return
	}
	tag := termination.Tag(cause, nil)
	f.mu.Lock()
	for i, m := range roots {
		skip := cascade.ParentEnded(m.info.Stage, tag).Detail
		down := detail
		if down == "" {
			down = skip
		}
		f.queueEndLocked(m, endRecord{Cascade: down, Skip: skip})
		for _, d := range subtrees[i] { // ended with Cancelled{parent, down}
			f.queueEndLocked(d, endRecord{Cascade: down, Skip: cascade.ParentEnded(d.info.Stage, termination.TagCancelled).Detail})
		}
	}
	f.mu.Unlock()
	f.poke()
}

// endedRecord reads the stored record of run id's end; ok is false when
// there is none (the run is live, unknown, or ended more than the ended
// TTL ago) or the server cannot say (the run is admitted: fail-open).
func (f *Fleet) endedRecord(ctx context.Context, id string) (endRecord, bool) {
	cctx, cancel := f.timeout(ctx)
	defer cancel()
	v, err := f.client.Get(cctx, f.k.ended(id)).Result()
	if err != nil {
		if !errors.Is(err, redis.Nil) && ctx.Err() == nil { // not the caller giving up
			f.fail(fleetmetrics.OpConnect)
		}
		return endRecord{}, false
	}
	var rec endRecord
	if json.Unmarshal([]byte(v), &rec) != nil {
		f.metrics.Error(fleetmetrics.OpInternal)
		return endRecord{}, false
	}
	return rec, true
}

// member is one local run of the fleet.
type member struct {
	f     *Fleet
	esc   string
	run   fleet.Run       // nil for a run that gives its figures to Progress
	start int64           // server ms
	sh    *shared         // nil without a fleet budget
	acct  *account.Member // the run's place in sh's Account

	mu    sync.Mutex // guards info's figures and dirty
	info  fleet.RunInfo
	dirty bool

	// guarded by f.mu
	registered bool
	published  time.Time
	left       bool
	refused    bool      // Join refused it: it leaves no ended record
	joining    bool      // Join is looking up its remote parent: not registered yet
	stopID     string    // the fleet stop that ended it or an ancestor, if any
	end        endRecord // its ended record, once queued (endQueued)
	endQueued  bool
}

func (m *member) Spend(u termination.Usage, cost float64) (warning, stop termination.Cause) {
	if m.sh == nil {
		return nil, nil
	}
	return m.sh.spend(m.f, m, u, cost)
}

func (m *member) Progress(p termination.Totals) {
	m.mu.Lock()
	m.info.SetProgress(p)
	m.dirty = true
	m.mu.Unlock()
}

func (m *member) Leave(res *termination.Result) {
	f := m.f
	f.mu.Lock()
	if m.left {
		f.mu.Unlock()
		return
	}
	m.left = true
	if f.runs[m.esc] == m {
		delete(f.runs, m.esc)
	}
	if !m.refused {
		f.queueEndLocked(m, endRecordOf(m, res))
	}
	if m.registered {
		f.removed = append(f.removed, m.esc)
	}
	if m.sh != nil && m.acct.Leave() == 0 {
		m.sh.pending.Store(true) // return the unused lease now
	}
	f.mu.Unlock()
	f.poke()
}

// pull reads the run's figures through its Run, when it has
// one, and reports whether they changed since the last pull. It is
// called by the sync loop without f.mu.
func (m *member) pull() bool {
	if m.run == nil {
		return false
	}
	p := m.run.Progress()
	var next fleet.RunInfo
	next.SetProgress(p)
	next.SetHeld(m.run)
	m.mu.Lock()
	defer m.mu.Unlock()
	i := &m.info
	changed := i.Iterations != next.Iterations || i.ToolCalls != next.ToolCalls ||
		i.InputTokens != next.InputTokens || i.OutputTokens != next.OutputTokens || i.Cost != next.Cost
	if !sameHeld(i.Held, next.Held) { // raise.go
		i.Held, changed = next.Held, true
	}
	if changed {
		i.SetProgress(p)
		m.dirty = true
	}
	return changed
}

// snapshot returns the run's registry value.
func (m *member) snapshot() (string, error) {
	m.pull()
	m.mu.Lock()
	e := entry{RunInfo: m.info}
	m.dirty = false
	m.mu.Unlock()
	e.Updated = time.Now().UTC()
	if m.sh != nil {
		e.Budget = m.sh.esc
	}
	b, err := json.Marshal(e)
	return string(b), err
}

// loop is the sync loop: every tick, or sooner when woken.
func (f *Fleet) loop(ctx context.Context) {
	defer f.wg.Done()
	t := time.NewTicker(f.cfg.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-f.wake:
		case done := <-f.flush:
			f.mu.Lock()
			for _, sh := range f.trees {
				sh.pending.Store(true) // settle, and read the tree's usage back
			}
			f.mu.Unlock()
			f.sync(ctx, false)
			close(done)
			continue
		}
		f.sync(ctx, false)
	}
}

// sync does one round of background work. first: at New (and Close with
// first false after the loop ended, with ctx the caller's).
func (f *Fleet) sync(ctx context.Context, first bool) {
	defer f.endRound()
	wasUp := f.up.Load()

	if f.clockAt.IsZero() || time.Since(f.clockAt) >= f.cfg.clockEvery || !wasUp {
		if !f.estimateClock(ctx) {
			f.fail(fleetmetrics.OpConnect)
			return // unreachable: the next round tries again
		}
	}
	f.syncRuns(ctx)
	if !f.up.Load() {
		return // unreachable: the next round tries again
	}
	f.syncBudgets(ctx)
	f.syncTrees(ctx)
	f.mu.Lock()
	resync := f.resync || first || !wasUp
	f.resync = false
	f.mu.Unlock()
	if resync || time.Since(f.lastRead) >= time.Second {
		f.readControl(ctx)
	}
}

// figuresEvery is how often a run's changed figures are published.
const figuresEvery = 500 * time.Millisecond

var errClosed = errors.New("redisfleet: the fleet is closed")

// syncRuns registers new runs (and every run again after the server lost
// them), publishes changed figures, renews leases and removes ended runs.
func (f *Fleet) syncRuns(ctx context.Context) {
	now := time.Now()
	renewDue := now.Sub(f.lastRenew) >= f.cfg.lease/3
	r := f.dueRuns(now, renewDue)
	if r.empty() && !renewDue && f.up.Load() {
		return
	}
	keys, args := f.runsScriptArgs(&r)
	cctx, cancel := f.timeout(ctx)
	res, err := syncScript.Run(cctx, f.scripts, keys, args...).Slice()
	cancel()
	if err != nil {
		f.fail(fleetmetrics.OpRenew)
		f.putBackRuns(&r)
		return
	}
	if !f.up.Swap(true) {
		// Reconnected (or connected for the first time): register every
		// run again, re-read stops, blocks and raises.
		f.mu.Lock()
		for _, m := range f.runs {
			m.registered = false
		}
		f.resync = true
		f.mu.Unlock()
		f.poke()
	}
	if renewDue {
		f.lastRenew = now
	}
	f.registered(r.ups, now, res[1:])
}

// runsRound is one sync's work on the registry: runs to register or
// publish (ups), registrations to renew (escaped ids), runs to remove
// (escaped ids) and ended runs whose records to write (ends: their JSON).
type runsRound struct {
	ups            []*member
	renew, removed []string
	ended          []*member
	ends           []string
}

func (r *runsRound) empty() bool {
	return len(r.ups) == 0 && len(r.renew) == 0 && len(r.removed) == 0 && len(r.ended) == 0
}

// dueRuns collects this round's registry work: new and changed runs
// (a run's changed figures at most every figuresEvery), renewals when due,
// and the runs removed and ended since the last round.
func (f *Fleet) dueRuns(now time.Time, renewDue bool) runsRound {
	var r runsRound
	var maybe []*member
	f.mu.Lock()
	for esc, m := range f.runs {
		if m.joining {
			continue // registered once Join has looked up its parent
		}
		m.mu.Lock()
		dirty := m.dirty
		m.mu.Unlock()
		stale := now.Sub(m.published) >= figuresEvery
		switch {
		case !m.registered || dirty && stale:
			r.ups = append(r.ups, m)
		case stale && m.run != nil:
			maybe = append(maybe, m) // its figures are read below, without f.mu
		case renewDue:
			r.renew = append(r.renew, esc)
		}
	}
	r.removed, f.removed = f.removed, nil
	r.ended, f.ended = f.ended, nil
	r.ends = make([]string, len(r.ended))
	for i, m := range r.ended {
		rec := m.end
		rec.Stop = m.stopID
		b, _ := json.Marshal(rec) // strings only: cannot fail
		r.ends[i] = string(b)
	}
	f.mu.Unlock()
	for _, m := range maybe {
		switch {
		case m.pull():
			r.ups = append(r.ups, m)
		case renewDue:
			r.renew = append(r.renew, m.esc)
		}
	}
	return r
}

// runsScriptArgs returns syncScript's keys and arguments for round r. A
// run whose registry value cannot be built is left out of the call.
func (f *Fleet) runsScriptArgs(r *runsRound) ([]string, []any) {
	keys := make([]string, 1, 1+len(r.ups)+len(r.renew)+len(r.removed)+len(r.ended))
	keys[0] = f.k.runs()
	args := make([]any, 0, 7+2*len(r.ups)+len(r.renew)+len(r.removed)+2*len(r.ended))
	args = append(args, f.cfg.lease.Milliseconds(), f.cfg.endedTTL.Milliseconds(), f.k.ctl(), 0)
	n := 0
	for _, m := range r.ups {
		v, err := m.snapshot()
		if err != nil {
			f.metrics.Error(fleetmetrics.OpInternal)
			continue
		}
		keys = append(keys, f.k.record(keys[0], m.esc))
		args = append(args, m.esc, v)
		n++
	}
	args[3] = n
	for _, ids := range [][]string{r.renew, r.removed} {
		args = append(args, len(ids))
		for _, esc := range ids {
			keys = append(keys, f.k.record(keys[0], esc))
			args = append(args, esc)
		}
	}
	args = append(args, len(r.ended))
	for i, m := range r.ended {
		keys = append(keys, f.k.ended(m.info.ID))
		args = append(args, m.esc, r.ends[i])
	}
	return keys, args
}

// putBackRuns keeps round r's work for the next round: the script did not
// run.
func (f *Fleet) putBackRuns(r *runsRound) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, r.removed...)
	f.ended = append(f.ended, r.ended...)
	for _, m := range r.ups {
		m.mu.Lock()
		m.dirty = true
		m.mu.Unlock()
	}
}

// registered marks the runs of ups registered as of now (a run that left
// meanwhile is removed at the next round), and the runs the server lost
// (lost: their escaped ids, from the script) to be registered again.
func (f *Fleet) registered(ups []*member, now time.Time, lost []any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range ups {
		if !m.left {
			m.registered = true
			m.published = now
		} else {
			f.removed = append(f.removed, m.esc) // it left while being registered
		}
	}
	for _, v := range lost {
		if esc, ok := v.(string); ok {
			if m := f.runs[esc]; m != nil {
				m.registered = false // the server lost it: register again
			}
		}
	}
}

// readControl re-reads the stored stops, blocks and raises: blocks replace
// the local set; stops not yet applied are applied to the runs that
// started before them; raises not yet applied to the local runs they name
// (readRaises).
func (f *Fleet) readControl(ctx context.Context) {
	f.lastRead = time.Now()
	blocks, now, err := f.read(ctx, f.k.blocks())
	if err != nil {
		f.fail(fleetmetrics.OpBlock)
		return
	}
	stops, _, err := f.read(ctx, f.k.stops())
	if err != nil {
		f.fail(fleetmetrics.OpStop)
		return
	}
	set := make(map[string]record, len(blocks))
	for _, b := range blocks {
		set[b.ID] = b
	}
	f.mu.Lock()
	f.blocks = set
	for id, forget := range f.stops {
		if forget <= now {
			delete(f.stops, id)
		}
	}
	for id, ex := range f.exhausted {
		if ex.we <= now {
			delete(f.exhausted, id)
		}
	}
	for id, sh := range f.idle {
		if _, end := sh.acct.Window(); end.UnixMilli() <= now {
			delete(f.idle, id)
		}
	}
	f.mu.Unlock()
	for _, s := range stops {
		f.applyStop(ctx, s, true)
	}
	f.readRaises(ctx) // raise.go
	f.checkParents(ctx, nil)
}

// applyStop ends the local runs a stop matches, once per stop, and
// confirms them, then that the process is done with it. Read back from the store (stored), it applies only to
// runs that started before the stop was issued.
func (f *Fleet) applyStop(ctx context.Context, s record, stored bool) {
	f.mu.Lock()
	if _, done := f.stops[s.ID]; done {
		f.mu.Unlock()
		return
	}
	forget := s.Expires
	if forget == 0 {
		forget = s.At + f.cfg.lease.Milliseconds()
	}
	f.stops[s.ID] = forget
	var hit []*member
	for _, m := range f.runs {
		if stored && m.start >= s.At {
			continue
		}
		if s.Selector.MatchesRun(m.info.ID, m.info.Stage, m.info.Labels) {
			hit = append(hit, m)
		}
	}
	matched := make(map[*member]bool, len(hit))
	for _, m := range hit {
		matched[m] = true
	}
	subtrees := f.markSubtreesLocked(hit, matched, s.ID)
	f.mu.Unlock()
	cause := fleet.StopRequest{Reason: s.Reason, By: s.By}.Cause()
	acks := make([]any, 0, len(hit)+1)
	n := 0
	var roots []*member
	var under [][]*member
	for i, m := range hit {
		if m.run != nil && m.run.StopWith(cause) {
			acks = append(acks, "s "+m.info.ID)
			n++
			roots, under = append(roots, m), append(under, subtrees[i])
			// The middleware ended its live descendants of this process
			// with it (Cancelled{reason: parent}) before Stop returned.
			for _, d := range subtrees[i] {
				acks = append(acks, "d "+d.info.ID)
			}
		} else {
			acks = append(acks, "e "+m.info.ID)
		}
	}
	f.queueStopped(roots, under, cause, "")
	f.metrics.Stopped(n)
	// "p PROCESS" last: this process has applied the stop (the command
	// waits for one per process that received it).
	acks = append(acks, "p "+f.proc)
	cctx, cancel := f.timeout(ctx)
	defer cancel()
	ttl := (f.cfg.lease + time.Minute).Milliseconds()
	if err := ackScript.Run(cctx, f.scripts, []string{f.k.stopAck(s.ID)}, append([]any{ttl}, acks...)...).Err(); err != nil {
		f.fail(fleetmetrics.OpStop)
	}
}

// subscribe receives what is published on the control channel until ctx
// ends. A (re)subscription asks the sync loop to re-read the stored state.
func (f *Fleet) subscribe(ctx context.Context, ps *redis.PubSub) {
	defer f.wg.Done()
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024), redis.WithChannelHealthCheckInterval(time.Second))
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			switch msg := msg.(type) {
			case *redis.Subscription:
				f.mu.Lock()
				f.resync = true
				f.mu.Unlock()
				f.poke()
			case *redis.Message:
				f.handle(ctx, msg.Payload)
			}
		}
	}
}

// verify reports whether key holds value (want true) or is gone (want
// false). When the server cannot say, the message is not trusted: the
// next re-read of the stored state applies it.
func (f *Fleet) verify(ctx context.Context, key, value string, want bool) bool {
	cctx, cancel := f.timeout(ctx)
	defer cancel()
	got, err := f.client.Get(cctx, key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return !want
	case err != nil:
		f.fail(fleetmetrics.OpConnect)
		return false
	}
	return want && got == value
}

// handle applies one control message.
func (f *Fleet) handle(ctx context.Context, p string) {
	kind, rest, _ := strings.Cut(p, " ")
	switch kind {
	case "raise":
		f.handleRaise(ctx, p) // raise.go
	case "stop", "block":
		r, err := parseRecord(p)
		if err != nil {
			f.metrics.Error(fleetmetrics.OpInternal)
			return
		}
		// Only what an operator stored counts: a message without its
		// record (published by a client that may publish on the channel
		// but not write stops or blocks) is ignored.
		key := f.k.stop(r.ID)
		if kind == "block" {
			key = f.k.block(r.ID)
		}
		if !f.verify(ctx, key, p, true) {
			return
		}
		if kind == "stop" {
			f.applyStop(ctx, r, false)
			return
		}
		f.mu.Lock()
		f.blocks[r.ID] = r
		f.mu.Unlock()
	case "unblock":
		if !f.verify(ctx, f.k.block(rest), "", false) {
			return
		}
		f.mu.Lock()
		delete(f.blocks, rest)
		f.mu.Unlock()
	case "end":
		// "end ID..." (escaped ids): runs that ended, whose records were
		// stored with the message. Only the stored records count.
		ids := strings.Fields(rest)
		only := make(map[string]bool, len(ids))
		for _, id := range ids {
			only[id] = true
		}
		f.checkParents(ctx, only)
	case "tex", "twarn", "traise", "thold", "tend":
		f.handleTree(ctx, kind, rest)
	case "bex", "bpr":
		// "ID WS WE I USED LIMIT"
		fs := strings.Fields(rest)
		if len(fs) != 6 {
			f.metrics.Error(fleetmetrics.OpInternal)
			return
		}
		ws, _ := strconv.ParseInt(fs[1], 10, 64)
		we, _ := strconv.ParseInt(fs[2], 10, 64)
		i, _ := strconv.Atoi(fs[3])
		used, _ := strconv.ParseFloat(fs[4], 64)
		limit, _ := strconv.ParseFloat(fs[5], 64)
		if i < 1 || i > 4 {
			return
		}
		if kind == "bex" {
			f.budgetExhausted(fs[0], ws, we, i-1, used, limit)
		} else {
			f.budgetPressure(fs[0], ws, i-1, used, limit)
		}
	}
}

// markSubtreesLocked returns, for each root, its live descendants in this
// process (any depth; not roots themselves nor in skip), and marks the
// roots and those descendants as ended by fleet stop stopID (their ended
// records carry it, so that their children elsewhere are confirmed to the
// stop as descendants). f.mu is held.
func (f *Fleet) markSubtreesLocked(roots []*member, skip map[*member]bool, stopID string) [][]*member {
	out := make([][]*member, len(roots))
	if len(roots) == 0 {
		return out
	}
	var children map[string][]*member
	for _, m := range f.runs {
		if m.info.Parent != "" {
			if children == nil {
				children = map[string][]*member{}
			}
			children[m.info.Parent] = append(children[m.info.Parent], m)
		}
	}
	seen := map[*member]bool{}
	for i, r := range roots {
		if stopID != "" && r.stopID == "" {
			r.stopID = stopID
		}
		stack := []string{r.info.ID}
		for len(stack) > 0 {
			id := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, c := range children[id] {
				if seen[c] || skip[c] || c == r {
					continue
				}
				seen[c] = true
				if stopID != "" && c.stopID == "" {
					c.stopID = stopID
				}
				out[i] = append(out[i], c)
				stack = append(stack, c.info.ID)
			}
		}
	}
	return out
}

// checkParents ends the local runs whose parent runs in another process
// and has ended (§8): each with Cancelled{reason: parent} and the detail
// the parent's stored record gives, its descendants of this process with
// it (the middleware's cascade). When the parent was ended by a fleet stop
// (or under a run that was), the runs it ended are confirmed to that stop
// as descendants. only limits the parents looked up (escaped ids, from an
// "end" message); nil looks up every remote parent of a local run (the
// periodic re-read, which catches a lost message). One MGET in the {runs}
// slot; nothing when no local run has a remote parent.
func (f *Fleet) checkParents(ctx context.Context, only map[string]bool) {
	f.mu.Lock()
	byParent := map[string][]*member{}
	for _, m := range f.runs {
		p := m.info.Parent
		if p == "" || m.left {
			continue
		}
		pe := escape(p)
		if _, here := f.runs[pe]; here {
			continue // a live run of this process: the middleware's tree
		}
		if only != nil && !only[pe] {
			continue
		}
		byParent[p] = append(byParent[p], m)
	}
	f.mu.Unlock()
	if len(byParent) == 0 {
		return
	}
	parents := make([]string, 0, len(byParent))
	keys := make([]string, 0, len(byParent))
	for p := range byParent {
		parents = append(parents, p)
		keys = append(keys, f.k.ended(p))
	}
	cctx, cancel := f.timeout(ctx)
	vals, err := f.client.MGet(cctx, keys...).Result()
	cancel()
	if err != nil {
		f.fail(fleetmetrics.OpConnect)
		return
	}
	acks := map[string][]any{} // by stop id
	for i, v := range vals {
		js, ok := v.(string)
		if !ok {
			continue
		}
		var rec endRecord
		if json.Unmarshal([]byte(js), &rec) != nil {
			f.metrics.Error(fleetmetrics.OpInternal)
			continue
		}
		kids := byParent[parents[i]]
		f.mu.Lock()
		subtrees := f.markSubtreesLocked(kids, nil, rec.Stop)
		f.mu.Unlock()
		cause := termination.Cancelled{Reason: termination.CancelParent, Detail: rec.Cascade}
		var roots []*member
		var under [][]*member
		for j, m := range kids {
			if m.run == nil || !m.run.StopWith(cause) {
				continue
			}
			roots, under = append(roots, m), append(under, subtrees[j])
			if rec.Stop == "" {
				continue
			}
			acks[rec.Stop] = append(acks[rec.Stop], "d "+m.info.ID)
			for _, d := range subtrees[j] {
				acks[rec.Stop] = append(acks[rec.Stop], "d "+d.info.ID)
			}
		}
		f.queueStopped(roots, under, cause, rec.Cascade)
	}
	ttl := (f.cfg.lease + time.Minute).Milliseconds()
	for stop, a := range acks {
		cctx, cancel := f.timeout(ctx)
		if err := ackScript.Run(cctx, f.scripts, []string{f.k.stopAck(stop)}, append([]any{ttl}, a...)...).Err(); err != nil {
			f.fail(fleetmetrics.OpStop)
		}
		cancel()
	}
}

// accountHooks are how a shared budget's account reaches run: none for a
// nil run.
func accountHooks(run fleet.Run) account.Hooks {
	if run == nil {
		return account.Hooks{}
	}
	return account.Hooks{Stop: run.StopWith, Warn: run.Warn}
}
