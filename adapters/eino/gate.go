package eino

import (
	"context"
	"sync"
	"time"

	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/schema"

	"github.com/agentstop/agentstop/middleware"
)

// StepGrace is how long a model or tool call of an agent run under
// [Context] waits, at most, for an event of an earlier step that never
// reaches [Forward] (a step of a custom agent that reports no event), once
// Forward is idle, before it goes ahead.
const StepGrace = 500 * time.Millisecond

// Context returns ctx prepared for [Forward]: run the agent (runner.Query,
// runner.Run, agent.Run) under it, and every model and tool call of the
// agent waits, before it starts, until Forward has evaluated the events of
// the agent's earlier steps. A stop therefore lands before the next model
// or tool call: the call starts with the run's context already cancelled
// (a provider's client fails it without sending the request; a tool sees
// ctx.Err()). ctx must be the context that middleware.Stage.Start
// returned.
//
// The wait is keyed to steps that report events: every model response and
// every tool result of an adk ChatModelAgent (alone, with sub-agents and
// transfers, or in workflow agents) is one agent event. Model and tool
// calls nested inside a tool (an agent used as a tool, a graph inside a
// tool) do not wait and are not waited for. A step that reports no event
// (a custom agent's own model call) holds the next step for at most
// [StepGrace] once Forward is idle.
//
// Context sets ctx's eino callback handlers to the ones Context needs (the
// global handlers still apply), like [Handler.Context]. Do not use it with
// a [Handler] on the same run.
func Context(ctx context.Context, run *middleware.Run) context.Context {
	if run == nil {
		return ctx
	}
	g := gateOf(run, true)
	if g == nil {
		return ctx
	}
	return callbacks.InitCallbacks(ctx, &callbacks.RunInfo{}, g)
}

// gates holds the gate of each run prepared with Context, until Forward of
// that run ends or the run stops without Forward.
var gates sync.Map // *middleware.Run -> *gate

func gateOf(run *middleware.Run, create bool) *gate {
	if v, ok := gates.Load(run); ok {
		return v.(*gate)
	}
	if !create {
		return nil
	}
	v, loaded := gates.LoadOrStore(run, newGate(run))
	g := v.(*gate)
	if !loaded {
		// A run that stops before (or without) Forward must not stay in
		// the map: its context is cancelled when it stops.
		context.AfterFunc(run.Context(), func() {
			g.mu.Lock()
			attached := g.attached
			g.mu.Unlock()
			if !attached {
				gates.CompareAndDelete(run, g)
			}
		})
	}
	return g
}

// gate holds a run's agent steps until Forward has evaluated the events of
// the steps before them. Callbacks count the steps that ended; Forward
// counts the events it evaluated.
type gate struct {
	run *middleware.Run

	mu         sync.Mutex
	models     int64 // model calls that ended (callbacks)
	tools      int64 // tool calls that ended (callbacks)
	seenModels int64 // model responses evaluated by Forward
	seenTools  int64 // tool results evaluated by Forward
	attached   bool  // Forward reads the run's events
	idle       bool  // Forward is waiting for the agent's next event
	ended      bool  // Forward has ended: nothing to wait for
	progress   chan struct{}
}

func newGate(run *middleware.Run) *gate {
	return &gate{run: run, progress: make(chan struct{})}
}

var _ callbacks.Handler = (*gate)(nil)

// stepKey marks the context of a model or tool call that the gate held:
// the value is topStep for the call itself and nestedStep for the
// components run inside it.
type stepKey struct{}

type stepMark int

const (
	topStep stepMark = iota + 1
	nestedStep
)

// changed wakes the steps waiting on the gate. Called with g.mu held.
func (g *gate) changed() {
	close(g.progress)
	g.progress = make(chan struct{})
}

// attach is called by Forward when it starts reading.
func (g *gate) attach() {
	g.mu.Lock()
	g.attached = true
	g.changed()
	g.mu.Unlock()
}

