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

	"github.com/redis/go-redis/v9"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/termination"
)

// shared is this process's side of one shared budget: the lease it holds
// per resource and the usage it has not settled yet. Spend works on it
// under a mutex, without I/O; the sync loop settles and reserves.
type shared struct {
	id       fleet.BudgetID
	esc      string
	spec     termination.FleetBudget
	specJSON string
	window   int64 // ms
	limits   [4]float64
	lease    [4]float64 // lease size per resource

	pending atomic.Bool // the sync loop should settle and reserve now

	// guarded by Fleet.mu
	members  map[*member]struct{}
	mismatch termination.Cause

	// used by the sync loop only
	lastSettle time.Time
	indexed    int64 // the last window start added to the budget index

	mu        sync.Mutex
	bal       [4]float64 // lease left (negative: spent past the lease)
	sent      [4]float64 // usage past the lease sent in a reserve not answered yet
	used      [4]float64 // usage since the last settle
	committed [4]float64 // the window's committed usage at the last reserve
	ws, we    int64      // the lease's window, server ms
	exhausted termination.Cause
	exWS      int64
	warned    [4]int64 // window start + 1 of the last pressure warning
	// guessWS is the window start by the server's clock (as estimated)
	// when a warning came before any lease told the window (s.ws == 0, e.g.
	// the server is unreachable): warnings before the first lease are
	// keyed by it, so that a run is warned, and the crossing counted, once.
	guessWS int64
}

func newShared(id fleet.BudgetID, esc string, spec termination.FleetBudget, fraction float64) *shared {
	js, _ := json.Marshal(spec)
	s := &shared{id: id, esc: esc, spec: spec, specJSON: string(js), window: spec.Window.Milliseconds(),
		members: map[*member]struct{}{}}
	s.limits = [4]float64{float64(spec.TotalTokens), float64(spec.InputTokens), float64(spec.OutputTokens), spec.Cost}
	for i, l := range s.limits {
		if l > 0 {
			s.lease[i] = l * fraction
			if i < 3 && s.lease[i] < 1 {
				s.lease[i] = 1
			}
		}
	}
	return s
}

// spend charges one event for run m. It never does I/O: when the lease
// runs low it wakes the sync loop. Its estimate of the window's usage is
// the committed usage at the last reserve (which counts this process's
// whole lease) plus what it spent past its lease: when that reaches the
// pressure threshold it warns at once (and the sync loop warns the other
// local runs), and when it reaches a limit with no lease left the budget
// is exhausted at once.
func (s *shared) spend(f *Fleet, m *member, u termination.Usage, cost float64) (warning, stop termination.Cause) {
	a := [4]float64{float64(u.InputTokens + u.OutputTokens), float64(u.InputTokens), float64(u.OutputTokens), cost}
	low, over := false, false
	s.mu.Lock()
	if s.exhausted != nil {
		stop = s.exhausted
		s.mu.Unlock()
		return nil, stop
	}
	for i := range a {
		s.used[i] += a[i]
		if s.limits[i] == 0 {
			continue
		}
		s.bal[i] -= a[i]
		if s.bal[i] < s.lease[i]/2 {
			low = true
		}
		if s.sent[i]-s.bal[i] >= s.lease[i] {
			over = true // spent a whole lease past what the server granted
		}
		est := s.committed[i]
		if s.bal[i] < 0 {
			est -= s.bal[i]
		}
		// While the server is unreachable (fail-open) only its word ends
		// the budget: a process spends what is left of its lease, then the
		// runs' own limits apply.
		if stop == nil && s.bal[i] <= 0 && est >= s.limits[i] && f.up.Load() {
			s.exhausted = termination.BudgetExhausted{Resource: resources[i], Used: est, Limit: s.limits[i], Scope: termination.ScopeFleet}
			s.exWS = s.ws
			stop = s.exhausted
		}
		wk := s.ws
		if wk == 0 {
			wk = s.guessWS
		}
		if warning == nil && s.spec.Pressure > 0 && s.warned[i] != wk+1 && est >= s.spec.Pressure*s.limits[i] {
			s.warned[i] = wk + 1
			w := termination.BudgetPressure{Resource: resources[i], Threshold: s.spec.Pressure, Used: est, Limit: s.limits[i], Scope: termination.ScopeFleet}
			warning = w
		}
	}
	ws, we := s.ws, s.we
	s.mu.Unlock()
	if (low || stop != nil || warning != nil) && !s.pending.Load() {
		s.pending.Store(true)
		f.poke()
	}
	if warning != nil || stop != nil {
		f.crossed(s, m, ws, we, warning, stop) // rare: once per window
	}
	if over && stop == nil {
		stop = s.overdrawn(f)
	}
	return warning, stop
}

