package termination

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Kind is the kind of an [Event]. Its JSON form is the contract's name
// ("input", "message", ...).
type Kind uint8

// The eight event kinds of the contract. The zero Kind is invalid.
const (
	KindInput Kind = iota + 1
	KindMessage
	KindToolCall
	KindToolResult
	KindHandoff
	KindStop
	KindError
	KindFinal
)

var kindNames = [...]string{
	KindInput:      "input",
	KindMessage:    "message",
	KindToolCall:   "tool_call",
	KindToolResult: "tool_result",
	KindHandoff:    "handoff",
	KindStop:       "stop",
	KindError:      "error",
	KindFinal:      "final",
}

// String returns the contract's name of k, or "Kind(N)" for an invalid kind.
func (k Kind) String() string {
	if k.Valid() {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Valid reports whether k is one of the eight kinds.
func (k Kind) Valid() bool { return k >= KindInput && k <= KindFinal }

// parseKind returns the Kind named s.
func parseKind(s string) (Kind, error) {
	for k := KindInput; k <= KindFinal; k++ {
		if kindNames[k] == s {
			return k, nil
		}
	}
	if s == "" {
		return 0, fmt.Errorf("missing kind")
	}
	return 0, fmt.Errorf("unknown kind %q (want one of input, message, tool_call, tool_result, handoff, stop, error, final)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (k Kind) MarshalText() ([]byte, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("invalid kind %d", uint8(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Kind) UnmarshalText(b []byte) error {
	parsed, err := parseKind(string(b))
	if err != nil {
		return err
	}
	*k = parsed
	return nil
}

// Usage is the tokens spent by one event: a delta, never a running total.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Total returns input plus output tokens.
func (u Usage) Total() int64 { return satAdd(u.InputTokens, u.OutputTokens) }

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: satAdd(u.InputTokens, v.InputTokens), OutputTokens: satAdd(u.OutputTokens, v.OutputTokens)}
}

// IsZero reports whether u carries no tokens.
func (u Usage) IsZero() bool { return u.InputTokens == 0 && u.OutputTokens == 0 }

// Event is one framework-neutral thing an agent loop did. Which fields are
// meaningful depends on Kind; see the contract's event table.
type Event struct {
	Kind   Kind            `json:"kind"`
	Source string          `json:"source,omitempty"`
	Text   string          `json:"text,omitempty"`
	Tool   string          `json:"tool,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	Target string          `json:"target,omitempty"`
	Usage  Usage           `json:"usage,omitzero"`
	Cost   float64         `json:"cost,omitempty"`
	// Err is non-empty on a failed tool_result or an error event.
	Err string `json:"error,omitempty"`
	// Time is when the event happened; replay uses it as the clock.
	Time time.Time `json:"time,omitzero"`
	// CallID is the tool call's id (tool_call, tool_result): it pairs a
	// result with its call when one tool runs in parallel.
	CallID string `json:"call_id,omitempty"`
	// Model is the model that produced this turn (message, final).
	Model string `json:"model,omitempty"`
	// Log holds the fields that only the lines of a recorded log carry
	// (the run, its parent and stage, dropped lines, content hashes); nil
	// for an event without them, as every event a live loop reports. They
	// sit behind one pointer so that an Event, copied on every hand-over,
	// stays small. Events may share one LogFields (a decoder gives the
	// lines of a run the same one): replace it, never change it. In the
	// JSON form its fields are the event's own, beside the others.
	Log *LogFields `json:"-"`
}

// LogFields are the fields of an [Event] that only the lines of a recorded
// log carry (§1).
type LogFields struct {
	// Run is the run the event belongs to, in a log that holds many runs
	// (contract §4.1, §8).
	Run string `json:"run,omitempty"`
	// Parent is, on a run's first event, the run id of its parent run (§8).
	Parent string `json:"parent,omitempty"`
	// Stage is, on a run's first event, the stage that ran it; replay and
	// backtest pick that stage's policy (§1, §4).
	Stage string `json:"stage,omitempty"`
	// Dropped is how many events of the run the recorder dropped under
	// load just before this one (§1 "dropped"); replay marks the run's
	// result Incomplete.
	Dropped int64 `json:"dropped,omitempty"`
	// ArgsHash stands in for the event's Args in a log recorded without
	// content: the hash of the canonical args (§1). An event carries one
	// or the other: the decoder rejects a line with both (a null args
	// aside).
	ArgsHash string `json:"args_hash,omitempty"`
	// TextHash stands in for the event's Text (and, on a tool_result,
	// Err) in a log recorded without content: the hash of the trimmed text
	// (§1). The decoder rejects a line with both a text and a text_hash; a
	// failed tool_result keeps its error beside its text_hash.
	TextHash string `json:"text_hash,omitempty"`
}

// Logged returns e's log fields, the zero LogFields when it has none.
func (e *Event) Logged() LogFields {
	if e.Log == nil {
		return LogFields{}
	}
	return *e.Log
}

// argsHash and textHash are e's content hashes, "" for none.
func (e *Event) argsHash() string {
	if e.Log == nil {
		return ""
	}
	return e.Log.ArgsHash
}

func (e *Event) textHash() string {
	if e.Log == nil {
		return ""
	}
	return e.Log.TextHash
}

// eventJSON is the JSON form of an Event: its log fields flat beside the
// others, in the contract's order.
type eventJSON struct {
	plainEvent
	*LogFields
}

// plainEvent is Event without its JSON methods.
type plainEvent Event

// MarshalJSON writes e as one JSON object, its log fields among the
// others ("run", "parent", ...). It leaves HTML characters as they are:
// encoding/json escapes them in what a marshaler returns unless its
// Encoder is told not to (SetEscapeHTML), as for any other value.
func (e Event) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(eventJSON{plainEvent(e), e.Log}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON reads the form MarshalJSON writes; unknown fields are
// ignored. (Logs are read by package codec, which checks and words
// errors for the person who wrote them.)
func (e *Event) UnmarshalJSON(b []byte) error {
	j := eventJSON{plainEvent: plainEvent(*e)}
	if e.Log != nil {
		l := *e.Log // shared: never written through
		j.LogFields = &l
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Event(j.plainEvent)
	if j.LogFields != nil && *j.LogFields != (LogFields{}) {
		e.Log = j.LogFields
	} else {
		e.Log = nil
	}
	return nil
}

// Failed reports whether e is an error event or a failed tool result.
func (e *Event) Failed() bool {
	return e.Kind == KindError || (e.Kind == KindToolResult && e.Err != "")
}

// ErrorText is the error carried by e: Err, or Text for an error event
// without Err.
func (e *Event) ErrorText() string {
	if e.Err == "" && e.Kind == KindError {
		return e.Text
	}
	return e.Err
}

// satAdd adds token counts (never negative once decoded), saturating at
// the largest int64 instead of wrapping to a negative total that would
// turn a budget off.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a || b < 0 {
		return s
	}
	return math.MaxInt64
}
