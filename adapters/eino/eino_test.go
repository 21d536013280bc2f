package eino_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/adapters/eino"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scriptedModel is a model.ToolCallingChatModel that answers with a
// script's turns, like a provider would: it fails once its context is done
// (as an HTTP client does), reports usage in ResponseMeta, and streams a
// response as text chunks followed by a chunk with the tool calls and usage.
type scriptedModel struct {
	script  adaptertest.Script
	latency time.Duration // how long a call takes; real models take 100s of ms

	mu    sync.Mutex
	calls int
}

func (m *scriptedModel) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

func (m *scriptedModel) next(ctx context.Context) (*schema.Message, error) {
	if m.latency > 0 {
		select {
		case <-time.After(m.latency):
		case <-ctx.Done():
		}
	}
	// Checked under the lock, so that a call counted after a test's
	// snapshot (taken after a stop) started with a cancelled context.
	m.mu.Lock()
	if err := ctx.Err(); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	i := m.calls
	m.calls++
	m.mu.Unlock()
	turn, ok := m.script.TurnAt(i)
	if !ok {
		return nil, fmt.Errorf("scripted model: no turn %d", i)
	}
	var calls []schema.ToolCall
	for j, tc := range turn.ToolCalls {
		idx := j
		calls = append(calls, schema.ToolCall{Index: &idx, ID: fmt.Sprintf("call_%d_%d", i, j), Type: "function",
			Function: schema.FunctionCall{Name: tc.Name, Arguments: tc.Args}})
	}
	msg := schema.AssistantMessage(turn.Text, calls)
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	msg.ResponseMeta = &schema.ResponseMeta{FinishReason: finish, Usage: &schema.TokenUsage{
		PromptTokens:     int(turn.Usage.InputTokens),
		CompletionTokens: int(turn.Usage.OutputTokens),
		TotalTokens:      int(turn.Usage.Total()),
	}}
	return msg, nil
}

func (m *scriptedModel) Generate(ctx context.Context, _ []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	return m.next(ctx)
}

func (m *scriptedModel) Stream(ctx context.Context, _ []*schema.Message, _ ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.next(ctx)
	if err != nil {
		return nil, err
	}
	var chunks []*schema.Message
	for _, w := range strings.SplitAfter(msg.Content, " ") {
		if w != "" {
			chunks = append(chunks, &schema.Message{Role: schema.Assistant, Content: w})
		}
	}
	chunks = append(chunks, &schema.Message{Role: schema.Assistant, ToolCalls: msg.ToolCalls, ResponseMeta: msg.ResponseMeta})
	sr, sw := schema.Pipe[*schema.Message](1)
	go func() {
		defer sw.Close()
		for _, c := range chunks {
			if closed := sw.Send(c, nil); closed {
				return
			}
		}
	}()
	return sr, nil
}

func (m *scriptedModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return m, nil
}

// fixedTool returns a short fixed text.
type fixedTool struct{ name string }

// countingTool is fixedTool that counts the calls that start with a live
// context and takes latency to run.
type countingTool struct {
	fixedTool
	latency time.Duration

	mu   sync.Mutex
	live int
}

func (t *countingTool) InvokableRun(ctx context.Context, args string, opts ...tool.Option) (string, error) {
	t.mu.Lock()
	if err := ctx.Err(); err != nil {
		t.mu.Unlock()
		return "", err
	}
	t.live++
	t.mu.Unlock()
	if t.latency > 0 {
		time.Sleep(t.latency)
	}
	return t.fixedTool.InvokableRun(ctx, args, opts...)
}

func (t *countingTool) Live() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live
}

func (t fixedTool) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: t.name, Desc: "looks things up", ParamsOneOf: schema.NewParamsOneOfByParams(
		map[string]*schema.ParameterInfo{"query": {Type: schema.String, Desc: "what to look up"}})}, nil
}

func (t fixedTool) InvokableRun(context.Context, string, ...tool.Option) (string, error) {
	return "Paris is the capital of France.", nil
}

// config of one harness run.
type setup struct {
	streaming     bool
	handler       bool // feed the run with eino.Handler instead of Forward
	maxIterations int
	exit          bool
	tool          tool.BaseTool // default fixedTool{"search"}
	opts          []eino.Option // for NewHandler or Forward
}

