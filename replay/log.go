package replay

import (
	"errors"
	"io"
	"time"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/termination"
)

// Log evaluates c over the JSON Lines events in r, with the events' times
// as the clock, exactly as a live stage would evaluate them. It stops
// reading at the first cause: the lines after the event that stopped the
// run are not read, so they are neither evaluated nor checked, and a log of
// millions of events that stops early returns at once. Errors before that
// point are *codec.DecodeErrors naming the line. The Result has no stage.
//
// Without [WithLenient], a truncated last line is an error wrapping
// codec.ErrTruncated. Of the other options, [WithEvidence] applies; the
// options of a log of many runs ([WithStage], [WithPolicies], [WithIndex])
// are ignored. Nil options are ignored.
func Log(c termination.Condition, r io.Reader, opts ...Option) (termination.Result, error) {
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
	for {
		e, err := dec.Next()
		if errors.Is(err, io.EOF) {
			return result(false), nil
		}
		if cfg.lenient && errors.Is(err, codec.ErrTruncated) {
			return result(true), nil
		}
		if err != nil {
			return termination.Result{}, err
		}
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
