package importer

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// otlpRun is a run being put together from a trace.
type otlpRun struct {
	id, parent string
	agent      int32 // its agent span's record, -1 for a trace without one
	start      int64
	items      []int32 // the records of its model turns and tools
}

// finish maps every trace once the input has ended and hands the runs on,
// in the order they started.
func (rd *otlpReader) finish() error {
	if len(rd.nodes) == 0 {
		return &EntryError{File: rd.file, Err: fmt.Errorf("no spans: not OTLP traces (ExportTraceServiceRequest objects with resourceSpans)")}
	}
	var runs []*otlpRun
	var path []int32
	for t := range rd.traces {
		for _, i := range rd.traces[t].nodes {
			rd.link(i)
		}
		for _, i := range rd.traces[t].nodes {
			path = rd.resolve(i, path[:0])
		}
		rd.markNests(t)
		runs = rd.traceRuns(t, runs)
	}
	slices.SortStableFunc(runs, func(a, b *otlpRun) int {
		return cmp.Compare(a.start, b.start)
	})
	for _, r := range runs {
		if err := rd.out.Run(Run{ID: r.id, Parent: r.parent, Events: rd.runEvents(r)}); err != nil {
			return err
		}
	}
	return nil
}

// link finds a span's parent node.
func (rd *otlpReader) link(i int32) {
	n := &rd.nodes[i]
	n.parentIdx, n.agent, n.modelAnc = -1, -1, -1
	if !n.hasParent {
		return
	}
	p, ok := rd.byID[spanKey{rd.traces[n.trace].id, n.parent}]
	if ok && p != i {
		n.parentIdx = p
	} else {
		n.orphan = true // its parent is not in the file
	}
}

// resolve works out, for a span and the spans above it that are not
// resolved yet, the nearest agent above it, whether its chain ends at a
// missing parent, and whether a model turn with usage is above it. Each
// span is resolved once (linear); a cycle of parent links is cut where it
// closes, as if that parent were missing.
func (rd *otlpReader) resolve(i int32, path []int32) []int32 {
	cur := i
	for cur >= 0 && rd.nodes[cur].state == 0 {
		rd.nodes[cur].state = 1
		path = append(path, cur)
		cur = rd.nodes[cur].parentIdx
	}
	if cur >= 0 && rd.nodes[cur].state == 1 {
		last := &rd.nodes[path[len(path)-1]]
		last.parentIdx, last.orphan = -1, true
	}
	for k := len(path) - 1; k >= 0; k-- {
		n := &rd.nodes[path[k]]
		n.state = 2
		if n.parentIdx < 0 {
			continue
		}
		p := &rd.nodes[n.parentIdx]
		if p.kind == kindAgent {
			n.agent = n.parentIdx
			continue
		}
		n.agent, n.orphan, n.modelAnc = p.agent, p.orphan, p.modelAnc
		if p.kind == kindModel {
			n.modelAnc = n.parentIdx
		}
		n.ancUsage = p.ancUsage || (p.kind == kindModel && p.usage)
	}
	return path
}

// markNests marks, below each agent, the spans that have a model turn
// (with usage) under them: the outer spans of nested model turns (a
// framework's model span around an instrumented client's). Each span is
// marked once per flag, so the walk is linear.
func (rd *otlpReader) markNests(t int) {
	for _, i := range rd.traces[t].nodes {
		m := &rd.nodes[i]
		if m.kind != kindModel {
			continue
		}
		usage := m.usage
		for p := m.parentIdx; p >= 0 && rd.nodes[p].kind != kindAgent; p = rd.nodes[p].parentIdx {
			n := &rd.nodes[p]
			if n.modelDesc && (n.descUsage || !usage) {
				break
			}
			n.modelDesc = true
			n.descUsage = n.descUsage || usage
		}
	}
}

// counts reports whether a model turn is one: in a nest of model spans,
// the innermost ones that carry usage count, or, when none of the nest
// carries usage, the innermost ones.
func (n *otlpNode) counts() bool {
	if n.descUsage {
		return false
	}
	return n.usage || (!n.ancUsage && !n.modelDesc)
}

