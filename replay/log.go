package replay

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/termination"
)

// Log evaluates c over the JSON Lines events in r, a log of one run, with
// the events' times as the clock, exactly as a live stage would evaluate
// them. It stops reading at the first cause: the lines after the event that
// stopped the run are not read, so they are neither evaluated nor checked,
// and a log of millions of events that stops early returns at once. Errors
// before that point are *codec.DecodeErrors naming the line. The Result
// has no stage.
//
// A recorded run ends at its end record (§4 "Recorded runs"): when c has
// not stopped the run before it, the Result is the recorded end (its
// cause, outcome, stopped_at and events) with FromRecord set, and Live
// names its tag. A raise record raises nothing: a Condition holds no run
// (hold: is a policy's). A log of many runs (a second run id) is an error
// naming the line: [Runs] and a [Runner] replay those, with their trees,
// holds and raises ([WithCondition] gives them a condition written in Go). An invalid c is an error, as is a nil r.
//
// Without [WithLenient], a truncated last line is an error wrapping
// codec.ErrTruncated. Of the other options, [WithEvidence] applies; the
// options of a log of many runs ([WithStage], [WithPolicies],
// [WithCondition], [WithStages], [WithIndex]) are ignored. Nil options are
// ignored.
func Log(c termination.Condition, r io.Reader, opts ...Option) (termination.Result, error) {
	switch {
	case r == nil:
		return termination.Result{}, errors.New("replay: nil reader")
	case c != nil:
		if err := c.Validate(); err != nil {
			return termination.Result{}, fmt.Errorf("replay: the condition: %w", err)
		}
	}
	cfg := configOf(opts)
	ev := termination.NewEvaluator(c, time.Time{})
	var notes *evidenceNotes
	if cfg.describe != nil {
		notes = new(evidenceNotes)
	}
	result := func(truncated bool) termination.Result {
		res := ev.Result()
		res.Truncated = truncated
		if notes != nil {
			cfg.describe(res, notes.describe(res.Evidence))
		}
		return res
	}
	dec := codec.NewDecoder(r)
	if ev.ComparesArgs() {
		// Tool calls' args are hashed from the raw bytes as they are
		// decoded, not again when they are evaluated.
		dec.HashArgs()
	}
	var run oneRun
	for {
		entry, err := dec.NextEntry()
		if errors.Is(err, io.EOF) {
			return result(false), nil
		}
		if cfg.lenient && errors.Is(err, codec.ErrTruncated) {
			return result(true), nil
		}
		if err != nil {
			return termination.Result{}, err
		}
		if rec := entry.Record; rec != nil {
			if err := run.check(rec.Run, rec.Line); err != nil {
				return termination.Result{}, err
			}
			if rec.Kind == codec.RecordEnd {
				res := run.fromRecord(ev.Result(), rec)
				if notes != nil {
					cfg.describe(res, notes.describe(res.Evidence))
				}
				return res, nil
			}
			continue // a raise record: nothing holds the run
		}
		e := entry.Event
		if err := run.check(e.Logged().Run, dec.Line()); err != nil {
			return termination.Result{}, err
		}
		run.note(&e)
		key, keyed := dec.ArgsKey()
		_, stopped := ev.ObserveKeyed(e, key, keyed)
		if notes != nil {
			notes.note(ev, &e)
		}
		if stopped {
			return result(false), nil
		}
	}
}

// Option configures a replay: [Log], [Runs] and [NewRunner].
type Option interface {
	apply(*config)
}

type config struct {
	lenient  bool
	stage    string                                    // WithStage
	describe func(termination.Result, []EvidenceEvent) // WithEvidence
	stages   func(string) (*termination.Policy, bool)  // WithPolicies
	cond     termination.Condition                     // WithCondition
	code     func(string) (Stage, bool)                // WithStages
	index    *codec.Index                              // WithIndex
}

// configOf resolves opts, nil ones ignored.
func configOf(opts []Option) config {
	cfg := config{stage: "replay"}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	return cfg
}

type lenientOption struct{}

func (lenientOption) apply(c *config) { c.lenient = true }

// WithLenient makes a replay of a truncated log (its last line ends inside
// an event, with no newline after it: an agent killed while writing)
// evaluate the events before that line and return the result with
// Truncated set, instead of an error. A replay that stops before the
// truncated line never reads it, lenient or not. Every other bad line is
// still an error. The default is strict.
func WithLenient() Option { return lenientOption{} }

// oneRun is what Log keeps of the run it replays: its id, to refuse a log
// of many, and the time of its first timed event, for a recorded end's
// duration.
type oneRun struct {
	id    string
	seen  bool
	first time.Time
}

// check refuses a line of another run than the log's first line's.
func (o *oneRun) check(id string, line int) error {
	if !o.seen {
		o.id, o.seen = id, true
		return nil
	}
	if id == o.id {
		return nil
	}
	// (Lines with a run after lines without one, or the other way round,
	// are the Decoder's error: codec.ErrMixedRuns.)
	return &codec.DecodeError{Line: line, Err: fmt.Errorf("a line of run %q after lines of run %q: "+
		"replay.Log reads a log of one run; replay.Runs and a replay.Runner replay a log of many", id, o.id)}
}

// note notes an event's time.
func (o *oneRun) note(ev *termination.Event) {
	if o.first.IsZero() && !ev.Time.IsZero() {
		o.first = ev.Time
	}
}

// fromRecord is res, the condition's result as of the end record rec (it
// has not stopped the run), ended as the record says, as Runs ends a run
// its policy has not stopped before its end record.
func (o *oneRun) fromRecord(res termination.Result, rec *codec.Record) termination.Result {
	res = recordedEnd(res, rec, o.first)
	res.Live, res.TerminationCause = termination.Tag(rec.Cause, nil), ""
	return res
}

// recordedEnd is res, a run's result as of its end record rec, ended as
// the record says (§4 "Recorded runs": what happened after the last line
// is not in the log): its cause, outcome, stopped_at and events, and a
// duration from first, the run's first timed event, to the record. The
// totals are the events'.
func recordedEnd(res termination.Result, rec *codec.Record, first time.Time) termination.Result {
	res.Cause, res.Outcome = rec.Cause, rec.Outcome
	res.StoppedAt, res.Events = rec.StoppedAt, rec.Events
	res.Fired, res.Evidence = nil, nil
	if _, natural := rec.Cause.(termination.NaturalCompletion); !natural {
		res.Fired = []termination.Cause{rec.Cause}
	}
	if !first.IsZero() && !rec.Time.IsZero() && !rec.Time.Before(first) {
		res.Duration, res.Untimed = rec.Time.Sub(first), false
	}
	res.FromRecord = true
	return res
}