func newAgent(t *testing.T, ctx context.Context, name string, m model.ToolCallingChatModel, s setup) adk.Agent {
	t.Helper()
	conf := &adk.ChatModelAgentConfig{
		Name:          name,
		Description:   "answers questions",
		Instruction:   "You are a helpful assistant.",
		Model:         m,
		ToolsConfig:   adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{fixedTool{"search"}}}},
		MaxIterations: s.maxIterations,
	}
	if s.tool != nil {
		conf.ToolsConfig.Tools = []tool.BaseTool{s.tool}
	}
	if conf.MaxIterations == 0 {
		conf.MaxIterations = 1000
	}
	if s.exit {
		conf.Exit = adk.ExitTool{}
	}
	agent, err := adk.NewChatModelAgent(ctx, conf)
	if err != nil {
		t.Fatal(err)
	}
	return agent
}

// outcome of one harness run.
type outcome struct {
	res      termination.Result
	calls    int
	consumed []string // what the consumer read: role and full content of each event's message
}

// drive runs agent under a run of stage and reads every event like a
// consumer that renders streamed messages.
func drive(t *testing.T, stage *middleware.Stage, input string, s setup, agentOf func(ctx context.Context) adk.Agent, m *scriptedModel) outcome {
	t.Helper()
	ctx, run := stage.Start(context.Background())
	var h *eino.Handler
	if s.handler {
		h = eino.NewHandler(run, s.opts...)
		ctx = h.Context(ctx)
	} else {
		ctx = eino.Context(ctx, run)
	}
	runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agentOf(ctx), EnableStreaming: s.streaming})
	events := runner.Query(ctx, input)
	if !s.handler {
		events = eino.Forward(run, events, s.opts...)
	}
	var out outcome
	for {
		ev, ok := events.Next()
		if !ok {
			break
		}
		if ev.Err != nil {
			out.consumed = append(out.consumed, "error: "+ev.Err.Error())
			continue
		}
		if ev.Output == nil || ev.Output.MessageOutput == nil {
			continue
		}
		mv := ev.Output.MessageOutput
		text := ""
		if mv.IsStreaming {
			for {
				chunk, err := mv.MessageStream.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Errorf("consumer stream: %v", err)
					break
				}
				text += chunk.Content
			}
			mv.MessageStream.Close()
		} else if mv.Message != nil {
			text = mv.Message.Content
		}
		out.consumed = append(out.consumed, fmt.Sprintf("%s: %s", mv.Role, text))
	}
	if s.handler {
		// The loop's errors are not collected: the Handler sees them.
		out.res = h.Finish(nil)
	} else {
		out.res = run.Wait()
	}
	out.calls = m.Calls()
	return out
}

func harness(s setup) adaptertest.Harness {
	return adaptertest.Harness{
		Timeout: 20 * time.Second,
		Run: func(t *testing.T, stage *middleware.Stage, script adaptertest.Script) adaptertest.Report {
			m := &scriptedModel{script: script, latency: 2 * time.Millisecond}
			out := drive(t, stage, script.Input, s, func(ctx context.Context) adk.Agent {
				return newAgent(t, ctx, "assistant", m, s)
			}, m)
			return adaptertest.Report{Result: out.res, ModelCalls: out.calls}
		},
		CallIDs: true, // the model is named only to callbacks, by components that report their Config
	}
}

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    setup
	}{
		{"Forward", setup{}},
		{"ForwardStreaming", setup{streaming: true}},
		{"Handler", setup{handler: true}},
		{"HandlerStreaming", setup{handler: true, streaming: true}},
	} {
		t.Run(tc.name, func(t *testing.T) { adaptertest.Run(t, harness(tc.s)) })
	}
}

func newStage(t *testing.T, policy string, opts ...middleware.Option) (*middleware.Stage, *adaptertest.Events) {
	t.Helper()
	return adaptertest.NewStage(t, "eino_test", policy, opts...)
}

var lookup = adaptertest.Lookup

// runaway calls the same tool forever, saying nothing: only the tool calls
// repeat.
var runaway = adaptertest.Runaway

