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
// window, warn_at, cycle, same_result), recomputed from the whole history at
// every event and comparing args by encoding/json round trips rather than
// argsHash. The evaluator must agree with it on random streams, the evidence
// included, and on the same streams recorded without content (hashes).
type refStall struct {
	repeats, window, warnAt, cycle int
	sameResult                     bool
	calls, msgs, results           []refKey
	open                           []refOpen
	warned                         bool
}

type refKey struct {
	key string
	at  int
}

type refOpen struct{ sig, tool, callID string }

func canonicalArgs(raw json.RawMessage) string {
	var v any
	if len(strings.TrimSpace(string(raw))) == 0 || json.Unmarshal(raw, &v) != nil {
		return "null"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func lastN[T any](xs []T, n int) []T { return xs[max(0, len(xs)-n):] }

// observe returns what fired on ev (the at-th event), the warnings and the
// evidence of the first cause fired.
func (r *refStall) observe(ev Event, at int) (fired, warnings []Cause, evidence []int) {
	count := func(xs []refKey) (int, []int) {
		var idx []int
		for _, x := range lastN(xs, r.window) {
			if x.key == xs[len(xs)-1].key {
				idx = append(idx, x.at)
			}
		}
		return len(idx), idx
	}
	repeated := func(sig StallSignal, xs []refKey) {
		n, idx := count(xs)
		if r.repeats > 0 && n >= r.repeats {
			fired = append(fired, StallDetected{Signal: sig, Repeats: n})
			if evidence == nil {
				evidence = idx
			}
		}
		if r.warnAt > 0 && n >= r.warnAt && !r.warned {
			r.warned = true
			warnings = append(warnings, StallDetected{Signal: sig, Repeats: r.warnAt})
		}
	}
	switch ev.Kind {
	case KindToolCall:
		sig := ev.Tool + "\x00" + canonicalArgs(ev.Args)
		r.calls = append(r.calls, refKey{sig, at})
		if r.repeats > 0 && !r.sameResult {
			repeated(SignalRepeatedToolCall, r.calls)
		}
		if r.repeats > 0 && r.sameResult {
			r.open = append(r.open, refOpen{sig, ev.Tool, ev.CallID})
		}
		for p := 2; r.cycle > 0 && p <= 4 && len(r.calls) >= p*r.cycle; p++ {
			tail := lastN(r.calls, p*r.cycle)
			block := tail[:p]
			same := true
			var keys []string
			for i, c := range tail {
				same = same && c.key == block[i%p].key
				keys = append(keys, c.key)
			}
			if distinct := slices.Compact(slices.Sorted(slices.Values(keys[:p]))); same && len(distinct) >= 2 {
				fired = append(fired, StallDetected{Signal: SignalCycle, Repeats: r.cycle, Period: p})
				if evidence == nil {
					for _, c := range tail {
						evidence = append(evidence, c.at)
					}
				}
				break
			}
		}
	case KindToolResult:
		if r.repeats == 0 || !r.sameResult {
			break
		}
		i := -1
		if ev.CallID != "" {
			i = slices.IndexFunc(r.open, func(o refOpen) bool { return o.callID == ev.CallID })
		}
		if i < 0 {
			i = slices.IndexFunc(r.open, func(o refOpen) bool { return o.callID == "" && o.tool == ev.Tool })
		}
		if i < 0 {
			break
		}
		sig := r.open[i].sig + "\x00" + strings.TrimSpace(ev.Text) + "\x00" + strings.TrimSpace(ev.Err)
		r.open = slices.Delete(r.open, i, i+1)
		r.results = append(r.results, refKey{sig, at})
		repeated(SignalRepeatedResult, r.results)
	case KindMessage:
		if text := strings.TrimSpace(ev.Text); text != "" && r.repeats > 0 && !r.sameResult {
			r.msgs = append(r.msgs, refKey{ev.Source + "\x00" + text, at})
			repeated(SignalRepeatedMessage, r.msgs)
		}
	}
	return fired, warnings, evidence
}

// hashed is ev as a recorder without content writes it (§1): args_hash and
// text_hash in place of the values.
func hashed(ev Event) Event {
	switch ev.Kind {
	case KindToolCall:
		ev.ArgsHash, ev.Args = ArgsHash(ev.Args), nil
	case KindToolResult:
		ev.TextHash, ev.Text = ResultHash(ev.Text, ev.Err), ""
	case KindMessage, KindFinal, KindStop, KindError:
		ev.TextHash, ev.Text = TextHash(ev.Text), ""
	}
	return ev
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
			ref.sameResult = r.IntN(3) == 0
		}
		if ref.repeats == 0 || r.IntN(2) == 0 {
			ref.cycle = 2 + r.IntN(2)
		}
		cond := Stall(StallLimits{Repeats: ref.repeats, Window: ref.window, WarnAt: ref.warnAt, Cycle: ref.cycle,
			SameResult: ref.sameResult})
		require.NoError(t, Validate(cond))
		var evs []Event
		tools := []string{"a", "b", "c"}
		for range 40 {
			switch r.IntN(6) {
			case 0:
				evs = append(evs, msg([]string{"x", "y"}[r.IntN(2)], []string{"hi", " hi ", "yo", ""}[r.IntN(4)]))
			case 1, 2:
				res := result(tools[r.IntN(1+r.IntN(3))], []string{"", "", "exit 1", " exit 1\n"}[r.IntN(4)])
				res.Text = []string{"ok", " ok ", "changed", ""}[r.IntN(4)]
				if r.IntN(3) == 0 {
					res.CallID = fmt.Sprint(r.IntN(3))
				}
				evs = append(evs, res)
			default:
				ev := call(tools[r.IntN(1+r.IntN(3))], argsSet[r.IntN(len(argsSet))])
				if r.IntN(3) == 0 {
					ev.CallID = fmt.Sprint(r.IntN(3))
				}
				evs = append(evs, ev)
			}
		}
		var wantFired, wantWarnings []Cause
		var wantEvidence []int
		at := 0
		for i, ev := range evs {
			f, w, e := ref.observe(ev, i+1)
			wantWarnings = append(wantWarnings, w...)
			if len(f) > 0 {
				wantFired, wantEvidence, at = f, e, i+1
				break
			}
		}
		for _, form := range []string{"content", "hashes"} {
			in := evs
			if form == "hashes" {
				in = make([]Event, len(evs))
				for i, ev := range evs {
					in[i] = hashed(ev)
				}
			}
			res := replayEvents(t, cond, in...)
			desc := fmt.Sprintf("case %d (%s): %s", c, form, cond)
			require.Equal(t, at, res.StoppedAt, desc)
			if at > 0 {
				require.Equal(t, wantFired, res.Fired, desc)
				require.Equal(t, wantEvidence, res.Evidence, desc+": evidence")
			}
			require.Equal(t, len(wantWarnings), len(res.Warnings), desc)
			if len(wantWarnings) > 0 {
				require.Equal(t, wantWarnings, res.Warnings, desc)
			}
		}
		if len(wantWarnings) > 0 {
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
	for _, k := range []string{"warning", "repeated_tool_call", "repeated_result", "repeated_message", "cycle"} {
		require.Greater(t, seen[k], 50, "random cases that reached %s", k)
	}
}
