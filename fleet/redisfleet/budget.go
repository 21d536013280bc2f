package redisfleet

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/internal/account"
	"github.com/agentstop/agentstop/fleet/internal/fleetmetrics"
	"github.com/agentstop/agentstop/termination"
)

// shared is this process's side of one shared budget: its Account
// (fleet/internal/account: the lease, the usage not settled yet, the
// crossings) and what the sync loop needs to settle and reserve. Spend
// charges the Account, without I/O; the sync loop settles and reserves.
type shared struct {
	id       fleet.BudgetID
	esc      string
	spec     termination.FleetBudget
	specJSON string
	window   int64 // ms
	acct     *account.Account

	pending atomic.Bool // the sync loop should settle and reserve now

	// guarded by Fleet.mu
	mismatch termination.Cause

	// used by the sync loop only
	lastSettle time.Time
	indexed    int64 // the last window start added to the budget index
}

// newShared returns this process's side of budget id under spec, in the
// window that holds now (server ms) until the first reserve tells it.
func (f *Fleet) newShared(id fleet.BudgetID, esc string, spec termination.FleetBudget, now int64) *shared {
	js, _ := json.Marshal(spec)
	s := &shared{id: id, esc: esc, spec: spec, specJSON: string(js), window: spec.Window.Milliseconds()}
	s.acct = account.New(id.Key, id.Value, spec, time.UnixMilli(now-now%s.window), f.metrics, &account.Store{
		Fraction:  f.cfg.leaseFraction,
		Reachable: f.up.Load,
		Exhausted: func(x termination.BudgetExhausted, end time.Time) { f.recordExhausted(esc, end.UnixMilli(), x) },
	})
	return s
}

