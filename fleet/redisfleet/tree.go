package redisfleet

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/fleet/internal/fleetmetrics"
	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/termination"
)

// Trees (tree.Sharer): a tree's limits are shared through one hash per
// holder, P{tree:HOLDER}, in leases, as fleet budgets are (budget.go),
// without windows and over the six resources of treeResources. See
// the package documentation ("Trees") for the guarantees.

var _ tree.Sharer = (*Fleet)(nil)

// nTree is the number of resources a tree counts.
const nTree = len(treeResources)

// treeShare is this process's side of one shared tree: the lease it holds
// per resource and the usage it has not settled yet, for its local
// members of the tree (the holding and the joins). Spend works on it under
// a mutex, without I/O; the sync loop settles and reserves (reserveTree).
type treeShare struct {
	esc    string // the holder's escaped run id
	holder string // the holder's run id

	pending atomic.Bool // the sync loop should settle and reserve now

	// guarded by Fleet.mu
	members map[*treeMember]struct{}
	holding *treeMember // the live holding of this process, if any
	holds   bool        // this process holds the tree (its calls keep the record)
	ending  bool        // the holding left: tell the server the tree ended
	endWith string      // what the holding left with (tree.Member.Leave's detail)
	warns   []any       // the holding's warnings to publish (cause JSON)

	// used by the sync loop only
	lastSettle time.Time
	mine       [nTree]float64 // what this process settled in all
	others     [nTree]float64 // the other processes' settled usage charged to the holding
	mineF      [nTree]float64 // of mine, what final events spent
	othersF    [nTree]float64 // of others, what final events spent

	mu        sync.Mutex
	stage     string // the holder's stage (known to a joined process after its first reserve)
	limits    [nTree]float64
	lease     [nTree]float64 // lease size per resource
	bal       [nTree]float64 // lease left (negative: spent past the lease)
	sent      [nTree]float64 // usage past the lease sent in a reserve not answered yet
	used      [nTree]float64 // usage since the last settle
	settled   [nTree]float64 // the tree's settled usage at the last reserve
	usedF     [nTree]float64 // of used, what final events spent
	settledF  [nTree]float64 // of settled, what final events spent
	full      [nTree]bool    // the last reserve found no room left (committed >= limit)
	fire      bool           // usage since the last settle that may fire a limit (not only finals')
	exhausted termination.Cause
	// A tree that holds (tree.Spec.Hold: its holder's stage has hold:) is
	// never exhausted: hold is its hold timeout (the holder's process
	// says it; a joined one learns it from its reserves), and heldAt is
	// the limit this process holds its joined runs at, since heldSince,
	// while the known usage reaches the limits (treehold.go); endedWith
	// is the holder's end as its record gives it (the detail its
	// descendants end with).
	hold      time.Duration
	heldAt    termination.Cause
	heldSince time.Time
	endedWith string
	heldOut   bool      // the runs were let go without word from the holder (treehold.go): not held again until its limits change
	ended     bool      // the holder has ended: nothing more is granted
	heard     bool      // a reserve was answered (or this process holds the tree)
	born      time.Time // when this process first took part
}

// setLimits sets the tree's limits and the lease sizes they imply. s.mu is
// held.
func (s *treeShare) setLimits(limits [nTree]float64, fraction float64) {
	s.limits = limits
	for i, l := range limits {
		s.lease[i] = 0
		if l > 0 {
			s.lease[i] = l * fraction
			if treeResources[i] != termination.ResourceCost && s.lease[i] < 1 {
				s.lease[i] = 1 // counts and tokens: whole units
			}
		}
	}
}

// treeMember is a local run's part in a shared tree.
type treeMember struct {
	f       *Fleet
	sh      *treeShare     // nil: a member that charges nothing (no holder id)
	run     tree.SharedRun // nil: told nothing
	holding bool

	left atomic.Bool // set under Fleet.mu
}

// shareLocked returns the tree of holder esc, made if needed. f.mu is
// held.
func (f *Fleet) shareLocked(esc string) *treeShare {
	sh := f.trees[esc]
	if sh == nil {
		sh = &treeShare{esc: esc, holder: unescape(esc), members: map[*treeMember]struct{}{}, born: time.Now()}
		f.trees[esc] = sh
	}
	return sh
}

