// Package trial_test is a user's trial of agentstop: a fake but realistic
// coding agent (chat turns with ~1 KiB of code, JSON tool arguments with
// escapes, the tools bash, read_file, edit_file and run_tests) driven through
// the public API only, with the assertions a user adopting agentstop would
// make: the behaviour docs/spec.md promises for progress and stalls, polling,
// delegation, hangs, cut-off logs and replaying a recording.
package trial_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/eventlog"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// toolCall is one tool call of an assistant message, as a chat SDK gives it:
// the arguments are JSON text.
type toolCall struct {
	ID, Name, Arguments string
}

// chatMsg is what the fake agent's loop emits: a user task, an assistant turn
// (with its tool calls and usage) or a tool's answer.
type chatMsg struct {
	Role       string // user, assistant, tool
	Content    string
	ToolCalls  []toolCall
	ToolCallID string
	ToolName   string
	IsError    bool // the tool failed (exit status != 0)
	Final      bool // the assistant's final answer
	In, Out    int64
}

// decodeMsg turns one chat message into agentstop's events: an assistant
// turn is a message (or the final answer) followed by its tool calls.
func decodeMsg(m chatMsg, emit func(termination.Event)) {
	switch m.Role {
	case "user":
		emit(termination.Event{Kind: termination.KindInput, Source: "user", Text: m.Content})
	case "assistant":
		kind := termination.KindMessage
		if m.Final {
			kind = termination.KindFinal
		}
		emit(termination.Event{Kind: kind, Source: "coder", Text: m.Content, Model: "claude-sonnet-5",
			Usage: termination.Usage{InputTokens: m.In, OutputTokens: m.Out}})
		for _, c := range m.ToolCalls {
			emit(termination.Event{Kind: termination.KindToolCall, Tool: c.Name, CallID: c.ID,
				Args: json.RawMessage(c.Arguments)})
		}
	case "tool":
		ev := termination.Event{Kind: termination.KindToolResult, Tool: m.ToolName, CallID: m.ToolCallID, Text: m.Content}
		if m.IsError {
			ev.Err = "exit status 1"
		}
		emit(ev)
	}
}

// turn is one scripted model response.
type turn struct {
	say     string
	calls   []toolCall // IDs are filled in by the agent
	final   bool
	reverse bool // parallel calls whose answers come back last first
}

// tool runs one tool call; it returns the tool's output and whether it
// failed. A tool that takes long must honour ctx, as exec.CommandContext does.
type tool func(ctx context.Context, args string) (string, bool)

// agent is a fake coding agent: a model that answers from a script and real
// (fake) tools with state.
type agent struct {
	task   string
	model  func(i int) (turn, bool) // the i-th response; false: the model has nothing more
	tools  map[string]tool
	in     int64 // input tokens per model turn
	out    int64
	callNo int
}

