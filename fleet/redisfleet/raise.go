package redisfleet

import (
	"context"
	"strings"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/internal/fleetmetrics"
	"github.com/agentstop/agentstop/internal/operator"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/termination"
)

// Raise (§7, §3 hold): the Control stores and publishes a raise record
// naming one run and the amounts (P{raises}:ID, kept for the wait and a
// lease); the process that holds the run applies it through the run
// (fleet.Run.Raise) and confirms it on P{raises}:ack:ID ("r ID": raised, "n ID": not
// held). Like stops, the stored raises are re-read every second and after
// every reconnect (readRaises): a process that missed the message (its
// subscription was down) applies a raise that names one of its runs when
// it reads it back, while the record lasts. Each process applies a raise
// once: it remembers the raise ids it has applied or answered until their
// records expire, and checks them on the message and on the re-read. The
// registry shows a held run's Held from its next published figures
// (figuresEvery).

// Raise implements fleet.Control.
func (c *Control) Raise(ctx context.Context, req fleet.RaiseRequest) (fleet.RaiseReport, error) {
	if err := req.Validate(); err != nil {
		return fleet.RaiseReport{}, err
	}
	if req.By == "" {
		req.By = operator.Name()
	}
	if req.Wait == 0 {
		req.Wait = operator.Wait
	}
	runs, err := c.Runs(ctx, fleet.Selector{RunID: req.RunID})
	if err != nil {
		return fleet.RaiseReport{}, err
	}
	if len(runs) == 0 {
		return fleet.RaiseReport{Outcome: fleet.RaiseUnknown}, nil
	}
	rep := fleet.RaiseReport{Held: runs[0].Held}
	id := runid.New()
	ttl := c.cfg.lease + req.Wait
	_, _, err = c.publish(ctx, "raise", c.k.raises(), c.k.raise(id), id, ttl,
		recordBody{Selector: fleet.Selector{RunID: req.RunID}, By: req.By, Limits: req.Limits.String()})
	if err != nil {
		return fleet.RaiseReport{}, c.unavailable(fleetmetrics.OpStop, err)
	}
	deadline := time.Now().Add(req.Wait)
	for {
		lctx, cancel := c.timeout(ctx)
		acks, err := c.client.LRange(lctx, c.k.raiseAck(id), 0, -1).Result()
		cancel()
		if err == nil {
			for _, a := range acks {
				switch kind, rid, _ := strings.Cut(a, " "); {
				case rid != req.RunID:
				case kind == "r":
					rep.Outcome = fleet.RaiseRaised
					return rep, nil
				case kind == "n":
					rep.Outcome = fleet.RaiseNotHeld
					return rep, nil
				}
			}
		}
		if len(c.gone(ctx, []string{req.RunID})) == 1 {
			rep.Outcome = fleet.RaiseUnknown // it ended before its process applied the raise
			return rep, nil
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			rep.Outcome = fleet.RaiseUnconfirmed
			return rep, nil
		}
		time.Sleep(min(25*time.Millisecond, time.Until(deadline)))
	}
}

// handleRaise applies a published raise to the run it names, if it is
// one of this process's, once, and confirms it.
func (f *Fleet) handleRaise(ctx context.Context, p string) {
	r, err := parseRecord(p)
	if err != nil {
		f.metrics.Error(fleetmetrics.OpInternal)
		return
	}
	if !f.holds(r.Selector.RunID) {
		return
	}
	// Only what an operator stored counts, as for a stop. When the server
	// cannot say, the next re-read of the stored raises applies it.
	if !f.verify(ctx, f.k.raise(r.ID), p, true) {
		return
	}
	f.applyRaise(ctx, r, false)
}

// applyRaise applies raise r to the run it names, if that is a run of
// this process and this process has not applied or answered r already
// (from the message or from a re-read of the stored raises), and confirms
// it: "r ID" raised, "n ID" not held (or ended otherwise). A raise for a
// run of another process changes nothing and is not confirmed here. Read
// back from the store (stored), it applies only to a hold that began before
// the raise was issued: the message would have found a run held later not
// held, and a raise never reaches a later hold.
func (f *Fleet) applyRaise(ctx context.Context, r record, stored bool) {
	var l termination.Limits
	if err := l.Set(r.Limits); err != nil || r.Selector.RunID == "" {
		f.metrics.Error(fleetmetrics.OpInternal)
		return
	}
	f.mu.Lock()
	var hit *member
	for _, m := range f.runs {
		if m.info.ID == r.Selector.RunID {
			hit = m
		}
	}
	_, done := f.raises[r.ID]
	if hit == nil || done {
		f.mu.Unlock()
		return
	}
	// Applied once: remembered until the stored record has expired (a
	// re-read no longer returns it), then forgotten (readRaises).
	forget := max(r.Expires, r.At+f.cfg.lease.Milliseconds())
	f.raises[r.ID] = forget
	f.mu.Unlock()
	ack := "n " + hit.info.ID
	if hit.run != nil && !(stored && f.heldSince(hit.run, r.At)) && hit.run.Raise(l) == nil { // not held or ended otherwise
		ack = "r " + hit.info.ID
		hit.mu.Lock()
		hit.dirty = true // its Held is gone from the registry at the next sync
		hit.mu.Unlock()
	}
	cctx, cancel := f.timeout(ctx)
	defer cancel()
	ttl := (f.cfg.lease + time.Minute).Milliseconds()
	if err := ackScript.Run(cctx, f.scripts, []string{f.k.raiseAck(r.ID)}, ttl, ack).Err(); err != nil {
		f.fail(fleetmetrics.OpStop)
	}
}

// readRaises re-reads the stored raises that have not expired and applies
// those that name a run of this process and that it has not applied yet
// (applyRaise): a raise published while this process was disconnected
// reaches its run after the reconnect. Nothing is read while this process
// has no run.
func (f *Fleet) readRaises(ctx context.Context) {
	f.mu.Lock()
	none := len(f.runs) == 0
	f.mu.Unlock()
	if none {
		return
	}
	raises, now, err := f.read(ctx, f.k.raises())
	if err != nil {
		f.fail(fleetmetrics.OpStop)
		return
	}
	// The raises this process has applied or answered are forgotten once
	// their records have expired, by the clock of the node that keeps
	// them (on a cluster, {raises}'s own node, not {blocks}'s).
	f.mu.Lock()
	for id, forget := range f.raises {
		if forget < now { // strictly past: a re-read at now may still return a record expiring at now
			delete(f.raises, id)
		}
	}
	f.mu.Unlock()
	for _, r := range raises {
		if r.Kind == "raise" && f.holds(r.Selector.RunID) {
			f.applyRaise(ctx, r, true)
		}
	}
}

// heldSince reports whether run is held at a limit since at (server
// milliseconds) or later: held after a raise issued at at.
func (f *Fleet) heldSince(run fleet.Run, at int64) bool {
	_, since, held := run.Held()
	return held && (since.UnixMicro()+f.offset.Load())/1000 >= at
}

// holds reports whether the run is one of this process's.
func (f *Fleet) holds(runID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.runs {
		if m.info.ID == runID {
			return true
		}
	}
	return false
}

// sameHeld reports whether two registry views of a hold are the same.
func sameHeld(a, b *fleet.Held) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Limit == b.Limit && a.Since.Equal(b.Since)
}