// spend charges one event for run m (see account.Member.Charge). It never
// does I/O: when the lease runs low or a threshold is crossed it wakes
// the sync loop (the other local runs are warned or stopped by the
// Account; the sync loop tells the server, which tells the other
// processes), and it waits only when this process spent a whole lease
// past its grants (overdrawn).
func (s *shared) spend(f *Fleet, m *member, u termination.Usage, cost float64) (warning, stop termination.Cause) {
	warning, stop, wake, over := m.acct.Charge(u, cost)
	if wake && !s.pending.Load() {
		s.pending.Store(true)
		f.poke()
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
	return f.waitRound(s.acct.Overdrawn, &s.pending)
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

// syncBudgets settles and reserves for every budget that needs it.
func (f *Fleet) syncBudgets(ctx context.Context) {
	now := time.UnixMilli(f.serverNow())
	f.mu.Lock()
	var todo []*shared
	for _, s := range f.budgets {
		members := s.acct.Members()
		rollover := s.acct.Expire(now) && members > 0
		if s.pending.Load() || rollover || time.Since(s.lastSettle) >= f.renewEvery() || members == 0 {
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

// reserve settles s's usage and asks for a new lease in one script call,
// then acts on the server's answer.
func (f *Fleet) reserve(ctx context.Context, s *shared) {
	members := s.acct.Members()
	s.pending.Store(false)
	s.lastSettle = time.Now()
	st := s.acct.Settle(time.UnixMilli(f.serverNow()), members)
	var sws int64 // the settled usage's window (0: none known yet)
	if !st.Start.IsZero() {
		sws = st.Start.UnixMilli()
	}
	res, err := f.runBudgetScript(ctx, s, sws, f.budgetArgs(s, st, sws, members))
	if err != nil || len(res) != 19 {
		s.acct.Unsettle(st) // the next try settles it
		s.pending.Store(true)
		f.fail(fleetmetrics.OpReserve)
		return
	}
	ans := parseBudgetAnswer(res)
	f.indexWindow(ctx, s, ans.ws, ans.we)
	s.acct.Answer(time.UnixMilli(ans.ws), ans.granted, ans.committed, ans.ex == 0, members)
	if ans.mismatch != "" {
		f.budgetMismatch(s, ans.mismatch)
		return
	}
	limits := account.LimitsOf(s.spec)
	if ans.ex >= 1 && ans.ex <= 4 {
		f.budgetExhausted(s.esc, ans.ws, ans.we, int(ans.ex)-1, ans.exUsed, limits[ans.ex-1])
	}
	for i := range 4 {
		if ans.pressure&(1<<i) != 0 {
			f.budgetPressure(s.esc, ans.ws, i, ans.committed[i], limits[i])
		}
	}
	if members == 0 {
		f.dropBudget(s)
	}
}

// budgetArgs returns budgetScript's arguments for settlement st of s in
// window sws; the first (the window starts) is set per call.
func (f *Fleet) budgetArgs(s *shared, st account.Settlement, sws int64, members int) []any {
	args := make([]any, 0, 40)
	args = append(args, "", s.esc, s.specJSON, s.window, (f.cfg.lease * 2).Milliseconds(), sws)
	args = appendAmounts(args, st.Used, st.Debt, st.Release)
	args = append(args, boolArg(members > 0))
	args = appendAmounts(args, st.Want)
	for _, v := range st.Dry {
		args = append(args, boolArg(v))
	}
	args = appendAmounts(args, account.LimitsOf(s.spec))
	args = append(args, fmtFloat(s.spec.Pressure), f.k.ctl(), f.proc, f.cfg.lease.Milliseconds())
	return appendAmounts(args, st.Held)
}

// appendAmounts appends each amount of each of as to args.
func appendAmounts(args []any, as ...account.Amounts) []any {
	for _, a := range as {
		for _, v := range a {
			args = append(args, fmtFloat(v))
		}
	}
	return args
}

// runBudgetScript runs budgetScript for s with args on the windows around
// the current one by this process's estimate of the server's clock, and
// the settled usage's (sws): the script touches only these keys. When the
// server's window was none of them (the clock estimate was off by more
// than a window: the server's clock stepped), it estimates the clock
// again and retries once.
func (f *Fleet) runBudgetScript(ctx context.Context, s *shared, sws int64, args []any) ([]any, error) {
	var res []any
	var err error
	for try := 0; try < 2; try++ {
		keys, starts := f.windowKeys(s, sws)
		args[0] = starts
		cctx, cancel := f.timeout(ctx)
		res, err = budgetScript.Run(cctx, f.scripts, keys, args...).Slice()
		cancel()
		if err != nil || len(res) != 1 || !f.estimateClock(ctx) {
			break
		}
	}
	return res, err
}

// budgetAnswer is budgetScript's answer: the window (server ms), the
// stored limits when they differ from this process's (JSON), the resource
// found exhausted (1..4; 0: none) and its usage, the resources whose
// pressure threshold this reserve crossed (bit i-1), the lease granted
// and the window's committed usage.
type budgetAnswer struct {
	ws, we             int64
	mismatch           string
	ex                 int64
	exUsed             float64
	pressure           int64
	granted, committed account.Amounts
}

// parseBudgetAnswer reads budgetScript's answer (19 values).
func parseBudgetAnswer(res []any) budgetAnswer {
	var a budgetAnswer
	a.ws, _ = res[1].(int64)
	a.we, _ = res[2].(int64)
	a.mismatch, _ = res[3].(string)
	a.ex, _ = res[4].(int64)
	a.exUsed = parseFloat(res[5])
	a.pressure, _ = res[6].(int64)
	for i := range 4 {
		a.granted[i] = parseFloat(res[7+i])
		a.committed[i] = parseFloat(res[11+i])
	}
	return a
}

// indexWindow adds window ws of s to the budget index when this process
// has not listed it yet (in a slot of its own; a failure is retried by
// the next reserve).
func (f *Fleet) indexWindow(ctx context.Context, s *shared, ws, we int64) {
	if ws == s.indexed {
		return
	}
	cctx, cancel := f.timeout(ctx)
	defer cancel()
	key := f.k.budget(s.esc, ws)
	pipe := f.client.Pipeline()
	pipe.ZAdd(cctx, f.k.budgets(), redis.Z{Score: float64(we + (f.cfg.lease * 2).Milliseconds()), Member: key})
	pipe.ZRemRangeByScore(cctx, f.k.budgets(), "-inf", strconv.FormatInt(f.serverNow(), 10))
	if _, err := pipe.Exec(cctx); err != nil {
		f.fail(fleetmetrics.OpReserve)
		return
	}
	s.indexed = ws
}

// budgetMismatch stops the local runs of s when the server holds other
// limits for the budget (stored, JSON) than theirs; new runs are refused.
func (f *Fleet) budgetMismatch(s *shared, stored string) {
	var spec termination.FleetBudget
	if err := json.Unmarshal([]byte(stored), &spec); err != nil {
		f.metrics.Error(fleetmetrics.OpReserve)
		return
	}
	cause := s.id.MismatchCause(s.spec, spec)
	if cause == nil {
		return
	}
	f.mu.Lock()
	s.mismatch = cause
	f.mu.Unlock()
	s.acct.StopAll(cause)
}

// dropBudget forgets s when no local run shares it and it has nothing to
// settle or return. Until its window ends the process remembers it
// (f.idle): the next local run of the budget takes it up again, so a
// crossing is counted and warned once per process however many runs come
// and go (not once per run).
func (f *Fleet) dropBudget(s *shared) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.acct.Members() != 0 || f.budgets[s.esc] != s || !s.acct.Idle() {
		return
	}
	delete(f.budgets, s.esc)
	if s.acct.Known() {
		f.idle[s.esc] = s
	}
}

// recordExhausted records that a shared budget is exhausted until the end
// we of its window (server ms): new local runs of it are refused until
// then. It reports false when the window is over or was recorded already.
func (f *Fleet) recordExhausted(esc string, we int64, cause termination.BudgetExhausted) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.serverNow() >= we {
		return false
	}
	if ex, ok := f.exhausted[esc]; ok && ex.we == we {
		return false
	}
	f.exhausted[esc] = exhaustion{we: we, cause: cause}
	return true
}

// budgetExhausted records that a shared budget is exhausted until the end of
// window [ws, we) (the server's word) and stops its local runs, once per
// window.
func (f *Fleet) budgetExhausted(esc string, ws, we int64, i int, used, limit float64) {
	cause := termination.BudgetExhausted{Resource: account.Resources[i], Used: used, Limit: limit, Scope: termination.ScopeFleet}
	if !f.recordExhausted(esc, we, cause) {
		return
	}
	f.mu.Lock()
	s := f.budgets[esc]
	f.mu.Unlock()
	if s == nil {
		f.metrics.Exhausted(cause.Resource)
		return
	}
	s.acct.Exhaust(time.UnixMilli(ws), cause)
}

// budgetPressure warns the local runs of a shared budget that its usage
// crossed the pressure threshold (the server's word), once per resource
// and window.
func (f *Fleet) budgetPressure(esc string, ws int64, i int, used, limit float64) {
	f.mu.Lock()
	s := f.budgets[esc]
	f.mu.Unlock()
	if s == nil {
		return
	}
	s.acct.Press(time.UnixMilli(ws), termination.BudgetPressure{Resource: account.Resources[i], Threshold: s.spec.Pressure,
		Used: used, Limit: limit, Scope: termination.ScopeFleet})
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
