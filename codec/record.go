package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/agentstop/agentstop/internal/jsonscan"

	"github.com/agentstop/agentstop/termination"
)

// RecordKind is the kind of a [Record]: a line of a recorded log that is
// not an event (§1 "End records").
type RecordKind uint8

// The record kinds.
const (
	// RecordEnd is an end record: how a run really ended live.
	RecordEnd RecordKind = iota + 1
	// RecordRaise is a raise record: limits raised on a held run (§3 hold).
	RecordRaise
)

// String returns the record's "kind": "end" or "raise".
func (k RecordKind) String() string {
	switch k {
	case RecordEnd:
		return "end"
	case RecordRaise:
		return "raise"
	}
	return fmt.Sprintf("RecordKind(%d)", uint8(k))
}

// Record is a line of a recorded log that is not an event: an end record
// or a raise record (docs/spec.md §1). It is never evaluated or counted.
type Record struct {
	Kind RecordKind
	Run  string
	Time time.Time
	// The end record's fields (RecordEnd).
	Parent, Stage string
	Cause         termination.Cause
	Outcome       termination.Outcome
	StoppedAt     int
	Events        int
	// Policy is "sha256:" and the hex digest of the enforced policy's
	// canonical JSON ([termination.Policy.Hash]), or "code" for a stage whose
	// conditions are Go code.
	Policy string
	// Shadow is the end record's shadow verdicts as written (§5.2), nil
	// when the line has none.
	Shadow json.RawMessage
	// Dropped is how many events of the run the recorder dropped since
	// its last written line.
	Dropped int64
	// Limits is what a raise record adds to the run's limits
	// (RecordRaise): each field in Has is a positive amount.
	Limits termination.Limits
	// Line is the record's line in the log.
	Line int
}

// Tag is the termination_cause of an end record's cause.
func (r *Record) Tag() string { return termination.Tag(r.Cause, nil) }

// wireRecord is a record line as encoding/json decodes it.
type wireRecord struct {
	Kind      string                     `json:"kind"`
	Run       string                     `json:"run"`
	Parent    string                     `json:"parent"`
	Stage     string                     `json:"stage"`
	Time      wireTime                   `json:"time"`
	Cause     json.RawMessage            `json:"cause"`
	Outcome   termination.Outcome        `json:"outcome"`
	StoppedAt int                        `json:"stopped_at"`
	Events    int                        `json:"events"`
	Policy    string                     `json:"policy"`
	Shadow    json.RawMessage            `json:"shadow"`
	Dropped   int64                      `json:"dropped"`
	Limits    map[string]json.RawMessage `json:"limits"`
}

// recordKind returns the record kind of the line b when its "kind" is
// "end" or "raise", reading nothing else; 0 for an event (or a line the
// event decoder must judge).
func recordKind(b []byte) RecordKind {
	if !bytes.Contains(b, []byte(`"end"`)) && !bytes.Contains(b, []byte(`"raise"`)) {
		return 0
	}
	var kind RecordKind
	p := fastParser{Scanner: jsonscan.Scanner{Data: b}}
	p.SkipSpace()
	ok := p.members(func(key []byte) bool {
		if string(key) != "kind" {
			return p.Skip(0, fastMaxDepth)
		}
		s, ok := p.str()
		switch {
		case !ok:
			return false
		case string(s) == "end":
			kind = RecordEnd
		case string(s) == "raise":
			kind = RecordRaise
		default:
			kind = 0
		}
		return true
	})
	if !ok {
		return 0 // not a well-formed object: the event decoder's error stands
	}
	return kind
}

