package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"sync"
	"time"

	agentfleet "github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// stageSpec is one simulated agent stage: its policy and the scripted
// behaviours its runs take turns at.
type stageSpec struct {
	name string
	// scenario says what the stage's runs do and how each ends (folded to
	// the output's width when printed: tableWriter.scenarios).
	scenario   string
	policy     string
	wrap       string // how the loop is wrapped: channel, seq or callback
	behaviours []behaviour
	// delegated: the stage has no workers of its own; its runs are the
	// sub-agents a planner run starts (behaviour.delegate), children of
	// that run (spec §8).
	delegated bool
	// shadows are candidate policies tried on the stage's runs without
	// acting (spec §5.2, middleware.WithShadowPolicy), as YAML.
	shadows []shadowSpec
}

// behaviour scripts one run. next returns the i-th event and false once the
// script is over; runaway scripts never end by themselves.
type behaviour struct {
	name string
	next func(i int) (termination.Event, bool)
	// hang makes the loop stop sending (but honour its context) after the
	// script's events: a hung loop that only the timeout timer can end.
	hang bool
	// stopAfter makes an operator stop the run through the fleet after
	// this long.
	stopAfter time.Duration
	// cancelAfter cancels the caller's context after this long.
	cancelAfter time.Duration
	// skip skips the stage instead of running it.
	skip termination.Reason
	// raiseAfter makes an operator raise every other run of the behaviour
	// by two iterations once it has been held at its limit this long (the
	// stage's policy has hold:); the others wait out the hold timeout.
	raiseAfter time.Duration
	// delegate are the sub-agents the run starts after its first event, as
	// runs of delegateStage under the run's context (its children, spec
	// §8), all at once; the run's loop goes on when they have all ended.
	delegate []behaviour
}

// delegateStage is the stage of the planner's sub-agents.
const delegateStage = "analyst"

// treeBudget is the planner's tree: token budget, over the planner and
// its analysts together.
const treeBudget = 8000