// The consumer of Forward reads the same events, streamed messages
// included, as it would without agentstop.
func TestForwardConsumerSeesEverything(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprint("streaming=", streaming), func(t *testing.T) {
			s := setup{streaming: streaming}
			stage, seen := newStage(t, "max_tool_calls: 10")
			m := &scriptedModel{script: lookup}
			out := drive(t, stage, lookup.Input, s, func(ctx context.Context) adk.Agent { return newAgent(t, ctx, "assistant", m, s) }, m)
			want := []string{
				"assistant: Let me look that up.",
				"tool: Paris is the capital of France.",
				"assistant: The capital of France is Paris.",
			}
			if fmt.Sprint(out.consumed) != fmt.Sprint(want) {
				t.Errorf("consumer read %q, want %q", out.consumed, want)
			}
			if _, ok := out.res.Cause.(termination.NaturalCompletion); !ok {
				t.Errorf("cause = %#v, want NaturalCompletion", out.res.Cause)
			}
			wantEvents := []string{
				`message assistant "Let me look that up." {120 15}`,
				`tool_call assistant search {"query":"capital of France"}`,
				`tool_result assistant search "Paris is the capital of France."`,
				`final assistant "The capital of France is Paris." {160 9}`,
			}
			if got := describe(seen.All()); fmt.Sprint(got) != fmt.Sprint(wantEvents) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantEvents, "\n"))
			}
		})
	}
}

func describe(evs []termination.Event) []string {
	var out []string
	for _, ev := range evs {
		switch ev.Kind {
		case termination.KindMessage, termination.KindFinal:
			out = append(out, fmt.Sprintf("%s %s %q %v", ev.Kind, ev.Source, ev.Text, ev.Usage))
		case termination.KindToolCall:
			out = append(out, fmt.Sprintf("%s %s %s %s", ev.Kind, ev.Source, ev.Tool, ev.Args))
		case termination.KindToolResult:
			out = append(out, fmt.Sprintf("%s %s %s %q%s", ev.Kind, ev.Source, ev.Tool, ev.Text, ev.Err))
		case termination.KindHandoff:
			out = append(out, fmt.Sprintf("%s %s -> %s", ev.Kind, ev.Source, ev.Target))
		default:
			out = append(out, fmt.Sprintf("%s %s %q%s", ev.Kind, ev.Source, ev.Text, ev.Err))
		}
	}
	return out
}

// A runaway caught by the stall condition: the stop reaches the agent,
// whose loop ends.
func TestRunawayStopsAgent(t *testing.T) {
	for _, s := range []setup{{}, {streaming: true}, {handler: true}} {
		t.Run(fmt.Sprintf("%+v", s), func(t *testing.T) {
			stage, _ := newStage(t, "{stall: {repeats: 3}, max_tool_calls: 50}")
			m := &scriptedModel{script: runaway}
			out := drive(t, stage, runaway.Input, s, func(ctx context.Context) adk.Agent { return newAgent(t, ctx, "assistant", m, s) }, m)
			want := termination.StallDetected{Signal: termination.SignalRepeatedToolCall, Repeats: 3}
			if out.res.Cause != want {
				t.Errorf("cause = %#v, want %#v", out.res.Cause, want)
			}
			if out.calls != 3 {
				t.Errorf("model called %d times with a live context; the stop fired on its 3rd turn", out.calls)
			}
		})
	}
}

// A runaway that also repeats its text is caught on its third message, one
// tool call earlier.
func TestRepeatedMessageStall(t *testing.T) {
	chatty := adaptertest.Script{Input: runaway.Input, Repeat: true, Turns: []adaptertest.Turn{{
		Text: "Searching again.", ToolCalls: runaway.Turns[0].ToolCalls, Usage: runaway.Turns[0].Usage}}}
	for _, s := range []setup{{}, {handler: true}} {
		t.Run(fmt.Sprint("handler=", s.handler), func(t *testing.T) {
			stage, _ := newStage(t, "{stall: {repeats: 3}}")
			m := &scriptedModel{script: chatty}
			out := drive(t, stage, chatty.Input, s, func(ctx context.Context) adk.Agent { return newAgent(t, ctx, "assistant", m, s) }, m)
			want := termination.StallDetected{Signal: termination.SignalRepeatedMessage, Repeats: 3}
			if out.res.Cause != want || out.res.ToolCalls != 2 {
				t.Errorf("cause = %#v after %d tool calls, want %#v after 2", out.res.Cause, out.res.ToolCalls, want)
			}
		})
	}
}

