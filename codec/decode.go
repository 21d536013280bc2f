package codec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentstop/agentstop/termination"
)

// DecodeError is a bad line in a JSON Lines event log.
type DecodeError struct {
	Line int   // 1-based line number
	Err  error // what is wrong with it
}

// The errors a log can end with; callers branch on them with errors.Is.
var (
	// ErrTruncated is wrapped by the error the Decoder returns for a truncated
	// log: its last line ends inside an event, with no newline after it.
	// errors.Is(err, ErrTruncated) tells it apart from a malformed line; the
	// *DecodeError it comes in names the line.
	ErrTruncated = errors.New("the log looks truncated: its last line ends inside an event, with no newline after it (was the agent stopped while writing?)")
	// ErrJSONDocument is wrapped by the error the Decoder returns for a file
	// that is a JSON document (a pretty-printed object, an array of events or
	// of runs, an object holding a list) rather than JSON Lines.
	ErrJSONDocument = errors.New("the file is a JSON document, not JSON Lines (one event object per line)")
	// ErrMixedRuns is wrapped by the error the Decoder returns for the first
	// event that breaks its log's pattern of runs: in a log, every event names
	// its run ("run", a log of many runs) or none does (§4). Which it is, the
	// first event says.
	ErrMixedRuns = errors.New("every event of a log names its run, or none does")
)

