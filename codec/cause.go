package codec

import (
	"encoding/json"
	"reflect"

	"github.com/agentstop/agentstop/internal/causejson"
	"github.com/agentstop/agentstop/termination"
)

// ErrUnregisteredCause is wrapped by the error for a cause whose type, or
// whose "$kind", is not registered (see [RegisterCause]). It is the same
// error that decoding a termination.Result with such a cause wraps.
var ErrUnregisteredCause = causejson.ErrUnregistered

// causes is the table of termination's built-in causes (§2), each under its
// type name, in the contract's order; RegisterCause adds to the registry
// behind it. termination's own JSON forms (Result, ShadowVerdict, All) use
// a table of the same causes; the tests hold the two together.
var causes = causejson.NewTable([]termination.Cause{termination.Completed{}, termination.NaturalCompletion{},
	termination.HandoffRequested{}, termination.MaxIterationsReached{}, termination.MaxToolCallsReached{},
	termination.BudgetPressure{}, termination.BudgetExhausted{}, termination.StallDetected{}, termination.Timeout{},
	termination.Cancelled{}, termination.Failed{}, termination.Skipped{}, termination.Custom{}, termination.All{}})

// RegisterCause adds the cause type C to the JSON registry under kind, so
// that [MarshalCause] writes it with "$kind": kind and [UnmarshalCause]
// (and termination.Result's UnmarshalJSON) reads it back. The causes of
// package termination have their type names as kinds. It is an
// error to reuse a kind or register a type twice. Register before any JSON
// is handled (in main, or a package's variable initialization).
func RegisterCause[C termination.Cause](kind string) error {
	return causes.Register(kind, reflect.TypeFor[C](), func(b []byte) (any, error) {
		var c C
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, err
		}
		return c, nil
	})
}

// CauseType returns the registered "$kind" of c's type: the name
// [MarshalCause] writes under the key "$kind" (unrelated to an event's
// termination.Kind). An unregistered type is an error wrapping
// [ErrUnregisteredCause].
func CauseType(c termination.Cause) (string, error) { return causes.Kind(c) }

// MarshalCause returns the JSON form of c (contract §2): an object whose
// first member is "$kind" followed by the cause's snake_case fields. An
// unregistered cause type is an error.
func MarshalCause(c termination.Cause) ([]byte, error) { return causes.Marshal(c) }

// UnmarshalCause reads the JSON form written by MarshalCause. A missing or
// unregistered "$kind" is an error.
func UnmarshalCause(data []byte) (termination.Cause, error) {
	v, err := causes.Unmarshal(data)
	if err != nil {
		return nil, err
	}
	return v.(termination.Cause), nil // RegisterCause takes only causes
}