// ChatModelAgent's own MaxIterations ends the run with MaxIterationsReached:
// the adapter's error wraps the typed cause, and Finish keeps it.
func TestFrameworkMaxIterations(t *testing.T) {
	for _, s := range []setup{{maxIterations: 3}, {maxIterations: 3, handler: true}} {
		t.Run(fmt.Sprint("handler=", s.handler), func(t *testing.T) {
			stage, seen := newStage(t, "max_tool_calls: 50")
			m := &scriptedModel{script: runaway}
			out := drive(t, stage, runaway.Input, s, func(ctx context.Context) adk.Agent { return newAgent(t, ctx, "assistant", m, s) }, m)
			if want := (termination.MaxIterationsReached{Limit: 3, Count: 4}); out.res.Cause != want {
				t.Errorf("cause = %#v, want %#v (from %q)", out.res.Cause, want, adk.ErrExceedMaxIterations)
			}
			if out.calls != 3 || out.res.Iterations != 3 {
				t.Errorf("model calls, iterations = %d, %d; want 3, 3", out.calls, out.res.Iterations)
			}
			evs := seen.All()
			if last := evs[len(evs)-1]; last.Kind != termination.KindError {
				t.Errorf("last event = %v, want the error", last.Kind)
			}
		})
	}
}

// The exit tool is a stop event: stop_message completes the stage.
func TestExitToolIsStop(t *testing.T) {
	script := adaptertest.Script{Input: "Say done.", Turns: []adaptertest.Turn{
		{ToolCalls: []adaptertest.ToolCall{{Name: "exit", Args: `{"final_result":"done"}`}}, Usage: termination.Usage{InputTokens: 10, OutputTokens: 2}},
	}}
	s := setup{exit: true}
	stage, seen := newStage(t, "stop_message: true")
	m := &scriptedModel{script: script}
	out := drive(t, stage, script.Input, s, func(ctx context.Context) adk.Agent { return newAgent(t, ctx, "assistant", m, s) }, m)
	want := termination.Completed{Condition: "stop_message", Detail: "assistant"}
	if c, ok := out.res.Cause.(termination.Completed); !ok || c.Condition != want.Condition {
		t.Errorf("cause = %#v, want %#v", out.res.Cause, want)
	}
	got := describe(seen.All())
	wantEvents := []string{
		`message assistant "" {10 2}`,
		`tool_call assistant exit {"final_result":"done"}`,
		`tool_result assistant exit "done"`,
		`stop assistant "done"`,
	}
	if fmt.Sprint(got) != fmt.Sprint(wantEvents) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantEvents, "\n"))
	}
}