// decodeRecord decodes the record line b of kind k, checking what §1
// requires of it.
func decodeRecord(b []byte, k RecordKind) (Record, error) {
	var w wireRecord
	if err := json.Unmarshal(b, &w); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			return Record{}, fmt.Errorf("%s record: %s: must be %s", k, typ.Field, recordFieldForm(typ.Field))
		}
		var fe *fieldError
		if errors.As(err, &fe) {
			return Record{}, fmt.Errorf("%s record: %v", k, fe)
		}
		return Record{}, fmt.Errorf("%s record: %v", k, describeJSONError(err))
	}
	rec := Record{Kind: k, Run: w.Run, Time: w.Time.t, Dropped: w.Dropped}
	if k == RecordRaise {
		lim, err := raiseLimits(w.Limits)
		if err != nil {
			return Record{}, fmt.Errorf("raise record: %v", err)
		}
		rec.Limits = lim
		return rec, nil
	}
	rec.Parent, rec.Stage, rec.Outcome, rec.Policy = w.Parent, w.Stage, w.Outcome, w.Policy
	rec.StoppedAt, rec.Events = w.StoppedAt, w.Events
	if len(w.Shadow) > 0 && string(w.Shadow) != "null" {
		rec.Shadow = append(json.RawMessage(nil), w.Shadow...)
	}
	switch {
	case len(w.Cause) == 0 || string(w.Cause) == "null":
		return Record{}, errors.New(`end record: cause: missing (want a cause in its JSON form, such as {"$kind":"NaturalCompletion"})`)
	case rec.StoppedAt < 0 || rec.Events < 0 || rec.StoppedAt > rec.Events:
		return Record{}, fmt.Errorf("end record: stopped_at %d and events %d: want 0 <= stopped_at <= events", rec.StoppedAt, rec.Events)
	}
	c, err := UnmarshalCause(w.Cause)
	if err != nil {
		return Record{}, fmt.Errorf("end record: cause: not a cause in its JSON form (§2): %v", err)
	}
	rec.Cause = c
	if rec.Outcome == 0 {
		rec.Outcome = c.DefaultOutcome()
	}
	return rec, nil
}

// recordFieldForm says what form a record's field must have.
func recordFieldForm(field string) string {
	switch field {
	case "stopped_at", "events", "dropped":
		return "an integer"
	case "limits":
		return `an object such as {"total_tokens": 10000}`
	case "outcome":
		return "one of succeeded, skipped, failed"
	}
	if f, ok := fieldForms[field]; ok {
		return f
	}
	return "a different kind of value"
}

// raiseLimits reads a raise record's limits: the §2 resource names, each a
// positive amount.
func raiseLimits(m map[string]json.RawMessage) (termination.Limits, error) {
	var l termination.Limits
	if len(m) == 0 {
		return l, errors.New(`limits: missing (want an object such as {"total_tokens": 10000}, with one or more of total_tokens, input_tokens, output_tokens, cost, iterations, tool_calls)`)
	}
	for _, name := range []string{"total_tokens", "input_tokens", "output_tokens", "cost", "iterations", "tool_calls"} {
		raw, ok := m[name]
		if !ok {
			continue
		}
		delete(m, name)
		var x float64
		if err := json.Unmarshal(raw, &x); err != nil || string(raw) == "null" {
			return l, fmt.Errorf("limits.%s: must be a positive amount, got %s", name, describeValue(raw))
		}
		if !(x > 0) || !finiteAmount(x) {
			return l, fmt.Errorf("limits.%s: must be a positive amount, got %s", name, describeValue(raw))
		}
		if name != "cost" && x != float64(int64(x)) {
			return l, fmt.Errorf("limits.%s: must be a positive integer, got %s", name, describeValue(raw))
		}
		switch name {
		case "total_tokens":
			l.TotalTokens, l.Has = int64(x), l.Has|termination.LimitTotalTokens
		case "input_tokens":
			l.InputTokens, l.Has = int64(x), l.Has|termination.LimitInputTokens
		case "output_tokens":
			l.OutputTokens, l.Has = int64(x), l.Has|termination.LimitOutputTokens
		case "cost":
			l.Cost, l.Has = x, l.Has|termination.LimitCost
		case "iterations":
			l.Iterations, l.Has = int(x), l.Has|termination.LimitIterations
		case "tool_calls":
			l.ToolCalls, l.Has = int(x), l.Has|termination.LimitToolCalls
		}
	}
	for name := range m {
		return l, fmt.Errorf("limits: unknown resource %q (want total_tokens, input_tokens, output_tokens, cost, iterations or tool_calls)", name)
	}
	return l, nil
}

// runLines is what the Decoder remembers of each run of the log to check
// its records (§1): its first line's stage and parent, and whether its end
// record has been read.
type runLines struct {
	stage, parent string
	endLine       int // the line of its end record, 0 before it
	seen          bool
}

