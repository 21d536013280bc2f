package backtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/internal/canonical"
	"github.com/agentstop/agentstop/termination"
)

// source is one JSON Lines file of the corpus and the name its run gets
// when its events do not name their runs: its path relative to the PATH it
// was found under, without .jsonl ("week1/run-17" for week1/run-17.jsonl
// under the directory given).
type source struct {
	Path string // the file, as found (PATH joined with the relative path)
	Name string // the run's name in a one-run file
}

// find resolves the corpus PATHs (see Evaluate).
func find(paths []string) ([]source, error) {
	if len(paths) == 0 {
		return nil, errors.New("no corpus: give at least one JSON Lines file, directory or glob")
	}
	var out []source
	seen := make(map[string]bool)
	add := func(s source) {
		key := filepath.Clean(s.Path)
		if !seen[key] {
			seen[key] = true
			out = append(out, s)
		}
	}
	for _, p := range paths {
		matches := []string{p}
		if hasMeta(p) {
			m, err := filepath.Glob(p)
			if err != nil {
				return nil, fmt.Errorf("%s: not a valid glob: %v", p, err)
			}
			if len(m) == 0 {
				return nil, fmt.Errorf("%s: no file matches", p)
			}
			matches = m
		}
		for _, m := range matches {
			fi, err := os.Stat(m)
			if err != nil {
				return nil, fmt.Errorf("cannot read %s: %v", m, pathErrorText(err))
			}
			if !fi.IsDir() {
				add(source{Path: m, Name: runName(filepath.Base(m))})
				continue
			}
			found := 0
			err = filepath.WalkDir(m, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return fmt.Errorf("cannot read %s: %v", path, pathErrorText(err))
				}
				if d.IsDir() || !strings.HasSuffix(d.Name(), ".jsonl") {
					return nil
				}
				rel, err := filepath.Rel(m, path)
				if err != nil {
					rel = d.Name()
				}
				found++
				add(source{Path: path, Name: runName(filepath.ToSlash(rel))})
				return nil
			})
			if err != nil {
				return nil, err
			}
			if found == 0 {
				return nil, fmt.Errorf("%s: a directory with no *.jsonl file", m)
			}
		}
	}
	return out, nil
}

func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[`) }

func runName(rel string) string { return strings.TrimSuffix(rel, ".jsonl") }

// pathErrorText is what went wrong with a file, without the operation and
// path that the caller's message already names.
func pathErrorText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// decodedRun is one run of the corpus, decoded.
type decodedRun struct {
	ID     string // the events' run, or the source's Name in a one-run file
	Parent string // the parent run's id (§8), "" for a root
	File   string // the file it was read from
	// Events are the run's own events, in the order of the lines.
	Events []termination.Event
	// Truncated is set when, with Lenient, the file's truncated last line
	// was skipped: on every run of the file, since the line's run cannot be
	// read (as agentstop replay -lenient marks a log of many runs).
	Truncated bool
}

// decodedFile is one decoded file: its runs in the order they first
// appear, and all its events in the order of the lines (what a tree replay
// evaluates).
type decodedFile struct {
	Source source
	Runs   []*decodedRun
	Events []termination.Event
	// Multi is set when the events name their runs (a file of many runs).
	Multi bool
}

// readFile reads and decodes one file of the corpus, whole: the reference
// the tests hold Evaluate to (Evaluate never holds a file's events: it
// reads a line at a time). A bad line is an error naming the file and the line; with lenient,
// a truncated last line (one that ends inside a value, with no newline
// after it: an agent killed while writing) is skipped and its run marked
// Truncated instead. Evaluate reports the same errors.
func readFile(src source, lenient bool) (*decodedFile, error) {
	var buf []byte
	data, err := readInto(src.Path, &buf)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", src.Path, pathErrorText(err))
	}
	return decodeFile(src, data, lenient)
}

// readInto reads the file at path into *buf, growing it as needed.
func readInto(path string, buf *[]byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := (*buf)[:0]
	if fi, err := f.Stat(); err == nil && int64(cap(b)) < fi.Size()+1 {
		b = make([]byte, 0, fi.Size()+512)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			*buf = b
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func decodeFile(src source, data []byte, lenient bool) (*decodedFile, error) {
	// One event per line at most: the events are appended without a copy.
	f := &decodedFile{Source: src, Events: make([]termination.Event, 0, bytes.Count(data, []byte{'\n'})+1)}
	dec := codec.NewDecoder(bytes.NewReader(data))
	truncated := false
	var logs logArena
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.Is(err, codec.ErrTruncated) {
				if lenient {
					truncated = true
					break
				}
				return nil, fmt.Errorf("%s: %w; -lenient evaluates the events before it", src.Path, err)
			}
			// A line that breaks the log's pattern of runs (every event
			// names its run, or none does) is the decoder's error, as in
			// replay.
			return nil, fmt.Errorf("%s: %w", src.Path, err)
		}
		fingerprintArgs(&ev, &logs)
		f.Multi = ev.Logged().Run != ""
		f.Events = append(f.Events, ev)
	}
	if len(f.Events) == 0 {
		if truncated {
			return nil, fmt.Errorf("%s: no complete event: the file's only line is truncated", src.Path)
		}
		return nil, fmt.Errorf("%s: no events", src.Path)
	}
	if !f.Multi {
		f.Runs = []*decodedRun{{ID: src.Name, File: src.Path, Events: f.Events, Truncated: truncated}}
		return f, nil
	}
	byID := make(map[string]*decodedRun)
	for _, ev := range f.Events {
		l := ev.Logged()
		r := byID[l.Run]
		if r == nil {
			r = &decodedRun{ID: l.Run, File: src.Path}
			byID[l.Run] = r
			f.Runs = append(f.Runs, r)
		}
		if r.Parent == "" {
			r.Parent = l.Parent
		}
		r.Events = append(r.Events, ev)
	}
	for _, r := range f.Runs {
		r.Truncated = truncated
	}
	return f, nil
}

// fingerprintArgs replaces a tool call's args with their fingerprint
// (canonical.ArgsKey), given as an in-process args_hash, so that
// the canonical args are hashed once per run rather than once per policy:
// stall detection compares a call's args by exactly this fingerprint, and
// compares args_hash values for equality, so every policy's result is the
// same (the property test checks it against replay). Nothing else in an
// evaluation reads args. The "\x00" prefix keeps it apart from a recorded
// args_hash, which never starts so.
func fingerprintArgs(ev *termination.Event, logs *logArena) {
	if ev.Kind != termination.KindToolCall || ev.Logged().ArgsHash != "" || len(ev.Args) == 0 {
		return
	}
	l := ev.Logged() // a copy: a decoder shares one between lines
	l.ArgsHash = "\x00" + strconv.FormatUint(canonical.ArgsKey(ev.Args), 16)
	ev.Log, ev.Args = logs.add(l), nil
}

// logArena hands out the log fields of fingerprinted calls from chunks:
// one allocation for many calls rather than one each. A chunk is never
// written again once handed out, so its fields stay as given.
type logArena []termination.LogFields

// logChunk is how many log fields a chunk of logArena holds.
const logChunk = 64

func (a *logArena) add(l termination.LogFields) *termination.LogFields {
	if len(*a) == cap(*a) {
		*a = make([]termination.LogFields, 0, logChunk)
	}
	*a = append(*a, l)
	return &(*a)[len(*a)-1]
}