// A transfer to another agent is a handoff: the handoff condition stops the
// stage before the other agent runs.
func TestTransferIsHandoff(t *testing.T) {
	router := &scriptedModel{script: adaptertest.Script{Turns: []adaptertest.Turn{
		{ToolCalls: []adaptertest.ToolCall{{Name: adk.TransferToAgentToolName, Args: `{"agent_name":"billing"}`}}, Usage: termination.Usage{InputTokens: 30, OutputTokens: 4}},
	}}}
	billing := &scriptedModel{script: adaptertest.Script{Turns: []adaptertest.Turn{{Text: "Your bill is 10 EUR.", Usage: termination.Usage{InputTokens: 20, OutputTokens: 6}}}}}
	agents := func(ctx context.Context) adk.Agent {
		root := newAgent(t, ctx, "router", router, setup{})
		sub := newAgent(t, ctx, "billing", billing, setup{})
		a, err := adk.SetSubAgents(ctx, root, []adk.Agent{sub})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	t.Run("WatchedTarget", func(t *testing.T) {
		stage, _ := newStage(t, "handoff: [billing]")
		out := drive(t, stage, "How much do I owe?", setup{}, agents, router)
		want := termination.HandoffRequested{Target: "billing", Source: "router"}
		if out.res.Cause != want {
			t.Errorf("cause = %#v, want %#v", out.res.Cause, want)
		}
		if billing.Calls() != 0 {
			t.Errorf("billing agent ran %d model turns after the handoff stop", billing.Calls())
		}
	})
	t.Run("Unwatched", func(t *testing.T) {
		router.calls, billing.calls = 0, 0
		stage, seen := newStage(t, "max_tool_calls: 5")
		out := drive(t, stage, "How much do I owe?", setup{}, agents, router)
		if _, ok := out.res.Cause.(termination.NaturalCompletion); !ok {
			t.Errorf("cause = %#v, want NaturalCompletion", out.res.Cause)
		}
		want := []string{
			`message router "" {30 4}`,
			`tool_call router transfer_to_agent {"agent_name":"billing"}`,
			`tool_result router transfer_to_agent "successfully transferred to agent [billing]"`,
			`handoff router -> billing`,
			`final billing "Your bill is 10 EUR." {20 6}`,
		}
		if got := describe(seen.All()); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if out.res.Tokens != (termination.Usage{InputTokens: 50, OutputTokens: 10}) {
			t.Errorf("tokens = %+v", out.res.Tokens)
		}
	})
}

// A timeout fires while the model is working: the output ends and the run
// reports Timeout, with no event after the stop delivered.
func TestTimeoutWhileWorking(t *testing.T) {
	stage, _ := newStage(t, "timeout: 50ms")
	slow := &slowModel{scriptedModel: scriptedModel{script: runaway}, delay: 20 * time.Millisecond}
	out := drive(t, stage, runaway.Input, setup{}, func(ctx context.Context) adk.Agent { return newAgent(t, ctx, "assistant", slow, setup{}) }, &slow.scriptedModel)
	if _, ok := out.res.Cause.(termination.Timeout); !ok {
		t.Errorf("cause = %#v, want Timeout", out.res.Cause)
	}
	for _, c := range out.consumed {
		if strings.HasPrefix(c, "error:") {
			t.Errorf("consumer got the cancellation echo %q", c)
		}
	}
}

type slowModel struct {
	scriptedModel
	delay time.Duration
}

func (m *slowModel) Generate(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	select {
	case <-time.After(m.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return m.next(ctx)
}

func (m *slowModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) { return m, nil }

// Usage is counted as the GenAI conventions count it (contract §1), from
// ResponseMeta.Usage, whichever chat model produced it.
func TestDecodeUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    schema.TokenUsage
		want string
	}{
		{"plain", schema.TokenUsage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}, "{7 3}"},
		{"cached prompt tokens are part of the prompt", schema.TokenUsage{PromptTokens: 1200, PromptTokenDetails: schema.PromptTokenDetails{CachedTokens: 1000},
			CompletionTokens: 3, TotalTokens: 1203}, "{1200 3}"},
		{"reasoning inside completion (OpenAI)", schema.TokenUsage{PromptTokens: 50, CompletionTokens: 340,
			CompletionTokensDetails: schema.CompletionTokensDetails{ReasoningTokens: 300}, TotalTokens: 390}, "{50 340}"},
		{"reasoning apart (Gemini)", schema.TokenUsage{PromptTokens: 50, CompletionTokens: 40,
			CompletionTokensDetails: schema.CompletionTokensDetails{ReasoningTokens: 300}, TotalTokens: 390}, "{50 340}"},
		{"reasoning without a total", schema.TokenUsage{PromptTokens: 50, CompletionTokens: 40,
			CompletionTokensDetails: schema.CompletionTokensDetails{ReasoningTokens: 300}}, "{50 40}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := schema.AssistantMessage("42", nil)
			u := tc.u
			answer.ResponseMeta = &schema.ResponseMeta{Usage: &u}
			var evs []termination.Event
			eino.Decode(withName("a", adk.EventFromMessage(answer, nil, schema.Assistant, "")), func(ev termination.Event) { evs = append(evs, ev) })
			got := describe(evs)
			if len(got) != 1 || got[0] != `final a "42" `+tc.want {
				t.Fatalf("events %q, want one final with usage %s", got, tc.want)
			}
		})
	}
}