var stages = []stageSpec{
	{
		name: "planner", wrap: "seq",
		scenario: "plans and answers (natural_completion), hands off to the coder (handoff), or delegates to three analysts under a tree budget " +
			"of 8,000 tokens: they overspend it (budget_exhausted, scope tree; the live analysts: cancelled, reason parent), " +
			"or one crashes and the planner goes on (natural_completion); every 5s an operator blocks it for tenant globex for 2s (skipped: blocked)",
		policy: fmt.Sprintf("handoff: [coder]\nmax_iterations: 8\ntree: {token_budget: {total: %d, pressure: 0.75}}\n", treeBudget),
		behaviours: []behaviour{
			{name: "delegates to analysts who overspend", delegate: []behaviour{
				analystRunaway("market size"), analystRunaway("pricing"), analystRunaway("competitors")},
				next: script(
					msg("planner", "Splitting the research across three analysts.", 300, 60),
					final("planner", "Report assembled from the analysts' findings.", 420, 80))},
			{name: "delegates; one analyst crashes", delegate: []behaviour{
				analystReports("market size"), analystCrashes("pricing"), analystReports("competitors")},
				next: script(
					msg("planner", "Splitting the research across three analysts.", 300, 60),
					final("planner", "Report assembled from two analysts' findings.", 420, 80))},
			{name: "plans and finishes", next: script(
				msg("planner", "Breaking the task into steps.", 300, 60),
				final("planner", "Plan: research, implement, review.", 420, 80))},
			{name: "hands off to the coder", next: script(
				msg("planner", "This needs code.", 280, 40),
				termination.Event{Kind: termination.KindHandoff, Source: "planner", Target: "coder"})},
		},
	},
	{
		name: delegateStage, wrap: "channel", delegated: true,
		scenario: "the planner's sub-agents (its children): research until the planner's tree budget runs out (cancelled, reason parent), " +
			"report (natural_completion), or crash on a 429 (failed: stream_error), which does not stop the planner",
		policy: "max_iterations: 20\nerrors: {consecutive: 2}\n",
	},
	{
		name: "researcher", wrap: "channel",
		scenario: "searches with ever new queries, warned at 3 of 5 tool calls (budget pressure, tool_calls), until 5 (max_tool_calls), " +
			"repeats one search: warned at the 2nd time (stall warning), stopped at the 3rd (stall), or answers (natural_completion); " +
			"a stricter candidate policy, strict, runs in shadow and would have stopped the first two sooner (never acting)",
		policy: "max_tool_calls: {limit: 5, pressure: 0.6}\nstall: {repeats: 3, warn_at: 2}\n",
		// A stricter candidate, in shadow: it would stop the endless search
		// one call earlier and the repeated one at its 2nd repeat, and
		// leave the answering run alone (the dashboard's Shadow policies row).
		shadows: []shadowSpec{{name: "strict", policy: "max_tool_calls: 4\nstall: {repeats: 2}\n"}},
		behaviours: []behaviour{
			{name: "searches with new queries forever", next: func(i int) (termination.Event, bool) {
				if i%2 == 0 {
					return msg("researcher", fmt.Sprintf("Not found yet, refining (%d).", i/2), 400+int64(i)*30, 30), true
				}
				return call("web_search", fmt.Sprintf(`{"query":"agent loop termination %d"}`, i)), true
			}},
			{name: "repeats the same search", next: func(i int) (termination.Event, bool) {
				if i%2 == 0 {
					return msg("researcher", fmt.Sprintf("Trying again (%d).", i/2), 350, 25), true
				}
				return call("web_search", `{"query": "agentstop", "limit": 5}`), true
			}},
			{name: "researches and answers", next: script(
				msg("researcher", "Looking it up.", 300, 20),
				call("web_search", `{"query":"OpenTelemetry exemplars"}`),
				result("web_search", ""),
				final("researcher", "Exemplars link metrics to traces.", 520, 70))},
		},
	},
	{
		name: "coder", wrap: "channel",
		scenario: "rethinks past 6 turns and is held there for 1s (hold): an operator raises every other such run by 2 turns, " +
			"which rethinks on until held again; unraised, the hold times out (max_iterations); reruns failing tests " +
			"(failed: error_threshold), crashes on a 503 (failed: stream_error) or calls drop_database (custom guard)",
		policy: "max_iterations: 6\nerrors: {consecutive: 3}\nhold: {timeout: 1s}\n",
		behaviours: []behaviour{
			{name: "keeps rethinking", raiseAfter: 300 * time.Millisecond, next: func(i int) (termination.Event, bool) {
				return msg("coder", fmt.Sprintf("Refactoring attempt %d.", i), 600, 120), true
			}},
			{name: "tool keeps failing", next: func(i int) (termination.Event, bool) {
				if i%2 == 0 {
					return call("run_tests", fmt.Sprintf(`{"attempt":%d}`, i)), true
				}
				return result("run_tests", "exit status 1: 3 tests failed"), true
			}},
			{name: "crashes", next: script(
				msg("coder", "Compiling.", 200, 30),
				termination.Event{Kind: termination.KindError, Source: "coder", Err: "model provider: 503 service unavailable"})},
			{name: "calls a dangerous tool", next: script(
				msg("coder", "Cleaning up the test data.", 250, 40),
				call("drop_database", `{"name":"production"}`))},
		},
	},
	{
		name: "fixer", wrap: "seq",
		scenario: "edits and re-tests, the test output changing each time, until the tests pass (natural_completion: never a stall), " +
			"re-runs the same failing command and gets the same output a 3rd time (stall: repeated_result), searches the code with " +
			"ever-different patterns and finds nothing a 3rd time (stall: repeated_result, any_args) while polling CI (left alone: " +
			"ignore_tools), waits on CI polling its status until it passes (natural_completion), or hangs on a tool that never " +
			"returns until its 1s idle limit (timeout, idle)",
		policy: fixerPolicy,
		behaviours: []behaviour{
			{name: "edits and re-tests", next: editAndRetest},
			{name: "re-runs the same failing command", next: func(i int) (termination.Event, bool) {
				switch i % 3 {
				case 0:
					return msg("fixer", fmt.Sprintf("The test still fails; running it again (%d).", i/3), 500, 40), true
				case 1:
					return call("run_tests", `{"cmd":"go test ./parser/"}`), true
				}
				return output("run_tests", "--- FAIL: TestParse (0.00s)\n    parser_test.go:12: got 1, want 2", "exit status 1"), true
			}},
			{name: "searches with ever-different patterns", next: searchNothing},
			{name: "waits on CI", next: waitOnCI},
			{name: "hangs on a tool", hang: true, next: script(
				msg("fixer", "Running the integration suite.", 400, 30),
				call("run_tests", `{"cmd":"go test ./integration/"}`))},
		},
	},
	{
		name: "critic", wrap: "callback",
		scenario: "says APPROVE (completed: text_mention), or hangs on the model until its 2s timeout (timeout)",
		policy:   "text_mention: {text: APPROVE, sources: [critic]}\ntimeout: 2s\n",
		behaviours: []behaviour{
			{name: "approves", next: script(
				msg("coder", "Here is the patch.", 0, 0),
				msg("critic", "Tests pass. APPROVE", 380, 12))},
			{name: "hangs waiting on the model", hang: true, next: script(
				msg("critic", "Reviewing...", 300, 10))},
		},
	},
	{
		name: "summarizer", wrap: "seq",
		scenario: "burns its 5,000-token budget (budget_exhausted), or wraps up one turn after the 70% warning (budget_pressure); " +
			"each tenant's runs share 40,000 tokens per 10s window: past half of it they are warned (scope fleet), at the limit " +
			"the live ones stop (budget_exhausted, scope fleet) and new ones are skipped (fleet_budget_exhausted) until the next window",
		policy: "token_budget: {total: 5000, pressure: 0.7, grace: 1}\n" +
			"fleet_budget:\n  key: label:tenant\n  window: 10s\n  total_tokens: 40000\n  pressure: 0.5\n",
		behaviours: []behaviour{
			{name: "burns the budget", next: func(i int) (termination.Event, bool) {
				return msg("summarizer", fmt.Sprintf("Summary of part %d ...", i), 1800, 200), true
			}},
			{name: "wraps up under pressure", next: func(i int) (termination.Event, bool) {
				return msg("summarizer", fmt.Sprintf("Short summary %d.", i), 700, 100), true
			}},
		},
	},
	{
		name: "executor", wrap: "callback",
		scenario: "deploys and says stop (completed), an operator stops the run through the fleet (cancelled: external), its caller gives up (cancelled: context), or has nothing to deploy (skipped)",
		policy:   "stop_message: true\nmax_tool_calls: 20\n",
		behaviours: []behaviour{
			{name: "deploys and stops", next: script(
				call("deploy", `{"env":"staging"}`),
				result("deploy", ""),
				termination.Event{Kind: termination.KindStop, Source: "executor", Text: "deployed"})},
			{name: "operator presses Stop", stopAfter: 400 * time.Millisecond, next: func(i int) (termination.Event, bool) {
				return msg("executor", fmt.Sprintf("Waiting for rollout (%d).", i), 100, 5), true
			}},
			{name: "caller gives up", cancelAfter: 400 * time.Millisecond, next: func(i int) (termination.Event, bool) {
				return msg("executor", fmt.Sprintf("Polling status (%d).", i), 100, 5), true
			}},
			{name: "nothing to deploy", skip: "no changes to deploy"},
		},
	},
}