// overdrawn waits, while the server is reachable, until this process's
// usage past its leases is less than one lease again (the sync loop
// settled it and the server granted a new lease) or the budget is
// exhausted, and returns the exhaustion if so. This is what bounds the
// overshoot past a limit to a lease per process: without it a process
// that spends faster than a reserve's round trip would spend, before the
// server answers, all the room it saw at its last reserve, and so would
// every other process. A loop waits here only when it spends a whole
// lease (1% of the limit by default) within one round trip; the wait
// ends at the latest after the operation timeout, and at once when the
// server is found unreachable (fail-open) or the fleet closes.
func (s *shared) overdrawn(f *Fleet) termination.Cause {
	return f.waitRound(func() (termination.Cause, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		over := false
		for i := range s.limits {
			if s.limits[i] > 0 && s.sent[i]-s.bal[i] >= s.lease[i] {
				over = true
			}
		}
		return s.exhausted, over
	}, &s.pending)
}

// waitRound waits for the sync loop's rounds while check reports the
// caller over its cap (asking for a round each time through pending), and
// returns check's cause once it reports one. It returns nil at once while
// the server is unreachable or the fleet is closing, and after the
// operation timeout at the latest.
func (f *Fleet) waitRound(check func() (stop termination.Cause, over bool), pending *atomic.Bool) termination.Cause {
	deadline := time.Now().Add(f.cfg.opTimeout)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		round := f.nextRound()
		stop, over := check()
		if stop != nil || !over || !f.up.Load() || f.closed.Load() {
			return stop
		}
		pending.Store(true)
		f.poke()
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(left)
		}
		select {
		case <-round:
		case <-timer.C:
			return nil
		case <-f.bgDone:
			return nil
		}
	}
}

// crossed gives the other local runs of s the pressure warning or the
// exhaustion that run m's Spend found; the sync loop tells the server,
// which tells the other processes.
func (f *Fleet) crossed(s *shared, m *member, ws, we int64, warning, stop termination.Cause) {
	if we == 0 { // no lease reserved yet: the current window by the server's clock
		now := f.serverNow()
		ws = now - now%s.window
		we = ws + s.window
		s.mu.Lock()
		if s.guessWS == 0 {
			s.guessWS = ws
		}
		for i := range s.warned {
			if s.warned[i] == 1 { // warned before the window was known
				s.warned[i] = ws + 1
			}
		}
		if s.exWS == 0 && s.exhausted != nil {
			s.exWS = ws
		}
		s.mu.Unlock()
	}
	if w, ok := warning.(termination.BudgetPressure); ok {
		f.metrics.Pressure(w.Resource)
		f.mu.Lock()
		hit := membersOf(s)
		f.mu.Unlock()
		for _, o := range hit {
			if o != m && o.hooks.Warn != nil {
				o.hooks.Warn(w)
			}
		}
	}
	if x, ok := stop.(termination.BudgetExhausted); ok {
		f.budgetExhausted(s.esc, ws, we, resourceIndex(x.Resource), x.Used, x.Limit)
	}
}

// syncBudgets settles and reserves for every budget that needs it.
func (f *Fleet) syncBudgets(ctx context.Context) {
	now := f.serverNow()
	f.mu.Lock()
	var todo []*shared
	for _, s := range f.budgets {
		s.mu.Lock()
		rollover := s.we > 0 && now >= s.we && len(s.members) > 0
		if s.exhausted != nil && s.we > 0 && now >= s.we {
			s.exhausted = nil // a new window
		}
		s.mu.Unlock()
		if s.pending.Load() || rollover || time.Since(s.lastSettle) >= f.renewEvery() || len(s.members) == 0 {
			todo = append(todo, s)
		}
	}
	f.mu.Unlock()
	for _, s := range todo {
		if ctx.Err() != nil {
			return
		}
		f.reserve(ctx, s)
	}
}

// windowKeys returns the window keys a reserve of s may touch and their
// window starts, space-separated: the settled usage's window sws (when
// set), and the windows before, at and after the current one by the
// estimated server clock.
func (f *Fleet) windowKeys(s *shared, sws int64) ([]string, string) {
	now := f.serverNow()
	ws := now - now%s.window
	var keys []string
	var starts strings.Builder
	add := func(w int64) {
		if w <= 0 || slices.Contains(keys, f.k.budget(s.esc, w)) {
			return
		}
		keys = append(keys, f.k.budget(s.esc, w))
		if starts.Len() > 0 {
			starts.WriteByte(' ')
		}
		starts.WriteString(strconv.FormatInt(w, 10))
	}
	if sws != 0 {
		add(sws)
	}
	add(ws)
	add(ws - s.window)
	add(ws + s.window)
	return keys, starts.String()
}