// Error returns "line N: " and what is wrong with the line, or, for a
// truncated log, a sentence that names the line as where the log was cut.
func (e *DecodeError) Error() string {
	if e.Err == ErrTruncated {
		return fmt.Sprintf("the log looks truncated at line %d: its last line ends inside an event, with no newline after it (was the agent stopped while writing?)", e.Line)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// maxLineBytes bounds one line of an event log (16 MiB): a longer line is
// an error naming the limit, not an unbounded allocation.
const maxLineBytes = 16 << 20

// errLineTooLong is the error (inside a *DecodeError) for a line longer
// than maxLineBytes.
var errLineTooLong = fmt.Errorf("longer than %d MiB, the limit for one event", maxLineBytes>>20)

// utf8BOM is the byte-order mark some editors write at the start of a file.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// DecodeEvent decodes one JSON event. Unknown fields are ignored; a missing
// or unknown kind, an unknown key inside usage, and a field of the wrong
// form are errors that name the field and the form it must have (for
// example "usage.input_tokens: must be an integer, got a string").
func DecodeEvent(data []byte) (termination.Event, error) {
	var ev termination.Event
	if err := decodeEvent(data, &ev); err != nil {
		return termination.Event{}, err
	}
	return ev, nil
}

// decodeEvent decodes into *ev, which the Decoder reuses so that the event
// json.Unmarshal needs on the heap is allocated once, not once per line.
// Well-formed lines take the hand-written fast path (fastdecode.go); any
// line it is not certain about, every bad line included, is decoded by
// decodeEventJSON, which defines the behaviour.
func decodeEvent(data []byte, ev *termination.Event) error {
	_, _, err := decodeEventHashed(data, ev, false, nil)
	return err
}

// decodeEventHashed is decodeEvent that, with hashArgs, also returns the
// canonical hash of the event's args when the fast path computed it while
// decoding them (hashed). The event's Log is like when its log fields are
// equal to like's (the previous line's; nil for none).
func decodeEventHashed(data []byte, ev *termination.Event, hashArgs bool, like *termination.LogFields) (argsKey uint64, hashed bool, err error) {
	*ev = termination.Event{}
	ok, argsKey, hashed := decodeEventFastHashed(data, ev, hashArgs, like)
	if !ok {
		argsKey, hashed = 0, false
		if err := decodeEventJSON(data, ev); err != nil {
			return 0, false, err
		}
		if ev.Log != nil {
			ev.Log = shareLog(ev.Log, like)
		}
	}
	if err := checkDecoded(ev); err != nil {
		*ev = termination.Event{}
		return 0, false, err
	}
	return argsKey, hashed, nil
}

// checkDecoded is what the decoder checks beyond the JSON's form, on
// either path: the amounts (checkAmounts) and the content hashes
// (checkContentHashes).
func checkDecoded(ev *termination.Event) error {
	if err := ev.Validate(); err != nil {
		return err // the amounts: the kind is decoded already
	}
	return checkContentHashes(ev)
}

// checkContentHashes rejects an event that carries both a value and the
// hash that stands in for it (§1): args with args_hash, or text with
// text_hash. A recorder writes the hash in place of the value, never both;
// with both, whichever replay compared, a hash that does not match its
// value would go unnoticed. An args of null counts as no args, and a
// tool_result's error may go with its text_hash (the error says the call
// failed; the hash covers the text and the error).
func checkContentHashes(ev *termination.Event) error {
	switch {
	case ev.Log == nil:
		return nil
	case ev.Log.ArgsHash != "" && len(ev.Args) > 0 && string(ev.Args) != "null":
		return errors.New("args and args_hash: an event carries one or the other (args_hash stands in for args in a log recorded without content)")
	case ev.Log.TextHash != "" && ev.Text != "":
		return errors.New("text and text_hash: an event carries one or the other (text_hash stands in for text in a log recorded without content)")
	}
	return nil
}

// wireEvent is Event as encoding/json decodes it: the same fields, with a
// closed usage object and a time whose errors are worded for users.
type wireEvent struct {
	Kind     termination.Kind `json:"kind"`
	Source   string           `json:"source"`
	Text     string           `json:"text"`
	Tool     string           `json:"tool"`
	Args     json.RawMessage  `json:"args"`
	Target   string           `json:"target"`
	Usage    wireUsage        `json:"usage"`
	Cost     float64          `json:"cost"`
	Err      string           `json:"error"`
	Time     wireTime         `json:"time"`
	CallID   string           `json:"call_id"`
	Model    string           `json:"model"`
	Run      string           `json:"run"`
	Parent   string           `json:"parent"`
	Stage    string           `json:"stage"`
	Dropped  int64            `json:"dropped"`
	ArgsHash string           `json:"args_hash"`
	TextHash string           `json:"text_hash"`
}

// wireUsage is Usage as a closed object: a key that matches neither field
// is an error, since a typo would silently turn a token budget off.
type wireUsage termination.Usage

// UnmarshalJSON decodes into the existing value (so that a repeated usage
// key merges, as encoding/json does for a struct) after checking the keys.
func (u *wireUsage) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	if data[0] != '{' {
		return &json.UnmarshalTypeError{Value: jsonKindOf(data), Type: reflect.TypeFor[termination.Usage]()}
	}
	if key, ok := unknownUsageKey(data); ok {
		return &fieldError{field: "usage", msg: fmt.Sprintf("unknown key %q (want input_tokens or output_tokens)", key)}
	}
	return json.Unmarshal(data, (*termination.Usage)(u))
}

// unknownUsageKey returns the first key of the usage object data (valid
// JSON) that encoding/json would not match to a field of Usage.
func unknownUsageKey(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // {
		return "", false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		key, _ := tok.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
		// Keys are case-sensitive: encoding/json would match
		// "Input_Tokens" too, the contract does not.
		if key != "input_tokens" && key != "output_tokens" {
			return key, true
		}
	}
	return "", false
}

// wireTime is Event.Time with an error that says what form it must have.
type wireTime struct{ t time.Time }

func (w *wireTime) UnmarshalJSON(data []byte) error {
	if err := w.t.UnmarshalJSON(data); err != nil {
		return &fieldError{field: "time", msg: "must be an RFC 3339 timestamp such as 2026-11-20T09:00:04Z, got " + describeValue(data)}
	}
	return nil
}

