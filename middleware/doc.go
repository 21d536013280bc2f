// Package middleware wraps a live agent loop, evaluates a termination policy
// on every event it produces, and stops the loop when a condition fires,
// while the loop's consumer keeps receiving the same events in the same
// order.
//
// It is the live side of the contract in docs/spec.md of the repository:
// events (§1) are evaluated against conditions and policies (§3) as replay
// (§4) evaluates a recorded log, every run ends with one cause of §2, runs
// are recorded as §5 describes, the hot path meets the budgets of §6,
// [WithFleet](f) joins the fleet control of §7, and
// runs form trees (§8).
//
// # Stages and runs
//
// A [Stage] is a named, configured guard ([New] with [WithPolicy],
// [WithCondition], ...). It is safe for concurrent use and serves any number
// of runs. Each execution of the loop is a [Run], started with
// [Stage.Start]:
//
//	ctx, run := stage.Start(ctx)       // the loop must run under ctx
//	for ev := range middleware.Range(run, loop(ctx), decode) {
//		...                            // same events, same order
//	}
//	res := run.Wait()                  // why it stopped
//
// Like errgroup.WithContext, Start returns a derived context. It keeps the
// caller's values, reports the earlier of the caller's deadline and the
// stage's timeout as its Deadline, is cancelled when the run stops, and
// context.Cause(ctx) is the typed
// [termination.Cause], recoverable with errors.As. A loop that honours its
// context therefore ends as soon as a condition fires, the run's timer
// fires (a timeout, or an idle limit: no event for the policy's idle:),
// [Run.Stop] is called, or the caller's context ends. A run has one timer
// for its timeouts and idle limits, armed for the next deadline; events do
// not touch it (an idle deadline that an event moved on is re-armed when
// the timer finds nothing due). An idle limit is no Deadline of the
// context: an active run may go on.
//
// # Hold
//
// A stage whose policy has hold: {timeout: D} ([WithHold]) holds a run
// that reaches a limit — max_iterations, max_tool_calls, a token or cost
// budget, its own or a tree's — instead of stopping it: the event that
// reached the limit is delivered, the limit's cause is a warning (the
// result's Warnings, a span event, the OnWarning hook), and the run takes
// no next event until [Run.Raise] raises its limits (every limit that
// holds it, its own and, for a tree limit, the holder's, which releases
// every held run of the tree; the raise must name the resource of each),
// [Run.Stop], the loop's end ([Run.Finish]) or D passing end it with the
// limit's cause. The wait is in the one place
// every consumer path evaluates through, before the next event: Observe
// blocks, Range and ForwardSeq do not yield, Forward's forwarder does not
// forward the item it has received (so the producer's next send blocks).
// A timeout keeps counting while held; an idle limit pauses and resumes
// where it was, its deadline moved on by the wait — at a tree limit, the
// idle limits of every held run of the tree, the holder's and its
// descendants', from the moment the tree holds them until its release
// (termination.Evaluator.PauseIdle and ResumeIdle). [Run.Held] says what a run waits on and since when; a
// [HoldRecorder] is told of holds, releases and raises. A raise for a run
// that is not held, or that misses a limit that holds it, changes nothing
// and returns an error wrapping termination.ErrNotHeld.
//
// # Four ways in
//
//   - [Range] and [RangeEach] guard a channel from the consumer's side:
//     `for item := range middleware.Range(run, in, decode)` receives,
//     evaluates and yields each item in the ranging goroutine, with no
//     goroutine and no channel hop of its own — the cheapest guard for a
//     channel loop. When a condition fires, the item that fired it is still
//     yielded, then the loop ends; a stop from outside ends it when the
//     producer, told by the cancelled context, closes its channel; a body
//     that breaks out ends the run (Cancelled{reason: external}, or
//     NaturalCompletion right after the final answer). When the loop ends
//     early, the rest of the input is drained in the same goroutine, so the
//     range statement returns once the producer has closed its channel (at
//     once for a producer that honours the run's context, at the latest
//     after the drain timeout). Range waits for the producer as a bare
//     range loop does: a producer that ignores its context holds it.
//   - [Forward] and [ForwardEach] wrap a channel: one goroutine, owned by the
//     run, copies items to the returned channel. When a condition fires, the
//     item that fired it is still delivered, then the output is closed, the
//     rest of the input is drained (counted in Result.Drained, not
//     forwarded) so the producer never blocks, and draining gives up after
//     the drain timeout ([WithDrainTimeout], default 5s). A consumer that
//     reads until the output closes receives every item that was
//     evaluated, however the run stopped and however long it is busy — a
//     supervisor's [Run.Stop] included: the item evaluated before the stop
//     is still handed over, and is never given up on a wall clock while
//     the consumer may still read. A consumer that leaves early must say
//     so with [Run.Leave]: the run then ends at once (NaturalCompletion
//     right after the final answer, Cancelled{reason: external} otherwise)
//     and [Run.Wait] returns as soon as the producer has closed its
//     channel (at the latest after the drain timeout). Without Leave, Wait
//     waits for the consumer until the caller's context ends; a stopped
//     run whose last item waits longer than the drain timeout reports it
//     once to the recorder, naming the stage, the run and Run.Leave.
//     Prefer Forward to Range when the guarded stream must stay a channel
//     (it is selected on, or handed on), or when the consumer must not wait
//     for a producer that may ignore its context: Forward ends its output
//     when the run stops, whatever the producer does, and drains in its own
//     goroutine, at the cost of a second channel hop per item.
//   - [ForwardSeq] and [ForwardSeqEach] wrap an iter.Seq2 inline, with no
//     goroutine: the loop runs in the consumer's goroutine, so a loop that
//     ignores its context cannot be interrupted between items; a loop that
//     honours it is. Breaking out of the range loop on an error or right
//     after the final answer ends the run as the stream would; any other
//     break is the consumer leaving (Cancelled{reason: external}).
//   - [Run.Observe] is the synchronous core for callback frameworks: call it
//     from the callback, and call [Run.Finish] when the loop returns.
//
// One run, one way in. A run evaluates one stream, and the path that
// consumes it (Forward, ForwardEach, ForwardSeq, ForwardSeqEach, Range or
// RangeEach, ranged once) finishes the run when the stream ends, as Finish
// does for a loop that calls Observe. A second path on the same run —
// Forward called twice, Range after Forward, an iterator ranged a second
// time, a path on a run that Finish has finished — panics at once with a
// message that names the run and both paths, as sync.WaitGroup panics when
// it is reused, and takes nothing from its own stream; so does [Run.Finish]
// while a path still owns the stream (it would drain what the path has not
// handed over), except after [Run.Leave] on a Forward run, when it waits
// for the forwarder as [Run.Wait] does. The misuse is in the code, not in
// the data: it shows on the first run that takes it, and the path that
// owns the run goes on with nothing lost (a run that recorded the misuse
// as its cause would drain that path's items instead). Observe,
// [ObserveEach] and [Run.ObserveError] take no stream: they may report
// events beside a path (an error the loop survives), and once the run has
// stopped they report the stop (stop is true) instead of evaluating.
//
// Decode functions turn a framework item into a [termination.Event]; a
// returned event with Kind 0 means the item carries no event; any other
// invalid event (an unknown Kind, negative usage, a negative or non-finite
// cost) ends the run with Failed{reason: invalid_input}, as replay would. A
// typed nil Cause (a nil *termination.Custom from a CauseFunc condition, or
// wrapped in the error passed to Finish) is no cause. A panic in a
// decode function or a predicate ends the run with Failed{reason: panic}
// (and is reported to the recorder) instead of crashing the loop; a panic in
// a hook (WithOnWarning, WithTreatAsSuccess) is recovered and reported, and
// the run goes on. Misuse — a nil channel, iterator or decode function — ends the
// run at once with Failed{reason: invalid_input}; a second way in on one
// run panics (above).
//
// # Results
//
// Every run ends with exactly one cause. When no condition fires the end of
// the stream decides: an error from the iterator, an error passed to
// Finish, or a last event of kind error is Failed{reason: stream_error}
// (an error that wraps a termination.Cause, such as a framework's own
// iteration limit mapped by an adapter, keeps that cause); a cancelled caller context is
// Cancelled{reason: context}; anything else is NaturalCompletion. The
// [termination.Result] carries the cause, the outcome (overridable with
// [WithTreatAsSuccess]), the counts and the warnings (budget and count
// pressure, stall warn_at), which are also handed to [WithOnWarning] as they
// happen, with the run that warned, so the loop can tell that agent to wrap
// up.
//
// # Shadow policies
//
// [WithShadowPolicy] tries a candidate policy on live traffic before it is
// enforced (§5.2): each run evaluates it, with an evaluator of its own, on
// every event the run evaluates, beside the enforced policy, and nothing it
// does acts on the run: no stop, no hold, no warning, no hook, no
// cancelled context. The run's [termination.Result] says, in Shadow, for
// each candidate by name, the cause it would have stopped the run with and
// the event it would have stopped at (nil when it would not have); the
// recorder records it at the run's end (package telemetry: span attributes
// and agent.stage.shadow.stops). A candidate that would have stopped the
// run is fed no more, and one sees exactly the events the run evaluated:
// after the enforced policy's stop there are none. A shadow policy holds no
// timeout, idle, tree, hold or fleet_budget (an error from [New] naming the key):
// it judges the run's own events. Each one costs at most one more
// evaluation per event and allocates nothing.
//
// # Fleets
//
// With [WithFleet](f) every run joins a fleet (package fleet) when it starts:
// it gets an id ([Run.ID]) and is visible, with its labels ([WithLabels])
// and figures, to operators, who can stop it (Cancelled{reason: external,
// detail: "REASON (by WHO)"}) or block new runs (Skipped{reason: blocked}).
// A policy's fleet_budget (or [WithFleetBudget]) makes runs with the same
// key share one budget per window: each event's usage is charged
// in-process, without allocating or waiting on the network; when the
// shared budget runs out every sharing run stops with
// BudgetExhausted{scope: fleet}, and new runs are skipped until the next
// window. A fleet warning raised by another run (BudgetPressure{scope:
// fleet}) is in the run's result at once and reaches [WithOnWarning] and
// the recorder with the run's next event (or as it ends, when none comes).
// Labels are checked at Start (snake_case names, values of at most 256
// bytes): bad ones end the run with Failed{reason: invalid_input}. Without a fleet a fleet_budget is
// ignored; every run has an id all the same.
//
// # Trees of runs
//
// Agents delegate, and a run can be another run's child (docs/spec.md §8).
// A run started under a context that descends from a live run's context
// ([Stage.Start] with the parent's ctx) is that run's child; so is one
// started with [WithParent], or under a context into which [Propagator]
// extracted a parent from an incoming request. [Run.Parent] names the
// parent, and Result.Parent and the recorder's RunInfo.ParentRunID carry
// it; every run has an id ([Run.ID], 128 random bits). A child is a child
// however it was started: when its parent is a live run of this process,
// it is linked to it directly (cascade and tree limits, exactly, as
// below) — always by context and by WithParent, and by a propagated
// request when both stages use the same fleet (fleet.Membership; without a
// shared fleet such a request counts as one from another process, below).
//
// A run's lineage is its own: the parent link and its live children in
// an intrusive list, made only for runs that have a parent here or have
// had a child (a finished child unlinks itself, so a parent of 10,000
// finished children holds nothing for them). Tree limits are evaluated
// by the module's internal/tree: a run whose events some tree limits count
// has a tree node among
// its parts (the seam, below), which evaluates its events under the
// limits of the run and its holders in one order across the tree, holds
// the tree at a limit, and shares it through a fleet. No goroutine is
// started per child.
//
//   - Cascade: when a run ends, for whatever cause, its live descendants
//     end with Cancelled{reason: parent, detail: "STAGE ended: TAG"} naming
//     the run whose end started the cascade (a grandchild names the
//     planner, not the researcher between them), before the run's own
//     context is cancelled, so that their contexts' causes are that one. A
//     child that starts after its parent ended ends at once as
//     Skipped{reason: parent_ended}. A run's end never ends its parent.
//   - Tree limits: a policy's tree: key ([WithPolicy]) or
//     [WithTreeLimits] gives every run of the stage limits over itself and
//     its descendants. They are termination conditions with scope tree,
//     evaluated by one more evaluator per holder, fed by every event of the
//     subtree: an event is evaluated by its run's own condition, then,
//     with the run's lock held, by the tree limits of the run and of its
//     ancestors in this process, nearest first (one lock and one
//     evaluation per holder, no allocation). A tree limit that fires ends
//     the holder with its cause and the descendants with
//     Cancelled{reason: parent}, the run whose event crossed it included
//     (its Observe reports the stop). A tree pressure warning is recorded
//     on the holder and every live descendant at once and reaches each
//     one's [WithOnWarning] hook and recorder with its next event (the
//     run whose event raised it: at once), or as it ends when none comes.
//     A tree timeout runs from a timer armed when the holder starts. The holder's Result carries the
//     tree's totals beside its own (Result.Tree: iterations, tool calls,
//     tokens and cost of the run and all its descendants, what other
//     processes spent under a shared tree included): the figures a tree
//     cause names; nil for a run that holds no tree limits.
//   - [Run.Remaining] is what is left of the run's own and its trees'
//     limits; [Run.Charge] charges usage spent on the run's behalf
//     elsewhere (a remote agent's, reported when the call returns) to its
//     trees.
//   - Across processes, [Propagator] carries the run's id and what is left
//     of its tree limits. Without a fleet the remote child takes them as
//     tree limits of its own (the smaller of them and its stage's), and
//     the caller charges the callee's reported usage with [Run.Charge]:
//     the remote child stops within what was left when it was called, and
//     the caller's tree stops once the charges reach its limits; the
//     caller's end reaches the remote child only as its request's
//     cancellation (Cancelled{reason: context}). With a fleet that
//     carries trees across processes (fleet/redisfleet), the remote
//     child is registered with its parent's id, ends with Cancelled{reason:
//     parent} when its parent ends in any process (a fleet stop
//     included), and is refused with Skipped{reason: parent_ended} when
//     its parent has already ended.
//   - Tree limits shared through a fleet: when the stage's fleet shares
//     trees (fleet.Local and fleet/redisfleet do), a run that holds tree
//     limits shares them through it from its start (§8,
//     clarified 2026-11-28: whenever it has tree: limits, not only once
//     its id leaves the process), and the fleet's registry lists, with
//     every run of the tree, the holders of the shared trees that count
//     its events (fleet.RunInfo.Trees). The Propagator names them too
//     (TreeHeader). A run started in another process joins each holder's
//     tree, however it was started: from a request that names them, or
//     with [WithParent] and only its parent's id (a job queue), whose
//     holders the fleet looks up (one round trip with fleet/redisfleet,
//     at the child's start). A run started from a
//     request joins instead of taking the propagated limits as its
//     own (Remaining reports them, less what its subtree has spent since
//     the call; a fleet that does not know one of the holders shares
//     nothing with it, and the propagated limits are then the run's own,
//     as without a fleet): every event of its subtree is
//     spent through the fleet after the tree limits of this process, with
//     no lock held, and the holder's process is charged what the other
//     processes spent, so that the limit fires in the holder with its own
//     cause and the cascade ends the tree everywhere. A process that finds
//     the tree's limits spent ends its runs of the tree at once with
//     Cancelled{reason: parent} naming the holder. The overshoot bound is
//     the fleet's. What sharing from the start costs: one holding per run
//     that holds tree limits, at its start, and, when the holding needs
//     the subtree's usage (fleet/redisfleet's; not fleet.Local's), per
//     event of its subtree one more lock of the holder's tree and one
//     spend from the holding (no allocation, no I/O). A run with no tree limits over it, or whose
//     stage has no fleet, pays nothing for it.
//
// Lock order: a parent's run lock before its children's, a run's lock
// before a tree's; no code holding a tree's lock takes a run's (warnings
// copy the children out first). A run's end is decided, recorded (the
// StopRecorders) and cascaded to its live descendants in one critical
// section, with their locks held from before its end is recorded: in an
// event log every run ends where it ended live, whatever the scheduler
// does (a child's own stop or event is either before its parent's end
// record, or finds the child ended by the cascade), and a run's context
// is cancelled only once its descendants have ended.
//
// # The seam: participants
//
// Everything that watches or limits a run besides its own evaluator takes
// part in it through one small seam ([Participant], go-grpc-middleware's
// Reporter is the model): a participant given with [WithParticipant] joins
// every run when it starts and returns its [Part] of the run, which is
// told the run's events, warnings, errors and end, in order, under the
// run's lock. A Part may also be a [Starter] (it acts once the run has its
// context: a fleet registers the run, and may refuse it), a [Spender] (it
// is given each event's usage without the lock: a fleet's shared budget),
// a [StopRecorder] (told the moment the run's cause is decided, before its
// descendants' cascade and before Finish: the event log writes the end
// record then, so that in the log each run ends where it ended live), a
// [HoldRecorder] (holds, releases, raises) and an [Ender] (told without
// the lock once the result is final: a fleet member leaves). Package
// telemetry's Recorder (spans and metrics), package eventlog's Writer (the
// event log that replay and backtest read) and package fleet's Membership
// are participants; so are the stage's own shadow policies
// ([WithShadowPolicy]), which come first. The middleware watches nothing
// by default, so it needs no OpenTelemetry SDK. [RunInfo] ([Run.Info])
// carries what a participant records of a run: its stage, ids, parent and
// the enforced policy's hash (termination.Policy.Hash) or "code", which
// the end record names.
package middleware
