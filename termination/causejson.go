package termination

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"
)

// CauseKindKey is the key of a cause's JSON object that names its registered
// kind (see [RegisterCause] and [CauseKind]); it is unrelated to an event's
// [Kind].
const CauseKindKey = "$kind"

// ErrUnregisteredCause is returned when a cause's type or "$kind" is not in
// the registry.
var ErrUnregisteredCause = errors.New("cause kind not registered")

type causeCodec struct {
	kind   string
	decode func([]byte) (Cause, error)
}

var registry = struct {
	sync.RWMutex
	byKind map[string]causeCodec
	byType map[reflect.Type]string
}{byKind: map[string]causeCodec{}, byType: map[reflect.Type]string{}}

// RegisterCause adds the cause type C to the JSON registry under kind, so
// that [MarshalCause] writes it with "$kind": kind and [UnmarshalCause]
// reads it back. It is an error to reuse a kind or register a type twice.
// Register in an init function, before any JSON is handled.
func RegisterCause[C Cause](kind string) error {
	if kind == "" {
		return errors.New("termination: RegisterCause: empty kind")
	}
	t := reflect.TypeFor[C]()
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.byKind[kind]; dup {
		return fmt.Errorf("termination: RegisterCause: kind %q already registered", kind)
	}
	if k, dup := registry.byType[t]; dup {
		return fmt.Errorf("termination: RegisterCause: type %v already registered as %q", t, k)
	}
	registry.byKind[kind] = causeCodec{kind: kind, decode: func(b []byte) (Cause, error) {
		var c C
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, err
		}
		return c, nil
	}}
	registry.byType[t] = kind
	return nil
}

func mustRegister[C Cause](kind string) {
	if err := RegisterCause[C](kind); err != nil {
		panic(err)
	}
}

func init() {
	mustRegister[Completed]("Completed")
	mustRegister[NaturalCompletion]("NaturalCompletion")
	mustRegister[HandoffRequested]("HandoffRequested")
	mustRegister[MaxIterationsReached]("MaxIterationsReached")
	mustRegister[MaxToolCallsReached]("MaxToolCallsReached")
	mustRegister[BudgetPressure]("BudgetPressure")
	mustRegister[BudgetExhausted]("BudgetExhausted")
	mustRegister[StallDetected]("StallDetected")
	mustRegister[Timeout]("Timeout")
	mustRegister[Cancelled]("Cancelled")
	mustRegister[Failed]("Failed")
	mustRegister[Skipped]("Skipped")
	mustRegister[Custom]("Custom")
	mustRegister[All]("All")
}

// RegisteredCauseKinds returns the registered "$kind" names, sorted.
func RegisteredCauseKinds() []string {
	registry.RLock()
	defer registry.RUnlock()
	kinds := make([]string, 0, len(registry.byKind))
	for k := range registry.byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// CauseKind returns the registered "$kind" of c's type: the name
// [MarshalCause] writes under [CauseKindKey].
func CauseKind(c Cause) (string, error) {
	if c == nil {
		return "", errors.New("termination: nil cause")
	}
	t := reflect.TypeOf(c)
	registry.RLock()
	kind, ok := registry.byType[t]
	registry.RUnlock()
	if !ok {
		return "", fmt.Errorf("termination: %w: %v (call RegisterCause)", ErrUnregisteredCause, t)
	}
	return kind, nil
}

// MarshalCause returns the JSON form of c: an object whose first member is
// "$kind" followed by the cause's snake_case fields. An unregistered cause
// type is an error.
func MarshalCause(c Cause) ([]byte, error) {
	kind, err := CauseKind(c)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("termination: marshal %s: %w", kind, err)
	}
	body = bytes.TrimSpace(body)
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("termination: marshal %s: cause must encode as a JSON object", kind)
	}
	var buf bytes.Buffer
	buf.Grow(len(body) + len(kind) + 12)
	buf.WriteString(`{"$kind":`)
	k, _ := json.Marshal(kind)
	buf.Write(k)
	if inner := bytes.TrimSpace(body[1 : len(body)-1]); len(inner) > 0 {
		buf.WriteByte(',')
		buf.Write(inner)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalCause reads the JSON form written by MarshalCause. A missing or
// unregistered "$kind" is an error.
func UnmarshalCause(data []byte) (Cause, error) {
	var head struct {
		Kind *string `json:"$kind"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("termination: cause: %w", err)
	}
	if head.Kind == nil {
		return nil, errors.New(`termination: cause: missing "$kind"`)
	}
	registry.RLock()
	codec, ok := registry.byKind[*head.Kind]
	registry.RUnlock()
	if !ok {
		return nil, fmt.Errorf("termination: cause: %w: %q", ErrUnregisteredCause, *head.Kind)
	}
	c, err := codec.decode(data)
	if err != nil {
		return nil, fmt.Errorf("termination: cause %s: %w", codec.kind, err)
	}
	return c, nil
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
		b, err := MarshalCause(c)
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
		c, err := UnmarshalCause(r)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}