// Decode maps each kind of agent event.
func TestDecode(t *testing.T) {
	tcMsg := schema.AssistantMessage("thinking", []schema.ToolCall{{ID: "1", Function: schema.FunctionCall{Name: "calc", Arguments: "1+1"}}})
	answer := schema.AssistantMessage("42", nil)
	answer.ResponseMeta = &schema.ResponseMeta{Usage: &schema.TokenUsage{PromptTokens: 7, CompletionTokens: 3}}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		ev   *adk.AgentEvent
		opts []eino.Option
		want []string
	}{
		{"ToolCalls", withName("a", adk.EventFromMessage(tcMsg, nil, schema.Assistant, "")), nil,
			[]string{`message a "thinking" {0 0}`, `tool_call a calc "1+1"`}},
		{"Answer", withName("a", adk.EventFromMessage(answer, nil, schema.Assistant, "")), nil,
			[]string{`final a "42" {7 3}`}},
		{"AnswerOfLoopingAgent", withName("a", adk.EventFromMessage(answer, nil, schema.Assistant, "")), []eino.Option{eino.WithFinalAgents("boss")},
			[]string{`message a "42" {7 3}`}},
		{"ToolResult", withName("a", adk.EventFromMessage(schema.ToolMessage("2", "1"), nil, schema.Tool, "calc")), nil,
			[]string{`tool_result a calc "2"`}},
		{"BreakLoop", &adk.AgentEvent{AgentName: "critic", Action: adk.NewBreakLoopAction("critic")}, nil,
			[]string{`stop critic "break loop"`}},
		{"Transfer", &adk.AgentEvent{AgentName: "a", Action: adk.NewTransferToAgentAction("b")}, nil,
			[]string{`handoff a -> b`}},
		{"Error", &adk.AgentEvent{AgentName: "a", Err: boom}, nil, []string{`error a ""boom`}},
		{"Nil", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []termination.Event
			eino.Decode(tc.ev, func(ev termination.Event) { got = append(got, ev) }, tc.opts...)
			if fmt.Sprint(describe(got)) != fmt.Sprint(tc.want) {
				t.Errorf("got %q, want %q", describe(got), tc.want)
			}
		})
	}
}

func withName(name string, ev *adk.AgentEvent) *adk.AgentEvent {
	ev.AgentName = name
	return ev
}

// A nil iterator is misuse: the run ends with invalid_input at once and the
// returned iterator carries one error.
func TestForwardNilIterator(t *testing.T) {
	stage, _ := newStage(t, "max_tool_calls: 3")
	_, run := stage.Start(context.Background())
	out := eino.Forward(run, nil)
	ev, ok := out.Next()
	if !ok || ev.Err == nil {
		t.Fatalf("first event = %+v, %v; want an error event", ev, ok)
	}
	if _, ok := out.Next(); ok {
		t.Fatal("iterator not closed after the error")
	}
	if f, ok := run.Wait().Cause.(termination.Failed); !ok || f.Reason != termination.FailInvalidInput {
		t.Errorf("cause = %#v, want Failed{invalid_input}", run.Wait().Cause)
	}
}

// An error with no text does not hide every later error from the run.
func TestHandlerEmptyErrorTextDoesNotHideLaterErrors(t *testing.T) {
	stage, seen := newStage(t, "max_tool_calls: 3")
	ctx, run := stage.Start(context.Background())
	h := eino.NewHandler(run)
	h.OnError(ctx, nil, errors.New(""))
	h.OnError(ctx, nil, errors.New("model unavailable"))
	run.Finish(nil)
	n := 0
	for _, ev := range seen.All() {
		if ev.Kind == termination.KindError {
			n++
		}
	}
	if n != 2 {
		t.Errorf("error events = %d, want 2", n)
	}
}