// analystRunaway researches a topic without end: only the planner's tree
// budget stops it (its own max_iterations is out of reach).
func analystRunaway(topic string) behaviour {
	return behaviour{name: "researches " + topic + " without end", next: func(i int) (termination.Event, bool) {
		if i%2 == 0 {
			return msg(delegateStage, fmt.Sprintf("More on %s (%d).", topic, i/2), 600, 100), true
		}
		return call("web_fetch", fmt.Sprintf(`{"topic":%q,"page":%d}`, topic, i/2)), true
	}}
}

// analystReports researches a topic and reports.
func analystReports(topic string) behaviour {
	return behaviour{name: "reports on " + topic, next: script(
		msg(delegateStage, "Looking into "+topic+".", 400, 60),
		call("web_fetch", fmt.Sprintf(`{"topic":%q}`, topic)),
		result("web_fetch", ""),
		final(delegateStage, "Findings on "+topic+".", 500, 80))}
}

// analystCrashes fails on its own: its planner goes on.
func analystCrashes(topic string) behaviour {
	return behaviour{name: "crashes on " + topic, next: script(
		msg(delegateStage, "Looking into "+topic+".", 300, 40),
		termination.Event{Kind: termination.KindError, Source: delegateStage, Err: "model provider: 429 rate limited"})}
}