// traceRuns makes the runs of one trace: one per agent span, and one for
// the model turns and tools that are under no agent span.
func (rd *otlpReader) traceRuns(t int, runs []*otlpRun) []*otlpRun {
	tr := &rd.traces[t]
	byAgent := map[int32]*otlpRun{}
	root := int32(-1) // the trace's top agent: what a span whose parent is missing joins
	for _, i := range tr.nodes {
		n := &rd.nodes[i]
		if n.kind != kindAgent || n.agent >= 0 {
			continue
		}
		if root < 0 || rd.topBefore(i, root) {
			root = i
		}
	}
	for _, i := range tr.nodes {
		if n := &rd.nodes[i]; n.kind == kindAgent {
			rec := &rd.recs[n.rec]
			r := &otlpRun{id: agentRunID(rec), agent: n.rec, start: rec.start}
			byAgent[i] = r
			runs = append(runs, r)
		}
	}
	var traceRun *otlpRun
	runOf := func(n *otlpNode) *otlpRun {
		switch {
		case n.agent >= 0:
			return byAgent[n.agent]
		case n.orphan && root >= 0:
			return byAgent[root]
		}
		if traceRun == nil {
			traceRun = &otlpRun{id: hex.EncodeToString(tr.id[:]), agent: -1, start: rd.recs[n.rec].start}
			runs = append(runs, traceRun)
		}
		return traceRun
	}
	for _, i := range tr.nodes {
		n := &rd.nodes[i]
		switch {
		case n.kind == kindAgent:
			if n.agent >= 0 || (n.orphan && root >= 0 && i != root) {
				byAgent[i].parent = runOf(n).id
			}
		case n.kind == kindModel && !n.counts():
			rd.out.Skip("nested model span")
		case n.kind == kindModel || n.kind == kindTool:
			if n.kind == kindTool && n.modelAnc >= 0 {
				rd.holdsTool(n.modelAnc, n.rec)
			}
			r := runOf(n)
			r.items = append(r.items, n.rec)
			r.start = min(r.start, rd.recs[n.rec].start)
		}
	}
	return runs
}

// holdsTool notes that model turn m's span holds tool record t.
func (rd *otlpReader) holdsTool(m, t int32) {
	rec := &rd.recs[rd.nodes[m].rec]
	if rec.toolInside < 0 || rd.recs[t].start < rd.recs[rec.toolInside].start {
		rec.toolInside = t
	}
}

// topBefore reports whether agent span a is a better top of its trace
// than b: one whose chain ends at a root rather than at a missing parent,
// then the earlier one.
func (rd *otlpReader) topBefore(a, b int32) bool {
	na, nb := &rd.nodes[a], &rd.nodes[b]
	if na.orphan != nb.orphan {
		return !na.orphan
	}
	return rd.recs[na.rec].start < rd.recs[nb.rec].start
}

func agentRunID(rec *otlpRecord) string {
	id := hex.EncodeToString(rec.id[:])
	if rec.name != "" {
		return rec.name + "-" + id
	}
	return id
}

// runEvents maps the model turns and tools of one run to events, in time
// order: a model turn is a message at its end (or, when its span holds
// the tools it asked for, just before the first of them); a tool a
// tool_call at its start and a tool_result at its end.
func (rd *otlpReader) runEvents(r *otlpRun) []termination.Event {
	type timed struct {
		at    int64
		order int
		ev    termination.Event
	}
	source := "agent"
	if r.agent >= 0 && rd.recs[r.agent].name != "" {
		source = rd.recs[r.agent].name
	}
	last, lastToolStart := int32(-1), int64(-1<<63)
	for _, k := range r.items {
		rec := &rd.recs[k]
		if rd.nodes[rec.node].kind == kindTool {
			lastToolStart = max(lastToolStart, rec.start)
		} else if last < 0 || rec.end >= rd.recs[last].end {
			last = k
		}
	}
	evs := make([]timed, 0, 2*len(r.items))
	for _, k := range r.items {
		rec := &rd.recs[k]
		if rd.nodes[rec.node].kind == kindTool {
			call := termination.Event{Kind: termination.KindToolCall, Tool: rec.name, CallID: rec.callID,
				Args: argsOf(rec.args), Time: nanoTime(rec.start)}
			res := termination.Event{Kind: termination.KindToolResult, Tool: rec.name, CallID: rec.callID,
				Text: rec.result, Err: rec.err, Time: nanoTime(rec.end)}
			evs = append(evs, timed{rec.start, 3*int(k) + 1, call}, timed{rec.end, 3*int(k) + 2, res})
			continue
		}
		at, order := rec.end, 3*int(k)
		if t := rec.toolInside; t >= 0 && rd.recs[t].start < at {
			at, order = rd.recs[t].start, 3*int(t)
		}
		ev := termination.Event{Kind: termination.KindMessage, Source: source, Model: rec.model, Usage: rec.usage, Time: nanoTime(at)}
		if k == last && !rec.requestsTool && lastToolStart <= rec.end && rec.toolInside < 0 {
			ev.Kind = termination.KindFinal
		}
		evs = append(evs, timed{at, order, ev})
	}
	slices.SortStableFunc(evs, func(a, b timed) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return a.order - b.order
	})
	out := make([]termination.Event, len(evs))
	for i, e := range evs {
		out[i] = e.ev
	}
	if len(out) == 0 {
		// An agent with no model turn and no tool: its span says it ran.
		out = append(out, termination.Event{Kind: termination.KindInput, Source: source, Time: nanoTime(r.start)})
	}
	return out
}

func nanoTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }
