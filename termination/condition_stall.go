package termination

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentstop/agentstop/internal/canonical"
)

// StallLimits configures stall detection. Set at least one of Repeats and
// Cycle.
//
// As a Condition, it fires StallDetected. With Window W (default
// Repeats): repeated_tool_call on a tool_call when at least Repeats of the last W
// tool calls (this one included) have its tool and canonically equal args;
// repeated_message on a message when at least Repeats of the last W
// messages with non-empty text came from its source with the same trimmed
// text; the cause's Repeats is the number of matches found. token_plateau
// on a message when each of the last Repeats iterations that carry usage
// spent total tokens within TokenTolerance of the one before. cycle as
// StallLimits.Cycle says; repeated_result as StallLimits.SameResult says.
// WarnAt warns before the stop (at most one stall warning per run). A final
// event never fires or warns.
//
// Events recorded without content (LogFields.ArgsHash, LogFields.TextHash) are
// compared by their hashes in place of the args, the message text and the
// result's text and error; a hashed value never equals an unhashed one.
type StallLimits struct {
	// Repeats (>= 2) is how many matching tool calls or messages (with
	// SameResult: completed calls) among the last Window make a stall
	// (repeated_tool_call, repeated_message; repeated_result), and how many
	// iterations make a token plateau. 0: off.
	Repeats int
	// Window (>= Repeats) is how many of the last tool calls (or non-empty
	// messages, or completed calls) are searched for matches. 0: Repeats,
	// which means the last Repeats must all match. Needs Repeats.
	Window int
	// WarnAt, in [2, Repeats), records one StallDetected{repeats: WarnAt}
	// warning the first time a repeated_tool_call, repeated_message or
	// repeated_result count reaches it; the run goes on. 0: no warning.
	// Needs Repeats.
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
	// SameResult counts a repeat only when the call also got the same
	// result: each tool_result is paired with its call (by call_id, else
	// the oldest open call of that tool without one), and Repeats of the
	// last Window completed calls with the same tool, canonical args,
	// trimmed result text and error fire repeated_result on the result
	// (WarnAt warns on repeated results). repeated_tool_call and
	// repeated_message are then off; cycle and token_plateau are not. A
	// result with no open call counts for nothing. Needs Repeats.
	SameResult bool
	// AnyArgs, with SameResult, leaves the args out of a completed call's
	// signature: the tool and the result alone, so that a loop calling one
	// tool with ever-varying args and getting the same (often empty)
	// answer is caught. It changes Repeats, Window and WarnAt, not Cycle.
	AnyArgs bool
	// IgnoreTools names tools whose calls and results count for no stall
	// signal and take no place in a window or a cycle: a tool that polls a
	// job's status is expected to repeat.
	IgnoreTools []string
}

// condition returns the condition l stands for.
func (l StallLimits) condition() Condition {
	return &stall{repeats: nonZero(l.Repeats), window: nonZero(l.Window), warnAt: nonZero(l.WarnAt),
		cycle: nonZero(l.Cycle), tolerance: nonZero(l.TokenTolerance),
		sameResult: l.SameResult, sameResultSet: l.SameResult,
		anyArgs: l.AnyArgs, ignore: slices.Clone(l.IgnoreTools), ignoreSet: l.IgnoreTools != nil}
}

type stall struct {
	repeats, window, warnAt, cycle setting[int]
	tolerance                      setting[float64]
	sameResult, sameResultSet      bool // a policy may write same_result: false
	anyArgs                        bool
	ignore                         []string // ignore_tools
	ignoreSet                      bool
}

// ignored reports whether tool is one of ignore_tools.
func (c *stall) ignored(tool string) bool {
	return len(c.ignore) > 0 && slices.Contains(c.ignore, tool)
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
	if c.sameResultSet {
		parts = append(parts, fmt.Sprintf("same_result: %t", c.sameResult))
	}
	if c.anyArgs {
		parts = append(parts, "any_args: true")
	}
	if c.ignoreSet {
		parts = append(parts, "ignore_tools: ["+strings.Join(c.ignore, ", ")+"]")
	}
	return "stall: {" + strings.Join(parts, ", ") + "}"
}

