package termination

import (
	"fmt"
	"math"
)

// Validate reports what makes e unusable as an event, in the terms of the
// contract's event table: a missing or invalid Kind, negative usage, or a
// cost that is negative or not finite. An Evaluator ends the run with
// Failed{reason: invalid_input} on such an event, live and in replay alike.
func (e *Event) Validate() error {
	switch {
	case e.Kind == 0:
		return fmt.Errorf("kind: missing (want one of %s)", kindList)
	case !e.Kind.Valid():
		return fmt.Errorf("kind: %d is not one of %s", uint8(e.Kind), kindList)
	}
	return checkAmounts(e)
}

const kindList = "input, message, tool_call, tool_result, handoff, stop, error, final"

// valid is Validate's fast check, for the Evaluator's hot path.
func (e *Event) valid() bool {
	return e.Kind.Valid() && e.Usage.InputTokens >= 0 && e.Usage.OutputTokens >= 0 && finiteAmount(e.Cost)
}

// finiteAmount reports whether x is a finite number >= 0 (false for NaN).
func finiteAmount(x float64) bool { return x >= 0 && x <= math.MaxFloat64 }

// checkAmounts rejects usage and cost that no model spends: negative
// amounts (an event would give budget back) and a cost that is not finite.
// Both [Event.Validate] and the decoder (package codec, through Validate) use it, so a replayed file and a
// live event are rejected in the same words.
func checkAmounts(ev *Event) error {
	switch {
	case ev.Usage.InputTokens < 0:
		return fmt.Errorf("usage.input_tokens: must be >= 0, got %d", ev.Usage.InputTokens)
	case ev.Usage.OutputTokens < 0:
		return fmt.Errorf("usage.output_tokens: must be >= 0, got %d", ev.Usage.OutputTokens)
	case !finiteAmount(ev.Cost):
		return fmt.Errorf("cost: must be a finite amount >= 0, got %g", ev.Cost)
	}
	return nil
}