// fixerPolicy is the fixer's: a coding agent's stall guard, which counts a
// repeat only when the call also got the same result. Without same_result
// the edit-and-test loop, which re-runs the same test command after every
// edit, would be stopped as repeated_tool_call on its 3rd run. any_args
// leaves the args out of a result's signature, so that a search retried
// with ever-different patterns that finds nothing each time is a stall
// too; ignore_tools leaves the CI status poll alone, which repeats by
// design. idle stops a run when no event has come for 1s: a hung tool.
const fixerPolicy = "stall: {repeats: 3, window: 8, same_result: true, any_args: true, ignore_tools: [ci_status]}\nidle: 1s\n"

// searchNothing searches the code for a symbol with a new pattern each
// round and finds nothing, checking CI's status before each search. The
// 3rd empty search is a stall with any_args (the patterns differ, the
// answer does not); the CI polls, the same call with the same answer,
// would be one first without ignore_tools.
func searchNothing(i int) (termination.Event, bool) {
	patterns := []string{"parseExpr", "func parse", "Parse\\(", "parser\\.go", "ParseError", "tokenize"}
	round := i / 5
	switch i % 5 {
	case 0:
		return msg("fixer", fmt.Sprintf("Looking for where the parser is called (%d).", round), 450, 40), true
	case 1:
		return call("ci_status", `{"build":42}`), true
	case 2:
		return output("ci_status", "running", ""), true
	case 3:
		return call("search_code", fmt.Sprintf(`{"pattern":%q}`, patterns[round%len(patterns)])), true
	}
	return output("search_code", "no matches", ""), true
}

// waitOnCI polls CI's status, the same call with the same answer, until
// the build passes, and reports.
func waitOnCI(i int) (termination.Event, bool) {
	const polls = 5
	switch {
	case i == 0:
		return msg("fixer", "Pushed the fix; waiting for CI.", 300, 30), true
	case i <= 2*polls && i%2 == 1:
		return call("ci_status", `{"build":42}`), true
	case i < 2*polls:
		return output("ci_status", "running", ""), true
	case i == 2*polls:
		return output("ci_status", "passed", ""), true
	}
	return final("fixer", "CI passed; the parser fix is in.", 400, 50), i == 2*polls+1
}

