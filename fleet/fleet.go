package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentstop/agentstop/internal/label"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Errors that callers branch on. Every error of a Control method that is
// the caller's fault wraps ErrInvalid; an implementation that cannot reach
// its shared store wraps ErrUnavailable.
var (
	// ErrInvalid marks a malformed request: a missing or malformed
	// selector, an empty reason, a negative expiry. The CLI exits 2.
	ErrInvalid = errors.New("fleet: invalid request")
	// ErrUnavailable marks a fleet whose shared store cannot be reached.
	ErrUnavailable = errors.New("fleet: unavailable")
)

// Fleet is what a stage uses (middleware.WithFleet(f)): every run of the
// stage joins it when it starts and leaves it when it ends. Implementations are
// safe for concurrent use. [Local] is the in-process implementation;
// package fleet/redisfleet shares a fleet across processes.
type Fleet interface {
	// Join registers a run that is starting. run carries the id, stage,
	// labels and start time (the fleet fills Host and PID); budget is the
	// stage's fleet_budget, nil for none; r lets the fleet stop the run,
	// warn it and read its figures at any time until Leave.
	//
	// A non-nil cause means the run must end at once with it (the Member is
	// then nil and the run never joined): Skipped{blocked, detail "REASON
	// (by WHO)"} when a block matches, Skipped{fleet_budget_exhausted} when
	// the run's shared budget is exhausted for the current window,
	// Skipped{fleet_unavailable} when a fail-closed fleet cannot reach its
	// store, Failed{invalid_input} when budget disagrees with the shared
	// budget's stored limits or the run lacks the label the budget is keyed
	// by. Join must not wait on the network for longer than ctx allows, and
	// should not wait at all when it can answer from local state.
	//
	// run.Parent names the run's parent (§8), which may run in another
	// process (a request's context carried it). The middleware has already
	// refused a child of an ended parent of its own process; a fleet that
	// knows of a remote parent's end refuses the child with
	// Skipped{parent_ended, detail "STAGE ended: TAG"} naming that parent,
	// and ends a live child through Run.StopWith with Cancelled{parent} when
	// its remote parent ends (redisfleet does both; Local, one process,
	// has no remote parents).
	Join(ctx context.Context, run RunInfo, budget *termination.FleetBudget, r Run) (Member, termination.Cause)
	// Participant returns how the fleet takes part in a stage's runs
	// (middleware.WithFleet): Membership of the fleet itself, which an
	// implementation returns as Membership(f).
	Participant() middleware.Participant
}

// Run is how a fleet reaches one of its runs: *middleware.Run implements
// it (Membership passes the run itself). Its methods are safe to call from
// any goroutine, return quickly, never block on the run's loop, and do
// nothing once the run has ended. A nil Run is a run the fleet can neither
// stop, warn nor raise, whose figures come from Member.Progress.
type Run interface {
	// StopWith ends the run with c (Cancelled{external, detail} for an
	// operator's stop, BudgetExhausted{scope: fleet} when the shared budget
	// ran out) and reports whether this call stopped it: false when the
	// run had already stopped, so a stop can count it as already ended.
	StopWith(c termination.Cause) bool
	// Warn records a warning on the run (BudgetPressure{scope: fleet} when
	// another run pushed the shared budget past its pressure threshold).
	// It is in the run's Result at once and reaches the stage's warning
	// hook and recorder with the run's next event (or at its end).
	Warn(c termination.Cause)
	// Progress returns the run's running figures. A fleet reads them
	// through it when it lists or publishes the run, off the per-event
	// path, so the run does not hand them over with every event. It must
	// not call into the fleet.
	Progress() termination.Totals
	// Raise raises the limits of the run held at a limit (§3 hold) and
	// releases it; an error wrapping termination.ErrNotHeld when it is not
	// held (or cannot be). Held says what it is held at and since when,
	// ok false when it is not held.
	Raise(l termination.Limits) error
	Held() (c termination.Cause, since time.Time, ok bool)
}

