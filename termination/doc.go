// Package termination is the domain of agentstop: what an agent loop did
// (Event), why a stage run stopped (Cause), when it should stop (Condition,
// Policy) and what a run amounts to once it has stopped (Result).
//
// It implements the contract in docs/spec.md of the repository: events are
// §1, causes and their termination_cause tags §2, conditions and the policy
// file §3, the replay result §4, run labels and fleet budgets §7, trees of
// runs §8. "The contract" below means that file.
//
// # How the pieces fit
//
// An agent loop is seen as a stream of framework-neutral [Event] values.
// The fields that only the lines of a recorded log carry (the run, its
// parent and stage, dropped lines, content hashes) sit behind one pointer,
// Event.Log ([LogFields]), nil for a live loop's events, so that an Event,
// copied on every hand-over, stays small; its JSON form keeps them flat. An
// adapter turns a framework's own events into this type; package
// middleware evaluates them live. The rooms around this package import it,
// never the other way: package codec reads and writes the file formats
// (JSON Lines event logs with their end and raise records, the JSON form
// of causes, the content hashes of a log recorded without content), and
// package replay evaluates recorded logs as a live stage would, one run or
// a tree of many. [Policy.Hash] is the enforced policy's hash an end
// record names.
//
// A [Condition] is an immutable description of when to stop. The policy
// file's keys are Go structs, each a Condition itself: [IterationLimits]
// and [ToolCallLimits] (per tool; both with an early warning),
// [TimeLimits] (a timeout, and idle: no event for a while),
// [TokenLimits], [CostLimit], [StallLimits] (repeats in a window, the
// same result again whatever the args, cycles, tools left out),
// [ErrorLimits] (streaks, totals, ignored tools) and [CompletionSignals]
// (text_mention, function_call, handoff, source_match, stop_message).
// [CauseFunc] is a condition written in Go, [TreeLimits] makes limits
// cover a run's descendants, and the combinators [AnyOf] and [AllOf] nest:
// AnyOf(IterationLimits{Limit: 25}, TokenLimits{Total: 50_000, Pressure:
// 0.8}). A [Policy] is the same thing read from YAML or JSON with
// [ParsePolicy]; its [Policy.Condition] is an ordinary Condition.
//
// Conditions hold no run state. Each run gets an [Evaluator] with fresh state
// ([NewEvaluator]), so one Condition or Policy serves any number of
// concurrent runs with no reset calls. The Evaluator takes events one at a
// time, keeps the running counts ([Totals]), asks the condition tree whether
// anything fired, and applies the precedence of the contract (docs/spec.md
// §3, "Several causes on one event") when several causes fire on the same
// event. Once it has stopped, or once the stream has ended,
// [Evaluator.Result] reports the [Result]. Its Evidence names the events
// that made the cause (§3): the conditions keep event indices in the
// windows they already have, and the list is built only when a cause
// fires, so evidence costs a run nothing until it stops. A replay can
// also describe those events (kind, tool, the start of the text:
// replay.WithEvidence), noting them as they are read and keeping only
// those the conditions still hold ([Evaluator.HeldEvidence]).
//
// Tree limits (§8) are the same count, budget and timeout conditions with
// scope tree: [TreeLimits] in Go, the policy's top-level tree: key
// ([Policy.Tree]). The run that holds them evaluates them with one more
// Evaluator fed by its own events and its descendants'; package middleware
// does this live, and package replay over a log of many runs (events with
// run and parent), one Result per run. [Limits] are amounts left
// ([Evaluator.Remaining]), in a text form a propagator carries
// ([Limits.Set]).
//
// Every finished run has exactly one [Cause]. Causes are plain Go types
// (Completed, MaxToolCallsReached, Timeout, ..., the table of §2) that
// also implement error, so a cause carried by context.Cause is recovered
// with errors.As. Each has a low-cardinality [Cause.TagValue], the
// termination_cause attribute of spans and metrics; [Tag] applies a stage's
// allow-list of custom reasons, so the set of emitted values stays closed
// (docs/spec.md §2). Causes have a JSON
// form with a "$kind" discriminator, a built-in cause's type name (package
// codec: MarshalCause, UnmarshalCause; user-defined cause types join it
// with RegisterCause); the JSON form of a [Result] writes its causes in it.
//
// # Names that differ from the contract's condition list
//
// The contract (docs/spec.md §2 and §3) names both a cause and a condition "Timeout" and "All". In Go
// one package cannot hold both, so the causes keep the contract's $kind names
// (they travel in JSON and through errors.As) and the conditions are
// [TimeLimits] and the constructor [AllOf]; [AnyOf] matches for symmetry.
//
// # Choices where the contract is silent
//
// docs/spec.md leaves these open; this package decides them as follows.
//
//   - Trees (§8, replay.Runs): a holder stopped by its own event has that
//     event as StoppedAt and evidence; one stopped by a descendant's event
//     (or a tree timeout) has StoppedAt 0 and no evidence, as for any stop
//     from outside its stream. A cascade ends the descendants depth first,
//     in the order they started. A parent named by a run's first event
//     that is not in the log (a caller in another service) is recorded
//     only. A late child's Skipped{parent_ended} has the detail "STAGE
//     ended: TAG" of its parent's end. Every run of a replay holds the
//     policy's tree: limits, as every run of a live stage does.
//   - A final event never fires or warns a limit (the contract, §3). What
//     a final's usage reached is acted on at the next event that is not a
//     final, whatever its kind: the budget fires there, the pressure
//     warning is recorded there (with grace 0 the grace stop fires there
//     too). Evidence then names the final first.
//   - token_plateau with repeats N looks at the last N iterations that carry
//     usage: N values, N-1 ratios, like the other stall signals, where N equal
//     things are N values.
//   - A timeout fires on a clock tick, never on an event: live from the
//     timer, in replay before the first event at or past the deadline. Both
//     stop after the last event evaluated (StoppedAt is its index, 0 if
//     none), so live and replay agree. A live event that arrives after the
//     deadline before the timer has fired is not evaluated either: the
//     evaluator ticks first. Elapsed is the limit, live as in replay (a
//     live timer fires a little past it; Result.Duration has the time
//     measured), so that a recorded run replays with the cause it had live.
//     With several timeouts, replay ticks at each deadline in turn.
//   - A stop forced from outside the event stream (Stop, a cancelled
//     context) has StoppedAt 0.
//   - Budget thresholds compare used/limit with the fraction, so a decimal
//     threshold is reached exactly when usage equals it (0.07*100 rounds
//     above 7 in binary floating point; 7/100 does not). Cost, a sum of
//     decimal amounts in binary, reaches a limit within a relative 1e-9:
//     ten events costing 0.1 exhaust a limit of 1.
//   - Tool arguments are equal when encoding/json decodes them to equal
//     values: a duplicated key keeps its last value and invalid UTF-8 reads
//     as U+FFFD, as in encoding/json.
//   - max_iterations fires on the first message event past the limit; if a
//     final event took the count past it, that message's count is N+2.
//   - Event JSON keys are case-sensitive: "Kind" or "Text" is an unknown
//     field, ignored (a framework's extra must not fire text_mention), and
//     "Input_Tokens" is an unknown usage key, an error.
//   - Negative usage or cost, or a cost that is not finite, is bad input in
//     a log; live events are summed as they come, saturating at the limits.
//   - A policy file holds one YAML document; a second one is an error, not
//     a silently ignored set of guards.
//   - Fired lists what fired: the causes of the stopping event (or timer
//     tick), or the cause given to Stop. A stream that ends by itself fires
//     nothing, so its Fired is empty ("fired": []), like its StoppedAt is 0.
//   - Count pressure (max_iterations or max_tool_calls with pressure) warns
//     on the first message (tool_call) at which count/limit reaches the
//     threshold; if a final event took the count there, the next message
//     warns, with its count, possibly on the event the limit fires. Count
//     limits do not appear in Result.Budgets (utilization is tokens and
//     cost).
//   - A per-tool limit, like the overall one, fires on every call past it;
//     in an all: the child latches on the first.
//   - stall.warn_at: the warning's repeats is warn_at, not the count. When
//     several stall conditions reach warn_at on one event, the first in the
//     policy's order gives the run's one stall warning.
//   - stall.cycle looks at tool_call events only: messages and results
//     between the calls neither break nor extend a cycle.
//   - errors.consecutive: a failed tool_result neither extends nor breaks
//     the error-event row (it belongs to the other streak), and an error
//     event does not break the failed results' row. errors.ignore_tools
//     matches a tool_result by its own tool field.
//   - stall.same_result keeps at most 64 calls open waiting for their
//     results (the oldest is dropped past that, as telemetry's pairing
//     does), so a loop that never reports results cannot grow a live run.
//   - Evidence is kept as event indices in the conditions' windows: the
//     stall windows hold an index beside each key, the error streaks the
//     last consecutive failures, errors.total the run's failures up to
//     total (it names them all when it fires); they grow with the events
//     seen, up to those bounds, never per event once full.
//   - A hashed value (args_hash, text_hash) never equals a plain one: a log
//     is recorded with content or without it, not both.
//   - Evidence: invalid input names the invalid event; a CauseFunc cause
//     names the firing event; when a streak longer than
//     errors.consecutive fires again (in an all:), the last consecutive
//     failures; for a grace stop whose threshold a final reached, the final
//     too. Stop and a stream that ends by an iterator error list none.
//   - When several causes fire on one event, Fired lists them in precedence
//     order, so Fired[0] is the reported cause. Causes of one kind keep the
//     contract's inner orders: BudgetExhausted and BudgetPressure by
//     resource, the overall MaxToolCallsReached before a per-tool one,
//     StallDetected by signal; others keep firing order.
//   - A policy's empty list (handoff: [], sources: []) is an error rather
//     than "every name"; so is an empty non-nil list in a
//     CompletionSignals, whose AnyHandoff watches every target.
//     Condition.Validate and ParsePolicy report ranges with the same
//     messages: the parser only reads types and shapes, and maps the
//     condition's own validation error onto the key and line written.
//   - idle (TimeLimits.Idle): Elapsed is the limit live too, as the contract
//     writes the cause (Timeout{limit: D, elapsed: D, idle: true}), so that
//     a live idle stop and its replay agree, as a timeout's. Live, a run has
//     one timer for its timeouts and idle limits together, armed for the
//     next deadline: an event only notes its arrival time (read once per
//     event, as a timeout already did), and a timer that fires before a moved idle deadline finds
//     nothing due and is re-armed. An idle limit is not part of the run
//     context's Deadline (an active run may go on). In replay, Duration of
//     an idle stop runs to the idle deadline. Several idle limits tick in
//     turn, shortest first, like several timeouts; on a tie between a
//     timeout and an idle limit, the timeout ticks alone first.
//   - hold: {timeout: D} ([Policy.Hold], [Evaluator.SetHold]): when every
//     cause that fired on an event is one [Hold.Holds] (max_iterations,
//     max_tool_calls — a per-tool limit included —, a token or cost budget,
//     the run's own or a tree's; never a grace stop, a fleet budget, stall,
//     errors, completion, idle or timeout), the Evaluator records the
//     first cause as a warning and holds instead of stopping ([Evaluator.
//     Held]). [Evaluator.Raise] adds amounts (the §2 resource names, as a
//     [Limits] with no time; a tool_calls amount raises per-tool limits
//     too) to the run's limits and releases it; [Evaluator.EndHold] ends it
//     with the held cause, Fired, StoppedAt and Evidence of the event that
//     reached the limit, as without hold. An event evaluated while held is
//     counted and keeps the hold at its first limit (live, the stage lets
//     none through; a tree's other runs may have one under way). On the
//     wall clock the hold timeout is on the run's one timer, idle limits
//     pause while held and resume where they were, timeouts keep counting.
//     A live raise fires what fell due before it first: after the hold
//     timeout (or a timeout), though its timer has not fired yet, it finds
//     the run ended. On the events' clock (replay) the hold lasts from the
//     held event's time to the time [Evaluator.Advance] brings (a raise
//     record's): a hold timeout due by then ends it there (or a timeout
//     due before it), and otherwise a raise resumes the idle limits there, the time paused added to their base
//     (the run's last timed event stays its last, for Duration). A hold
//     outside the evaluator (a tree's, at which every live run of the tree
//     is held) pauses them through [Evaluator.PauseIdle] and
//     [Evaluator.ResumeIdle]; a run held at both resumes when the last
//     hold ends.
//     A policy whose hold: has no limit of its own to hold at
//     (max_iterations, max_tool_calls, token_budget or cost_budget, at
//     any depth or under tree:) holds only the tree limits a remote parent
//     propagates (§8); Policy.HoldsNothingOfItsOwn says so, and the
//     commands that load one warn.
//   - stall.any_args: true without same_result is an error; any_args: false
//     is accepted anywhere. stall.ignore_tools matches a tool_call and a
//     tool_result by their own tool field: a result of an ignored tool is
//     not paired with any call.
//   - max_tool_calls.per_tool above limit is an error; equal to limit is
//     accepted (both fire on the same call, the overall one first).
//   - Huge limits cost nothing up front: stall windows and cycles keep
//     memory in proportion to the events seen, not to the setting. Causes outside the
//     contract's precedence list (All, Custom, user types) rank after Timeout;
//     All ranks as the last cause it holds.
package termination
