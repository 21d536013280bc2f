package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// Run is one imported run: its id, its parent's id (a run that another
// run started; "" for a root) and its §1 events in order.
type Run struct {
	ID     string
	Parent string
	Events []termination.Event
}

// Options are the format-specific settings of an import; the zero value
// is every format's default.
type Options struct {
	// MessagesField names the field that holds the messages list
	// (openai-chat; default "messages").
	MessagesField string
	// IDField names the field that names a run (openai-chat; default:
	// none, runs are named FILE#N).
	IDField string
	// ErrorPrefix, when not empty, makes a tool message whose content
	// starts with it a failed tool_result (openai-chat).
	ErrorPrefix string
}

// EntryError is an entry of an input file that cannot be mapped to
// events: it names the file and the entry ("messages[4]", "line 3",
// "span 5f0c…").
type EntryError struct {
	File  string
	Entry string
	Err   error
}

func (e *EntryError) Error() string {
	if e.Entry == "" {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", e.File, e.Entry, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }

// Output receives what an import produces: each run, in the order the
// format completes them, and a count of the entries the format
// legitimately leaves out (an HTTP span in a trace, a file-history line
// in a session), by kind, for the summary line of §4.2. The zero Output
// keeps the runs in Runs; one with Emit set hands each run to Emit as
// soon as the format completes it, and keeps none.
type Output struct {
	// Emit, when not nil, receives each run instead of Runs; its error
	// ends the import.
	Emit func(Run) error
	// Runs are the runs received so far, in order, when Emit is nil.
	Runs Runs
	// Unique gives each run a distinct id as it is received, as
	// Runs.Uniquify gives the runs of a list: a name that repeats gets
	// #2, #3, …, in order, over every import into this Output, and a run
	// whose parent was received before it gets the parent's new name.
	Unique bool

	skipped map[string]int
	names   namer // the ids given so far, when Unique
}

// Run hands one complete run on; Emit's error ends the import.
func (o *Output) Run(r Run) error {
	if o.Unique {
		o.names.rename(&r)
	}
	if o.Emit != nil {
		return o.Emit(r)
	}
	o.Runs = append(o.Runs, r)
	return nil
}

// Skip counts one entry of the given kind that the format leaves out.
func (o *Output) Skip(kind string) {
	if o.skipped == nil {
		o.skipped = map[string]int{}
	}
	o.skipped[kind]++
}

// Skipped returns the kinds of entries left out so far and how many of
// each, kinds in ascending order.
func (o *Output) Skipped() []Skipped {
	out := make([]Skipped, 0, len(o.skipped))
	for k, n := range o.skipped {
		out = append(out, Skipped{Kind: k, Count: n})
	}
	slices.SortFunc(out, func(a, b Skipped) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}

// Skipped is a kind of entry an import left out and how many of it.
type Skipped struct {
	Kind  string
	Count int
}

// A format reads one file of its kind from r and hands its runs to out.
// documents is set for a format that reads a JSON document (a file that
// is one JSON value, pretty-printed or not), unset for one that reads
// only JSON Lines.
type format struct {
	name      string
	decode    func(file string, r io.Reader, o *Options, out *Output) error
	documents bool
}

var formats = []format{
	{"openai-chat", decodeOpenAIChat, true},
	{"mini-swe-agent", decodeMiniSWEAgent, true},
	{"swe-agent", decodeSWEAgent, true},
	{"otlp", decodeOTLP, true},
	{"claude-code", importClaudeCode, false},
	{"codex", importCodex, false},
	{"gemini-cli", importGeminiCLI, true},
}

// documentFormats returns the names of the formats that read a JSON
// document.
func documentFormats() []string {
	var names []string
	for _, f := range formats {
		if f.documents {
			names = append(names, f.name)
		}
	}
	return names
}

// whole adapts a format that maps a file read whole.
func whole(f func(file string, data []byte, o *Options) ([]Run, error)) func(string, io.Reader, *Options, *Output) error {
	return func(file string, r io.Reader, o *Options, out *Output) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return fmt.Errorf("cannot read %s: %w", file, err)
		}
		data = bytes.TrimPrefix(data, []byte{0xEF, 0xBB, 0xBF})
		if len(bytes.TrimSpace(data)) == 0 {
			return &EntryError{File: file, Err: fmt.Errorf("empty file")}
		}
		runs, err := f(file, data, o)
		if err != nil {
			return err
		}
		for _, run := range runs {
			if err := out.Run(run); err != nil {
				return err
			}
		}
		return nil
	}
}

// Formats returns the names of the formats Import reads.
func Formats() []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.name
	}
	return names
}

