package termination

import (
	"fmt"
	"hash/maphash"
	"math"
	"strings"
)

// StallLimits configures stall detection. Set at least one of Repeats and
// Cycle.
type StallLimits struct {
	// Repeats (>= 2) is how many matching tool calls or messages among the
	// last Window make a stall (repeated_tool_call, repeated_message), and
	// how many iterations make a token plateau. 0: off.
	Repeats int
	// Window (>= Repeats) is how many of the last tool calls (or non-empty
	// messages) are searched for matches. 0: Repeats, which means the last
	// Repeats must all match. Needs Repeats.
	Window int
	// WarnAt, in [2, Repeats), records one StallDetected{repeats: WarnAt}
	// warning the first time a repeated_tool_call or repeated_message count
	// reaches it; the run goes on. 0: no warning. Needs Repeats.
	WarnAt int
	// Cycle (>= 2) fires StallDetected{signal: cycle, repeats: Cycle,
	// period: P} when the last P×Cycle tool calls are one block of P calls
	// (P in 2..4, the smallest that fits) repeated Cycle times, the block
	// holding at least two different calls. 0: off.
	Cycle int
	// TokenTolerance, in [0,1), also detects a token plateau when > 0 (a
	// policy's token_tolerance: 0 asks for exactly equal totals).
	// Needs Repeats.
	TokenTolerance float64
}

// Stall fires StallDetected. With Window W (default Repeats):
// repeated_tool_call on a tool_call when at least Repeats of the last W
// tool calls (this one included) have its tool and canonically equal args;
// repeated_message on a message when at least Repeats of the last W
// messages with non-empty text came from its source with the same trimmed
// text; the cause's Repeats is the number of matches found. token_plateau
// on a message when each of the last Repeats iterations that carry usage
// spent total tokens within TokenTolerance of the one before. cycle as
// StallLimits.Cycle says. WarnAt warns before the stop (at most one stall
// warning per run). A final event never fires or warns.
func Stall(l StallLimits) Condition {
	return &stall{repeats: nonZero(l.Repeats), window: nonZero(l.Window), warnAt: nonZero(l.WarnAt),
		cycle: nonZero(l.Cycle), tolerance: nonZero(l.TokenTolerance)}
}

type stall struct {
	repeats, window, warnAt, cycle setting[int]
	tolerance                      setting[float64]
}

func (c *stall) String() string {
	var parts []string
	for _, s := range []struct {
		key string
		v   setting[int]
	}{{"repeats", c.repeats}, {"window", c.window}, {"warn_at", c.warnAt}, {"cycle", c.cycle}} {
		if s.v.set {
			parts = append(parts, fmt.Sprintf("%s: %d", s.key, s.v.v))
		}
	}
	if c.tolerance.set {
		parts = append(parts, fmt.Sprintf("token_tolerance: %g", c.tolerance.v))
	}
	return "stall: {" + strings.Join(parts, ", ") + "}"
}

func (c *stall) validate() error {
	const key = "stall"
	if !c.repeats.set && !c.cycle.set {
		return badSetting(key, "", "needs repeats or cycle")
	}
	if c.repeats.set && c.repeats.v < 2 {
		return badSetting(key, "repeats", "must be an int >= 2, got %d", c.repeats.v)
	}
	for _, s := range []struct {
		name string
		set  bool
	}{{"window", c.window.set}, {"warn_at", c.warnAt.set}, {"token_tolerance", c.tolerance.set}} {
		if s.set && !c.repeats.set {
			return badSetting(key, s.name, "needs repeats")
		}
	}
	if c.window.set && c.window.v < c.repeats.v {
		return badSetting(key, "window", "must be an int >= repeats (%d), got %d", c.repeats.v, c.window.v)
	}
	if c.warnAt.set && !(c.warnAt.v >= 2 && c.warnAt.v < c.repeats.v) {
		return badSetting(key, "warn_at", "must be an int >= 2 and < repeats (%d), got %d", c.repeats.v, c.warnAt.v)
	}
	if c.cycle.set && c.cycle.v < 2 {
		return badSetting(key, "cycle", "must be an int >= 2, got %d", c.cycle.v)
	}
	if c.tolerance.set && !(c.tolerance.v >= 0 && c.tolerance.v < 1) {
		return badSetting(key, "token_tolerance", "must be in [0,1), got %g", c.tolerance.v)
	}
	return nil
}

// windowSize is W: how many of the last calls or messages are searched.
func (c *stall) windowSize() int {
	if c.window.set {
		return c.window.v
	}
	return c.repeats.v
}

// maxCyclePeriod is the longest block stall.cycle looks for.
const maxCyclePeriod = 4

func (c *stall) start() check {
	s := &stallCheck{stall: c}
	calls := 0
	if c.repeats.set {
		calls = c.windowSize()
		s.msgs = newRing[uint64](c.windowSize())
		if c.tolerance.set {
			s.tokens = newRing[int64](c.repeats.v)
		}
	}
	if c.cycle.set {
		need := math.MaxInt // P×Cycle saturates: the ring grows only with the calls seen
		if c.cycle.v <= math.MaxInt/maxCyclePeriod {
			need = maxCyclePeriod * c.cycle.v
		}
		calls = max(calls, need)
	}
	s.calls = newRing[uint64](calls)
	return s
}

// keySeed seeds the hashes of stall keys. The rings hold 64-bit hashes of
// (tool, canonical args) and (source, trimmed text) rather than the strings:
// 8 bytes a slot keeps a live run small, and equal keys hash equal (a
// collision, one in 2^64, would count as a match, as for argsHash).
var keySeed = maphash.MakeSeed()