// loop runs the agent under ctx and returns its message channel, closed when
// the loop ends (its script ends, a final answer, or ctx ends).
func (a *agent) loop(ctx context.Context) <-chan chatMsg {
	ch := make(chan chatMsg)
	go func() {
		defer close(ch)
		send := func(m chatMsg) bool {
			select {
			case ch <- m:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if !send(chatMsg{Role: "user", Content: a.task}) {
			return
		}
		for i := 0; ; i++ {
			t, ok := a.model(i)
			if !ok {
				return
			}
			for j := range t.calls {
				a.callNo++
				t.calls[j].ID = fmt.Sprintf("toolu_%04d", a.callNo)
			}
			if !send(chatMsg{Role: "assistant", Content: t.say, ToolCalls: t.calls, Final: t.final, In: a.in, Out: a.out}) || t.final {
				return
			}
			order := t.calls // the sent message shares it: reverse a copy
			if t.reverse {
				order = slices.Clone(t.calls)
				slices.Reverse(order)
			}
			for _, c := range order {
				out, failed := a.tools[c.Name](ctx, c.Arguments)
				if ctx.Err() != nil {
					return
				}
				if !send(chatMsg{Role: "tool", Content: out, ToolCallID: c.ID, ToolName: c.Name, IsError: failed}) {
					return
				}
			}
		}
	}()
	return ch
}

// run starts a run of stage for the agent, ranges over its messages as a
// user's loop would (RangeEach: several events per chat message) and returns
// the result and how many messages the consumer saw.
func (a *agent) run(ctx context.Context, stage *middleware.Stage, opts ...middleware.RunOption) (termination.Result, int) {
	ctx, run := stage.Start(ctx, opts...)
	seen := 0
	for range middleware.RangeEach(run, a.loop(ctx), decodeMsg) {
		seen++
	}
	return run.Wait(), seen
}

// args encodes tool arguments as a model sends them: JSON text, with the
// escapes code needs (newlines, tabs, quotes, backslashes, non-ASCII).
func args(kv ...any) string {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// goSource is about 1 KiB of Go: what read_file returns and edit_file
// carries, with tabs, quotes, backslashes and a non-ASCII comment.
func goSource(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// Package parser lexes the configuration language (révision %d).\npackage parser\n\nimport (\n\t\"fmt\"\n\t\"strings\"\n)\n\n", n)
	fmt.Fprintf(&b, "// Token is one lexeme.\ntype Token struct {\n\tKind  int\n\tText  string\n\tLine  int\n}\n\n")
	fmt.Fprintf(&b, "func lex%d(src string) ([]Token, error) {\n\tvar out []Token\n\tfor i, line := range strings.Split(src, \"\\n\") {\n", n)
	fmt.Fprintf(&b, "\t\tif strings.HasPrefix(line, \"#\") {\n\t\t\tcontinue // a comment: «skip»\n\t\t}\n")
	fmt.Fprintf(&b, "\t\tif strings.Count(line, \"\\\"\")%%2 != 0 {\n\t\t\treturn nil, fmt.Errorf(\"line %%d: unterminated string %%q\", i+1, line)\n\t\t}\n")
	fmt.Fprintf(&b, "\t\tfor _, f := range strings.Fields(line) {\n\t\t\tout = append(out, Token{Kind: kindOf(f), Text: f, Line: i + 1})\n\t\t}\n\t}\n\treturn out, nil\n}\n\n")
	fmt.Fprintf(&b, "func kindOf(s string) int {\n\tswitch {\n\tcase s == \"=\":\n\t\treturn 1\n\tcase strings.HasPrefix(s, \"\\\\\"):\n\t\treturn 2 // an escape: \\t \\n\n\t}\n\treturn 0\n}\n")
	return b.String()
}

// testOutput is what `go test` prints with failures failing tests.
func testOutput(failures int) (string, bool) {
	var b strings.Builder
	for i := range failures {
		fmt.Fprintf(&b, "--- FAIL: TestLex/case_%d (0.00s)\n    lexer_test.go:%d: lex(\"a = \\\"b\\\"\\tc\") = [{1 \"=\" 1}], want [{0 \"a\" 1} {1 \"=\" 1}]\n", i, 40+i*7)
		fmt.Fprintf(&b, "        diff: -want +got\n        \t- {Kind: 0, Text: \"a\"}\n")
	}
	if failures == 0 {
		b.WriteString("ok  \tgithub.com/acme/conf/internal/parser\t0.412s\n")
		return b.String(), false
	}
	fmt.Fprintf(&b, "FAIL\nFAIL\tgithub.com/acme/conf/internal/parser\t0.38%ds\nFAIL\n", failures)
	for b.Len() < 1024 { // pad to ~1 KiB as verbose output does
		b.WriteString("=== RUN   TestLex/case_x\n")
	}
	return b.String(), true
}

// repo is the fake working tree the tools act on: how many tests still fail.
type repo struct {
	mu       sync.Mutex
	failures int
}

func (r *repo) tools() map[string]tool {
	return map[string]tool{
		"read_file": func(_ context.Context, a string) (string, bool) {
			var p struct{ Path string }
			_ = json.Unmarshal([]byte(a), &p)
			if strings.Contains(p.Path, "missing") {
				// As Claude Code's Read answers: the path is not echoed
				// (an answer that echoes it differs for every path, and
				// any_args then never sees the same answer twice).
				return "File does not exist. Current working directory: /home/dev/conf", true
			}
			return goSource(len(p.Path)), false
		},
		"edit_file": func(_ context.Context, a string) (string, bool) {
			var p struct {
				OldString string `json:"old_string"`
			}
			_ = json.Unmarshal([]byte(a), &p)
			if strings.Contains(p.OldString, "NOT IN FILE") {
				return "edit_file: old_string not found in internal/parser/lexer.go", true
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.failures > 0 {
				r.failures--
			}
			return "Edited internal/parser/lexer.go: 1 hunk, +3 −1 lines", false
		},
		"run_tests": func(_ context.Context, a string) (string, bool) {
			if strings.Contains(a, "internal/config") {
				return testOutput(0) // the other package passes
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			return testOutput(r.failures)
		},
		"bash": func(_ context.Context, a string) (string, bool) {
			return "", false // replaced by the scenarios that use it
		},
	}
}

// the tool calls the scripts use.
var (
	readLexer = toolCall{Name: "read_file", Arguments: args("path", "internal/parser/lexer.go", "limit", 400)}
	runTests  = toolCall{Name: "run_tests", Arguments: args("cmd", "go test -run 'TestLex/.*' ./internal/parser/...", "timeout_s", 120, "env", map[string]string{"GOFLAGS": "-count=1"})}
)

// editLexer is the k-th edit: a different hunk each time.
func editLexer(k int) toolCall {
	return toolCall{Name: "edit_file", Arguments: args("path", "internal/parser/lexer.go",
		"old_string", goSource(k)[300:700], "new_string", strings.Replace(goSource(k)[300:700], "\t\t", "\t\t\t", 1)+fmt.Sprintf("\n\t// fix %d: handle \"\\\\\" escapes\n", k))}
}

// script builds a model from its turns; the model has nothing more after
// the last.
func script(turns ...turn) func(int) (turn, bool) {
	return func(i int) (turn, bool) {
		if i >= len(turns) {
			return turn{}, false
		}
		t := turns[i]
		t.calls = append([]toolCall(nil), t.calls...)
		return t, true
	}
}

// say is a model turn's text: prose with a code excerpt, about 1 KiB.
func say(format string, a ...any) string {
	return fmt.Sprintf(format, a...) + "\n\n```go\n" + goSource(7)[:700] + "\n```\n"
}

// verdict is what a user compares between two results of the same run: the
// cause, where it stopped, what it evaluated, the evidence and warnings.
type verdict struct {
	Cause     termination.Cause
	Tag       string
	Outcome   termination.Outcome
	StoppedAt int
	Events    int
	Evidence  []int
	Warnings  []termination.Cause
}

func verdictOf(res termination.Result) verdict {
	return verdict{Cause: res.Cause, Tag: res.Tag(), Outcome: res.Outcome, StoppedAt: res.StoppedAt,
		Events: res.Events, Evidence: res.Evidence, Warnings: res.Warnings}
}

// stageWith makes a stage with a policy file's text, or with the same
// conditions in Go when cond is not nil.
func stageWith(t *testing.T, name, policy string, cond termination.Condition, extra ...middleware.Option) *middleware.Stage {
	t.Helper()
	var opt middleware.Option
	if cond != nil {
		require.NoError(t, cond.Validate())
		opt = middleware.WithCondition(cond)
	} else {
		p, err := termination.ParsePolicy([]byte(policy))
		require.NoError(t, err, "policy:\n%s", policy)
		opt = middleware.WithPolicy(p)
	}
	stage, err := middleware.New(name, append([]middleware.Option{opt}, extra...)...)
	require.NoError(t, err)
	return stage
}

// bothForms runs a fresh agent under the policy file and again under the
// same conditions in Go, checks that both give the same verdict, and
// returns the policy file's result.
func bothForms(t *testing.T, name, policy string, cond termination.Condition, newAgent func() *agent, extra ...middleware.Option) termination.Result {
	t.Helper()
	res, _ := newAgent().run(context.Background(), stageWith(t, name, policy, nil, extra...))
	if cond != nil {
		inGo, _ := newAgent().run(context.Background(), stageWith(t, name, "", cond, extra...))
		require.Equal(t, verdictOf(res), verdictOf(inGo), "the policy file and the same conditions in Go disagree")
	}
	return res
}

// The coding agent's policy, as README "A policy for coding agents" gives it.
const fixerPolicy = `
max_iterations: 150
stall: {repeats: 3, window: 8, warn_at: 2, same_result: true}
errors: {consecutive: 5, total: 20, ignore_tools: [grep, find]}
token_budget: {total: 2000000, pressure: 0.8, grace: 2}
`

var fixerCond = termination.AnyOf(
	termination.IterationLimits{Limit: 150},
	termination.StallLimits{Repeats: 3, Window: 8, WarnAt: 2, SameResult: true},
	termination.ErrorLimits{Consecutive: 5, Total: 20, IgnoreTools: []string{"grep", "find"}},
	termination.TokenLimits{Total: 2_000_000, Pressure: 0.8, Grace: new(2)},
)

// progressAgent reads the lexer, runs the tests (4 failures), then edits and
// re-runs the same test command until it passes: the output changes each
// time (fewer failures).
func progressAgent() *agent {
	r := &repo{failures: 4}
	turns := []turn{
		{say: say("I'll read the lexer first."), calls: []toolCall{readLexer}},
		{say: say("Let me run the lexer tests to see what fails."), calls: []toolCall{runTests}},
	}
	for k := range 4 {
		turns = append(turns,
			turn{say: say("Case %d fails on escaped quotes; fixing the lexer.", k), calls: []toolCall{editLexer(k)}},
			turn{say: say("Re-running the tests after fix %d.", k), calls: []toolCall{runTests}})
	}
	turns = append(turns, turn{say: "All lexer tests pass now. Summary: escapes are handled in kindOf.", final: true})
	return &agent{task: "Fix the failing TestLex cases in internal/parser.", model: script(turns...), tools: r.tools(), in: 3000, out: 250}
}

// stuckAgent re-runs the identical test command and gets the identical
// failure each time.
func stuckAgent() *agent {
	r := &repo{failures: 2}
	turns := []turn{{say: say("I'll read the lexer first."), calls: []toolCall{readLexer}}}
	for k := range 6 {
		turns = append(turns, turn{say: say("Running the tests again (attempt %d).", k+1), calls: []toolCall{runTests}})
	}
	return &agent{task: "Fix the failing TestLex cases in internal/parser.", model: script(turns...), tools: r.tools(), in: 3000, out: 250}
}

// parallelAgent runs two test commands in parallel in each turn (one
// fails, one passes); they come back last first, the same each time.
func parallelAgent() *agent {
	r := &repo{failures: 2}
	testsB := toolCall{Name: "run_tests", Arguments: args("cmd", "go test ./internal/config/...", "timeout_s", 120)}
	turns := []turn{{say: say("I'll read the lexer first."), calls: []toolCall{readLexer}}}
	for k := range 4 {
		turns = append(turns, turn{say: say("Running both suites (round %d).", k+1), calls: []toolCall{runTests, testsB}, reverse: true})
	}
	return &agent{task: "Fix the failing tests.", model: script(turns...), tools: r.tools(), in: 3000, out: 250}
}

// cutArgsAgent's model hits its output limit in the middle of a long bash
// command, again and again: its tool calls' arguments are not JSON, and the
// framework answers each with the same error.
func cutArgsAgent() *agent {
	r := &repo{}
	tools := r.tools()
	tools["bash"] = func(context.Context, string) (string, bool) {
		return "error: the tool call's arguments are not valid JSON", true
	}
	cut := args("command", "cat <<'EOF' > internal/parser/lexer.go\n"+goSource(3)+"\nEOF")[:900]
	var turns []turn
	for k := range 4 {
		turns = append(turns, turn{say: say("Rewriting the lexer in one go (try %d).", k+1), calls: []toolCall{{Name: "bash", Arguments: cut}}})
	}
	return &agent{task: "Fix TestLex.", model: script(turns...), tools: tools, in: 3000, out: 4096}
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestTrial(t *testing.T) {
	t.Run("1_progress_is_not_a_stall", func(t *testing.T) {
		res := bothForms(t, "fixer", fixerPolicy, fixerCond, progressAgent)
		require.Equal(t, termination.NaturalCompletion{}, res.Cause, "an edit-and-test loop whose output changes made progress")
		require.Equal(t, termination.OutcomeSucceeded, res.Outcome)
		require.Empty(t, res.Warnings, "no stall warning either: no result repeated")
		require.Equal(t, 5, countTool(progressAgent, "run_tests"), "the same run_tests call ran 5 times")

		// The plain window guard (no same_result) counts each run_tests as
		// the same call and stops the run that was making progress, as
		// the README says it does.
		plain := bothForms(t, "fixer", "stall: {repeats: 3, window: 8}",
			termination.StallLimits{Repeats: 3, Window: 8}, progressAgent)
		require.Equal(t, termination.StallDetected{Signal: termination.SignalRepeatedToolCall, Repeats: 3}, plain.Cause)
		require.Equal(t, []int{6, 12, 18}, plain.Evidence, "the three run_tests calls")
	})

	t.Run("1_identical_output_is_a_stall", func(t *testing.T) {
		res := bothForms(t, "fixer", fixerPolicy, fixerCond, stuckAgent)
		// Events: 1 input; then per turn a message, its call, its result:
		// read_file 2-4, run_tests 5-7, 8-10, 11-13.
		require.Equal(t, termination.StallDetected{Signal: termination.SignalRepeatedResult, Repeats: 3}, res.Cause)
		require.Equal(t, "stall", res.Tag())
		require.Equal(t, termination.OutcomeFailed, res.Outcome)
		require.Equal(t, 13, res.StoppedAt)
		require.Equal(t, 13, res.Events)
		require.Equal(t, []int{7, 10, 13}, res.Evidence)
		require.Equal(t, []termination.Cause{termination.StallDetected{Signal: termination.SignalRepeatedResult, Repeats: 2}}, res.Warnings)
	})

	t.Run("1_parallel_calls_answered_out_of_order", func(t *testing.T) {
		// Two test runs in one turn (one failing, one passing), answered
		// last first, three turns in a row with the same answers: results
		// pair with their calls by call_id. Events: read_file 2-4; each turn a message, call A,
		// call B, answer B, answer A (5-9, 10-14, 15-19).
		res := bothForms(t, "fixer", fixerPolicy, fixerCond, parallelAgent)
		require.Equal(t, termination.StallDetected{Signal: termination.SignalRepeatedResult, Repeats: 3}, res.Cause)
		require.Equal(t, 18, res.StoppedAt)
		require.Equal(t, []int{8, 13, 18}, res.Evidence, "B's answers")
	})

	t.Run("2_polling", testPolling)
	t.Run("3_delegation", testDelegation)
	t.Run("4_hang", testHang)
	t.Run("5_cut_off_log", testCutOffLog)
	t.Run("6_replay_as_live", testReplayAsLive)
}

// countTool counts the tool calls of one tool a fresh agent makes.
func countTool(newAgent func() *agent, name string) int {
	n := 0
	for m := range newAgent().loop(context.Background()) {
		for _, c := range m.ToolCalls {
			if c.Name == name {
				n++
			}
		}
	}
	return n
}

// pollAgent waits for CI: the same bash call `gh run view 123 --json status`
// 10 times, "in_progress" until the 10th, then its final answer. With
// missing > 0 it also looks for a file that is not there between the polls,
// a different path each time, every 4 polls: read, 4 polls, read, ...
func pollAgent(missing int) func() *agent {
	return func() *agent {
		r := &repo{}
		tools := r.tools()
		polls := 0
		tools["bash"] = func(_ context.Context, a string) (string, bool) {
			polls++
			if polls < 10 {
				return `{"status":"in_progress","jobs":[{"name":"test (ubuntu-latest, 1.26)","status":"in_progress"}]}`, false
			}
			return `{"status":"completed","conclusion":"success"}`, false
		}
		poll := toolCall{Name: "bash", Arguments: args("command", "gh run view 123 --json status", "timeout", 30)}
		var turns []turn
		for i := range 10 {
			if i%4 == 0 && i/4 < missing {
				path := fmt.Sprintf("internal/parser/missing_%c.go", 'a'+i/4)
				turns = append(turns, turn{say: say("Looking for the generated lexer tables in %s.", path),
					calls: []toolCall{{Name: "read_file", Arguments: args("path", path)}}})
			}
			turns = append(turns, turn{say: fmt.Sprintf("CI run 123 is still going (check %d); polling again.", i+1), calls: []toolCall{poll}})
		}
		turns = append(turns, turn{say: "CI run 123 passed.", final: true})
		return &agent{task: "Push the fix and wait for CI.", model: script(turns...), tools: tools, in: 2000, out: 60}
	}
}

func testPolling(t *testing.T) {
	same := termination.StallLimits{Repeats: 3, Window: 8, SameResult: true}
	// Events: 1 input, then per poll a message, the call, the result:
	// results at 4, 7, 10, ...
	stall3 := termination.StallDetected{Signal: termination.SignalRepeatedResult, Repeats: 3}

	// Without ignore_tools, the poll's third identical answer is a stall.
	res := bothForms(t, "deployer", "stall: {repeats: 3, window: 8, same_result: true}", same, pollAgent(0))
	require.Equal(t, stall3, res.Cause)
	require.Equal(t, []int{4, 7, 10}, res.Evidence)

	// any_args only widens what counts as the same: still a stall.
	anyArgs := same
	anyArgs.AnyArgs = true
	res = bothForms(t, "deployer", "stall: {repeats: 3, window: 8, same_result: true, any_args: true}", anyArgs, pollAgent(0))
	require.Equal(t, stall3, res.Cause)

	// ignore_tools is what the spec offers for polling: the polls count for
	// nothing and the run ends with its final answer.
	ignore := same
	ignore.IgnoreTools = []string{"bash"}
	res = bothForms(t, "deployer", "stall: {repeats: 3, window: 8, same_result: true, ignore_tools: [bash]}", ignore, pollAgent(0))
	require.Equal(t, termination.NaturalCompletion{}, res.Cause)
	require.Equal(t, 32, res.Events, "input, 10 polls of 3 events, the final answer")

	// README's coding-agent form: a search for files that are not there,
	// a different path each time, is stuck (any_args), and the polls
	// between the searches take no place in the window: the third empty
	// answer stops the run although 8 polls came between the first and it.
	both := anyArgs
	both.IgnoreTools = []string{"bash"}
	res = bothForms(t, "deployer", "stall: {repeats: 3, window: 8, same_result: true, any_args: true, ignore_tools: [bash]}", both, pollAgent(3))
	// read a: 2-4, polls 1-4: 5-16, read b: 17-19, polls 5-8: 20-31, read c: 32-34.
	require.Equal(t, stall3, res.Cause)
	require.Equal(t, []int{4, 19, 34}, res.Evidence)

	// any_args holds for every tool: an edit tool whose success answer is
	// always the same ("Edited …: 1 hunk") repeats "whatever its
	// arguments", so the same policy stops the edit-and-test loop that
	// made progress, at its third edit (read 2-4, tests 5-7, edits at
	// 8-10, 14-16, 20-22). As the spec says; a pitfall for coding agents.
	res = bothForms(t, "deployer", "stall: {repeats: 3, window: 8, same_result: true, any_args: true, ignore_tools: [bash]}", both, progressAgent)
	require.Equal(t, stall3, res.Cause)
	require.Equal(t, []int{10, 16, 22}, res.Evidence)
}

// The planner's and its sub-agents' policies: a tree token budget over the
// whole task, warned at 75%.
const (
	plannerPolicy = "max_iterations: 30\ntree: {token_budget: {total: 20000, pressure: 0.75}}\n"
	coderPolicy   = "max_iterations: 40\n"
)

// subAgent is a sub-agent the planner delegates to: each model turn spends
// 2,000 + 400 tokens; it reads, then alternates edits and test runs. With
// hang set, its first test run blocks until its context ends (a long suite,
// killed by the context) and it closes hang when the tool starts.
func subAgent(hang chan struct{}) *agent {
	r := &repo{failures: 9}
	tools := r.tools()
	if hang != nil {
		tools["run_tests"] = func(ctx context.Context, _ string) (string, bool) {
			close(hang)
			<-ctx.Done()
			return "signal: killed", true
		}
	}
	turns := []turn{{say: say("Reading the lexer."), calls: []toolCall{readLexer}}}
	for k := range 8 {
		turns = append(turns,
			turn{say: say("Fix %d.", k), calls: []toolCall{editLexer(k)}},
			turn{say: say("Testing fix %d.", k), calls: []toolCall{runTests}})
	}
	return &agent{task: "Fix TestLex case 3.", model: script(turns...), tools: tools, in: 2000, out: 400}
}

// warnings collects what WithOnWarning hands out, by run id.
type warnings struct {
	mu  sync.Mutex
	got map[string][]termination.Cause
}

func (w *warnings) hook(_ context.Context, run *middleware.Run, c termination.Cause) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got[run.ID()] = append(w.got[run.ID()], c)
}

func (w *warnings) of(id string) []termination.Cause {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.got[id]
}

// gated makes a model stop before its n-th response until resume is closed,
// closing paused when it gets there.
func gated(model func(int) (turn, bool), n int, paused, resume chan struct{}) func(int) (turn, bool) {
	return func(i int) (turn, bool) {
		if i == n {
			close(paused)
			<-resume
		}
		return model(i)
	}
}

// delegate runs a planner that starts two sub-agents: a by its run's
// context, b by its id (WithParent, as a job queue would). a blocks in a
// test run while b works on until the tree's budget is spent. b pauses
// after its third turn, which crosses the tree's 75% pressure: then the
// planner reads its spawn call's answer (its next event).
func delegate(t *testing.T, planner, coder *middleware.Stage, w *warnings) (plan, a, b termination.Result) {
	t.Helper()
	pctx, prun := planner.Start(context.Background())
	prun.Observe(termination.Event{Kind: termination.KindInput, Source: "user", Text: "Fix the lexer's escape handling; tests in internal/parser."})
	prun.Observe(termination.Event{Kind: termination.KindMessage, Source: "planner", Text: say("Two sub-tasks: cases 1-2 and case 3."),
		Usage: termination.Usage{InputTokens: 1200, OutputTokens: 300}})
	prun.Observe(termination.Event{Kind: termination.KindToolCall, Tool: "bash", CallID: "toolu_p1",
		Args: json.RawMessage(args("command", "spawn-agents --tasks 'cases 1-2' 'case 3'"))})

	hang := make(chan struct{})
	aDone := make(chan termination.Result, 1)
	go func() {
		res, _ := subAgent(hang).run(pctx, coder) // a child: pctx carries the planner's run
		aDone <- res
	}()
	<-hang
	paused, resume := make(chan struct{}), make(chan struct{})
	bDone := make(chan termination.Result, 1)
	bAgent := subAgent(nil)
	bAgent.model = gated(bAgent.model, 3, paused, resume)
	go func() {
		res, _ := bAgent.run(context.Background(), coder, middleware.WithParent(prun.ID()))
		bDone <- res
	}()
	<-paused
	// The tree crossed 75% on b's event: b's hook had it at once, the
	// planner's comes with its next event (middleware doc, Trees of runs).
	require.Len(t, w.of(prun.ID()), 0, "the planner had no event since the warning")
	prun.Observe(termination.Event{Kind: termination.KindToolResult, Tool: "bash", CallID: "toolu_p1", Text: "spawned 2 agents"})
	require.Len(t, w.of(prun.ID()), 1, "the planner's hook, with its next event")
	close(resume)
	b, a = <-bDone, <-aDone
	require.Len(t, w.of(b.Run), 1, "b's hook: b's own event raised the warning")

	require.Error(t, pctx.Err(), "the planner's loop is told to stop")
	var cause termination.BudgetExhausted
	require.ErrorAs(t, context.Cause(pctx), &cause)
	return prun.Finish(nil), a, b
}

func testDelegation(t *testing.T) {
	forms := map[string][2]*middleware.Stage{}
	w := &warnings{got: map[string][]termination.Cause{}}
	hook := middleware.WithOnWarning(w.hook)
	forms["policy file"] = [2]*middleware.Stage{stageWith(t, "planner", plannerPolicy, nil, hook), stageWith(t, "coder", coderPolicy, nil, hook)}
	inGo, err := middleware.New("planner", middleware.WithCondition(termination.IterationLimits{Limit: 30}), hook,
		middleware.WithTreeLimits(termination.TreeLimits(termination.TokenLimits{Total: 20000, Pressure: 0.75})))
	require.NoError(t, err)
	forms["Go"] = [2]*middleware.Stage{inGo, stageWith(t, "coder", "", termination.IterationLimits{Limit: 40}, hook)}

	for name, stages := range forms {
		t.Run(name, func(t *testing.T) {
			plan, a, b := delegate(t, stages[0], stages[1], w)
			// planner 1,500; a 3 turns (7,200): 8,700; b's turns of 2,400:
			// the 3rd reaches 75% (15,900), the 5th the limit (20,700).
			require.Equal(t, termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 20700, Limit: 20000, Scope: termination.ScopeTree}, plan.Cause)
			require.Equal(t, termination.OutcomeFailed, plan.Outcome)
			require.Zero(t, plan.StoppedAt, "stopped by a descendant's event (termination doc, Trees)")
			require.NotNil(t, plan.Tree)
			require.Equal(t, int64(20700), plan.Tree.Tokens.InputTokens+plan.Tree.Tokens.OutputTokens)
			require.Equal(t, int64(1500), plan.Tokens.InputTokens+plan.Tokens.OutputTokens, "the planner's own")

			cascade := termination.Cancelled{Reason: termination.CancelParent, Detail: "planner ended: budget_exhausted"}
			require.Equal(t, cascade, b.Cause, "the sub-agent whose event crossed the tree limit")
			require.Equal(t, cascade, a.Cause, "the sub-agent that was waiting on its tests")
			require.Equal(t, plan.Run, a.Parent)
			require.Equal(t, plan.Run, b.Parent)
			require.Equal(t, 14, b.Events, "input, 4 turns of message, call and result, the 5th turn's message")

			pressure := termination.BudgetPressure{Resource: termination.ResourceTotalTokens, Threshold: 0.75, Used: 15900, Limit: 20000, Scope: termination.ScopeTree}
			for who, res := range map[string]termination.Result{"planner": plan, "a": a, "b": b} {
				require.Equal(t, []termination.Cause{pressure}, res.Warnings, "%s: a tree warning reaches every live run of the tree", who)
				// a, blocked in its tests, had no next event: its hook had
				// the warning at its end (WithOnWarning).
				require.Equal(t, []termination.Cause{pressure}, w.of(res.Run), "%s: the warning hook, once", who)
			}
		})
	}
}

// hangAgent reads the lexer, then runs the tests, which hang: the tool
// blocks until the run's context ends, as a subprocess started with
// exec.CommandContext does.
func hangAgent() *agent {
	r := &repo{failures: 1}
	tools := r.tools()
	tools["run_tests"] = func(ctx context.Context, _ string) (string, bool) {
		<-ctx.Done()
		return "signal: killed", true
	}
	return &agent{task: "Fix TestLex.", tools: tools, in: 3000, out: 200, model: script(
		turn{say: say("Reading the lexer."), calls: []toolCall{readLexer}},
		turn{say: say("Running the whole suite."), calls: []toolCall{runTests}},
		turn{say: "done", final: true})}
}

func testHang(t *testing.T) {
	cases := []struct {
		name, policy string
		cond         termination.Condition
		want         termination.Timeout
	}{
		{"idle", "idle: 300ms\ntimeout: 10s\n", termination.TimeLimits{Idle: 300 * time.Millisecond, Timeout: 10 * time.Second},
			termination.Timeout{Limit: 300 * time.Millisecond, Elapsed: 300 * time.Millisecond, Idle: true}},
		{"timeout", "timeout: 400ms\nidle: 5s\n", termination.TimeLimits{Idle: 5 * time.Second, Timeout: 400 * time.Millisecond},
			termination.Timeout{Limit: 400 * time.Millisecond, Elapsed: 400 * time.Millisecond}},
	}
	for _, tc := range cases {
		for _, form := range []string{"policy file", "Go"} {
			t.Run(tc.name+"/"+form, func(t *testing.T) {
				defer goleak.VerifyNone(t)
				var cond termination.Condition
				if form == "Go" {
					cond = tc.cond
				}
				stage := stageWith(t, "tester", tc.policy, cond)
				start := time.Now()
				ctx, run := stage.Start(context.Background())
				seen := 0
				for range middleware.RangeEach(run, hangAgent().loop(ctx), decodeMsg) {
					seen++
				}
				res := run.Wait()
				took := time.Since(start)

				require.Equal(t, tc.want, res.Cause)
				require.Equal(t, "timeout", res.Tag())
				require.Equal(t, termination.OutcomeFailed, res.Outcome)
				// 1 input, read_file 2-4, the test run's message 5 and call 6.
				require.Equal(t, 6, res.Events)
				require.Equal(t, 6, res.StoppedAt, "a timeout stops after the last event evaluated (termination doc)")
				require.Empty(t, res.Evidence)
				require.Equal(t, 4, seen, "the task, the two assistant turns and the read_file answer")
				require.GreaterOrEqual(t, res.Duration, tc.want.Limit)
				require.Less(t, took, tc.want.Limit+time.Second, "stopped promptly")
				var got termination.Timeout
				require.ErrorAs(t, context.Cause(ctx), &got)
				require.Equal(t, tc.want, got)
			})
		}
	}
	t.Run("tool ignores its context/Forward", testHangIgnoringContext)
}

// testHangIgnoringContext: the hung tool ignores the context (a blocking
// call with no deadline). Range would wait for the producer as a bare range
// loop does; Forward ends its output when the run stops, whatever the
// producer does, and Wait gives the producer the drain timeout.
func testHangIgnoringContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	stuck := make(chan struct{})
	defer close(stuck) // the tool returns at last, when the test ends
	a := hangAgent()
	a.tools["run_tests"] = func(context.Context, string) (string, bool) {
		<-stuck
		return "ok", false
	}
	stage := stageWith(t, "tester", "idle: 300ms\n", nil, middleware.WithDrainTimeout(200*time.Millisecond))
	start := time.Now()
	ctx, run := stage.Start(context.Background())
	seen := 0
	for range middleware.ForwardEach(run, a.loop(ctx), decodeMsg) {
		seen++
	}
	closed := time.Since(start)
	res := run.Wait()
	waited := time.Since(start)
	require.Equal(t, termination.Timeout{Limit: 300 * time.Millisecond, Elapsed: 300 * time.Millisecond, Idle: true}, res.Cause)
	require.Equal(t, 6, res.Events)
	require.Equal(t, 4, seen)
	require.Less(t, closed, 300*time.Millisecond+time.Second, "the output closed promptly")
	require.Less(t, waited, 500*time.Millisecond+time.Second, "Wait: at the latest the drain timeout after the stop")
}

// recording is a set of live runs recorded by an eventlog.Writer.
type recording struct {
	path     string
	policies map[string]string             // stage: policy file text
	live     map[string]termination.Result // run id: the live result
}

// stage makes a stage of the recording: a policy file's text, or, with
// cond, conditions in Go (its end records say "policy":"code").
func (r *recording) stage(t *testing.T, w *eventlog.Writer, name, policy string, cond termination.Condition, extra ...middleware.Option) *middleware.Stage {
	if cond == nil {
		r.policies[name] = policy
	}
	return stageWith(t, name, policy, cond, append(extra, middleware.WithParticipant(w))...)
}

func (r *recording) add(results ...termination.Result) {
	for _, res := range results {
		r.live[res.Run] = res
	}
}

// record runs the agents of scenarios 1 to 4 with an event log, as
// production would, and returns the recording.
func record(t *testing.T, opts ...eventlog.Option) *recording {
	rec := &recording{path: filepath.Join(t.TempDir(), "events.jsonl"), policies: map[string]string{}, live: map[string]termination.Result{}}
	w, err := eventlog.New(rec.path, opts...)
	require.NoError(t, err)
	ctx := context.Background()

	fixer := rec.stage(t, w, "fixer", fixerPolicy, nil)
	for _, a := range []*agent{progressAgent(), stuckAgent()} {
		res, _ := a.run(ctx, fixer)
		rec.add(res)
	}
	inGo := rec.stage(t, w, "fixer-go", "", fixerCond)
	res, _ := stuckAgent().run(ctx, inGo)
	rec.add(res)
	res, _ = parallelAgent().run(ctx, fixer)
	rec.add(res)
	res, _ = cutArgsAgent().run(ctx, fixer)
	require.Equal(t, termination.SignalRepeatedResult, res.Cause.(termination.StallDetected).Signal)
	rec.add(res)

	deployer := rec.stage(t, w, "deployer", "stall: {repeats: 3, window: 8, same_result: true, any_args: true, ignore_tools: [bash]}\n", nil)
	for _, a := range []*agent{pollAgent(0)(), pollAgent(3)()} {
		res, _ := a.run(ctx, deployer)
		rec.add(res)
	}

	warned := &warnings{got: map[string][]termination.Cause{}}
	planner := rec.stage(t, w, "planner", plannerPolicy, nil, middleware.WithOnWarning(warned.hook))
	coder := rec.stage(t, w, "coder", coderPolicy, nil, middleware.WithOnWarning(warned.hook))
	rec.add(delegate(t, planner, coder, warned))

	tester := rec.stage(t, w, "tester", "idle: 300ms\ntimeout: 10s\n", nil)
	res, _ = hangAgent().run(ctx, tester)
	rec.add(res)

	require.NoError(t, w.Close())
	require.Zero(t, w.Dropped())
	return rec
}

// replayRecording replays the log at path as `agentstop replay -policies`
// does: a first pass indexes the runs, the second replays each run with its
// stage's policy (the Go conditions for fixer-go).
func replayRecording(t *testing.T, rec *recording, path string, opts ...replay.Option) ([]termination.Result, bool, error) {
	t.Helper()
	policies := map[string]*termination.Policy{}
	for stage, text := range rec.policies {
		p, err := termination.ParsePolicy([]byte(text))
		require.NoError(t, err)
		policies[stage] = &p
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	idx := codec.IndexRuns(f)
	_, err = f.Seek(0, io.SeekStart)
	require.NoError(t, err)
	runner := replay.NewRunner(nil, append([]replay.Option{replay.WithIndex(&idx), replay.WithCondition(fixerCond),
		replay.WithPolicies(func(stage string) (*termination.Policy, bool) {
			p, ok := policies[stage]
			return p, ok
		})}, opts...)...)
	results, truncated, err := runner.Log(f)
	require.Empty(t, runner.LeftOut())
	return results, truncated, err
}

func testReplayAsLive(t *testing.T) {
	t.Run("with content", func(t *testing.T) { replayAsLive(t, record(t)) })
	// Arguments, texts and results as hashes: replay compares the hashes.
	t.Run("without content", func(t *testing.T) {
		rec := record(t, eventlog.WithoutContent())
		data, err := os.ReadFile(rec.path)
		require.NoError(t, err)
		require.NotContains(t, string(data), "gh run view", "no tool arguments")
		require.NotContains(t, string(data), "--- FAIL", "no tool output")
		replayAsLive(t, rec)
	})
}

func replayAsLive(t *testing.T, rec *recording) {
	results, truncated, err := replayRecording(t, rec, rec.path)
	require.NoError(t, err)
	require.False(t, truncated)
	require.Len(t, results, len(rec.live), "one result per recorded run")
	for _, res := range results {
		live, ok := rec.live[res.Run]
		require.True(t, ok, "run %s was not run live", res.Run)
		msg := fmt.Sprintf("run of stage %s (live: %s)", live.Stage, live.Cause)
		t.Logf("%s %s from_record=%v stopped_at=%d events=%d live=%s", live.Stage, res.Cause, res.FromRecord, res.StoppedAt, res.Events, res.Live)
		require.Equal(t, live.Tag(), res.Live, msg)
		require.Equal(t, live.Cause, res.Cause, msg)
		require.Equal(t, live.StoppedAt, res.StoppedAt, msg)
		require.Equal(t, live.Events, res.Events, msg)
		require.Equal(t, live.Outcome, res.Outcome, msg)
		require.Equal(t, live.Parent, res.Parent, msg)
		if !res.FromRecord {
			// Derived from the events by the same policy: the same evidence
			// and warnings too.
			require.Equal(t, live.Evidence, res.Evidence, msg)
			require.Equal(t, live.Warnings, res.Warnings, msg)
		}
	}
}

// lineBounds returns where line n (1-based) of data starts and where its
// newline is.
func lineBounds(t *testing.T, data []byte, n int) (start, end int) {
	t.Helper()
	for i := 1; i < n; i++ {
		nl := bytes.IndexByte(data[start:], '\n')
		require.GreaterOrEqual(t, nl, 0, "the log has fewer than %d lines", n)
		start += nl + 1
	}
	end = start + bytes.IndexByte(data[start:], '\n')
	require.Greater(t, end, start)
	return start, end
}

func testCutOffLog(t *testing.T) {
	// Two runs of the coding agent: the stuck one ends (a stall and its
	// end record), then the process is killed while the progress run
	// writes its 13th line (run_tests' answer: ~1 KiB with escapes).
	rec := &recording{path: filepath.Join(t.TempDir(), "events.jsonl"), policies: map[string]string{}, live: map[string]termination.Result{}}
	w, err := eventlog.New(rec.path)
	require.NoError(t, err)
	fixer := rec.stage(t, w, "fixer", fixerPolicy, nil)
	stuck, _ := stuckAgent().run(context.Background(), fixer)
	progress, _ := progressAgent().run(context.Background(), fixer)
	require.NoError(t, w.Close())
	data, err := os.ReadFile(rec.path)
	require.NoError(t, err)

	cutLine := stuck.Events + 1 + 13 // the stuck run's events, its end record, 13 lines of the progress run
	start, end := lineBounds(t, data, cutLine)
	require.Contains(t, string(data[start:end]), `"tool_result"`)
	require.Contains(t, string(data[start:end]), `--- FAIL`)
	cut := filepath.Join(t.TempDir(), "killed.jsonl")
	require.NoError(t, os.WriteFile(cut, data[:start+(end-start)/2], 0o600))

	// Strict: an error naming the line and saying the log looks truncated.
	_, _, err = replayRecording(t, rec, cut)
	require.ErrorIs(t, err, codec.ErrTruncated)
	var de *codec.DecodeError
	require.ErrorAs(t, err, &de)
	require.Equal(t, cutLine, de.Line)
	require.Contains(t, err.Error(), fmt.Sprintf("line %d", cutLine))

	// Lenient: the events before the cut are evaluated. The stuck run ends
	// as it did live; the progress run, which no cause stopped, ends at
	// its last whole line and is the one the truncation concerns.
	results, truncated, err := replayRecording(t, rec, cut, replay.WithLenient())
	require.NoError(t, err)
	require.True(t, truncated)
	require.Len(t, results, 2)
	byRun := map[string]termination.Result{results[0].Run: results[0], results[1].Run: results[1]}
	require.Equal(t, stuck.Cause, byRun[stuck.Run].Cause)
	require.Equal(t, stuck.StoppedAt, byRun[stuck.Run].StoppedAt)
	require.Equal(t, "stall", byRun[stuck.Run].Live)
	cutRun := byRun[progress.Run]
	require.Equal(t, termination.NaturalCompletion{}, cutRun.Cause)
	require.Equal(t, 12, cutRun.Events, "the progress run's lines before the cut")
	require.Empty(t, cutRun.Live, "its end record was never written")

	// Wherever the line is cut — inside an escape, a multi-byte rune, a
	// key, a number — a one-run log cut there is a truncated log at that
	// line, for replay.Log as for the Runner.
	one := filepath.Join(t.TempDir(), "one.jsonl")
	w, err = eventlog.New(one)
	require.NoError(t, err)
	progress, _ = progressAgent().run(context.Background(), rec.stage(t, w, "fixer", fixerPolicy, nil))
	require.NoError(t, w.Close())
	data, err = os.ReadFile(one)
	require.NoError(t, err)
	start, end = lineBounds(t, data, 4) // read_file's answer: ~1 KiB of Go
	cond := termination.MustParsePolicy(fixerPolicy).Condition()
	for at := start + 1; at < end; at++ {
		_, err := replay.Log(cond, bytes.NewReader(data[:at]))
		if !errors.Is(err, codec.ErrTruncated) || !errors.As(err, &de) || de.Line != 4 {
			t.Fatalf("cut at byte %d of line 4 (%q…): got %v, want a truncated log at line 4", at-start, data[max(start, at-12):at], err)
		}
		res, err := replay.Log(cond, bytes.NewReader(data[:at]), replay.WithLenient())
		require.NoError(t, err)
		require.True(t, res.Truncated)
		require.Equal(t, 3, res.Events)
	}
}
