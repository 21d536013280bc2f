package termination

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// refStall is a naive reading of the contract's stall rules (repeats with a
// window, warn_at, cycle), recomputed from the whole history at every event
// and comparing args by encoding/json round trips rather than argsHash. The
// evaluator must agree with it on random streams.
type refStall struct {
	repeats, window, warnAt, cycle int
	calls, msgs                    []string
	warned                         bool
}

func canonicalArgs(raw json.RawMessage) string {
	var v any
	if len(strings.TrimSpace(string(raw))) == 0 || json.Unmarshal(raw, &v) != nil {
		return "null"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func lastN(xs []string, n int) []string { return xs[max(0, len(xs)-n):] }

func (r *refStall) observe(ev Event) (fired, warnings []Cause) {
	count := func(xs []string) int {
		n := 0
		for _, x := range lastN(xs, r.window) {
			if x == xs[len(xs)-1] {
				n++
			}
		}
		return n
	}
	repeated := func(sig StallSignal, n int) {
		if r.repeats > 0 && n >= r.repeats {
			fired = append(fired, StallDetected{Signal: sig, Repeats: n})
		}
		if r.warnAt > 0 && n >= r.warnAt && !r.warned {
			r.warned = true
			warnings = append(warnings, StallDetected{Signal: sig, Repeats: r.warnAt})
		}
	}
	switch ev.Kind {
	case KindToolCall:
		r.calls = append(r.calls, ev.Tool+"\x00"+canonicalArgs(ev.Args))
		if r.repeats > 0 {
			repeated(SignalRepeatedToolCall, count(r.calls))
		}
		for p := 2; r.cycle > 0 && p <= 4 && len(r.calls) >= p*r.cycle; p++ {
			tail := lastN(r.calls, p*r.cycle)
			block := tail[:p]
			same := true
			for i, c := range tail {
				same = same && c == block[i%p]
			}
			if distinct := slices.Compact(slices.Sorted(slices.Values(block))); same && len(distinct) >= 2 {
				fired = append(fired, StallDetected{Signal: SignalCycle, Repeats: r.cycle, Period: p})
				break
			}
		}
	case KindMessage:
		if text := strings.TrimSpace(ev.Text); text != "" && r.repeats > 0 {
			r.msgs = append(r.msgs, ev.Source+"\x00"+text)
			repeated(SignalRepeatedMessage, count(r.msgs))
		}
	}
	return fired, warnings
}

func TestStallMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 23))
	argsSet := []string{`1`, `{"q":1}`, `{ "q" : 1.0 }`, `2`, ``, `null`}
	seen := map[string]int{}
	for c := range 3000 {
		ref := &refStall{}
		if r.IntN(4) > 0 {
			ref.repeats = 2 + r.IntN(3)
			ref.window = ref.repeats + r.IntN(5)
			if ref.repeats > 2 && r.IntN(2) == 0 {
				ref.warnAt = 2 + r.IntN(ref.repeats-2)
			}
		}
		if ref.repeats == 0 || r.IntN(2) == 0 {
			ref.cycle = 2 + r.IntN(2)
		}
		cond := Stall(StallLimits{Repeats: ref.repeats, Window: ref.window, WarnAt: ref.warnAt, Cycle: ref.cycle})
		require.NoError(t, Validate(cond))
		var evs []Event
		for range 40 {
			switch r.IntN(5) {
			case 0:
				evs = append(evs, msg([]string{"x", "y"}[r.IntN(2)], []string{"hi", " hi ", "yo", ""}[r.IntN(4)]))
			case 1:
				evs = append(evs, result("a", ""))
			default:
				evs = append(evs, call([]string{"a", "b", "c"}[r.IntN(1+r.IntN(3))], argsSet[r.IntN(len(argsSet))]))
			}
		}
		var wantFired, wantWarnings []Cause
		at := 0
		for i, ev := range evs {
			f, w := ref.observe(ev)
			wantWarnings = append(wantWarnings, w...)
			if len(f) > 0 {
				wantFired, at = f, i+1
				break
			}
		}
		res := replayEvents(t, cond, evs...)
		desc := fmt.Sprintf("case %d: %s", c, cond)
		require.Equal(t, at, res.StoppedAt, desc)
		if at > 0 {
			require.Equal(t, wantFired, res.Fired, desc)
		}
		require.Equal(t, len(wantWarnings), len(res.Warnings), desc)
		if len(wantWarnings) > 0 {
			require.Equal(t, wantWarnings, res.Warnings, desc)
			seen["warning"]++
		}
		for _, f := range wantFired {
			seen[string(f.(StallDetected).Signal)]++
			if f.(StallDetected).Repeats > ref.repeats && f.(StallDetected).Signal != SignalCycle {
				seen["more matches than repeats"]++
			}
		}
	}
	t.Logf("%v", seen)
	for _, k := range []string{"warning", "repeated_tool_call", "repeated_message", "cycle"} {
		require.Greater(t, seen[k], 50, "random cases that reached %s", k)
	}
}