// renewEvery is how often a process settles and renews its leases while it
// has runs: every second, or a third of the lease when that is shorter.
func (f *Fleet) renewEvery() time.Duration { return min(time.Second, f.cfg.lease/3) }

// reserve settles s's usage and asks for a new lease in one script call.
func (f *Fleet) reserve(ctx context.Context, s *shared) {
	f.mu.Lock()
	members := len(s.members)
	f.mu.Unlock()
	s.pending.Store(false)
	s.lastSettle = time.Now()
	now := f.serverNow()

	var used, debt, rel, want, held [4]float64
	var dry [4]bool
	s.mu.Lock()
	sws := s.ws
	rollover := s.we > 0 && now >= s.we
	used = s.used
	s.used = [4]float64{}
	for i := range s.limits {
		if s.limits[i] == 0 {
			continue
		}
		if s.bal[i] < 0 {
			debt[i] = -s.bal[i]
			s.bal[i] = 0
		}
		s.sent[i] = debt[i]
		if x, ok := s.exhausted.(termination.BudgetExhausted); ok && x.Resource == resources[i] {
			dry[i] = true // exhausted here: the server records it unless it has room
		}
		switch {
		case members == 0:
			rel[i] = s.bal[i]
			s.bal[i] = 0
		case rollover:
			want[i] = s.lease[i]
			dry[i] = true
		case s.bal[i] < s.lease[i]/2 || s.exhausted != nil:
			want[i] = s.lease[i] - s.bal[i]
			dry[i] = s.bal[i] <= 0
		}
		if !rollover {
			held[i] = s.bal[i]
		}
	}
	s.mu.Unlock()

	args := make([]any, 0, 40)
	args = append(args, "", s.esc, s.specJSON, s.window, (f.cfg.lease * 2).Milliseconds(), sws)
	for _, v := range used {
		args = append(args, fmtFloat(v))
	}
	for _, v := range debt {
		args = append(args, fmtFloat(v))
	}
	for _, v := range rel {
		args = append(args, fmtFloat(v))
	}
	args = append(args, boolArg(members > 0))
	for _, v := range want {
		args = append(args, fmtFloat(v))
	}
	for _, v := range dry {
		args = append(args, boolArg(v))
	}
	for _, v := range s.limits {
		args = append(args, fmtFloat(v))
	}
	args = append(args, fmtFloat(s.spec.Pressure), f.k.ctl(), f.proc, f.cfg.lease.Milliseconds())
	for _, v := range held {
		args = append(args, fmtFloat(v))
	}

	var res []any
	var err error
	for try := 0; try < 2; try++ {
		// The windows around the current one by this process's estimate
		// of the server's clock, and the settled usage's: the script
		// touches only these keys.
		keys, starts := f.windowKeys(s, sws)
		args[0] = starts
		cctx, cancel := f.timeout(ctx)
		res, err = budgetScript.Run(cctx, f.scripts, keys, args...).Slice()
		cancel()
		if err != nil || len(res) != 1 {
			break
		}
		// The server's window was none of the keys: the clock estimate
		// was off by more than a window (the server's clock stepped).
		// Estimate it again and retry.
		if !f.estimateClock(ctx) {
			break
		}
	}
	if err != nil || len(res) != 19 {
		// Put everything back: the next try settles it.
		s.mu.Lock()
		for i := range s.used {
			s.used[i] += used[i]
			s.bal[i] += rel[i] - debt[i]
		}
		s.sent = [4]float64{}
		s.mu.Unlock()
		s.pending.Store(true)
		f.fail(fleet.OpReserve)
		return
	}
	ws, _ := res[1].(int64)
	we, _ := res[2].(int64)
	mismatch, _ := res[3].(string)
	ex, _ := res[4].(int64)
	exu := parseFloat(res[5])
	pmask, _ := res[6].(int64)
	var g, c [4]float64
	for i := range 4 {
		g[i] = parseFloat(res[7+i])
		c[i] = parseFloat(res[11+i])
	}

	if ws != s.indexed {
		// A window this process has not listed yet: add it to the budget
		// index (in a slot of its own; a failure is retried by the next
		// reserve).
		cctx, cancel := f.timeout(ctx)
		key := f.k.budget(s.esc, ws)
		pipe := f.client.Pipeline()
		pipe.ZAdd(cctx, f.k.budgets(), redis.Z{Score: float64(we + (f.cfg.lease * 2).Milliseconds()), Member: key})
		pipe.ZRemRangeByScore(cctx, f.k.budgets(), "-inf", strconv.FormatInt(f.serverNow(), 10))
		if _, err := pipe.Exec(cctx); err != nil {
			f.fail(fleet.OpReserve)
		} else {
			s.indexed = ws
		}
		cancel()
	}
	s.mu.Lock()
	if ws != s.ws {
		if s.ws != 0 {
			s.bal = [4]float64{} // the old window's leases are void
		}
		s.ws, s.we = ws, we
	}
	s.sent = [4]float64{}
	for i := range s.limits {
		s.bal[i] += g[i]
		s.committed[i] = c[i]
	}
	if ex == 0 && s.exhausted != nil && members > 0 && s.exWS <= ws {
		// Exhausted locally, but the server found room (another process
		// returned its lease): new runs may go on.
		s.exhausted = nil
	}
	s.mu.Unlock()

	if mismatch != "" {
		var stored termination.FleetBudget
		if err := json.Unmarshal([]byte(mismatch), &stored); err != nil {
			f.metrics.Error(fleet.OpReserve)
			return
		}
		cause := fleet.MismatchCause(s.id, s.spec, stored)
		if cause == nil {
			return
		}
		f.mu.Lock()
		s.mismatch = cause
		hit := membersOf(s)
		f.mu.Unlock()
		for _, m := range hit {
			m.hooks.Stop(cause)
		}
		return
	}
	if ex >= 1 && ex <= 4 {
		f.budgetExhausted(s.esc, ws, we, int(ex)-1, exu, s.limits[ex-1])
	}
	for i := range 4 {
		if pmask&(1<<i) != 0 {
			f.budgetPressure(s.esc, ws, i, c[i], s.limits[i])
		}
	}
	if members == 0 {
		f.mu.Lock()
		if len(s.members) == 0 && f.budgets[s.esc] == s {
			s.mu.Lock()
			idle := s.used == [4]float64{} && s.bal == [4]float64{}
			if idle {
				// Remember the window's counted crossings until it ends:
				// the next local run of this budget must not count them
				// again.
				delete(f.budgets, s.esc)
				if s.we > 0 {
					f.idle[s.esc] = idleBudget{ws: s.ws, we: s.we, committed: s.committed, warned: s.warned}
				}
			}
			s.mu.Unlock()
		}
		f.mu.Unlock()
	}
}