// Member is a run's membership of a fleet, returned by Join.
type Member interface {
	// Spend charges one event's usage to the run's shared budget, if it
	// has one. It is on the per-event path: it must not allocate, block on
	// I/O or wait on the network (a networked fleet spends from a local
	// lease and settles in the background; redisfleet waits for its sync
	// loop only when a process spends a whole lease past its grants within
	// one round trip, which bounds the overshoot). warning is a
	// BudgetPressure{scope: fleet} when this spend crossed the pressure
	// threshold; stop is a BudgetExhausted{scope: fleet} when the shared
	// budget is exhausted: the run must end with it. Either is nil
	// otherwise. The Member does not also deliver them through the Run.
	Spend(u termination.Usage, cost float64) (warning, stop termination.Cause)
	// Progress reports the run's running figures for the registry, for a
	// run that joined without a Run: such a caller calls it after every
	// evaluated event, with the same constraints as Spend; a networked
	// fleet publishes the latest figures periodically. A run that joined
	// with a Run (as middleware's do) need not call it.
	Progress(p termination.Totals)
	// Leave is called once, when the run has ended, with its final result
	// (nil when the run ended without one). The run leaves the registry;
	// a networked fleet returns the unused part of its lease when this was
	// the last local run of a budget. Leave must not block for long.
	Leave(res *termination.Result)
}

// Control is what operators and the agentstop CLI use to see and steer a
// fleet. [Local] implements it for its own process; redisfleet across
// processes. Methods return errors wrapping [ErrInvalid] for a malformed
// request and [ErrUnavailable] when the shared store cannot be reached.
type Control interface {
	// Runs lists the live runs the selector matches; the zero Selector
	// lists every run. Sorted by start time, then id.
	Runs(ctx context.Context, sel Selector) ([]RunInfo, error)
	// Stop ends every matching run live when its process receives the
	// stop with Cancelled{external, detail "REASON (by WHO)"}, waits up to
	// req.Wait for the owning processes to confirm, and reports the
	// counts. Runs that start later are not affected.
	Stop(ctx context.Context, req StopRequest) (StopReport, error)
	// Block makes every new matching run end at once with Skipped{blocked,
	// detail "REASON (by WHO)"} until Unblock or the expiry. A block on the
	// same selector as an active one replaces it. Live runs go on.
	Block(ctx context.Context, req BlockRequest) (Block, error)
	// Unblock removes the active block whose selector equals sel (the
	// same run-id-less selector Block was given) and reports how many it
	// removed (0 or 1).
	Unblock(ctx context.Context, sel Selector) (int, error)
	// Blocks lists the active blocks, sorted by selector.
	Blocks(ctx context.Context) ([]Block, error)
	// Budgets lists the shared budgets of the current windows, sorted by
	// key and value.
	Budgets(ctx context.Context) ([]Budget, error)
	// Raise raises the limits of the held run req.RunID by req.Limits and
	// releases it (§3 hold), and waits up to req.Wait for its process to
	// confirm. RaiseReport.Outcome says what happened.
	Raise(ctx context.Context, req RaiseRequest) (RaiseReport, error)
}

// RunInfo is a live run as the registry shows it.
type RunInfo struct {
	ID    string `json:"id"`
	Stage string `json:"stage"`
	// Parent is the id of the run's parent run (docs/spec.md §8), "" for a
	// run without one. The parent may run in another process.
	Parent string `json:"parent,omitempty"`
	// Trees are the ids of the runs whose tree limits count this run's
	// events and are shared through the fleet (§8: the run itself when it
	// holds tree: limits, then the ancestors that do, in any process),
	// nearest first; empty for a run in no shared tree. A child started
	// elsewhere with only this run's id joins them (the fleet looks them
	// up here).
	Trees        []string          `json:"trees,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Host         string            `json:"host"`
	PID          int               `json:"pid"`
	Started      time.Time         `json:"started"`
	Updated      time.Time         `json:"updated"` // the last figures' time
	Iterations   int               `json:"iterations"`
	ToolCalls    int               `json:"tool_calls"`
	InputTokens  int64             `json:"input_tokens"`
	OutputTokens int64             `json:"output_tokens"`
	Cost         float64           `json:"cost"`
	// Held is what the run waits on while it is held at a limit (§3
	// hold), nil otherwise (raise.go).
	Held *Held `json:"held,omitempty"`
}

// SetProgress copies a run's figures into r.
func (r *RunInfo) SetProgress(p termination.Totals) {
	r.Iterations, r.ToolCalls = p.Iterations, p.ToolCalls
	r.InputTokens, r.OutputTokens, r.Cost = p.Tokens.InputTokens, p.Tokens.OutputTokens, p.Cost
}

// Selector names runs: every given field must match (a run id, a stage,
// each label); All matches every run and cannot be combined with the
// others. The zero Selector selects nothing for Stop and Block (Validate
// rejects it) and everything for Runs.
type Selector struct {
	RunID  string            `json:"run_id,omitempty"`
	Stage  string            `json:"stage,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	All    bool              `json:"all,omitempty"`
}