// editAndRetest edits a file and re-runs the same test command, whose
// output changes with each edit (one failure fewer each time), until the
// tests pass and it answers.
func editAndRetest(i int) (termination.Event, bool) {
	const rounds = 4
	if i >= rounds*5 {
		return final("fixer", "All tests pass; the parser is fixed.", 600, 60), i == rounds*5
	}
	round := i / 5
	switch i % 5 {
	case 0:
		return msg("fixer", fmt.Sprintf("Fixing the next failure (%d left).", rounds-round), 700, 90), true
	case 1:
		return call("edit_file", fmt.Sprintf(`{"path":"parser/parse.go","hunk":%d}`, round)), true
	case 2:
		return output("edit_file", fmt.Sprintf("applied hunk %d", round), ""), true
	case 3:
		return call("run_tests", `{"cmd":"go test ./parser/"}`), true
	}
	if failing := rounds - 1 - round; failing > 0 {
		return output("run_tests", fmt.Sprintf("FAIL: %d of 12 tests failed", failing), "exit status 1"), true
	}
	return output("run_tests", "ok  parser 0.012s", ""), true
}

// dangerousTools is the custom guard: calling one stops the run with a
// Custom cause (recorded as termination_cause="custom").
var dangerousTools = termination.CauseFunc("dangerous_tool", func(ev termination.Event, _ termination.Totals) termination.Cause {
	if ev.Kind == termination.KindToolCall && ev.Tool == "drop_database" {
		return termination.Custom{Reason: "dangerous_tool", Properties: map[string]any{"tool": ev.Tool}}
	}
	return nil
})

func script(events ...termination.Event) func(int) (termination.Event, bool) {
	return func(i int) (termination.Event, bool) {
		if i < len(events) {
			return events[i], true
		}
		return termination.Event{}, false
	}
}

func msg(source, text string, in, out int64) termination.Event {
	return termination.Event{Kind: termination.KindMessage, Source: source, Text: text, Model: "gpt-4o-mini",
		Usage: termination.Usage{InputTokens: in, OutputTokens: out}, Cost: float64(in+4*out) / 1e6}
}

func final(source, text string, in, out int64) termination.Event {
	ev := msg(source, text, in, out)
	ev.Kind = termination.KindFinal
	return ev
}

func call(tool, args string) termination.Event {
	return termination.Event{Kind: termination.KindToolCall, Source: "assistant", Tool: tool, Args: []byte(args)}
}

func result(tool, err string) termination.Event {
	return output(tool, "ok", err)
}

// output is a tool result with its output text.
func output(tool, text, err string) termination.Event {
	return termination.Event{Kind: termination.KindToolResult, Source: tool, Tool: tool, Text: text, Err: err}
}

// fleet runs every stage with two workers each. Every stage joins one
// fleet (package fleet: in-process by default, Redis with -redis), every
// run carries a tenant label, and a simulated operator steers the fleet
// through its Control: it stops the executor's "operator" runs by id and
// blocks the planner for one tenant now and then.
//
// Shutdown (Ctrl-C or -duration) stops the workers from starting new runs;
// the runs in flight go on to their own end, so that each is counted under
// its real cause. Only a run still going after the drain timeout is stopped,
// and it is reported apart (tally.interrupted), never mixed with the
// executor's deliberate cancellations.
type fleet struct {
	stages  []*middleware.Stage // in the order of the stages variable
	byName  map[string]*middleware.Stage
	control agentfleet.Control
	tally   *tally
	wg      sync.WaitGroup
	// hard ends the runs still in flight after the drain timeout.
	hard       context.Context
	cancelHard context.CancelFunc
}

// The operator's periodic block: every blockEvery (the first after
// blockFirst), new runs of blockStage for blockTenant are skipped for
// blockFor.
const (
	blockStage  = "planner"
	blockTenant = "globex"
	blockFirst  = time.Second
	blockEvery  = 5 * time.Second
	blockFor    = 2 * time.Second
)

// operator is who the quickstart's stops and blocks say issued them
// (Cancelled and Skipped details end with "(by quickstart)").
const operator = "quickstart"

// newFleet makes the quickstart's stages on m's fleet, recording through
// rec (nil: nothing recorded).
func newFleet(rec middleware.Participant, m *membership, feed int) (*fleet, error) {
	var recs []middleware.Participant
	if rec != nil { // nil: record nothing (a nil recorder is an error)
		recs = append(recs, rec)
	}
	return newFleetRecorded(recs, m, feed)
}