func (c *stall) Validate() error {
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
	}{{"window", c.window.set}, {"warn_at", c.warnAt.set}, {"token_tolerance", c.tolerance.set}, {"same_result", c.sameResultSet}} {
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
	if c.anyArgs && !c.sameResult {
		// Without results, any two calls of one tool would be a repeat.
		return badSetting(key, "any_args", "needs same_result: true")
	}
	if c.ignoreSet {
		return validNames(key, "ignore_tools", c.ignore, false)
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
		if c.sameResult {
			s.sameResultState = &sameResultState{results: newRing[keyAt](c.windowSize()),
				open: make([]openCall, 0, min(c.windowSize(), maxOpenCalls))}
		} else {
			calls = c.windowSize()
			s.msgs = newRing[keyAt](c.windowSize())
		}
		if c.tolerance.set {
			s.tokens = newRing[keyAt](c.repeats.v)
		}
	}
	if c.cycle.set {
		need := math.MaxInt // P×Cycle saturates: the ring grows only with the calls seen
		if c.cycle.v <= math.MaxInt/maxCyclePeriod {
			need = maxCyclePeriod * c.cycle.v
		}
		calls = max(calls, need)
	}
	s.calls = newRing[keyAt](calls)
	return s
}

// maxOpenCalls bounds the calls a same_result stall keeps open waiting for
// their results: past it the oldest is dropped (a loop that never reports
// results must not grow a live run without bound), as telemetry's pairing
// does.
const maxOpenCalls = 64

// keyAt is a stall key (or an iteration's total tokens) and the event
// (1-based index) it came from: the windows keep the indices for the
// evidence, so that naming the events of a stall costs nothing until one
// fires. An entry is 12 bytes, not 16: the key in two halves, and the low
// 32 bits of the index, whose high bits are those of the event it is read
// on (index), less the entry's age. That holds while the entry is less
// than 2^32 events older than the event it is read on: a run would need
// four billion events between a tool call and a stall or evidence that
// names it. The windows are most of a live run's stall state (§6: a live
// run's memory); their loops compare the halves.
type keyAt struct {
	lo, hi uint32
	at32   uint32
}

// entry returns the window entry of key for event at.
func entry(key uint64, at int) keyAt {
	return keyAt{lo: uint32(key), hi: uint32(key >> 32), at32: uint32(at)}
}

// key returns the entry's key.
func (k keyAt) key() uint64 { return uint64(k.hi)<<32 | uint64(k.lo) }

// is reports whether the entry's key is key.
func (k keyAt) is(key uint64) bool { return k.lo == uint32(key) && k.hi == uint32(key>>32) }

// sameKey reports whether the entries have the same key.
func (k keyAt) sameKey(o keyAt) bool { return k.lo == o.lo && k.hi == o.hi }

// index returns the entry's event index, read on event now (now >= the
// entry's).
func (k keyAt) index(now int) int { return now - int(uint32(now)-k.at32) }

// openCall is a tool call waiting for its result (stall.same_result).
type openCall struct {
	key    uint64 // callKey
	tool   string
	callID string
}

// The rings hold 64-bit hashes of (tool, canonical args) and (source,
// trimmed text) rather than the strings: 8 bytes a slot keeps a live run
// small, and equal keys hash equal (a collision, one in 2^64, would count
// as a match, as for canonical.ArgsKey). Strings are hashed with
// canonical.StringKey, seeded per process.

// pairKey hashes two strings' worth of identity into one key.
func pairKey(a string, b uint64) uint64 {
	h := canonical.StringKey(a)
	return h ^ (b + 0x9e3779b97f4a7c15 + h<<6 + h>>2)
}

// hashedDomain sets a stored content hash (args_hash, text_hash) apart from
// a value's own hash, so that a hash never equals a value.
const hashedDomain = 0x51ed270b27f0a1c3

func hashedKey(h string) uint64 { return canonical.StringKey(h) ^ hashedDomain }

// callKey is the key of a tool call: its tool and canonical args, or its
// args_hash in a log recorded without content.
func callKey(ev *Event) uint64 {
	if ev.argsHash() != "" {
		return pairKey(ev.Tool, hashedKey(ev.argsHash()))
	}
	return pairKey(ev.Tool, canonical.ArgsKey(ev.Args))
}

// anyArgsDomain sets a tool's key (stall.any_args) apart from its calls'
// keys.
const anyArgsDomain = 0x2545f4914f6cdd1d

// toolKey is the key of a call with its args left out (stall.any_args).
func toolKey(tool string) uint64 { return pairKey(tool, anyArgsDomain) }