// checkEntry checks the event or record just decoded against what the log
// said of its run before: no line of a run after its end record, no second
// end record, an end record's stage and parent as on the run's first line.
func (d *Decoder) checkEntry(run string, rec *Record, ev *termination.Event) error {
	st := d.last
	if st == nil || run != d.lastRun {
		if d.runs == nil {
			d.runs = map[string]*runLines{}
		}
		if st = d.runs[run]; st == nil {
			st = &runLines{}
			d.runs[run] = st
		}
		d.last, d.lastRun = st, run
	}
	if st.endLine > 0 {
		what := "an event"
		if rec != nil {
			what = "a " + rec.Kind.String() + " record"
			if rec.Kind == RecordEnd {
				return fmt.Errorf("a second end record for run %q (its end record is line %d)", run, st.endLine)
			}
		}
		return fmt.Errorf("%s of run %q after its end record (line %d): nothing of a run follows its end", what, run, st.endLine)
	}
	if !st.seen {
		// A raise record names no stage or parent: a run's first line is
		// its first event or its end record (a holder with no events of
		// its own may be raised, through its tree, before either).
		switch {
		case ev != nil:
			l := ev.Logged()
			st.seen, st.stage, st.parent = true, l.Stage, l.Parent
		case rec != nil && rec.Kind == RecordEnd:
			st.seen, st.stage, st.parent = true, rec.Stage, rec.Parent
		}
	}
	if rec == nil || rec.Kind != RecordEnd {
		return nil
	}
	switch {
	case rec.Stage != st.stage:
		return fmt.Errorf("end record: stage %q differs from the run's first line's %q", rec.Stage, st.stage)
	case rec.Parent != st.parent:
		return fmt.Errorf("end record: parent %q differs from the run's first line's %q", rec.Parent, st.parent)
	}
	st.endLine = d.line
	return nil
}

// Entry is one line of a log: an event, or a record (Record non-nil).
type Entry struct {
	Event  termination.Event
	Record *Record
}

// NextEntry returns the next line of the log, event or record, io.EOF at
// the end, or a *DecodeError naming the line. Events are checked as
// [Decoder.Next] checks them; records as §1 says (see [Record]), and
// every line against its run's end record. The Record is valid until the
// next call.
func (d *Decoder) NextEntry() (Entry, error) {
	b, ok := d.scanLine()
	if !ok {
		return Entry{}, d.scanErr()
	}
	if err := d.decodeEntry(b); err != nil {
		return Entry{}, err
	}
	if d.isRecord {
		return Entry{Record: &d.rec}, nil
	}
	return Entry{Event: d.ev}, nil
}

// decodeEntry decodes the line b into d.ev, or into d.rec for a record
// (isRecord), and checks it. Records are rare: a line is decoded as an
// event first, and only a line that is no event is looked at as a record.
func (d *Decoder) decodeEntry(b []byte) error {
	d.isRecord = false
	var err error
	// The lines of a run share their log fields: the line before's are
	// handed on when this one's are equal (never changed once handed out).
	like := d.ev.Log
	if d.argsKey, d.argsHashed, err = decodeEventHashed(b, &d.ev, d.hashArgs, like); err != nil {
		if k := recordKind(b); k != 0 {
			return d.decodeRecordLine(b, k)
		}
		return &DecodeError{Line: d.line, Err: d.lineError(b, err)}
	}
	if err := d.checkRun(); err != nil {
		return err
	}
	d.events++
	if run := d.ev.Logged().Run; d.last == nil || run != d.lastRun || d.last.endLine != 0 {
		if err := d.checkEntry(run, nil, &d.ev); err != nil {
			return &DecodeError{Line: d.line, Err: err}
		}
	}
	return nil
}

// decodeRecordLine decodes the record line b of kind k into d.rec.
func (d *Decoder) decodeRecordLine(b []byte, k RecordKind) error {
	rec, err := decodeRecord(b, k)
	if err != nil {
		return &DecodeError{Line: d.line, Err: err}
	}
	rec.Line = d.line
	if err := d.checkEntry(rec.Run, &rec, nil); err != nil {
		return &DecodeError{Line: d.line, Err: err}
	}
	d.rec, d.isRecord = rec, true
	return nil
}

// finiteAmount reports whether x is a finite number >= 0 (false for NaN).
func finiteAmount(x float64) bool { return x >= 0 && x <= math.MaxFloat64 }