// fieldError is a field whose value is not of the form the schema wants.
type fieldError struct {
	field string // the field's path, e.g. usage.input_tokens
	msg   string
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// fieldForms says, in the user's terms, what form each field must have.
var fieldForms = map[string]string{
	"kind":                "a string, one of input, message, tool_call, tool_result, handoff, stop, error, final",
	"source":              "a string",
	"text":                "a string",
	"tool":                "a string",
	"target":              "a string",
	"error":               "a string",
	"call_id":             "a string",
	"model":               "a string",
	"run":                 "a string",
	"parent":              "a string",
	"stage":               "a string",
	"dropped":             "an integer",
	"args_hash":           "a string",
	"text_hash":           "a string",
	"usage":               `an object such as {"input_tokens": 120, "output_tokens": 40}`,
	"usage.input_tokens":  "an integer",
	"usage.output_tokens": "an integer",
	"cost":                "a number",
	"time":                "an RFC 3339 timestamp such as 2026-11-20T09:00:04Z",
}

// decodeEventJSON decodes into *ev with encoding/json and words its errors
// for the person who wrote the log: the field, the form it must have and
// what it got, never a Go type.
func decodeEventJSON(data []byte, ev *termination.Event) error {
	*ev = termination.Event{}
	var w wireEvent
	if err := json.Unmarshal(exactFields(data), &w); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return describeSyntaxError(data, syn)
		}
		return describeJSONError(err)
	}
	if w.Kind == 0 {
		return errors.New("missing kind")
	}
	*ev = termination.Event{
		Kind: w.Kind, Source: w.Source, Text: w.Text, Tool: w.Tool, Args: w.Args, Target: w.Target,
		Usage: termination.Usage(w.Usage), Cost: w.Cost, Err: w.Err, Time: w.Time.t, CallID: w.CallID, Model: w.Model,
	}
	if l := (termination.LogFields{Run: w.Run, Parent: w.Parent, Stage: w.Stage, Dropped: w.Dropped, ArgsHash: w.ArgsHash, TextHash: w.TextHash}); l != (termination.LogFields{}) {
		ev.Log = &l
	}
	return nil
}

// describeJSONError rewords an encoding/json error.
func describeJSONError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("malformed JSON: %v", err)
	case errors.As(err, &typ):
		got := describeTypeValue(typ.Value)
		if typ.Field == "" {
			return fmt.Errorf("an event must be a JSON object, got %s", got)
		}
		form, ok := fieldForms[typ.Field]
		if !ok {
			form = "a different kind of value"
		}
		if num, isNum := strings.CutPrefix(typ.Value, "number "); isNum {
			switch typ.Field {
			case "usage.input_tokens", "usage.output_tokens":
				if !strings.ContainsAny(num, ".eE") { // an integer out of range
					form = "an integer from 0 to " + strconv.FormatInt(math.MaxInt64, 10)
				}
			case "cost":
				form = "a finite number" // out of range
			}
		}
		return &fieldError{field: typ.Field, msg: "must be " + form + ", got " + got}
	}
	return err // kind and usage errors are worded already
}

// describeSyntaxError words encoding/json's syntax error in data for the
// person who wrote the line: where (the column, counted in characters) and
// what is wrong there, never the lexer's state ("in string escape code").
func describeSyntaxError(data []byte, syn *json.SyntaxError) error {
	at := int(syn.Offset) - 1 // the byte the lexer stopped at
	if at < 0 || at >= len(data) || endsInsideValue(data) {
		return errors.New("malformed JSON: the line ends inside an event (a string, object or array is not closed)")
	}
	col := utf8.RuneCount(data[:at]) + 1
	r, _ := utf8.DecodeRune(data[at:])
	var what string
	switch msg := syn.Error(); {
	case strings.Contains(msg, "escape"):
		if i := bytes.LastIndexByte(data[:at], '\\'); i >= 0 {
			col = utf8.RuneCount(data[:i]) + 1 // the backslash, not the byte after it
		}
		what = `a backslash in a string must start an escape such as \n, \" or \u00e9`
	case strings.Contains(msg, "string literal") && r < ' ':
		what = fmt.Sprintf("a control character (U+%04X) in a string must be escaped", r)
	case strings.Contains(msg, "exceeded max depth"):
		what = "values nested more than 10000 levels deep"
	default:
		what = "unexpected " + describeChar(r)
		for _, w := range syntaxWhere {
			if strings.Contains(msg, w.lexer) {
				what += " " + w.user
				break
			}
		}
	}
	return fmt.Errorf("malformed JSON at column %d: %s", col, what)
}

