package termination

import (
	"fmt"
	"slices"
	"strings"
)

// ErrorLimits configures the error threshold; set at least one of
// Consecutive and Total, each > 0.
//
// As a Condition, it fires Failed{reason: error_threshold} when error
// events and failed tool results reach either limit.
type ErrorLimits struct {
	// Consecutive watches two streaks and fires when either reaches it:
	// failed tool_results in a row, reset only by a successful tool_result
	// (model turns in between do not reset it), and error events in a row,
	// reset by a successful tool_result and by a model turn (message or
	// final) that follows another model turn with no error event between
	// them: message, error, message, error is a streak of two (an agent
	// whose every response is rejected), error, message, message, error is
	// one and then one.
	Consecutive int
	// Total counts error events and failed tool results in the run.
	Total int
	// IgnoreTools names tools whose failed results count towards neither
	// streak nor Total and reset neither (grep exits 1 when nothing
	// matches); their successful results reset the streaks as any other.
	// A result is matched by its own tool name.
	IgnoreTools []string
}

// condition returns the condition l stands for.
func (l ErrorLimits) condition() Condition {
	return &errorLimit{consecutive: nonZero(l.Consecutive), total: nonZero(l.Total),
		ignore: slices.Clone(l.IgnoreTools), ignoreSet: l.IgnoreTools != nil}
}

type errorLimit struct {
	consecutive, total setting[int]
	ignore             []string
	ignoreSet          bool // a policy's ignore_tools: [] is an error
}

func (c *errorLimit) String() string {
	var parts []string
	if c.consecutive.set {
		parts = append(parts, fmt.Sprintf("consecutive: %d", c.consecutive.v))
	}
	if c.total.set {
		parts = append(parts, fmt.Sprintf("total: %d", c.total.v))
	}
	if c.ignoreSet {
		parts = append(parts, "ignore_tools: ["+strings.Join(c.ignore, ", ")+"]")
	}
	return "errors: {" + strings.Join(parts, ", ") + "}"
}

func (c *errorLimit) Validate() error {
	if !c.consecutive.set && !c.total.set {
		return badSetting("errors", "", "needs consecutive or total")
	}
	if err := positive("errors", "consecutive", c.consecutive); err != nil {
		return err
	}
	if err := positive("errors", "total", c.total); err != nil {
		return err
	}
	if c.ignoreSet {
		return validNames("errors", "ignore_tools", c.ignore, false)
	}
	return nil
}

func (c *errorLimit) start() check { return &errorCheck{errorLimit: c} }

// prepare makes the windows, and their first slots in one allocation, on
// the run's first failure: a run that never fails carries none. A window
// that outgrows its share grows apart. The run's failures (total) start
// with fewer slots than a window: the list grows with the failures of the
// run, not with its events.
//
//go:noinline
func (e *errorCheck) prepare() {
	e.errorWindows = new(errorWindows)
	c := e.errorLimit
	var streak, total int
	if c.consecutive.set {
		streak = min(max(c.consecutive.v, 0), ringPrealloc)
	}
	if c.total.set {
		total = min(max(c.total.v, 0), failuresPrealloc)
	}
	buf := make([]int, 2*streak+total)
	if c.consecutive.set {
		e.resultIdx = ring[int]{buf: buf[0:0:streak], size: ringSize(c.consecutive.v)}
		e.errorIdx = ring[int]{buf: buf[streak : streak : 2*streak], size: ringSize(c.consecutive.v)}
	}
	if c.total.set {
		e.allIdx = failureLog{head: buf[2*streak : 2*streak : 2*streak+total], size: max(c.total.v, 0)}
	}
}

// failureLog keeps the indices of the last size failures of a run
// (errors.total) in chunks: it grows with the run's failures, towards a
// total that may be written as 1e9, without ever copying what it holds (a
// slice that doubles would copy it all, and touch that much fresh memory,
// on the hot path).
type failureLog struct {
	head []int   // the oldest chunk; head[off:] the oldest indices held
	rest [][]int // the later chunks, full but the last; nil until head is full
	off  int
	n    int // values held
	size int
}

// failureChunk is how many indices a chunk after the first holds.
const failureChunk = 256