// msgKey is the key of a message with a non-empty trimmed text (or a
// text_hash): its source and text; ok is false for an empty message.
func msgKey(ev *Event) (key uint64, ok bool) {
	if ev.textHash() != "" {
		return pairKey(ev.Source, hashedKey(ev.textHash())), ev.textHash() != emptyTextHash
	}
	text := trimSpace(ev.Text)
	return pairKey(ev.Source, canonical.StringKey(text)), text != ""
}

// trimSpace is strings.TrimSpace without its call for the common text
// that starts and ends with a printable ASCII character (nothing to trim).
func trimSpace(s string) string {
	if n := len(s); n > 0 && s[0] > ' ' && s[0] < utf8.RuneSelf && s[n-1] > ' ' && s[n-1] < utf8.RuneSelf {
		return s
	}
	return strings.TrimSpace(s)
}

// emptyTextHash is the text_hash of an empty text: a message recorded
// without content whose text was empty.
var emptyTextHash = canonical.TextHash("")

// resultKey is the signature of a completed call: the call's key and the
// result's trimmed text and error, or its text_hash.
func resultKey(call uint64, ev *Event) uint64 {
	if ev.textHash() != "" {
		return pairKey("\x00hashed result", call^hashedKey(ev.textHash()))
	}
	h := pairKey(trimSpace(ev.Err), canonical.StringKey(trimSpace(ev.Text)))
	return pairKey("\x00result", call^h)
}

// stallCheck keeps the last keys of each signal in rings.
type stallCheck struct {
	*stall
	calls            ring[keyAt] // callKey of the last tool calls
	msgs             ring[keyAt] // msgKey of the last non-empty messages
	tokens           ring[keyAt] // total tokens of the last iterations that carry usage
	*sameResultState             // nil without same_result: a live run is smaller
}

// sameResultState is what stall.same_result keeps.
type sameResultState struct {
	results ring[keyAt] // resultKey of the last completed calls
	open    []openCall  // calls waiting for their results, oldest first
}

func (c *stallCheck) observe(ev *Event, p *progress, s *sink) {
	if ev == nil {
		return
	}
	switch ev.Kind {
	case KindToolCall:
		if c.ignored(ev.Tool) {
			return // no place in a window or a cycle
		}
		key := s.callKey
		if key == 0 { // not computed (see sink.callKey)
			key = callKey(ev)
		}
		c.calls.push(entry(key, p.Events))
		if c.repeats.set {
			if c.sameResult {
				if c.anyArgs {
					c.openCall(toolKey(ev.Tool), ev) // the result's signature leaves the args out
				} else {
					c.openCall(key, ev)
				}
			} else {
				if n := matches(&c.calls, key, c.windowSize()); c.signals(n, s) {
					c.repeated(SignalRepeatedToolCall, n, s)
				}
			}
		}
		if c.cycle.set {
			if p := c.period(); p > 0 {
				c.fireCycle(p, s)
			}
		}
	case KindToolResult:
		if !c.sameResult || !c.repeats.set || c.ignored(ev.Tool) {
			return
		}
		call, ok := c.closeCall(ev)
		if !ok {
			return // no open call to pair with: counts for nothing
		}
		key := resultKey(call, ev)
		c.results.push(entry(key, p.Events))
		if n := matches(&c.results, key, c.windowSize()); c.signals(n, s) {
			c.repeated(SignalRepeatedResult, n, s)
		}
	case KindMessage, KindFinal:
		if !c.repeats.set {
			return
		}
		if ev.Kind == KindMessage && !c.sameResult {
			if key, ok := msgKey(ev); ok {
				c.msgs.push(entry(key, p.Events))
				if n := matches(&c.msgs, key, c.windowSize()); c.signals(n, s) {
					c.repeated(SignalRepeatedMessage, n, s)
				}
			}
		}
		if c.tolerance.set {
			if total := ev.Usage.Total(); total > 0 {
				c.tokens.push(entry(uint64(total), p.Events))
				if ev.Kind == KindMessage && c.plateau() {
					c.firePlateau(s)
				}
			}
		}
	}
}

// fireCycle and firePlateau fire those signals. They, repeated and
// openCall have frames of their own: observe runs on a live run's small
// stack, and causes built in its frame would make it larger.
//
//go:noinline
func (c *stallCheck) fireCycle(period int, s *sink) {
	s.fire(StallDetected{Signal: SignalCycle, Repeats: c.cycle.v, Period: period}, c)
}