// syntaxWhere says where in the line encoding/json's lexer was, in the
// words of someone reading the line.
var syntaxWhere = [...]struct{ lexer, user string }{
	{"after top-level value", "after the event's closing brace (one event per line)"},
	{"numeric literal", "in a number (numbers look like 12, -0.5 or 1e3)"},
	{"beginning of object key", "where a quoted key should be"},
	{"after object key:value pair", "after a value (want a comma or a closing brace)"},
	{"after object key", "after a key (want a colon)"},
	{"after array element", "after an array element (want a comma or a closing bracket)"},
	{"beginning of value", "where a value should be"},
	{"in literal", "in true, false or null"},
}

// describeChar names a character as a user would find it in the line.
func describeChar(r rune) string {
	switch {
	case r == utf8.RuneError:
		return "byte that is not UTF-8"
	case r == '\'':
		return "single quote (JSON strings take double quotes)"
	case r < ' ' || r == 0x7f || !unicode.IsPrint(r):
		return fmt.Sprintf("character U+%04X", r)
	}
	return "'" + string(r) + "'"
}

// describeTypeValue words an UnmarshalTypeError's Value ("string",
// "number 1.5", ...).
func describeTypeValue(v string) string {
	if num, ok := strings.CutPrefix(v, "number "); ok {
		return num
	}
	switch v {
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "bool":
		return "true or false"
	case "array":
		return "an array"
	case "object":
		return "an object"
	}
	return v
}

// describeValue words a raw JSON value: a short string or number as it
// is, anything else by its kind.
func describeValue(data []byte) string {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && (data[0] == '"' || data[0] == '-' || '0' <= data[0] && data[0] <= '9') {
		if len(data) > 64 {
			return string(data[:60]) + "..."
		}
		return string(data)
	}
	return describeTypeValue(jsonKindOf(data))
}

// jsonKindOf names the kind of the raw JSON value data as encoding/json's
// UnmarshalTypeError.Value does.
func jsonKindOf(data []byte) string {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return "nothing"
	}
	switch data[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// Decoder reads events from JSON Lines: one object per line, blank lines
// skipped, a UTF-8 byte-order mark at the start skipped. A line longer
// than 16 MiB is an error.
//
// Two kinds of file that are not an event log get errors of their own,
// since encoding/json's words for them ("unexpected end of JSON input")
// point at the wrong problem:
//   - a JSON document (a pretty-printed object, an array of events or of
//     runs, an object holding a list such as an agent's trajectory file):
//     an error wrapping [ErrJSONDocument] on its first line, which names
//     agentstop import, the command that converts such files;
//   - a truncated log, whose last line ends inside an event with no newline
//     after it (an agent killed while writing): an error wrapping
//     [ErrTruncated] that says so. Every event before that line has been
//     returned and Next returns io.EOF after it, so a caller may treat it
//     as the end of the log, as a lenient replay does (replay.WithLenient).
type Decoder struct {
	sc     *bufio.Scanner
	line   int
	events int               // events returned so far
	ev     termination.Event // decoding target, reused
	// unterminated is set by the split function when the line it returned
	// last is the end of the input, with no newline after it.
	unterminated bool
	// With hashArgs (replay with a policy that compares tool calls), each
	// event's canonical args hash is computed from the line's bytes while
	// they are decoded: argsKey, when argsHashed.
	hashArgs   bool
	argsHashed bool
	argsKey    uint64
	// The first event's line and run: whether every later event must name
	// its run or none may (checkRun).
	firstLine int
	firstRun  string
	// runs is what the log said of each run, to check its records
	// (record.go); last caches the run of the line before.
	runs     map[string]*runLines
	lastRun  string
	last     *runLines
	rec      Record // the record decodeEntry decoded last
	isRecord bool   // the line decodeEntry decoded last is a record (rec), not an event (ev)
}

// NewDecoder returns a Decoder reading from r. It reads r in chunks as Next
// asks for events, never further ahead than one buffer.
func NewDecoder(r io.Reader) *Decoder {
	d := &Decoder{sc: bufio.NewScanner(r)}
	d.sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	d.sc.Split(d.splitLines)
	return d
}

// splitLines is bufio.ScanLines (a trailing \r is left for TrimSpace) that
// also records whether the line it returns had no newline after it.
func (d *Decoder) splitLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		d.unterminated = false
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		d.unterminated = true
		return len(data), data, nil
	}
	return 0, nil, nil
}