// newFleetRecorded is newFleet with every recorder of recs.
func newFleetRecorded(recs []middleware.Participant, m *membership, feed int) (*fleet, error) {
	if m == nil {
		return nil, errors.New("no fleet to join")
	}
	f := &fleet{tally: newTally(feed), control: m.control, byName: map[string]*middleware.Stage{}}
	for _, spec := range stages {
		policy, err := termination.ParsePolicy([]byte(spec.policy))
		if err != nil {
			return nil, fmt.Errorf("stage %s: %w", spec.name, err)
		}
		opts := []middleware.Option{middleware.WithPolicy(policy), middleware.WithCondition(dangerousTools),
			middleware.WithDrainTimeout(time.Second), middleware.WithProviderName("openai"), middleware.WithFleet(m.fleet)}
		shadows, err := spec.shadowOptions() // shadow.go
		if err != nil {
			return nil, err
		}
		opts = append(opts, shadows...)
		for _, rec := range recs {
			opts = append(opts, middleware.WithParticipant(rec))
		}
		st, err := middleware.New(spec.name, opts...)
		if err != nil {
			return nil, err
		}
		f.stages = append(f.stages, st)
		f.byName[spec.name] = st
	}
	f.hard, f.cancelHard = context.WithCancel(context.Background())
	return f, nil
}

// run starts the workers and the operator's blocks, and returns. A worker
// starts runs until ctx ends; the runs themselves live under f.hard, so
// that the end of ctx does not cancel them.
func (f *fleet) run(ctx context.Context) {
	for i, spec := range stages {
		if spec.delegated {
			continue // its runs are started by a planner run
		}
		for w := range 2 {
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
				for n := w; ctx.Err() == nil; n++ {
					b := spec.behaviours[n%len(spec.behaviours)]
					f.tally.begin()
					res, info := f.runOnce(f.hard, f.stages[i], spec.wrap, b, rng, pickTenant(rng))
					f.tally.add(res, info)
					sleep(ctx, time.Duration(100+rng.IntN(300))*time.Millisecond)
				}
			}()
		}
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.blocks(ctx)
	}()
}

// blocks is the operator's periodic block until ctx ends: new runs of
// blockStage for blockTenant are Skipped{blocked} for blockFor. The block
// expires by itself; an error (the Redis fleet unreachable) is counted by
// the fleet in agent.fleet.errors, and the next period tries again.
func (f *fleet) blocks(ctx context.Context) {
	req := agentfleet.BlockRequest{
		Selector: agentfleet.Selector{Stage: blockStage, Labels: map[string]string{"tenant": blockTenant}},
		Reason:   fmt.Sprintf("incident drill: %s paused for tenant %s", blockStage, blockTenant),
		By:       operator, Expire: blockFor,
	}
	for d := blockFirst; sleep(ctx, d); d = blockEvery {
		_, _ = f.control.Block(ctx, req)
	}
}

// stopRun is the operator stopping one run through the fleet's Control, as
// `agentstop stop -run ID -reason ... -by quickstart` does: the run ends as
// Cancelled{external, "operator pressed Stop (by quickstart)"} and the
// fleet counts it in agent.fleet.runs.stopped. Should the fleet be
// unreachable, the run is stopped directly, so that it still ends.
func (f *fleet) stopRun(run *middleware.Run) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	const reason = "operator pressed Stop"
	_, err := f.control.Stop(ctx, agentfleet.StopRequest{Selector: agentfleet.Selector{RunID: run.ID()},
		Reason: reason, By: operator, Wait: time.Second})
	if err != nil {
		run.StopWith(agentfleet.StopRequest{Reason: reason + " (fleet unreachable)", By: operator}.Cause())
	}
}