//go:noinline
func (c *stallCheck) firePlateau(s *sink) {
	s.fire(StallDetected{Signal: SignalTokenPlateau, Repeats: c.repeats.v}, c)
}

// openCall notes a tool call waiting for its result.
//
//go:noinline
func (c *stallCheck) openCall(key uint64, ev *Event) {
	switch n := len(c.open); {
	case n == maxOpenCalls:
		copy(c.open, c.open[1:])
		c.open = c.open[:n-1]
	case n == cap(c.open):
		// Grown by hand so that the slice never holds more than the bound.
		grown := make([]openCall, n, min(max(2*n, 4), maxOpenCalls))
		copy(grown, c.open)
		c.open = grown
	}
	c.open = append(c.open, openCall{key: key, tool: ev.Tool, callID: ev.CallID})
}

// closeCall pairs a tool_result with its call and closes the call: the open
// call with the result's call_id; else (no call_id, or none matches) the
// oldest open call of the result's tool that has no call_id.
func (c *stallCheck) closeCall(ev *Event) (uint64, bool) {
	i := -1
	if ev.CallID != "" {
		i = slices.IndexFunc(c.open, func(o openCall) bool { return o.callID == ev.CallID })
	}
	if i < 0 {
		i = slices.IndexFunc(c.open, func(o openCall) bool { return o.callID == "" && o.tool == ev.Tool })
	}
	if i < 0 {
		return 0, false
	}
	key := c.open[i].key
	copy(c.open[i:], c.open[i+1:])
	c.open[len(c.open)-1] = openCall{}
	c.open = c.open[:len(c.open)-1]
	return key, true
}

// signals reports whether n matches fire or warn a repetition signal
// (then repeated does it): a warning only while the run has none.
func (c *stallCheck) signals(n int, s *sink) bool {
	return n >= c.repeats.v || c.warnAt.set && n >= c.warnAt.v && !s.stallWarned()
}

// repeated fires or warns a repetition signal with n matches.
//
//go:noinline
func (c *stallCheck) repeated(sig StallSignal, n int, s *sink) {
	if n >= c.repeats.v {
		s.fire(StallDetected{Signal: sig, Repeats: n}, c)
	}
	if c.warnAt.set && n >= c.warnAt.v {
		s.warnStall(StallDetected{Signal: sig, Repeats: c.warnAt.v})
	}
}

// evidence is the events of the signal that fired: the matching calls,
// results or messages in the window, the cycle's calls, the plateau's
// iterations.
func (c *stallCheck) evidence(cause Cause, at int) []int {
	sd, _ := cause.(StallDetected)
	var out []int
	switch sd.Signal {
	case SignalRepeatedToolCall:
		out = matchIndices(&c.calls, c.windowSize(), at)
	case SignalRepeatedMessage:
		out = matchIndices(&c.msgs, c.windowSize(), at)
	case SignalRepeatedResult:
		out = matchIndices(&c.results, c.windowSize(), at)
	case SignalCycle:
		n := min(sd.Period*sd.Repeats, c.calls.len())
		for i := n - 1; i >= 0; i-- {
			out = append(out, c.calls.at(i).index(at))
		}
	case SignalTokenPlateau:
		n := min(c.repeats.v, c.tokens.len())
		for i := n - 1; i >= 0; i-- {
			out = append(out, c.tokens.at(i).index(at))
		}
	}
	return out
}

// matchIndices returns the events of the entries among the last w of r
// whose key is the last one's, oldest first, read on event now.
func matchIndices(r *ring[keyAt], w, now int) []int {
	if r.len() == 0 {
		return nil
	}
	key := r.at(0).key()
	var out []int
	a, b := r.last(max(0, min(w, r.len())))
	for _, part := range [2][]keyAt{a, b} {
		for _, v := range part {
			if v.is(key) {
				out = append(out, v.index(now))
			}
		}
	}
	return out
}

// matches counts the entries with key among the last w of r.
func matches(r *ring[keyAt], key uint64, w int) int {
	if w >= len(r.buf) {
		// The window holds every value kept (a ring as large as the
		// window): their order does not matter to a count.
		return countKey(r.buf, key)
	}
	a, b := r.last(max(0, w)) // an unvalidated negative window matches nothing
	return countKey(a, key) + countKey(b, key)
}