func resourceIndex(r termination.Resource) int {
	for i, x := range resources {
		if x == r {
			return i
		}
	}
	return 0
}

func membersOf(s *shared) []*member {
	out := make([]*member, 0, len(s.members))
	for m := range s.members {
		out = append(out, m)
	}
	return out
}

// budgetExhausted records that a shared budget is exhausted until the end of
// window [ws, we) and stops its local runs, once per window.
func (f *Fleet) budgetExhausted(esc string, ws, we int64, i int, used, limit float64) {
	cause := termination.BudgetExhausted{Resource: resources[i], Used: used, Limit: limit, Scope: termination.ScopeFleet}
	f.mu.Lock()
	if f.serverNow() >= we {
		f.mu.Unlock()
		return
	}
	if ex, ok := f.exhausted[esc]; ok && ex.we == we {
		f.mu.Unlock()
		return
	}
	f.exhausted[esc] = exhaustion{we: we, cause: cause}
	var hit []*member
	if s := f.budgets[esc]; s != nil {
		s.mu.Lock()
		if s.ws == 0 || s.ws == ws {
			if s.exhausted == nil {
				s.exhausted, s.exWS = cause, ws
			}
			hit = membersOf(s)
		}
		s.mu.Unlock()
	}
	f.mu.Unlock()
	f.metrics.Exhausted(cause.Resource)
	for _, m := range hit {
		m.hooks.Stop(cause)
	}
}

// budgetPressure warns the local runs of a shared budget that its usage
// crossed the pressure threshold, once per resource and window.
func (f *Fleet) budgetPressure(esc string, ws int64, i int, used, limit float64) {
	f.mu.Lock()
	s := f.budgets[esc]
	if s == nil {
		f.mu.Unlock()
		return
	}
	s.mu.Lock()
	if s.warned[i] == ws+1 || (s.ws != 0 && s.ws != ws) {
		s.mu.Unlock()
		f.mu.Unlock()
		return
	}
	s.warned[i] = ws + 1
	s.mu.Unlock()
	hit := membersOf(s)
	pressure := s.spec.Pressure
	f.mu.Unlock()
	f.metrics.Pressure(resources[i])
	w := termination.BudgetPressure{Resource: resources[i], Threshold: pressure, Used: used, Limit: limit, Scope: termination.ScopeFleet}
	for _, m := range hit {
		if m.hooks.Warn != nil {
			m.hooks.Warn(w)
		}
	}
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func parseFloat(v any) float64 {
	switch v := v.(type) {
	case string:
		f, _ := strconv.ParseFloat(v, 64)
		return f
	case int64:
		return float64(v)
	}
	return 0
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