// wait is called once ctx (given to run) has ended. It lets the runs in
// flight finish for up to drain, then stops the rest, and returns once every
// worker has exited.
func (f *fleet) wait(drain time.Duration) {
	f.tally.shutdown()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.wg.Wait()
	}()
	t := time.NewTimer(drain)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		f.cancelHard()
		<-done
	}
	f.cancelHard()
}

// runInfo is what the quickstart knows about a run beside its result.
type runInfo struct {
	behaviour string // the scripted behaviour's name
	tenant    string // the run's tenant label
	lastTool  string // the last tool called, to name a repeated one
	// interrupted: still in flight after the drain timeout, stopped by the
	// quickstart's shutdown.
	interrupted bool
	// raised: the run was held at its limit and the operator raised it
	// (raiseWhenHeld).
	raised bool
}

// runOnce runs one scripted loop under the stage, wrapped the stage's way,
// for a tenant. parent is f.hard for a worker's run, and the planner run's
// context for a sub-agent (which makes it the planner run's child). Either
// derives from f.hard: a run still in flight when the drain timeout cancels
// it ends as cancelled and is marked interrupted.
func (f *fleet) runOnce(parent context.Context, st *middleware.Stage, wrap string, b behaviour, rng *rand.Rand, tenant string) (termination.Result, runInfo) {
	hard := f.hard
	info := runInfo{behaviour: b.name, tenant: tenant}
	if b.skip != "" {
		return st.Skip(hard, b.skip), info
	}
	caller, cancel := context.WithCancel(parent)
	defer cancel()
	if b.cancelAfter > 0 {
		t := time.AfterFunc(b.cancelAfter, cancel)
		defer t.Stop()
	}
	ctx, run := st.Start(caller, middleware.WithAgentID(st.Name()+"-agent"),
		middleware.WithConversationID(fmt.Sprintf("conv-%d", rng.IntN(1_000_000))), tenantLabel(info.tenant))
	if b.stopAfter > 0 {
		// The stop's goroutine is this run's: runOnce returns once it has
		// returned or will never start.
		stopped := make(chan struct{})
		t := time.AfterFunc(b.stopAfter, func() {
			defer close(stopped)
			f.stopRun(run)
		})
		defer func() {
			if !t.Stop() {
				<-stopped
			}
		}()
	}
	var raised chan bool // whether the operator raised the run (raiseWhenHeld)
	if b.raiseAfter > 0 && rng.IntN(2) == 0 {
		// The raise's goroutine is this run's: it returns once the run
		// has ended at the latest, and runOnce waits for it.
		raised = make(chan bool, 1)
		go func() { raised <- raiseWhenHeld(ctx, run, b.raiseAfter) }()
		defer func() {
			if raised != nil {
				<-raised
			}
		}()
	}
	delay := func() time.Duration { return time.Duration(40+rng.IntN(80)) * time.Millisecond }
	watch := func(ev termination.Event) termination.Event {
		if ev.Kind == termination.KindToolCall {
			info.lastTool = ev.Tool
		}
		return ev
	}
	var delegate func(context.Context)
	if len(b.delegate) > 0 {
		seeds := [2]uint64{rng.Uint64(), rng.Uint64()}
		delegate = func(ctx context.Context) { f.delegate(ctx, b.delegate, info.tenant, seeds) }
	}
	var res termination.Result
	switch wrap {
	case "channel":
		for range middleware.Forward(run, produce(ctx, b, delay, delegate), watch) {
		}
		res = run.Wait()
	case "seq":
		for range middleware.ForwardSeq(run, sequence(ctx, b, delay, delegate), watch) {
		}
		res = run.Wait()
	default: // callback: the loop reports each event to Observe
		for ev := range sequence(ctx, b, delay, delegate) {
			if _, stop := run.Observe(watch(ev)); stop {
				break
			}
		}
		res = run.Finish(nil)
	}
	// Only the drain timeout cancels hard: a run cancelled after that was
	// cut short by the shutdown, whatever its script meant to do.
	if _, ok := res.Cause.(termination.Cancelled); ok && hard.Err() != nil {
		info.interrupted = true
	}
	if raised != nil {
		info.raised = <-raised // the run has ended: the raise's goroutine returns
		raised = nil
	}
	return res, info
}