// HoldTree implements tree.Sharer. The holding's usage and the used given
// are settled with the first reserve (within a sync); the record is
// created then. Held twice in one process (middleware holds a run once),
// the first holding's limits, run and used stand.
func (f *Fleet) HoldTree(spec tree.Spec, used tree.Usage, holder tree.SharedRun) tree.Member {
	if spec.Holder == "" {
		return &treeMember{f: f, run: holder, holding: true}
	}
	f.mu.Lock()
	sh := f.shareLocked(escape(spec.Holder))
	m := &treeMember{f: f, sh: sh, run: holder, holding: true}
	sh.members[m] = struct{}{}
	sh.mu.Lock()
	if sh.holding == nil && !sh.holds {
		sh.holding, sh.holds, sh.heard = m, true, true
		sh.stage, sh.hold = spec.Stage, spec.Hold
		sh.setLimits(limitsOf(spec.Limits), f.cfg.leaseFraction)
		a, af := amountsOf(used), finalAmounts(&used)
		for i := range a {
			sh.used[i] += a[i]
			sh.usedF[i] += af[i]
			sh.bal[i] -= a[i] // settled at once, as debt
		}
		sh.fire = sh.fire || !used.IsZero() && !finalsOnly(&used)
	}
	sh.mu.Unlock()
	f.mu.Unlock()
	sh.pending.Store(true)
	f.poke()
	return m
}

// JoinTree implements tree.Sharer. A holder this process already shares
// a tree of is joined at once. Otherwise JoinTree asks the store whether
// the tree is held (one EXISTS on its record, within ctx and the operation
// timeout): when it is not, it asks again for up to one sync interval
// (the holder's process creates the record with the sync that follows
// HoldTree, and the request naming the holder may arrive first), then
// returns nil: no process holds the tree (another fleet's run, or one that
// ended longer ago than the record's TTL), and the run takes the limits
// its request propagated as its own. While the server is unreachable it
// cannot tell, and joins (fail-open: the run spends without a lease until
// the server is back). The member learns the limits from its first
// reserve, which JoinTree starts at once.
func (f *Fleet) JoinTree(ctx context.Context, holder string, run tree.SharedRun) tree.Member {
	if holder == "" || f.closed.Load() {
		return nil
	}
	esc := escape(holder)
	f.mu.Lock()
	_, here := f.trees[esc]
	f.mu.Unlock()
	if !here && !f.treeHeld(ctx, esc) {
		return nil
	}
	f.mu.Lock()
	sh := f.shareLocked(esc)
	m := &treeMember{f: f, sh: sh, run: run}
	sh.members[m] = struct{}{}
	f.mu.Unlock()
	sh.pending.Store(true)
	f.poke()
	return m
}

// TreesOf implements tree.Sharer. A run of this process is answered from
// memory. For any other it reads the run's registry entry and its ended
// record in one round trip (MGET, one slot: {runs}, within ctx and the
// operation timeout): the entry's trees when it has one; nil when the run
// has ended (the child is then refused: Join reads the record again). A
// run with neither is looked up again for up to one sync interval (its
// process registers it with the sync that follows its start, and the job
// naming it may be faster), then taken for a run the fleet does not know.
// While the server is unreachable it returns nil: the child runs under its
// own limits.
func (f *Fleet) TreesOf(ctx context.Context, run string) []string {
	if run == "" || f.closed.Load() {
		return nil
	}
	esc := escape(run)
	f.mu.Lock()
	m := f.runs[esc]
	f.mu.Unlock()
	if m != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		return slices.Clone(m.info.Trees)
	}
	deadline := time.Now().Add(f.cfg.tick)
	wait := time.Millisecond
	for f.up.Load() {
		cctx, cancel := f.timeout(ctx)
		vs, err := f.client.MGet(cctx, f.k.run(run), f.k.ended(run)).Result()
		cancel()
		if err != nil || len(vs) != 2 {
			if ctx.Err() == nil {
				f.fail(fleetmetrics.OpJoin)
			}
			return nil
		}
		if v, ok := vs[0].(string); ok {
			var e entry
			if json.Unmarshal([]byte(v), &e) != nil {
				f.metrics.Error(fleetmetrics.OpInternal)
				return nil
			}
			return e.Trees
		}
		if vs[1] != nil || time.Now().Add(wait).After(deadline) {
			return nil // ended, or unknown
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
		wait *= 3
	}
	return nil
}

