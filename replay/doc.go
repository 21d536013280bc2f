// Package replay evaluates recorded runs as they ran live (contract §4,
// §8): a log of one run ([Log], or [Events] for events already decoded),
// a log of many runs with their trees, end and raise records ([Runs], and
// a [Runner] for a log too large to hold, fed one line at a time or with
// [Runner.Log]), under policies (one, or one a stage: [WithPolicies]) or
// conditions written in Go (one: [WithCondition]; or a stage's condition,
// tree limits and hold: [WithStages]). Events are evaluated by
// termination's Evaluator on the events' clock, exactly as a live stage
// evaluates them; what replay adds is the driving: the runs of a log, their parents and descendants, tree
// limits and their timeouts, holds and raises (on the events' clock, as
// live on the wall clock: an idle limit pauses from the held event's time
// to the raise record's, and a raise record past the hold timeout finds
// the hold ended by it), recorded ends, and the description of each
// result's evidence for people: [WithEvidence] hands the caller each
// result's [EvidenceEvent]s (kind, tool, the start of the text) as the
// result is made, beside it rather than in it, since they are no part of
// the result's JSON form.
//
// It owns the replay loops and nothing else: reading the bytes is package
// codec's (replay imports codec and termination, and internal/cascade for
// the causes of a cascade, nothing else of the module), and the
// evaluation is termination's. The agentstop replay and backtest commands
// call it.
package replay