func identity(ev termination.Event) termination.Event { return ev }

// raiseWhenHeld is the operator raising a held run, as `agentstop raise
// -run ID -iterations +2` does through a fleet: once the run has waited at
// its limit for after, its max_iterations goes up by two. It returns after
// the raise, reporting whether the run took it, or when the run ends
// (false; ctx is the run's context).
func raiseWhenHeld(ctx context.Context, run *middleware.Run, after time.Duration) bool {
	tick := time.NewTicker(after / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		if _, since, held := run.Held(); held && time.Since(since) >= after {
			// An error: the hold timed out since, or the run ended.
			return run.Raise(termination.Limits{Iterations: 2, Has: termination.LimitIterations}) == nil
		}
	}
}

// delegate runs the sub-agents of a planner run, all at once, as runs of
// delegateStage under ctx, the planner run's context: they are its
// children, their usage counts towards its tree budget, and its end ends
// them (Cancelled{reason: parent}). It returns when they have all ended;
// each is counted in the tally like any run.
func (f *fleet) delegate(ctx context.Context, subs []behaviour, tenant string, seeds [2]uint64) {
	st, spec := f.byName[delegateStage], stageNamed(delegateStage)
	var wg sync.WaitGroup
	for i, b := range subs {
		rng := rand.New(rand.NewPCG(seeds[0], seeds[1]+uint64(i)))
		f.tally.begin()
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, info := f.runOnce(ctx, st, spec.wrap, b, rng, tenant)
			f.tally.add(res, info)
		}()
	}
	wg.Wait()
}

// stageNamed returns the stage spec of that name.
func stageNamed(name string) stageSpec {
	for _, s := range stages {
		if s.name == name {
			return s
		}
	}
	panic("quickstart: no stage " + name) // the stages variable is fixed
}

// sequence is the scripted loop as an iterator; it honours ctx. Tool calls
// get call ids as a model API would give them, and their results the id of
// the oldest open call of their tool. A behaviour with sub-agents calls
// delegate with ctx after its first event: the loop waits for its
// sub-agents as a planner waits for its tools.
func sequence(ctx context.Context, b behaviour, delay func() time.Duration, delegate func(context.Context)) iter.Seq2[termination.Event, error] {
	return func(yield func(termination.Event, error) bool) {
		open := map[string][]string{} // tool → ids of its open calls
		for i := 0; ; i++ {
			ev, ok := b.next(i)
			if !ok {
				break
			}
			switch ev.Kind {
			case termination.KindToolCall:
				ev.CallID = fmt.Sprintf("call_%d", i)
				open[ev.Tool] = append(open[ev.Tool], ev.CallID)
			case termination.KindToolResult:
				if ids := open[ev.Tool]; len(ids) > 0 {
					ev.CallID, open[ev.Tool] = ids[0], ids[1:]
				}
			}
			if !sleep(ctx, delay()) {
				return
			}
			ev.Time = time.Now()
			if !yield(ev, nil) {
				return
			}
			if i == 0 && delegate != nil {
				delegate(ctx)
			}
		}
		if b.hang {
			<-ctx.Done()
		}
	}
}

// produce is the scripted loop as a goroutine sending on a channel; it
// honours ctx and closes the channel when done.
func produce(ctx context.Context, b behaviour, delay func() time.Duration, delegate func(context.Context)) <-chan termination.Event {
	out := make(chan termination.Event)
	go func() {
		defer close(out)
		for ev, err := range sequence(ctx, b, delay, delegate) {
			if err != nil {
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
