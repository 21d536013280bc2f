package termination

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/agentstop/agentstop/internal/causejson"
)

// The built-in causes' "$kind" names in the JSON form of causes (§2).
// Package codec publishes the registry (codec.RegisterCause for a
// program's own causes); the JSON forms of this package (Result,
// ShadowVerdict, All) write and read causes through it.
func init() {
	register[Completed]("Completed")
	register[NaturalCompletion]("NaturalCompletion")
	register[HandoffRequested]("HandoffRequested")
	register[MaxIterationsReached]("MaxIterationsReached")
	register[MaxToolCallsReached]("MaxToolCallsReached")
	register[BudgetPressure]("BudgetPressure")
	register[BudgetExhausted]("BudgetExhausted")
	register[StallDetected]("StallDetected")
	register[Timeout]("Timeout")
	register[Cancelled]("Cancelled")
	register[Failed]("Failed")
	register[Skipped]("Skipped")
	register[Custom]("Custom")
	register[All]("All")
}

// register adds the built-in cause type C under kind.
func register[C Cause](kind string) {
	err := causejson.Register(kind, reflect.TypeFor[C](), func(b []byte) (any, error) {
		var c C
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, err
		}
		return c, nil
	})
	if err != nil {
		panic(err)
	}
}

// marshalCause returns the JSON form of c (§2): "$kind" and its fields.
func marshalCause(c Cause) ([]byte, error) { return causejson.Marshal(c) }

// unmarshalCause reads the JSON form of a cause of a registered type.
func unmarshalCause(data []byte) (Cause, error) {
	v, err := causejson.Unmarshal(data)
	if err != nil {
		return nil, err
	}
	return v.(Cause), nil // every registered type is a Cause: codec.RegisterCause takes only those
}

// MarshalJSON writes Limit and Elapsed as Go duration strings.
func (t Timeout) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Limit   string `json:"limit"`
		Elapsed string `json:"elapsed"`
		Scope   string `json:"scope,omitempty"`
		Idle    bool   `json:"idle,omitempty"`
	}{t.Limit.String(), t.Elapsed.String(), t.Scope, t.Idle})
}

// UnmarshalJSON reads Go duration strings.
func (t *Timeout) UnmarshalJSON(b []byte) error {
	var raw struct {
		Limit   string `json:"limit"`
		Elapsed string `json:"elapsed"`
		Scope   string `json:"scope"`
		Idle    bool   `json:"idle"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := Timeout{Scope: raw.Scope, Idle: raw.Idle}
	var err error
	if out.Limit, err = parseOptionalDuration(raw.Limit); err != nil {
		return fmt.Errorf("limit: %w", err)
	}
	if out.Elapsed, err = parseOptionalDuration(raw.Elapsed); err != nil {
		return fmt.Errorf("elapsed: %w", err)
	}
	*t = out
	return nil
}

func parseOptionalDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

// MarshalJSON writes each cause in its "$kind" form.
func (a All) MarshalJSON() ([]byte, error) {
	raw, err := marshalCauses(a.Causes)
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Causes []json.RawMessage `json:"causes"`
	}{raw})
}

// UnmarshalJSON reads causes in their "$kind" form.
func (a *All) UnmarshalJSON(b []byte) error {
	var raw struct {
		Causes []json.RawMessage `json:"causes"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	causes, err := unmarshalCauses(raw.Causes)
	if err != nil {
		return fmt.Errorf("causes: %w", err)
	}
	a.Causes = causes
	return nil
}

func marshalCauses(cs []Cause) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(cs))
	for i, c := range cs {
		b, err := marshalCause(c)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func unmarshalCauses(raw []json.RawMessage) ([]Cause, error) {
	out := make([]Cause, len(raw))
	for i, r := range raw {
		c, err := unmarshalCause(r)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}
