package termination

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// DecodeError is a bad line in a JSON Lines event log.
type DecodeError struct {
	Line int   // 1-based line number
	Err  error // what is wrong with it
}

func (e *DecodeError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

func (e *DecodeError) Unwrap() error { return e.Err }

// maxLineBytes bounds one event line; a longer line is an error, not an
// unbounded allocation.
const maxLineBytes = 16 << 20

// DecodeEvent decodes one JSON event. Unknown fields are ignored; a missing
// or unknown kind is an error.
func DecodeEvent(data []byte) (Event, error) {
	var ev Event
	if err := decodeEvent(data, &ev); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// decodeEvent decodes into *ev, which the Decoder reuses so that the event
// json.Unmarshal needs on the heap is allocated once, not once per line.
// Well-formed lines take the hand-written fast path (fastdecode.go); any
// line it is not certain about, every bad line included, is decoded by
// decodeEventJSON, which defines the behaviour.
func decodeEvent(data []byte, ev *Event) error {
	*ev = Event{}
	if !decodeEventFast(data, ev) {
		if err := decodeEventJSON(data, ev); err != nil {
			return err
		}
	}
	if err := checkAmounts(ev); err != nil {
		*ev = Event{}
		return err
	}
	return nil
}

// checkAmounts rejects usage and cost that no model spends: negative
// amounts (an event would give budget back) and a cost that is not finite.
func checkAmounts(ev *Event) error {
	switch {
	case ev.Usage.InputTokens < 0:
		return fmt.Errorf("usage.input_tokens: must be >= 0, got %d", ev.Usage.InputTokens)
	case ev.Usage.OutputTokens < 0:
		return fmt.Errorf("usage.output_tokens: must be >= 0, got %d", ev.Usage.OutputTokens)
	case ev.Cost < 0 || math.IsNaN(ev.Cost) || math.IsInf(ev.Cost, 0):
		return fmt.Errorf("cost: must be a finite amount >= 0, got %g", ev.Cost)
	}
	return nil
}

// decodeEventJSON decodes into *ev with encoding/json.
func decodeEventJSON(data []byte, ev *Event) error {
	*ev = Event{}
	if err := json.Unmarshal(data, ev); err != nil {
		*ev = Event{}
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return fmt.Errorf("malformed JSON: %v", err)
		}
		return err
	}
	if ev.Kind == 0 {
		return errors.New("missing kind")
	}
	return nil
}

// Decoder reads events from JSON Lines: one object per line, blank lines
// skipped.
type Decoder struct {
	sc   *bufio.Scanner
	line int
	ev   Event // decoding target, reused
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	return &Decoder{sc: sc}
}

// Next returns the next event, io.EOF at the end, or a *DecodeError naming
// the line.
func (d *Decoder) Next() (Event, error) {
	for d.sc.Scan() {
		d.line++
		b := bytes.TrimSpace(d.sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if err := decodeEvent(b, &d.ev); err != nil {
			return Event{}, &DecodeError{Line: d.line, Err: err}
		}
		return d.ev, nil
	}
	if err := d.sc.Err(); err != nil {
		return Event{}, &DecodeError{Line: d.line + 1, Err: err}
	}
	return Event{}, io.EOF
}

// Line returns the line number of the event last returned by Next.
func (d *Decoder) Line() int { return d.line }

// Replay evaluates c over the JSON Lines events in r, with the events' times
// as the clock, exactly as a live stage would evaluate them. It stops
// evaluating at the first cause but still decodes the remaining lines, so a
// corrupt log is reported rather than half-read. The Result has no stage.
func Replay(c Condition, r io.Reader) (Result, error) {
	ev := NewEvaluator(c, EventClock)
	dec := NewDecoder(r)
	stopped := false
	for {
		e, err := dec.Next()
		if errors.Is(err, io.EOF) {
			return ev.Result(), nil
		}
		if err != nil {
			return Result{}, err
		}
		if !stopped {
			_, stopped = ev.Observe(e)
		}
	}
}