// documentError is the error for a JSON document: what it looks like, and
// what to do about it.
type documentError struct{ what string }

func (e *documentError) Error() string {
	return ErrJSONDocument.Error() + ": " + e.what + "; agentstop import converts agents' logs into events"
}

func (e *documentError) Unwrap() error { return ErrJSONDocument }

// Next returns the next event, io.EOF at the end, or a *DecodeError naming
// the line (wrapping [ErrTruncated] or [ErrJSONDocument] for the files
// described at [Decoder]).
//
// The records of a recorded log (end and raise records, §1) are not
// events: Next checks them and skips them ([Decoder.NextEntry] returns
// them).
func (d *Decoder) Next() (termination.Event, error) {
	for {
		b, ok := d.scanLine()
		if !ok {
			return termination.Event{}, d.scanErr()
		}
		if err := d.decodeEntry(b); err != nil {
			return termination.Event{}, err
		}
		if !d.isRecord {
			return d.ev, nil
		}
	}
}

// scanLine moves to the next line that is not blank and returns it,
// trimmed (and without a byte-order mark on the first line); false at the
// end of the input or when it cannot be read (scanErr).
func (d *Decoder) scanLine() ([]byte, bool) {
	for d.sc.Scan() {
		d.line++
		b := d.sc.Bytes()
		if d.line == 1 {
			b = bytes.TrimPrefix(b, utf8BOM)
		}
		b = bytes.TrimSpace(b)
		if len(b) > 0 {
			return b, true
		}
	}
	return nil, false
}

// scanErr is Next's error once scanLine has returned false: io.EOF at the
// end of the input, or a *DecodeError naming the line that could not be
// read.
func (d *Decoder) scanErr() error {
	if err := d.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = errLineTooLong
		} else {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the file is named by the caller
			}
			err = &readError{err}
		}
		return &DecodeError{Line: d.line + 1, Err: err}
	}
	return io.EOF
}

// mixedRunsError is the error for an event that breaks the pattern of
// runs the first event set: what this one names, what the first names.
type mixedRunsError struct {
	run       string // this event's run, "" for none
	firstLine int
	firstRun  string // the first event's run, "" for none
}

func (e *mixedRunsError) Error() string {
	if e.run == "" {
		return fmt.Sprintf("this event names no run, but the first event (line %d) names run %q: %v", e.firstLine, e.firstRun, ErrMixedRuns)
	}
	return fmt.Sprintf("this event names run %q, but the first event (line %d) names none: %v", e.run, e.firstLine, ErrMixedRuns)
}

func (e *mixedRunsError) Unwrap() error { return ErrMixedRuns }

// checkRun checks the event just decoded against the log's pattern of
// runs, which the first event sets: a *DecodeError wrapping
// [ErrMixedRuns], naming the line, for the first event that breaks it.
// This is the one check of the pattern: replay, backtest and every reader
// of logs get it from here.
func (d *Decoder) checkRun() error {
	if d.events == 0 {
		d.firstLine, d.firstRun = d.line, d.ev.Logged().Run
		return nil
	}
	run := d.ev.Logged().Run
	if (run == "") == (d.firstRun == "") {
		return nil
	}
	return &DecodeError{Line: d.line, Err: &mixedRunsError{run: run, firstLine: d.firstLine, firstRun: d.firstRun}}
}

