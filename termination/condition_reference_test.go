package termination

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/internal/canonical"
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
		ev.Log, ev.Args = &LogFields{ArgsHash: canonical.ArgsHash(ev.Args)}, nil
	case KindToolResult:
		ev.Log, ev.Text = &LogFields{TextHash: canonical.ResultHash(ev.Text, ev.Err)}, ""
	case KindMessage, KindFinal, KindStop, KindError:
		ev.Log, ev.Text = &LogFields{TextHash: canonical.TextHash(ev.Text)}, ""
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
		cond := StallLimits{Repeats: ref.repeats, Window: ref.window, WarnAt: ref.warnAt, Cycle: ref.cycle,
			SameResult: ref.sameResult}
		require.NoError(t, cond.Validate())
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

// refErrors is a naive reading of the contract's errors rules (v3: the
// error-event row survives one model turn between errors; ignore_tools),
// recomputed from the whole history at every event by walking it
// backwards. The evaluator must agree with it, the evidence included.
type refErrors struct {
	consecutive, total int
	ignore             []string
	history            []Event
}

func (r *refErrors) failed(ev Event) bool {
	switch ev.Kind {
	case KindError:
		return true
	case KindToolResult:
		return ev.Err != "" && !slices.Contains(r.ignore, ev.Tool)
	}
	return false
}

func (r *refErrors) observe(ev Event) (fired bool, evidence []int) {
	r.history = append(r.history, ev)
	if !r.failed(ev) {
		return false, nil
	}
	at := len(r.history)
	// The streak this failure belongs to, walking back.
	var streak []int
	if ev.Kind == KindToolResult {
		for i := at - 1; i >= 0; i-- {
			e := r.history[i]
			if e.Kind == KindToolResult && e.Err == "" {
				break // a success resets
			}
			if e.Kind == KindToolResult && r.failed(e) {
				streak = append([]int{i + 1}, streak...)
			}
		}
	} else {
		prevTurn := false // the event after this one (walking back) was a model turn
		for i := at - 1; i >= 0; i-- {
			e := r.history[i]
			if e.Kind == KindToolResult && e.Err == "" {
				break
			}
			turn := e.Kind == KindMessage || e.Kind == KindFinal
			if turn && prevTurn {
				break // two model turns with no error between them
			}
			switch {
			case turn:
				prevTurn = true
			case e.Kind == KindError:
				prevTurn = false
				streak = append([]int{i + 1}, streak...)
			}
		}
	}
	if r.consecutive > 0 && len(streak) >= r.consecutive {
		return true, streak[len(streak)-r.consecutive:]
	}
	var all []int
	for i, e := range r.history {
		if r.failed(e) {
			all = append(all, i+1)
		}
	}
	if r.total > 0 && len(all) >= r.total {
		return true, all[len(all)-r.total:]
	}
	return false, nil
}

func TestErrorsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	seen := map[string]int{}
	for c := range 3000 {
		ref := &refErrors{}
		if r.IntN(3) > 0 {
			ref.consecutive = 1 + r.IntN(4)
		}
		if ref.consecutive == 0 || r.IntN(2) == 0 {
			ref.total = 1 + r.IntN(8)
		}
		if r.IntN(2) == 0 {
			ref.ignore = []string{"grep"}
		}
		cond := ErrorLimits{Consecutive: ref.consecutive, Total: ref.total, IgnoreTools: ref.ignore}
		require.NoError(t, cond.Validate())
		var evs []Event
		for range 30 {
			switch r.IntN(7) {
			case 0, 1:
				evs = append(evs, msg("a", "x"))
			case 2:
				evs = append(evs, final("a", "y"))
			case 3:
				evs = append(evs, errEv("e"))
			case 4:
				evs = append(evs, call("t", `1`))
			default:
				evs = append(evs, result([]string{"grep", "bash"}[r.IntN(2)], []string{"", "fail", "fail"}[r.IntN(3)]))
			}
		}
		evs = append(evs, msg("a", "end")) // not a stream error
		at := 0
		var evidence []int
		for i, ev := range evs {
			if fired, e := ref.observe(ev); fired {
				at, evidence = i+1, e
				break
			}
		}
		res := replayEvents(t, cond, evs...)
		desc := fmt.Sprintf("case %d: %s", c, cond)
		require.Equal(t, at, res.StoppedAt, desc)
		if at > 0 {
			require.Equal(t, evidence, res.Evidence, desc+": evidence")
			if len(evidence) > 1 {
				seen["evidence of several failures"]++
			}
			seen[evs[at-1].Kind.String()]++
		}
	}
	t.Logf("%v", seen)
	for _, k := range []string{"error", "tool_result", "evidence of several failures"} {
		require.Greater(t, seen[k], 100, "random cases that fired on %s", k)
	}
}

