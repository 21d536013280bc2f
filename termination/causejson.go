package termination

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentstop/agentstop/internal/causejson"
)

// causeTable is the JSON form's table of the built-in causes (§2): each
// under its type name; the JSON forms of this package (Result,
// ShadowVerdict, All) read causes of other types from the registry that
// codec.RegisterCause adds to.
var causeTable = causejson.NewTable(builtinCauseList())

// builtinCauseList returns a zero value of each of the contract's built-in
// cause types (§2), in the contract's order, All last. Each is written in
// the JSON form of causes under its type name ("$kind": "Timeout").
// Package codec's table lists the same (its tests hold the two together).
func builtinCauseList() []Cause {
	return []Cause{Completed{}, NaturalCompletion{}, HandoffRequested{}, MaxIterationsReached{},
		MaxToolCallsReached{}, BudgetPressure{}, BudgetExhausted{}, StallDetected{}, Timeout{},
		Cancelled{}, Failed{}, Skipped{}, Custom{}, All{}}
}

// marshalCause returns the JSON form of c (§2): "$kind" and its fields.
func marshalCause(c Cause) ([]byte, error) { return causeTable.Marshal(c) }

// unmarshalCause reads the JSON form of a built-in or registered cause.
func unmarshalCause(data []byte) (Cause, error) {
	v, err := causeTable.Unmarshal(data)
	if err != nil {
		return nil, err
	}
	return v.(Cause), nil // every type of the table or the registry is a Cause: codec.RegisterCause takes only those
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