// lineError is the error for the line b, which decodeEvent rejected with
// err: a truncation or a JSON document when the line says so, err
// otherwise.
func (d *Decoder) lineError(b []byte, err error) error {
	incomplete := endsInsideValue(b)
	switch {
	case incomplete && d.unterminated:
		return ErrTruncated
	case d.events > 0:
		return err
	case b[0] == '[':
		return &documentError{"it starts with an array (a list of events or of runs)"}
	case incomplete:
		return &documentError{"its first object does not end on its first line (a pretty-printed object)"}
	}
	if key, ok := listMember(b); ok {
		return &documentError{fmt.Sprintf("its first line is an object holding a list, %q, not an event", key)}
	}
	return err
}

// listOfObjects reports whether the JSON value v is an array whose first
// element is an object.
func listOfObjects(v json.RawMessage) bool {
	if len(v) == 0 || v[0] != '[' {
		return false
	}
	rest := bytes.TrimLeft(v[1:], " \t\r\n")
	return len(rest) > 0 && rest[0] == '{'
}

// endsInsideValue reports whether b is the start of a JSON value that
// ends too soon: what is there is JSON, but a string, number, object or
// array is still open.
func endsInsideValue(b []byte) bool {
	var v json.RawMessage
	err := json.NewDecoder(bytes.NewReader(b)).Decode(&v)
	return errors.Is(err, io.ErrUnexpectedEOF)
}

// listMember returns the key of the first member of the object b whose
// value is an array of objects, other than an event's own fields (args may
// be one), if b is an object without a kind: the shape of a document
// holding a list of messages, steps or spans ({"messages": [{...}, ...]}),
// which no event has. (An event without a kind but with a list of strings
// among its extra fields is still "missing kind".)
func listMember(b []byte) (string, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return "", false
	}
	if _, ok := obj["kind"]; ok {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var val json.RawMessage
		if dec.Decode(&val) != nil {
			return "", false
		}
		key, _ := tok.(string)
		if listOfObjects(val) && !slices.Contains(eventFieldNames[:], key) {
			return key, true
		}
	}
	return "", false
}

// readError is a failure to read the event log itself (inside a
// *DecodeError), as opposed to a bad line.
type readError struct{ err error }

func (e *readError) Error() string { return "cannot read the events: " + e.err.Error() }

func (e *readError) Unwrap() error { return e.err }

// HashArgs makes the Decoder compute the canonical key of each tool
// call's args while it decodes the line's bytes ([Decoder.ArgsKey]), for
// an evaluator that compares tool calls by their args
// (termination.Evaluator.ComparesArgs): replay then reads each call's args
// once, not a second time to evaluate it. Call it before the first Next.
func (d *Decoder) HashArgs() { d.hashArgs = true }

// ArgsKey returns the canonical key of the args of the event Next or
// NextEntry returned last, and true, when the Decoder computed it while
// decoding ([Decoder.HashArgs]); false otherwise (then the evaluator hashes
// the args itself). The key is the one termination.Evaluator.ObserveKeyed
// takes: per process, never stored (a log's args_hash is [ArgsHash]).
func (d *Decoder) ArgsKey() (key uint64, ok bool) { return d.argsKey, d.argsHashed }

// Line returns the line number of the event last returned by Next.
func (d *Decoder) Line() int { return d.line }

// exactFields returns the event object data without the members whose key
// is not exactly one of the contract's field names, so that encoding/json,
// which matches keys case-insensitively, ignores "Text" or "KIND" as the
// unknown fields they are (§1). Data that is not a well-formed object, or
// has no such member, is returned as is for json.Unmarshal to judge.
func exactFields(data []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return data
	}
	type member struct {
		key string
		val json.RawMessage
	}
	var members []member
	dropped := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return data
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return data
		}
		if !slices.Contains(eventFieldNames[:], key) {
			dropped = true
			continue
		}
		members = append(members, member{key, val})
	}
	if !dropped {
		return data
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}