// IsZero reports whether s names nothing.
func (s Selector) IsZero() bool {
	return s.RunID == "" && s.Stage == "" && len(s.Labels) == 0 && !s.All
}

// Validate reports whether s is a usable selector: at least one of run id,
// stage, labels, or All alone; a run id of 32 hex digits; a stage name a
// run can have (as middleware.New checks it); snake_case label
// names and values of at most 256 bytes. The error wraps ErrInvalid and
// names what is missing or malformed.
func (s Selector) Validate() error {
	if s.IsZero() {
		return fmt.Errorf("%w: no selector: name a run id, a stage or a label, or select all runs", ErrInvalid)
	}
	if s.All && (s.RunID != "" || s.Stage != "" || len(s.Labels) > 0) {
		return fmt.Errorf("%w: all cannot be combined with a run id, stage or label", ErrInvalid)
	}
	if s.RunID != "" && !runid.Valid(s.RunID) {
		return fmt.Errorf("%w: run id %q is not 32 lowercase hex digits", ErrInvalid, s.RunID)
	}
	if s.Stage != "" && strings.TrimSpace(s.Stage) == "" {
		return fmt.Errorf("%w: stage name is blank", ErrInvalid)
	}
	if s.Stage != "" {
		// A stage no run can have (middleware.New checks the same rule)
		// would select nothing, silently.
		if err := label.ValidateStage(s.Stage); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	if err := label.ValidateLabels(s.Labels); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// Matches reports whether r is selected by s. The zero Selector matches
// every run (as Runs uses it); so does All.
func (s Selector) Matches(r RunInfo) bool {
	return s.MatchesRun(r.ID, r.Stage, r.Labels)
}

// MatchesRun is Matches on a run's parts.
func (s Selector) MatchesRun(id, stage string, labels map[string]string) bool {
	if s.All {
		return true
	}
	if s.RunID != "" && s.RunID != id {
		return false
	}
	if s.Stage != "" && s.Stage != stage {
		return false
	}
	for k, v := range s.Labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// String is the selector in the CLI's terms, fields in a fixed order:
// "-all", or "-run ID -stage NAME -label k=v ..." (labels sorted by name).
// Equal selectors give equal strings, so it also identifies a block.
func (s Selector) String() string {
	if s.All {
		return "-all"
	}
	var parts []string
	if s.RunID != "" {
		parts = append(parts, "-run "+s.RunID)
	}
	if s.Stage != "" {
		parts = append(parts, "-stage "+quoteIfNeeded(s.Stage))
	}
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		parts = append(parts, "-label "+quoteIfNeeded(k+"="+s.Labels[k]))
	}
	return strings.Join(parts, " ")
}

func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"'\\") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// Equal reports whether s and o select the same runs by the same fields.
func (s Selector) Equal(o Selector) bool {
	return s.RunID == o.RunID && s.Stage == o.Stage && s.All == o.All && maps.Equal(s.Labels, o.Labels)
}

// StopRequest asks a fleet to stop the runs a selector matches.
type StopRequest struct {
	Selector Selector
	Reason   string        // required: the runs' Cancelled.detail starts with it
	By       string        // who issued the stop; default USER@HOST of the process
	Wait     time.Duration // how long to wait for confirmations; 0: 2s
}

// Validate checks the request; the error wraps ErrInvalid.
func (r StopRequest) Validate() error {
	if err := r.Selector.Validate(); err != nil {
		return err
	}
	if strings.TrimSpace(r.Reason) == "" {
		return fmt.Errorf("%w: a stop needs a reason", ErrInvalid)
	}
	if r.Wait < 0 {
		return fmt.Errorf("%w: wait must be >= 0, got %s", ErrInvalid, r.Wait)
	}
	return nil
}

// StopReport is what a stop achieved. Matched = Stopped + AlreadyEnded +
// Unconfirmed.
type StopReport struct {
	Matched      int `json:"matched"`       // runs the selector matched
	Stopped      int `json:"stopped"`       // confirmed stopped by this command
	AlreadyEnded int `json:"already_ended"` // matched, but had ended or stopped when their process received it
	Unconfirmed  int `json:"unconfirmed"`   // matched, no confirmation within the wait
	// Descendants counts the live runs under the stopped ones (any depth,
	// not matched themselves) that the stop ended with Cancelled{reason:
	// parent} (§8): Local those of its process, redisfleet those of every
	// process that confirmed them within the wait.
	Descendants int `json:"descendants,omitempty"`
}

// BlockRequest asks a fleet to block new runs.
type BlockRequest struct {
	Selector Selector      // a stage and/or labels, or All; never a run id
	Reason   string        // required: the skipped runs' detail starts with it
	By       string        // who issued it; default USER@HOST of the process
	Expire   time.Duration // 0: until Unblock; otherwise > 0
}

// Validate checks the request; the error wraps ErrInvalid.
func (r BlockRequest) Validate() error {
	if err := r.Selector.Validate(); err != nil {
		return err
	}
	if r.Selector.RunID != "" {
		return fmt.Errorf("%w: a block applies to runs that have not started: select a stage or labels, not a run id", ErrInvalid)
	}
	if strings.TrimSpace(r.Reason) == "" {
		return fmt.Errorf("%w: a block needs a reason", ErrInvalid)
	}
	if r.Expire < 0 {
		return fmt.Errorf("%w: expire must be > 0, got %s", ErrInvalid, r.Expire)
	}
	return nil
}

// Block is an active block.
type Block struct {
	Selector Selector  `json:"selector"`
	Reason   string    `json:"reason"`
	By       string    `json:"by"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires,omitzero"` // zero: until unblocked
}

// Cause is the Skipped{blocked} cause of a run the block rejects.
func (b Block) Cause() termination.Skipped {
	return termination.Skipped{Reason: termination.SkipBlocked, Detail: detail(b.Reason, b.By)}
}

// detail is the detail of a fleet stop's Cancelled or a block's Skipped
// cause: "REASON (by WHO)", or REASON alone when by is empty.
func detail(reason, by string) string {
	if by == "" {
		return reason
	}
	return reason + " (by " + by + ")"
}

// Cause is the Cancelled{external} cause of a run the stop ends: detail
// "REASON (by WHO)", or REASON alone when By is empty (the fleets fill it
// in first).
func (r StopRequest) Cause() termination.Cancelled {
	return termination.Cancelled{Reason: termination.CancelExternal, Detail: detail(r.Reason, r.By)}
}

// Budget is a shared budget in its current window, as Budgets lists it.
type Budget struct {
	Key         string                  `json:"key"`   // "stage" or "label:NAME"
	Value       string                  `json:"value"` // the stage name or label value
	Policy      termination.FleetBudget `json:"policy"`
	WindowStart time.Time               `json:"window_start"`
	WindowEnd   time.Time               `json:"window_end"`
	Used        termination.Usage       `json:"used_tokens"`
	Cost        float64                 `json:"used_cost"`
	// Exhausted is the resource whose limit was reached in this window
	// (new runs are skipped until WindowEnd); empty while it is open.
	Exhausted termination.Resource `json:"exhausted,omitempty"`
	// Pressure reports whether usage crossed the pressure threshold.
	Pressure bool `json:"pressure,omitempty"`
	Runs     int  `json:"runs"` // live runs sharing it (that the listing process knows of)
}

// BudgetID identifies a shared budget: the key ("stage" or "label:NAME")
// and its value for a run (the stage name or the label's value).
type BudgetID struct {
	Key   string
	Value string
}

// BudgetID returns the shared budget the run uses under b, or a
// Failed{invalid_input} cause when the run lacks the label b is keyed by.
func (r RunInfo) BudgetID(b *termination.FleetBudget) (BudgetID, termination.Cause) {
	name, isLabel := b.Label()
	if !isLabel {
		return BudgetID{Key: b.Key, Value: r.Stage}, nil
	}
	v, ok := r.Labels[name]
	if !ok {
		return BudgetID{}, termination.Failed{Reason: termination.FailInvalidInput,
			Err: fmt.Sprintf("fleet_budget is keyed by label %q, which the run does not have (start it with middleware.WithLabels)", name)}
	}
	return BudgetID{Key: b.Key, Value: v}, nil
}

// MismatchCause is the Failed{invalid_input} cause of a run whose
// fleet_budget (mine) disagrees with the stored one of the shared budget
// id, or nil when they agree.
func (id BudgetID) MismatchCause(mine, stored termination.FleetBudget) termination.Cause {
	m := mine.Mismatch(stored)
	if m == "" {
		return nil
	}
	return termination.Failed{Reason: termination.FailInvalidInput,
		Err: fmt.Sprintf("shared budget %s=%s: %s", id.Key, id.Value, m)}
}