// Import maps one file in the named format, read from r, to runs of §1
// events handed to out. file names the input in errors and in run names.
// A format that does not exist, and an entry that cannot be mapped, are
// errors (an *EntryError for the latter); nothing is skipped silently:
// what a format leaves out is counted in out.
func Import(formatName, file string, r io.Reader, opts Options, out *Output) error {
	i := slices.IndexFunc(formats, func(f format) bool { return f.name == formatName })
	if i < 0 {
		return fmt.Errorf("unknown format %q (want one of %s)", formatName, strings.Join(Formats(), ", "))
	}
	err := formats[i].decode(file, r, &opts, out)
	var ee *EntryError
	if errors.As(err, &ee) && errors.Is(ee.Err, errJSONDocument) {
		ee.Err = fmt.Errorf("%w; the formats that read a JSON document are %s", ee.Err, strings.Join(documentFormats(), ", "))
	}
	return err
}

// ImportFile is Import of the file at path.
func ImportFile(formatName, path string, opts Options, out *Output) error {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return fmt.Errorf("cannot read %s: %w", path, err)
	}
	defer f.Close()
	return Import(formatName, path, f, opts, out)
}

// Runs are imported runs, in order.
type Runs []Run

// Uniquify gives every run a distinct id, in order: a name that repeats
// gets #2, #3, …. A run whose parent is a run named before it gets that
// run's new name as its parent (the same file imported twice: the second
// copy's children belong to the second copy).
func (runs Runs) Uniquify() {
	var n namer
	for i := range runs {
		n.rename(&runs[i])
	}
}

// rename gives r a distinct id, and the new name of its parent when its
// parent was renamed before it.
func (n *namer) rename(r *Run) {
	if p, ok := n.given[r.Parent]; ok && r.Parent != "" {
		r.Parent = p
	}
	id := n.unique(r.ID)
	if n.given == nil {
		n.given = map[string]string{}
	}
	n.given[r.ID] = id
	r.ID = id
}

// WriteStream writes runs as one JSON Lines stream: every event carries
// its run, and a run's first event its parent. When every event has a
// time, the runs' events are interleaved in time order (stable: ties keep
// the order of the runs), as a live log of concurrent runs is, so that a
// tree replay sees a child's events while its parent is still going;
// otherwise the runs are written one after the other. A run's own events
// keep their order: an event stamped later than one after it in its run
// (a Gemini CLI message is stamped after the tool calls it holds) is
// placed by the earliest time after it, so that the events stamped right
// keep their places among other runs' (a child's first event stays after
// the call that started it).
func (runs Runs) WriteStream(w io.Writer) error {
	type line struct {
		ev termination.Event
		at time.Time // the earliest time of the run from this event on
	}
	var lines []line
	timed := true
	for _, r := range runs {
		first := len(lines)
		for i, ev := range r.Events {
			l := termination.LogFields{Run: r.ID}
			if i == 0 {
				l.Parent = r.Parent
			}
			ev.Log = &l
			timed = timed && !ev.Time.IsZero()
			lines = append(lines, line{ev, ev.Time})
		}
		// From the run's last event back: each takes the earliest time
		// from it on, so that the run's times never go down.
		for i := len(lines) - 2; i >= first; i-- {
			if lines[i+1].at.Before(lines[i].at) {
				lines[i].at = lines[i+1].at
			}
		}
	}
	if timed {
		slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, l := range lines {
		if err := enc.Encode(l.ev); err != nil {
			return err
		}
	}
	return nil
}

// WriteDir writes each run to DIR/RUN.jsonl (characters that cannot be in
// a file name replaced by _), its events without run and parent: a one-run
// file, named by its run. It returns the files written. A file that exists
// already is an error, not overwritten; a file it cannot write whole is
// removed, and the error names it.
func (runs Runs) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, r := range runs {
		path := filepath.Join(dir, fileName(r.ID)+".jsonl")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return files, fmt.Errorf("cannot write run %s: %w", r.ID, err)
		}
		enc := json.NewEncoder(f)
		enc.SetEscapeHTML(false)
		for _, ev := range r.Events {
			if err = enc.Encode(ev); err != nil {
				break
			}
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path) // no half-written run: the file is this call's (O_EXCL)
			return files, fmt.Errorf("cannot write %s: %w", path, err)
		}
		files = append(files, path)
	}
	return files, nil
}