// countKey counts the entries of buf that hold key.
func countKey(buf []keyAt, key uint64) int {
	n := 0
	// Two entries a turn, without branches: a key matches rarely and
	// unpredictably. (Small enough to be inlined in matches.)
	for len(buf) >= 2 {
		b := (*[2]keyAt)(buf)
		n += b2i(b[0].key() == key) + b2i(b[1].key() == key)
		buf = buf[2:]
	}
	if len(buf) > 0 {
		n += b2i(buf[0].key() == key)
	}
	return n
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// period returns the smallest P in 2..4 for which the last P×Cycle calls
// are one block of P calls, holding two different calls at least, repeated
// Cycle times; 0 if none.
func (c *stallCheck) period() int {
	k := c.cycle.v
	if k < 1 {
		return 0 // unvalidated: no cycle
	}
	n, small := c.calls.len(), k <= math.MaxInt/maxCyclePeriod
	if n == 0 {
		return 0
	}
	last := c.calls.at(0).key()
	for p := 2; p <= maxCyclePeriod; p++ {
		// len < p×k: a product rather than a division on every tool call
		// (a 64-bit division costs tens of cycles), unless p×k overflows.
		if small && n < p*k || !small && n/p < k {
			return 0
		}
		// The last call begins the block's repeat before it, or P is not
		// the period (repeatsBlock's first comparison, without its call).
		if k > 1 && !c.calls.at(p).is(last) {
			continue
		}
		if c.repeatsBlock(p, k) {
			return p
		}
	}
	return 0
}

func (c *stallCheck) repeatsBlock(p, k int) bool {
	for i := range p * (k - 1) {
		if !c.calls.at(i).sameKey(c.calls.at(i + p)) {
			return false
		}
	}
	for i := 1; i < p; i++ {
		if !c.calls.at(i).sameKey(c.calls.at(0)) {
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
		cur, prev := int64(c.tokens.at(i).key()), int64(c.tokens.at(i+1).key())
		if beyond(math.Abs(float64(cur-prev)), float64(prev), c.tolerance.v) {
			return false
		}
	}
	return true
}

// beyond reports whether d/base > tolerance. Far above it (the common
// case of a token plateau's check: totals that differ), it is so whatever
// the rounding, and needs no division (tens of cycles). (d >= 1: the
// difference of two token totals that differ, whose ratio to a total
// cannot underflow.)
func beyond(d, base, tolerance float64) bool {
	if d > base*tolerance*farAbove && d >= 1 && base > 0 {
		return true
	}
	return d/base > tolerance
}

// ringPrealloc is how many values a ring holds before it first grows: a
// window written as 1e9 must not allocate gigabytes when the run starts
// (that is what stalled the policy fuzzer), while common windows never
// grow on the hot path.
const ringPrealloc = 32

// ring keeps the last size values pushed. Its memory grows with the values
// pushed, up to size. (size and next are 32-bit: a ring larger than 2^31
// values would take tens of gigabytes before it filled.)
type ring[T comparable] struct {
	buf  []T
	size int32
	// next is where the next value goes: len(buf) while the ring grows,
	// the oldest value's place once it is full.
	next int32
}

func newRing[T comparable](size int) ring[T] {
	n := ringSize(size)
	return ring[T]{buf: make([]T, 0, min(int(n), ringPrealloc)), size: n}
}

// ringSize is the size of a ring for a setting of n values: an unvalidated
// negative setting keeps nothing.
func ringSize(n int) int32 { return int32(min(max(n, 0), math.MaxInt32)) }

func (r *ring[T]) push(v T) {
	if len(r.buf) < int(r.size) {
		r.buf = append(r.buf, v)
	} else if r.size != 0 {
		r.buf[r.next] = v
	} else {
		return
	}
	if r.next++; r.next == r.size {
		r.next = 0
	}
}

func (r *ring[T]) len() int { return len(r.buf) }

// last returns the last w values pushed (w <= len), oldest first, in at
// most two slices of buf.
func (r *ring[T]) last(w int) (a, b []T) {
	next := int(r.next)
	if start := next - w; start >= 0 {
		return r.buf[start:next], nil
	}
	return r.buf[next-w+len(r.buf):], r.buf[:next] // full: it wraps
}

// at returns the i-th most recent value (0: the last pushed), i < len.
func (r *ring[T]) at(i int) T {
	j := int(r.next) - 1 - i
	if j < 0 {
		j += len(r.buf) // full: it wraps
	}
	return r.buf[j]
}