// The stop lands before the agent's next model or tool call, whatever the
// model's and the tools' latency: no call starts with a live context after
// the event that fired. (Run with -count=50 -race.)
func TestStopBeforeNextStep(t *testing.T) {
	parallel := adaptertest.Script{Input: runaway.Input, Repeat: true, Turns: []adaptertest.Turn{
		adaptertest.NewTurn("", 50, 5, "search", `{"query":"a"}`, "search", `{"query":"b"}`)}}
	for _, tc := range []struct {
		policy           string
		models, tools    int // calls that start with a live context
		modelMs, toolsMs int
		script           adaptertest.Script
	}{
		// The 4th tool_call fires: the 4th model call ran, its tool does not.
		{"max_tool_calls: 3", 4, 3, 0, 0, runaway},
		{"max_tool_calls: 3", 4, 3, 1, 0, runaway},
		{"max_tool_calls: 3", 4, 3, 0, 1, runaway},
		{"{stall: {repeats: 3}, max_tool_calls: 50}", 3, 2, 0, 0, runaway},
		{"{stall: {repeats: 3}, max_tool_calls: 50}", 3, 2, 2, 1, runaway},
		// Two parallel calls per turn: the second turn's second call fires;
		// neither of that turn's tools runs.
		{"max_tool_calls: 3", 2, 2, 0, 1, parallel},
	} {
		for _, streaming := range []bool{false, true} {
			name := fmt.Sprintf("%s/model=%dms/tool=%dms/calls=%d/streaming=%v", tc.policy, tc.modelMs, tc.toolsMs, len(tc.script.Turns[0].ToolCalls), streaming)
			t.Run(name, func(t *testing.T) {
				stage, _ := newStage(t, tc.policy)
				m := &scriptedModel{script: tc.script, latency: time.Duration(tc.modelMs) * time.Millisecond}
				tl := &countingTool{fixedTool: fixedTool{"search"}, latency: time.Duration(tc.toolsMs) * time.Millisecond}
				s := setup{streaming: streaming, tool: tl}
				out := drive(t, stage, tc.script.Input, s, func(ctx context.Context) adk.Agent { return newAgent(t, ctx, "assistant", m, s) }, m)
				if out.res.Outcome == termination.OutcomeSucceeded {
					t.Fatalf("cause = %#v, want a stop", out.res.Cause)
				}
				if out.calls != tc.models || tl.Live() != tc.tools {
					t.Errorf("model, tool calls with a live context = %d, %d; want %d, %d (%d, %d after the stop)",
						out.calls, tl.Live(), tc.models, tc.tools, out.calls-tc.models, tl.Live()-tc.tools)
				}
			})
		}
	}
}

// A caller that reads one event and leaves calls Stop: the agent makes no
// further model or tool call with a live context, and the run ends at once
// with Cancelled{external}.
func TestForwardLeaveEarlyWithStop(t *testing.T) {
	stage, _ := newStage(t, "max_tool_calls: 50")
	ctx, run := stage.Start(context.Background())
	ctx = eino.Context(ctx, run)
	m := &scriptedModel{script: runaway, latency: time.Millisecond}
	tl := &countingTool{fixedTool: fixedTool{"search"}}
	s := setup{tool: tl}
	runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: newAgent(t, ctx, "assistant", m, s)})
	events := eino.Forward(run, runner.Query(ctx, runaway.Input))
	if _, ok := events.Next(); !ok {
		t.Fatal("no first event")
	}
	run.Stop("caller left")
	models, tools := m.Calls(), tl.Live()
	done := make(chan termination.Result, 1)
	go func() { done <- run.Wait() }()
	select {
	case res := <-done:
		if c, ok := res.Cause.(termination.Cancelled); !ok || c.Reason != termination.CancelExternal {
			t.Errorf("cause = %#v, want Cancelled{external}", res.Cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not end within 5s of Stop")
	}
	if m.Calls() != models || tl.Live() != tools {
		t.Errorf("model, tool calls with a live context after Stop = %d, %d; want 0, 0", m.Calls()-models, tl.Live()-tools)
	}
}

// The Handler reports the model a callback's Config names (tool call ids
// are checked by the conformance suite).
func TestHandlerModelAndCallID(t *testing.T) {
	stage, seen := newStage(t, "max_tool_calls: 3")
	ctx, run := stage.Start(context.Background())
	h := eino.NewHandler(run)
	h.OnEnd(ctx, &callbacks.RunInfo{Component: components.ComponentOfChatModel},
		&model.CallbackOutput{Message: schema.AssistantMessage("hi", nil), Config: &model.Config{Model: "gpt-test"}})
	h.Finish(nil)
	evs := seen.All()
	if len(evs) != 1 || evs[0].Model != "gpt-test" {
		t.Fatalf("events = %+v, want one with model gpt-test", evs)
	}
}