// setIdle records whether Forward is waiting for the agent's next event.
func (g *gate) setIdle(idle bool) {
	g.mu.Lock()
	g.idle = idle
	g.changed()
	g.mu.Unlock()
}

// evaluated counts an agent event that Forward has evaluated.
func (g *gate) evaluated(model, tool bool) {
	if !model && !tool {
		return
	}
	g.mu.Lock()
	if model {
		g.seenModels++
	}
	if tool {
		g.seenTools++
	}
	g.changed()
	g.mu.Unlock()
}

// end releases every waiting step for good.
func (g *gate) end() {
	g.mu.Lock()
	g.ended = true
	g.changed()
	g.mu.Unlock()
	gates.CompareAndDelete(g.run, g)
}

// wait holds a step until Forward has evaluated the events of every step
// that ended before it, the run has stopped, or Forward has ended.
func (g *gate) wait() {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		g.mu.Lock()
		if g.ended || (g.seenModels >= g.models && g.seenTools >= g.tools) {
			g.mu.Unlock()
			return
		}
		progress, idle := g.progress, g.idle || !g.attached
		g.mu.Unlock()
		var grace <-chan time.Time
		if idle {
			if timer == nil {
				timer = time.NewTimer(StepGrace)
			}
			grace = timer.C
		} else if timer != nil {
			timer.Stop()
			timer = nil
		}
		select {
		case <-progress:
		case <-g.run.Done():
			return
		case <-grace:
			// The events of the steps before never came: they do not
			// report events. Go on, and do not wait for them again.
			g.mu.Lock()
			g.models, g.tools = min(g.models, g.seenModels), min(g.tools, g.seenTools)
			g.mu.Unlock()
			return
		}
	}
}

func gated(info *callbacks.RunInfo) bool {
	return info != nil && (info.Component == components.ComponentOfChatModel || info.Component == components.ComponentOfTool)
}

// start holds a model or tool call that is not nested in another one.
func (g *gate) start(ctx context.Context, info *callbacks.RunInfo) context.Context {
	if !gated(info) {
		return ctx
	}
	if ctx.Value(stepKey{}) != nil {
		return context.WithValue(ctx, stepKey{}, nestedStep)
	}
	g.wait()
	return context.WithValue(ctx, stepKey{}, topStep)
}

// end counts a model or tool call that the gate held.
func (g *gate) stepEnded(ctx context.Context, info *callbacks.RunInfo) {
	if !gated(info) || ctx.Value(stepKey{}) != topStep {
		return
	}
	g.mu.Lock()
	if info.Component == components.ComponentOfChatModel {
		g.models++
	} else {
		g.tools++
	}
	g.mu.Unlock()
}

// OnStart implements callbacks.Handler.
func (g *gate) OnStart(ctx context.Context, info *callbacks.RunInfo, _ callbacks.CallbackInput) context.Context {
	return g.start(ctx, info)
}

// OnEnd implements callbacks.Handler.
func (g *gate) OnEnd(ctx context.Context, info *callbacks.RunInfo, _ callbacks.CallbackOutput) context.Context {
	g.stepEnded(ctx, info)
	return ctx
}

// OnError implements callbacks.Handler: a failed step reports no event of
// its own (the agent's error event follows).
func (g *gate) OnError(ctx context.Context, _ *callbacks.RunInfo, _ error) context.Context {
	return ctx
}

// OnStartWithStreamInput implements callbacks.Handler.
func (g *gate) OnStartWithStreamInput(ctx context.Context, info *callbacks.RunInfo, input *schema.StreamReader[callbacks.CallbackInput]) context.Context {
	if input != nil {
		input.Close()
	}
	return g.start(ctx, info)
}

// OnEndWithStreamOutput implements callbacks.Handler.
func (g *gate) OnEndWithStreamOutput(ctx context.Context, info *callbacks.RunInfo, output *schema.StreamReader[callbacks.CallbackOutput]) context.Context {
	if output != nil {
		output.Close()
	}
	g.stepEnded(ctx, info)
	return ctx
}
