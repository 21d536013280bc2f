// Package eventlog records live runs as the JSON Lines event log of the
// contract (§1), so that production runs become a corpus for agentstop
// backtest and replay: every event a stage evaluates, one object per line,
// with the run's id in run and, on a run's first event, its parent's id in
// parent and its stage in stage; and, when a run ends, one end record
// (§1 "End records"):
//
//	{"kind":"end","run":ID,"parent":P,"stage":S,"time":T,"cause":{…},"outcome":O,
//	 "stopped_at":K,"events":N,"policy":"sha256:…"}
//
// saying how the run really ended — a fleet stop, a block, a timer, a
// parent's end — which its events alone cannot say. policy is "sha256:"
// and the hex digest of the enforced policy's canonical JSON
// (termination.Policy.Hash, given to the recorder as
// middleware.RunInfo.Policy), or "code" for a stage whose conditions are
// Go code (middleware.WithCondition). The end record is written the
// moment the run's cause is decided (the Writer's parts are
// middleware.StopRecorders), not when the loop returns: so a run ends in
// the log where it ended live, before the lines of the cascade that ends
// its descendants. Its outcome is then the cause's default (a
// WithTreatAsSuccess override comes at Finish, after the line is
// written). An end record is never dropped: when the buffer is full it
// waits beside it and is written after the run's events, with
// "dropped": N when events of the run were dropped. A run's first line in
// each file (after a rotation too) carries its stage and parent. A stage
// with shadow policies (middleware.WithShadowPolicy) has their verdicts in
// the end record's "shadow" (§5.2). Replay ends each run at its
// end record (agentstop replay -policies DIR, §4 "Recorded runs").
//
// # How the pieces fit
//
// A [Writer] is a middleware.Participant: give it to a stage with
// middleware.WithParticipant (beside the telemetry recorder; every
// participant a stage is given takes part in every run). Its parts copy each event into a
// bounded buffer and return: the loop never waits for the disk. One
// goroutine, owned by the Writer and ended by [Writer.Close], encodes the
// events and writes them through a buffered file, which it rotates by size
// (events.jsonl becomes events.jsonl.1, …, keeping WithMaxFiles old files).
// When the buffer is full an event is dropped, never waited for: drops are
// counted on the agentstop.eventlog.dropped counter, reported to
// otel.Handle, once per burst, with the count, and marked in the log
// itself: the next line written for a run that lost events carries
// "dropped": N, a field replay ignores (§1: unknown fields are ignored), so
// a reader of the log knows where events are missing. Close writes every event
// buffered before it and closes the file: a clean shutdown loses nothing.
// The package imports termination and middleware; nothing imports it but
// the user's wiring.
//
// # Without content
//
// [WithoutContent] keeps prompts, outputs and tool arguments out of the
// log while keeping what the policies need: a tool call's args become
// args_hash ([codec.ArgsHash], the canonical args' hash), a message's,
// stop's, error's or input's text becomes text_hash ([codec.TextHash]),
// a tool result's text and error become one text_hash
// ([codec.ResultHash]), and an error's text reads "error". Replay
// compares the hashes where it would compare the values, so stalls,
// repeated results, limits, budgets and error streaks replay as they ran;
// text_mention cannot fire on a hashed text, and a stream error's cause
// names no error text.
//
// # Choices
//
//   - An event without a time is stamped with the time it was recorded, so
//     that replay's clock (the events' times) sees the live run's.
//   - Only evaluated events are written: the events a run drains after its
//     stop are not, as replay would not evaluate them.
//   - A run that spans a rotation is in two files, each part a run of its
//     own to a backtest; choose WithMaxBytes so that rotations are rare, or
//     concatenate the files before a backtest.
//   - Tool arguments that are not JSON (a model's malformed arguments, cut
//     off at its output limit or with a quote left unescaped, which a live
//     run takes as they are) are written as their args_hash, as without
//     content: the event stays in the log, and replay compares the calls as
//     the live run compared them (the contract's args are JSON, and a line
//     holds a value or its hash, never text that is not JSON).
package eventlog