// treeHeld reports whether the store has a record of the tree of holder
// esc, or cannot say (unreachable: true). A missing record is looked up
// again for up to one sync interval, within ctx.
func (f *Fleet) treeHeld(ctx context.Context, esc string) bool {
	deadline := time.Now().Add(f.cfg.tick)
	wait := time.Millisecond
	for {
		if !f.up.Load() {
			return true
		}
		cctx, cancel := f.timeout(ctx)
		n, err := f.client.Exists(cctx, f.k.tree(esc)).Result()
		cancel()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				f.fail(fleetmetrics.OpJoin)
			}
			return true
		case n > 0:
			return true
		case time.Now().Add(wait).After(deadline):
			return false
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
		wait *= 3
	}
}

// causeFor is the cause member m ends with when its tree is exhausted with
// c: c itself for the holding, Cancelled{reason: parent} naming the
// holder's stage for a joined run.
func (m *treeMember) causeFor(c termination.Cause, stage string) termination.Cause {
	if m.holding {
		return c
	}
	return tree.StopCause(stage, c)
}

// reachedTree reports whether usage used reaches limit on resource i: a
// count limit n allows n and is passed by the (n+1)-th; a token or cost
// limit is reached at used >= limit, as termination's conditions fire.
func reachedTree(i int, used, limit float64) bool {
	if i <= 1 {
		return used > limit
	}
	return used >= limit
}

// Spend implements tree.Member. It never does I/O: it draws the lease
// down and wakes the sync loop when it runs low. The tree is exhausted at
// once when what is known to be spent (the settled usage at the last
// reserve plus this process's usage since) reaches a limit; a process
// that spent a whole lease past its grants within one round trip, or any
// usage past them once the tree has no room left, waits for the sync
// loop's next round (see shared.overdrawn).
func (m *treeMember) Spend(u tree.Usage) termination.Cause {
	sh := m.sh
	if sh == nil {
		return nil
	}
	f := m.f
	a := amountsOf(u)
	// What only finals spent counts but never fires a limit (§3), and an
	// event in flight after Leave is only counted: neither waits.
	quiet := m.left.Load() || finalsOnly(&u)
	low, over := false, false
	var hit termination.Cause
	sh.mu.Lock()
	if sh.exhausted != nil && !quiet {
		c, stage := sh.exhausted, sh.stage
		sh.mu.Unlock()
		return m.causeFor(c, stage)
	}
	over = !sh.heard && !quiet // a joined run's first events wait for its first reserve
	if !finalsOnly(&u) {
		sh.fire = true
	}
	if u.Final.Iterations > 0 {
		af := finalAmounts(&u)
		for i := range af {
			sh.usedF[i] += af[i]
		}
	}
	for i := range a {
		sh.used[i] += a[i]
		sh.bal[i] -= a[i]
		if sh.limits[i] == 0 || sh.ended || sh.exhausted != nil {
			continue
		}
		if sh.bal[i] < sh.lease[i]/2 {
			low = true
		}
		if quiet {
			continue
		}
		if sh.sent[i]-sh.bal[i] >= sh.lease[i] || sh.full[i] && sh.bal[i] < 0 {
			over = true
		}
		if known := sh.settled[i] + sh.used[i]; hit == nil && reachedTree(i, known, sh.limits[i]) {
			hit = tree.LimitCause(treeResources[i], known, sh.limits[i])
		}
	}
	var holdAt termination.Cause // a tree that holds: its runs here are held at it, once
	switch {
	case hit != nil && sh.hold > 0:
		if sh.heldAt == nil && !sh.heldOut {
			sh.heldAt, sh.heldSince, holdAt = hit, time.Now(), hit
		}
		hit = nil
	case hit != nil:
		sh.exhausted = hit
	}
	held := sh.heldAt != nil
	stage := sh.stage
	sh.mu.Unlock()
	if (low || hit != nil || holdAt != nil) && !sh.pending.Load() {
		sh.pending.Store(true)
		f.poke()
	}
	if holdAt != nil {
		f.holdTree(sh, holdAt) // rare: once per hold
	}
	if quiet {
		return nil
	}
	if hit != nil {
		f.stopTree(sh, m, hit, stage) // rare: once per tree
		return m.causeFor(hit, stage)
	}
	if over && !held { // held runs take no next event: nothing to wait for
		if c := f.waitRound(sh.overdrawn, &sh.pending); c != nil {
			return m.causeFor(c, stage)
		}
	}
	return nil
}

