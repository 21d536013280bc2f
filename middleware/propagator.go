package middleware

import (
	"context"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/propagation"

	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/termination"
)

// The propagator's fields: the parent run's id, and what is left of the
// tree limits over it (termination.Limits' text form).
const (
	// RunHeader carries the id of the run that makes a request: the
	// callee's runs are its children.
	RunHeader = "agentstop-run"
	// RemainingHeader carries what is left of the tree limits over the
	// calling run (in the form termination.Limits.String writes): without
	// a fleet, they become the callee's runs' tree limits.
	RemainingHeader = "agentstop-remaining"
	// TreeHeader carries the ids of the runs whose tree limits count the
	// calling run's events and are shared through the caller's fleet
	// (fleet.Local and fleet/redisfleet share trees), nearest first, space-separated: with a fleet that
	// shares trees, the callee's runs are charged to each of them.
	TreeHeader = "agentstop-tree"
)

// maxTreeHolders bounds the holder ids a propagator reads: a deeper list
// is malformed (each level of a tree that holds limits adds one).
const maxTreeHolders = 32

// maxRemainingHeader bounds the remaining-limits value a propagator reads:
// a longer one is malformed (the longest well-formed value is far shorter).
const maxRemainingHeader = 512

// remoteKey is the context key of a parent run extracted from a request.
type remoteKey struct{}

// remoteParent is a parent run in another process.
type remoteParent struct {
	id      string
	limits  termination.Limits
	holders []string // TreeHeader's ids
}

// Propagator returns the OpenTelemetry TextMapPropagator of trees of runs
// (§8). Inject writes the id of the run the context carries (RunHeader)
// and what is left of the tree limits that count its events, its own tree
// limits and its ancestors' (RemainingHeader; the run's own limits count
// its own events only and are not sent); a context without a run injects
// nothing. Extract reads them into the
// returned context: a run started under it ([Stage.Start]) is the remote
// run's child, with the propagated limits as its tree limits (the smaller
// of them and its stage's own, per resource) unless it joins the holders'
// trees through its fleet (below). When the named run is a live run of
// this process and both stages use the same fleet (fleet.Membership), the
// child is linked to it directly instead, as a context's child is: the
// parent's end and tree limits reach it exactly, and the propagated
// limits are not its own. A missing or malformed
// header is ignored (a malformed run id drops both; malformed limits drop
// the limits only): the propagator never fails a request.
//
// Compose it with the trace context so that otelhttp or otelgrpc carry
// both:
//
//	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
//		propagation.TraceContext{}, propagation.Baggage{}, middleware.Propagator()))
//
// With a fleet that shares trees (fleet.Local, fleet/redisfleet) on both sides, Inject also
// writes TreeHeader, the holders of the tree limits that count the
// caller's events, and the callee's runs are charged to them through the
// fleet (see the package documentation). Without one the callee's usage
// does not reach the caller's tree on its own: the caller charges what the
// callee reports with [Run.Charge] when the call returns. A malformed
// TreeHeader is dropped; the propagated limits then apply as without a
// fleet.
func Propagator() propagation.TextMapPropagator { return runPropagator{} }

type runPropagator struct{}

func (runPropagator) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	r := RunFromContext(ctx)
	if r == nil || carrier == nil {
		return
	}
	carrier.Set(RunHeader, r.id)
	if left := r.treeRemaining(); left.Has != 0 {
		carrier.Set(RemainingHeader, left.String())
	}
	if ids := r.sharedHolders(); ids != "" {
		carrier.Set(TreeHeader, ids)
	}
}

func (runPropagator) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	if carrier == nil {
		return ctx
	}
	id := carrier.Get(RunHeader)
	if !runid.Valid(id) {
		return ctx
	}
	p := remoteParent{id: id}
	if s := carrier.Get(RemainingHeader); s != "" && len(s) <= maxRemainingHeader {
		var l termination.Limits
		if l.Set(s) == nil {
			p.limits = l
		}
	}
	if s := carrier.Get(TreeHeader); s != "" {
		p.holders = parseHolders(s)
	}
	return context.WithValue(ctx, remoteKey{}, p)
}

// parseHolders reads TreeHeader's value: up to maxTreeHolders run ids,
// space-separated. Anything malformed drops the whole list (the remaining
// limits still apply).
func parseHolders(s string) []string {
	return validHolders(strings.Fields(s))
}

// validHolders returns ids, a list of holders from a request or a fleet,
// without repeats, or nil when it is empty, longer than maxTreeHolders or
// holds anything but run ids. It may reuse ids' array.
func validHolders(ids []string) []string {
	if len(ids) == 0 || len(ids) > maxTreeHolders {
		return nil
	}
	out := ids[:0]
	for _, id := range ids {
		if !runid.Valid(id) {
			return nil
		}
		if !slices.Contains(out, id) { // a holder named twice is joined once
			out = append(out, id)
		}
	}
	return out
}

func (runPropagator) Fields() []string { return []string{RunHeader, RemainingHeader, TreeHeader} }