// FuzzConditionsMatchReference derives a stream and a stall and errors
// policy from the input and checks the evaluator against refStall and
// refErrors, evidence included, with content and recorded without it.
func FuzzConditionsMatchReference(f *testing.F) {
	f.Add([]byte{3, 8, 2, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
	f.Add([]byte{2, 2, 0, 0, 5, 5, 5, 5, 5, 5, 2, 2, 2})
	f.Add([]byte{4, 9, 3, 1, 16, 17, 18, 19, 16, 17, 18, 19, 16, 17, 18, 19})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 || len(data) > 200 {
			return
		}
		repeats := 2 + int(data[0]%3)
		ref := &refStall{repeats: repeats, window: repeats + int(data[1]%5), sameResult: data[2]&2 != 0}
		if data[2]&0x80 != 0 {
			ref.cycle = 2 + int(data[2]%2)
		}
		errRef := &refErrors{consecutive: 1 + int(data[1]>>4%4), total: 2 + int(data[0]>>4%6)}
		if data[2]&4 != 0 {
			errRef.ignore = []string{"b"}
		}
		var evs []Event
		for _, b := range data[3:] {
			tool := []string{"a", "b"}[b>>6&1]
			switch b % 8 {
			case 0, 1:
				evs = append(evs, call(tool, []string{`1`, `{"x":1}`, `{ "x" : 1.0 }`}[int(b>>3)%3]).withID([]string{"", "", "i"}[int(b>>4)%3]))
			case 2, 3:
				evs = append(evs, out(tool, []string{"ok", " ok ", "no"}[int(b>>3)%3], []string{"", "e"}[b>>5&1]).withID([]string{"", "i", ""}[int(b>>4)%3]))
			case 4:
				evs = append(evs, msg("s", []string{"hi", " hi", ""}[int(b>>3)%3]))
			case 5:
				evs = append(evs, errEv("e"))
			case 6:
				evs = append(evs, final("s", "hi"))
			default:
				evs = append(evs, input("go"))
			}
		}
		stallCond := StallLimits{Repeats: ref.repeats, Window: ref.window, Cycle: ref.cycle, SameResult: ref.sameResult}
		errCond := ErrorLimits{Consecutive: errRef.consecutive, Total: errRef.total, IgnoreTools: errRef.ignore}
		at, wantEvidence := 0, []int(nil)
		var wantFired []Cause
		for i, ev := range evs {
			if f, _, e := ref.observe(ev, i+1); len(f) > 0 {
				at, wantEvidence, wantFired = i+1, e, f
				break
			}
		}
		for _, in := range [][]Event{evs, hashedAll(evs)} {
			res := replayEvents(t, stallCond, in...)
			if res.StoppedAt != at || (at > 0 && (!slices.Equal(res.Evidence, wantEvidence) || len(res.Fired) != len(wantFired))) {
				t.Fatalf("%s: stopped at %d with %v evidence %v; reference: %d, %v, %v", stallCond, res.StoppedAt, res.Fired, res.Evidence, at, wantFired, wantEvidence)
			}
		}
		at, wantEvidence = 0, nil
		for i, ev := range evs {
			if fired, e := errRef.observe(ev); fired {
				at, wantEvidence = i+1, e
				break
			}
		}
		res := replayEvents(t, errCond, evs...)
		if res.StoppedAt != at || (at > 0 && !slices.Equal(res.Evidence, wantEvidence)) {
			t.Fatalf("%s: stopped at %d evidence %v; reference: %d, %v", errCond, res.StoppedAt, res.Evidence, at, wantEvidence)
		}
	})
}

func hashedAll(evs []Event) []Event {
	out := make([]Event, len(evs))
	for i, ev := range evs {
		out[i] = hashed(ev)
	}
	return out
}