// finalsOnly reports whether u is what final events alone spent.
func finalsOnly(u *tree.Usage) bool {
	return u.Final.Iterations > 0 && u.Iterations == u.Final.Iterations && u.ToolCalls == 0 &&
		u.Tokens == u.Final.Tokens && u.Cost == u.Final.Cost
}

// finalAmounts returns what final events spent of u, per resource.
func finalAmounts(u *tree.Usage) [nTree]float64 {
	return amountsOf(tree.Usage{Totals: u.Final})
}

// overdrawn reports the tree's exhaustion, and whether this process's
// usage past its grants is at the cap: a whole lease past what the server
// granted, or any once the server had no room left (or, for a joined
// process, no answer to its first reserve yet: it does not know the
// limits).
func (s *treeShare) overdrawn() (termination.Cause, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	over := !s.heard
	for i := range s.limits {
		if s.limits[i] > 0 && !s.ended && (s.sent[i]-s.bal[i] >= s.lease[i] || s.full[i] && s.bal[i] < 0) {
			over = true
		}
	}
	return s.exhausted, over
}

// Warn implements tree.Member: the sync loop publishes the warning
// (with its next reserve, at once) to the tree's joined runs in every
// process. A joined member's Warn does nothing.
func (m *treeMember) Warn(c termination.Cause) {
	if m.sh == nil || !m.holding || c == nil {
		return
	}
	js, err := codec.MarshalCause(c)
	if err != nil {
		m.f.metrics.Error(fleetmetrics.OpInternal)
		return
	}
	f := m.f
	f.mu.Lock()
	m.sh.warns = append(m.sh.warns, string(js))
	f.mu.Unlock()
	m.sh.pending.Store(true)
	f.poke()
}

// Leave implements tree.Member. The holding's leave ends the tree:
// the next reserve records the end, after which nothing more is granted
// (its joined runs end through their parent links, §8, with the ended
// record's detail, which is end's). The last local member's leave
// returns the unused lease at the next sync.
func (m *treeMember) Leave(end termination.Cancelled) {
	sh, f := m.sh, m.f
	if sh == nil {
		return
	}
	f.mu.Lock()
	if m.left.Load() {
		f.mu.Unlock()
		return
	}
	m.left.Store(true)
	delete(sh.members, m)
	if m.holding && sh.holds {
		sh.ending, sh.endWith = true, end.Detail
		if sh.holding == m {
			sh.holding = nil
		}
	}
	f.mu.Unlock()
	sh.pending.Store(true)
	f.poke()
}

// stopTree ends the local members of sh (but skip, which is told by its
// Spend) with c: the holding with c itself, joined runs with
// Cancelled{reason: parent} naming the holder's stage.
func (f *Fleet) stopTree(sh *treeShare, skip *treeMember, c termination.Cause, stage string) {
	f.mu.Lock()
	hit := make([]*treeMember, 0, len(sh.members))
	for m := range sh.members {
		if m != skip {
			hit = append(hit, m)
		}
	}
	f.mu.Unlock()
	for _, m := range hit {
		if m.run != nil {
			m.run.StopTree(m.causeFor(c, stage))
		}
	}
}

// treeExhausted records that the tree of holder esc is exhausted on
// resource i (from the server: a reserve's answer or a "tex" message) and
// stops its local members, once.
func (f *Fleet) treeExhausted(esc, stage string, i int, used, limit float64) {
	f.mu.Lock()
	sh := f.trees[esc]
	f.mu.Unlock()
	if sh == nil || i < 0 || i >= nTree {
		return
	}
	c := tree.LimitCause(treeResources[i], used, limit)
	sh.mu.Lock()
	if sh.exhausted != nil {
		sh.mu.Unlock()
		return
	}
	sh.exhausted = c
	if sh.stage == "" {
		sh.stage = stage
	}
	stage = sh.stage
	sh.mu.Unlock()
	f.stopTree(sh, nil, c, stage)
}

// treeWarned hands a warning the holder of tree esc published to the
// tree's joined runs of this process.
func (f *Fleet) treeWarned(esc, js string) {
	f.mu.Lock()
	sh := f.trees[esc]
	var hit []*treeMember
	if sh != nil {
		for m := range sh.members {
			if !m.holding && m.run != nil {
				hit = append(hit, m)
			}
		}
	}
	f.mu.Unlock()
	if len(hit) == 0 {
		return
	}
	c, err := codec.UnmarshalCause([]byte(js))
	if err != nil {
		f.metrics.Error(fleetmetrics.OpInternal)
		return
	}
	for _, m := range hit {
		m.run.WarnTree(c)
	}
}