// pairKey hashes two strings' worth of identity into one key.
func pairKey(a string, b uint64) uint64 {
	h := maphash.String(keySeed, a)
	return h ^ (b + 0x9e3779b97f4a7c15 + h<<6 + h>>2)
}

func callKey(ev *Event) uint64 { return pairKey(ev.Tool, argsHash(ev.Args)) }

func msgKey(source, text string) uint64 { return pairKey(source, maphash.String(keySeed, text)) }

// stallCheck keeps the last keys of each signal in rings.
type stallCheck struct {
	*stall
	calls  ring[uint64] // callKey of the last tool calls
	msgs   ring[uint64] // msgKey of the last non-empty messages
	tokens ring[int64]
}

func (c *stallCheck) observe(ev *Event, _ *Progress, s *sink) {
	if ev == nil {
		return
	}
	switch ev.Kind {
	case KindToolCall:
		key := s.callKey
		if !s.keyed {
			key = callKey(ev)
		}
		c.calls.push(key)
		if c.repeats.set {
			c.repeated(SignalRepeatedToolCall, matches(&c.calls, key, c.windowSize()), s)
		}
		if c.cycle.set {
			if p := c.period(); p > 0 {
				s.fire(StallDetected{Signal: SignalCycle, Repeats: c.cycle.v, Period: p})
			}
		}
	case KindMessage, KindFinal:
		if !c.repeats.set {
			return
		}
		if ev.Kind == KindMessage {
			if text := strings.TrimSpace(ev.Text); text != "" {
				key := msgKey(ev.Source, text)
				c.msgs.push(key)
				c.repeated(SignalRepeatedMessage, matches(&c.msgs, key, c.windowSize()), s)
			}
		}
		if c.tolerance.set {
			if total := ev.Usage.Total(); total > 0 {
				c.tokens.push(total)
				if ev.Kind == KindMessage && c.plateau() {
					s.fire(StallDetected{Signal: SignalTokenPlateau, Repeats: c.repeats.v})
				}
			}
		}
	}
}

// repeated fires or warns a repetition signal with n matches.
func (c *stallCheck) repeated(sig StallSignal, n int, s *sink) {
	if n >= c.repeats.v {
		s.fire(StallDetected{Signal: sig, Repeats: n})
	}
	if c.warnAt.set && n >= c.warnAt.v {
		s.warnStall(StallDetected{Signal: sig, Repeats: c.warnAt.v})
	}
}

// matches counts the values equal to key among the last w of r.
func matches[T comparable](r *ring[T], key T, w int) int {
	n := 0
	a, b := r.last(max(0, min(w, r.len()))) // an unvalidated negative window matches nothing
	for _, v := range a {
		if v == key {
			n++
		}
	}
	for _, v := range b {
		if v == key {
			n++
		}
	}
	return n
}

// period returns the smallest P in 2..4 for which the last P×Cycle calls
// are one block of P calls, holding two different calls at least, repeated
// Cycle times; 0 if none.
func (c *stallCheck) period() int {
	k := c.cycle.v
	if k < 1 {
		return 0 // unvalidated: no cycle
	}
	for p := 2; p <= maxCyclePeriod; p++ {
		if c.calls.len()/p < k { // len < p×k, without overflow
			return 0
		}
		if c.repeatsBlock(p, k) {
			return p
		}
	}
	return 0
}

func (c *stallCheck) repeatsBlock(p, k int) bool {
	for i := range p * (k - 1) {
		if c.calls.at(i) != c.calls.at(i+p) {
			return false
		}
	}
	for i := 1; i < p; i++ {
		if c.calls.at(i) != c.calls.at(0) {
			return true
		}
	}
	return false // a block of one call is repeated_tool_call's job
}

// plateau reports whether each of the last Repeats totals is within
// tolerance of the one before it.
func (c *stallCheck) plateau() bool {
	n := c.repeats.v
	if c.tokens.len() < n {
		return false
	}
	for i := range n - 1 {
		cur, prev := c.tokens.at(i), c.tokens.at(i+1)
		if math.Abs(float64(cur-prev))/float64(prev) > c.tolerance.v {
			return false
		}
	}
	return true
}

// ringPrealloc is how many values a ring holds before it first grows: a
// window written as 1e9 must not allocate gigabytes when the run starts
// (that is what stalled the policy fuzzer), while common windows never
// grow on the hot path.
const ringPrealloc = 32

// ring keeps the last size values pushed. Its memory grows with the values
// pushed, up to size.
type ring[T comparable] struct {
	buf  []T
	size int
	next int // where the next value goes once buf is full
}

func newRing[T comparable](size int) ring[T] {
	size = max(size, 0) // an unvalidated negative setting keeps nothing
	return ring[T]{buf: make([]T, 0, min(size, ringPrealloc)), size: size}
}

func (r *ring[T]) push(v T) {
	if len(r.buf) < r.size {
		r.buf = append(r.buf, v)
		return
	}
	if r.size == 0 {
		return
	}
	r.buf[r.next] = v
	r.next++
	if r.next == r.size {
		r.next = 0
	}
}

func (r *ring[T]) len() int { return len(r.buf) }

// last returns the last w values pushed (w <= len), oldest first, in at
// most two slices of buf.
func (r *ring[T]) last(w int) (a, b []T) {
	if len(r.buf) < r.size {
		return r.buf[len(r.buf)-w:], nil
	}
	if start := r.next - w; start >= 0 {
		return r.buf[start:r.next], nil
	}
	return r.buf[r.next-w+r.size:], r.buf[:r.next]
}

// at returns the i-th most recent value (0: the last pushed), i < len.
func (r *ring[T]) at(i int) T {
	if len(r.buf) < r.size {
		return r.buf[len(r.buf)-1-i]
	}
	j := r.next - 1 - i
	if j < 0 {
		j += r.size
	}
	return r.buf[j]
}