// fileName turns a run id into a file name: path separators, spaces,
// control characters and the characters Windows forbids become _.
func fileName(id string) string {
	name := strings.Map(func(r rune) rune {
		if r < ' ' || strings.ContainsRune(`/\:*?"<>| `, r) {
			return '_'
		}
		return r
	}, id)
	if name == "" || name == "." || name == ".." {
		name = "_" + name
	}
	return name
}

// baseName is a file's name without its directory and its extensions
// (.json, .jsonl, .traj.json, .traj): how a run is named after its file.
func baseName(file string) string {
	name := filepath.Base(file)
	for _, ext := range []string{".traj.json", ".traj", ".jsonl", ".json", ".ndjson"} {
		if s, ok := strings.CutSuffix(name, ext); ok {
			return s
		}
	}
	return name
}

// usage reads a usage object as §1 counts it: input tokens include cached
// ones and output tokens reasoning ones. OpenAI's prompt_tokens and
// completion_tokens already do (cached_tokens and reasoning_tokens are
// parts of them); Anthropic's input_tokens does not, so
// cache_read_input_tokens and cache_creation_input_tokens are added in.
func usage(raw json.RawMessage) (termination.Usage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return termination.Usage{}, nil
	}
	var u struct {
		PromptTokens        *int64 `json:"prompt_tokens"`
		CompletionTokens    *int64 `json:"completion_tokens"`
		InputTokens         *int64 `json:"input_tokens"`
		OutputTokens        *int64 `json:"output_tokens"`
		CacheRead           int64  `json:"cache_read_input_tokens"`
		CacheCreation       int64  `json:"cache_creation_input_tokens"`
		CompletionTokensDet struct {
			Reasoning int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	if err := json.Unmarshal(raw, &u); err != nil {
		return termination.Usage{}, fmt.Errorf("usage: want token counts (prompt_tokens, completion_tokens), got %s", jsonKind(raw))
	}
	var out termination.Usage
	switch {
	case u.PromptTokens != nil || u.CompletionTokens != nil:
		out = termination.Usage{InputTokens: deref(u.PromptTokens), OutputTokens: deref(u.CompletionTokens)}
	case u.InputTokens != nil || u.OutputTokens != nil:
		out = termination.Usage{InputTokens: deref(u.InputTokens) + u.CacheRead + u.CacheCreation, OutputTokens: deref(u.OutputTokens)}
	}
	if out.InputTokens < 0 || out.OutputTokens < 0 {
		return termination.Usage{}, fmt.Errorf("usage: negative token count")
	}
	return out, nil
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// jsonKind names the kind of a JSON value for an error message.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
}

// describeJSONError says what is wrong with a JSON value in the user's
// terms: the field and the kind of value wanted, never a Go type.
func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		want := "another kind of value"
		switch te.Type.Kind() {
		case reflect.String:
			want = "a string"
		case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint64, reflect.Uint32:
			want = "a whole number"
		case reflect.Float64, reflect.Float32:
			want = "a number"
		case reflect.Bool:
			want = "true or false"
		case reflect.Slice, reflect.Array:
			want = "a list"
		case reflect.Struct, reflect.Map:
			want = "an object"
		}
		field := te.Field
		if field == "" {
			field = "the value"
		}
		got := map[string]string{"string": "a string", "number": "a number", "array": "a list", "object": "an object", "bool": "true or false"}[te.Value]
		if n, ok := strings.CutPrefix(te.Value, "number "); ok {
			got = n
		} else if got == "" {
			got = te.Value
		}
		return fmt.Sprintf("%s: want %s, got %s", field, want, got)
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d", se.Offset)
	}
	return "malformed JSON"
}

// argsOf turns a tool call's arguments string into the event's args: the
// JSON it holds, or, when it is not JSON (models do write broken
// arguments), the string itself as a JSON string, so that the call is kept
// and compared by its text.
func argsOf(arguments string) json.RawMessage {
	t := strings.TrimSpace(arguments)
	if t == "" {
		return nil
	}
	if b := []byte(t); json.Valid(b) {
		return b
	}
	return marshalJSON(arguments)
}

// marshalJSON encodes v without escaping &, < and > (command lines are
// full of them, and the log is read by people too).
func marshalJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