// handleTree applies a tree message: "traise HOLDER", "thold HOLDER",
// "tend HOLDER",
// "tex HOLDER STAGE I USED LIMIT" or
// "twarn HOLDER CAUSEJSON". An exhaustion counts only when the tree's
// record agrees (a client that may publish on the channel cannot stop a
// tree by hand); when the server cannot say, the next reserve reads it.
func (f *Fleet) handleTree(ctx context.Context, kind, rest string) {
	if kind == "traise" || kind == "thold" || kind == "tend" {
		f.treeNews(rest) // treehold.go
		return
	}
	if kind == "twarn" {
		esc, js, ok := strings.Cut(rest, " ")
		if !ok {
			f.metrics.Error(fleetmetrics.OpInternal)
			return
		}
		f.treeWarned(esc, js)
		return
	}
	fs := strings.Fields(rest)
	if len(fs) != 5 {
		f.metrics.Error(fleetmetrics.OpInternal)
		return
	}
	i, err1 := strconv.Atoi(fs[2])
	used, err2 := strconv.ParseFloat(fs[3], 64)
	limit, err3 := strconv.ParseFloat(fs[4], 64)
	if err1 != nil || err2 != nil || err3 != nil {
		f.metrics.Error(fleetmetrics.OpInternal)
		return
	}
	f.mu.Lock()
	_, here := f.trees[fs[0]]
	f.mu.Unlock()
	if !here {
		return
	}
	cctx, cancel := f.timeout(ctx)
	ex, err := f.client.HGet(cctx, f.k.tree(fs[0]), "ex").Result()
	cancel()
	if err != nil || ex != fs[2] {
		return
	}
	f.treeExhausted(fs[0], stageOf(fs[1]), i-1, used, limit)
}

// stageOf decodes a stored stage ("s" and the stage, escaped).
func stageOf(v string) string {
	if v == "" {
		return ""
	}
	return unescape(v[1:])
}

// syncTrees settles and reserves for every tree that needs it.
func (f *Fleet) syncTrees(ctx context.Context) {
	f.mu.Lock()
	var todo []*treeShare
	for _, sh := range f.trees {
		if sh.pending.Load() || len(sh.members) == 0 || sh.ending || len(sh.warns) > 0 ||
			time.Since(sh.lastSettle) >= f.renewEvery() {
			todo = append(todo, sh)
		}
	}
	f.mu.Unlock()
	for _, sh := range todo {
		if ctx.Err() != nil {
			return
		}
		f.reserveTree(ctx, sh)
	}
	f.checkHolds() // treehold.go
}

// reserveTree settles sh's usage and asks for new leases in one script
// call; then it hands the holding what the other processes settled since
// the last call (tree.SharedRun.ChargeTree, from this goroutine, under no lock).
func (f *Fleet) reserveTree(ctx context.Context, sh *treeShare) {
	f.mu.Lock()
	members := len(sh.members)
	holds, ending := sh.holds, ""
	if sh.ending {
		ending = "e" + sh.endWith
	}
	warns := sh.warns
	sh.warns = nil
	f.mu.Unlock()
	sh.pending.Store(false)
	sh.lastSettle = time.Now()

	st := sh.settle(members, holds)
	cctx, cancel := f.timeout(ctx)
	res, err := treeScript.Run(cctx, f.scripts, []string{f.k.tree(sh.esc)}, f.treeScriptArgs(sh, &st, ending, warns)...).Slice()
	cancel()
	unknown := err == nil && len(res) == 2
	if err != nil || (len(res) != 38 && !unknown) {
		f.putBackTree(sh, st.used, st.usedF, st.debt, st.rel, st.fire, warns)
		sh.pending.Store(true)
		f.fail(fleetmetrics.OpReserve)
		return
	}
	if unknown {
		f.unknownTree(sh, &st)
		return
	}
	ans := parseTreeAnswer(res)
	learned := sh.answer(&ans, holds, f.cfg.leaseFraction)
	if ending != "" {
		f.mu.Lock()
		sh.ending = false
		sh.holds = sh.holding != nil
		f.mu.Unlock()
	}
	if learned && members > 0 {
		sh.pending.Store(true)
		f.poke()
	}
	if ans.ex >= 1 && ans.ex <= int64(nTree) {
		f.treeExhausted(sh.esc, stageOf(ans.stage), int(ans.ex)-1, ans.exUsed, ans.limits[ans.ex-1])
	}
	f.chargeHolding(sh, &st, &ans)
	f.checkHold(sh) // treehold.go
	f.dropTree(sh, false)
}

