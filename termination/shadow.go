package termination

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ShadowVerdict is what a shadow policy (contract §5.2) would have done to
// a run that it watched beside the enforced policy: the cause it would
// have stopped the run with and the 1-based index of the event it would
// have stopped at. A shadow policy never acts: the run's own Cause and
// StoppedAt are the enforced policy's.
//
// Its JSON form is {"cause": {…cause JSON…}, "stopped_at": K}, as in the
// "shadow" object of a Result and of an end record (§1).
type ShadowVerdict struct {
	Cause     Cause
	StoppedAt int
}

type shadowVerdictJSON struct {
	Cause     json.RawMessage `json:"cause"`
	StoppedAt int             `json:"stopped_at"`
}

// MarshalJSON writes {"cause": …, "stopped_at": K}. A verdict without a
// cause is an error: a policy that would not have stopped the run has no
// verdict (null in the "shadow" object).
func (v ShadowVerdict) MarshalJSON() ([]byte, error) {
	if v.Cause == nil {
		return nil, errors.New("termination: shadow verdict without a cause (a policy that would not have stopped the run is null)")
	}
	c, err := marshalCause(v.Cause)
	if err != nil {
		return nil, err
	}
	return json.Marshal(shadowVerdictJSON{Cause: c, StoppedAt: v.StoppedAt})
}

// UnmarshalJSON reads the form MarshalJSON writes. A missing or null
// cause, and a stopped_at below 1, are errors naming the field.
func (v *ShadowVerdict) UnmarshalJSON(b []byte) error {
	var raw shadowVerdictJSON
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("shadow verdict: %w", err)
	}
	if len(raw.Cause) == 0 || string(raw.Cause) == "null" {
		return errors.New(`shadow verdict: "cause" is missing: a verdict is {"cause": {…}, "stopped_at": K}, or null when the policy would not have stopped the run`)
	}
	c, err := unmarshalCause(raw.Cause)
	if err != nil {
		return fmt.Errorf("shadow verdict: %w", err)
	}
	if raw.StoppedAt < 1 {
		return fmt.Errorf(`shadow verdict: "stopped_at" must be the 1-based index of an event, got %d`, raw.StoppedAt)
	}
	*v = ShadowVerdict{Cause: c, StoppedAt: raw.StoppedAt}
	return nil
}