func (l *failureLog) push(at int) {
	if l.size <= 0 {
		return
	}
	switch last := len(l.rest) - 1; {
	case last < 0 && len(l.head) < cap(l.head):
		l.head = append(l.head, at)
	case last >= 0 && len(l.rest[last]) < cap(l.rest[last]):
		l.rest[last] = append(l.rest[last], at)
	default:
		c := append(make([]int, 0, min(l.size, failureChunk)), at)
		if cap(l.head) == 0 {
			l.head = c
		} else {
			l.rest = append(l.rest, c)
		}
	}
	l.n++
	if l.n > l.size { // past size (a raised run): the oldest goes
		l.n--
		l.off++
		if l.off == len(l.head) && len(l.rest) > 0 {
			l.head, l.off = l.rest[0], 0
			l.rest[0] = nil
			l.rest = l.rest[1:]
		}
	}
}

// each calls f with the indices held, oldest first.
func (l *failureLog) each(f func(at int)) {
	for _, at := range l.head[l.off:] {
		f(at)
	}
	for _, c := range l.rest {
		for _, at := range c {
			f(at)
		}
	}
}

// last returns the last w indices held (w <= n), oldest first.
func (l *failureLog) last(w int) []int {
	out := make([]int, 0, w)
	skip := l.n - w
	l.each(func(at int) {
		if skip > 0 {
			skip--
			return
		}
		out = append(out, at)
	})
	return out
}

// failuresPrealloc is how many failures of the run errors.total keeps
// before its list first grows.
const failuresPrealloc = 8

type errorCheck struct {
	*errorLimit
	// *errorWindows is nil until the run's first failure (prepare): a
	// live run that never fails is smaller without them, and without
	// its counts, which are all 0 until then.
	*errorWindows
	turn        bool // a model turn came after the last error event
	streakFired bool // the last firing was a streak's
}

// errorWindows are an errorCheck's counts of failures and the indices of
// its last failures, for the evidence: of each streak (as many as
// Consecutive) and of the run (as many as Total).
type errorWindows struct {
	failedResults int // failed tool_results in a row
	errorEvents   int // error events in a row
	seen          int // error events and failed tool_results in the run

	resultIdx, errorIdx ring[int]
	allIdx              failureLog
}

func (c *errorCheck) observe(ev *Event, p *progress, s *sink) {
	if ev == nil {
		return
	}
	var streak int
	switch ev.Kind {
	case KindToolResult:
		if ev.Err == "" {
			if c.errorWindows != nil { // no failure yet: the streaks are 0
				c.failedResults, c.errorEvents = 0, 0
			}
			return
		}
		if slices.Contains(c.ignore, ev.Tool) {
			return // neither counts nor resets
		}
		if c.errorWindows == nil {
			c.prepare()
		}
		c.failedResults++
		c.resultIdx.push(p.Events)
		streak = c.failedResults
	case KindError:
		if c.errorWindows == nil {
			c.prepare()
		}
		c.errorEvents++
		c.turn = false
		c.errorIdx.push(p.Events)
		streak = c.errorEvents
	case KindMessage, KindFinal:
		if c.turn && c.errorWindows != nil {
			c.errorEvents = 0 // two model turns with no error between them
		}
		c.turn = true
		return
	default:
		return
	}
	c.seen++
	c.allIdx.push(p.Events)
	byStreak := c.consecutive.set && streak >= c.consecutive.v
	if byStreak || (c.total.set && c.seen >= c.total.v) {
		c.streakFired = byStreak
		s.fire(Failed{Reason: FailErrorThreshold, Err: ev.ErrorText()}, c)
	}
}

// evidence is the failures of the streak that fired (the last Consecutive
// of the current event's streak), or else the run's failures that reached
// Total.
func (c *errorCheck) evidence(_ Cause, at int) []int {
	if !c.streakFired {
		return c.allIdx.last(min(c.total.v, c.allIdx.n))
	}
	r, n := &c.resultIdx, c.consecutive.v
	if ev := c.errorIdx; ev.len() > 0 && ev.at(0) == at {
		r = &c.errorIdx
	}
	a, b := r.last(min(n, r.len()))
	return append(slices.Clone(a), b...)
}