// treeSettlement is what one reserveTree sends the store, per resource:
// the usage since the last settle (and of it what final events spent:
// usedF; fire: usage that may fire a limit), the usage past the lease
// (debt), the lease returned (rel), the lease wanted (want) and held
// (held); and the holder's stage (for the holding's process: "s" and the
// stage, escaped), the limits, and the tree's settled usage at the last
// reserve (base, baseF).
type treeSettlement struct {
	used, usedF, debt, rel, want, held [nTree]float64
	fire                               bool
	hold                               time.Duration // the holder's process: the tree's hold timeout (tree.Spec.Hold)
	stage                              string
	limits, base, baseF                [nTree]float64
}

// settle takes what this process spent since the last settle and decides
// what to ask for (see account.Account.Settle, which budgets use).
func (s *treeShare) settle(members int, holds bool) treeSettlement {
	var st treeSettlement
	s.mu.Lock()
	defer s.mu.Unlock()
	st.used, st.usedF, st.fire = s.used, s.usedF, s.fire
	s.used, s.usedF, s.fire = [nTree]float64{}, [nTree]float64{}, false
	for i := range s.bal {
		if s.bal[i] < 0 {
			st.debt[i] = -s.bal[i]
			s.bal[i] = 0
		}
		s.sent[i] = st.debt[i]
		switch {
		case members == 0:
			st.rel[i] = s.bal[i]
			s.bal[i] = 0
		case s.limits[i] > 0 && !s.ended && s.exhausted == nil && s.bal[i] < s.lease[i]/2:
			st.want[i] = s.lease[i] - s.bal[i]
		}
		st.held[i] = s.bal[i]
	}
	st.limits, st.base, st.baseF = s.limits, s.settled, s.settledF
	if holds {
		st.stage, st.hold = "s"+escape(s.stage), s.hold
	}
	return st
}

// treeArgs is the number of treeScript's fixed arguments.
const treeArgs = 63

// treeScriptArgs returns treeScript's arguments for settlement st of sh, with
// the holding's end (ending) and its warnings to publish.
func (f *Fleet) treeScriptArgs(sh *treeShare, st *treeSettlement, ending string, warns []any) []any {
	if ending == "" {
		ending = "0"
	}
	args := make([]any, 0, treeArgs+len(warns))
	args = append(args, sh.esc, st.stage, (2*f.cfg.lease + f.cfg.endedTTL).Milliseconds(), f.proc,
		f.cfg.lease.Milliseconds(), f.k.ctl(), ending)
	for _, vs := range [...]*[nTree]float64{&st.limits, &st.used, &st.debt, &st.rel, &st.want, &st.held, &st.base, &st.usedF, &st.baseF} {
		for _, v := range vs {
			args = append(args, fmtFloat(v))
		}
	}
	args = append(args, boolArg(st.fire), st.hold.Milliseconds())
	return append(args, warns...)
}

// unknownTree handles a reserve that found no record: the holder is
// unknown (it runs in a process that has not shared it yet, or ended long
// ago). Nothing is granted; the usage is settled when a record appears.
func (f *Fleet) unknownTree(sh *treeShare, st *treeSettlement) {
	f.putBackTree(sh, st.used, st.usedF, st.debt, st.rel, st.fire, nil)
	sh.mu.Lock()
	sh.heard = true
	sh.mu.Unlock()
	f.letGo(sh) // no process holds the tree: nothing to wait for (treehold.go)
	if time.Since(sh.born) < f.cfg.lease {
		// The holder's process may not have created the record yet
		// (it does with the sync after the holder starts): ask
		// again at the next sync for a lease period, then at each
		// renewal.
		sh.pending.Store(true)
	}
	f.dropTree(sh, true)
}

// treeAnswer is treeScript's answer: the holder's stage as stored, whether
// the holder ended, the resource found exhausted (1..nTree; 0: none) and
// its usage, and per resource the limits, the lease granted, the
// committed usage, the settled usage and of it what final events spent.
type treeAnswer struct {
	stage                     string
	ended, ex, hold           int64  // hold: the tree's hold timeout (ms), 0: it does not hold
	endedWith                 string // the holder's end detail, "" when not known
	exUsed                    float64
	limits, granted, c, s, sf [nTree]float64
}

// parseTreeAnswer reads treeScript's answer (38 values).
func parseTreeAnswer(res []any) treeAnswer {
	var a treeAnswer
	a.stage, _ = res[2].(string)
	a.ended, _ = res[3].(int64)
	a.ex, _ = res[4].(int64)
	a.exUsed = parseFloat(res[5])
	for i := range nTree {
		a.limits[i] = parseFloat(res[6+i])
		a.granted[i] = parseFloat(res[12+i])
		a.c[i] = parseFloat(res[18+i])
		a.s[i] = parseFloat(res[24+i])
		a.sf[i] = parseFloat(res[30+i])
	}
	a.hold, _ = res[36].(int64)
	if e, _ := res[37].(string); len(e) > 1 && e[0] == 'e' {
		a.endedWith = e[1:]
	}
	return a
}

// answer applies the store's answer to sh and reports whether a joined
// process learned the tree's limits from it (then a first lease is due at
// once).
func (s *treeShare) answer(a *treeAnswer, holds bool, fraction float64) (learned bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !holds && s.limits != a.limits {
		s.setLimits(a.limits, fraction)
		learned, s.heldOut = true, false
	}
	if s.stage == "" {
		s.stage = stageOf(a.stage)
	}
	if !holds {
		s.hold = time.Duration(a.hold) * time.Millisecond
	}
	s.ended, s.endedWith = a.ended == 1, a.endedWith
	s.heard = true
	s.sent = [nTree]float64{}
	for i := range nTree {
		s.bal[i] += a.granted[i]
		s.settled[i], s.settledF[i] = a.s[i], a.sf[i]
		s.full[i] = s.limits[i] > 0 && a.c[i] >= s.limits[i]
	}
	return learned
}

// chargeHolding hands the holding's evaluator the other processes' usage
// settled since the last reserve, and how much of it final events spent
// (which never fires a limit).
func (f *Fleet) chargeHolding(sh *treeShare, st *treeSettlement, a *treeAnswer) {
	var delta, deltaF [nTree]float64
	charge := false
	for i := range nTree {
		sh.mine[i] += st.used[i]
		sh.mineF[i] += st.usedF[i]
		if d := a.s[i] - sh.mine[i] - sh.others[i]; d > 0 {
			delta[i] = d
			sh.others[i] += d
			charge = true
		}
		if d := min(a.sf[i]-sh.mineF[i]-sh.othersF[i], sh.others[i]-sh.othersF[i]); d > 0 {
			deltaF[i] = min(d, delta[i])
			sh.othersF[i] += deltaF[i]
		}
	}
	f.mu.Lock()
	holding := sh.holding
	f.mu.Unlock()
	if charge && holding != nil && holding.run != nil {
		u := usageFrom(delta)
		u.Final.Iterations, u.Final.Cost = int(deltaF[0]), deltaF[5]
		u.Final.Tokens = termination.Usage{InputTokens: int64(deltaF[3]), OutputTokens: int64(deltaF[4])}
		holding.run.ChargeTree(u)
	}
}

// putBackTree restores what a failed or refused reserve took out of sh:
// the next reserve settles it.
func (f *Fleet) putBackTree(sh *treeShare, used, usedF, debt, rel [nTree]float64, fire bool, warns []any) {
	sh.mu.Lock()
	sh.fire = sh.fire || fire
	for i := range sh.used {
		sh.used[i] += used[i]
		sh.usedF[i] += usedF[i]
		sh.bal[i] += rel[i] - debt[i]
	}
	sh.sent = [nTree]float64{}
	sh.mu.Unlock()
	if len(warns) > 0 {
		f.mu.Lock()
		sh.warns = append(warns, sh.warns...)
		f.mu.Unlock()
	}
}

// dropTree forgets sh when it has no local member left and nothing to
// settle or return (or, unknown, nowhere to settle it).
func (f *Fleet) dropTree(sh *treeShare, unknown bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(sh.members) > 0 || sh.ending || len(sh.warns) > 0 || f.trees[sh.esc] != sh {
		return
	}
	sh.mu.Lock()
	idle := unknown || sh.used == [nTree]float64{} && sh.bal == [nTree]float64{}
	sh.mu.Unlock()
	if idle {
		delete(f.trees, sh.esc)
	}
}
