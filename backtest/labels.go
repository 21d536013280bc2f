package backtest

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Label says whether a run went well: good (it succeeded, so a policy
// that stops it is a false stop) or bad. The zero Label is unlabelled.
type Label uint8

// The labels a run can have.
const (
	Unlabelled Label = iota
	Good
	Bad
)

// String returns "good", "bad" or "" for an unlabelled run.
func (l Label) String() string {
	switch l {
	case Good:
		return "good"
	case Bad:
		return "bad"
	}
	return ""
}

// Labels maps run names (as the report names runs) to their labels.
type Labels map[string]Label

// ReadLabels reads a labels file: a JSON object whose values are "good",
// "bad", true (good) or false (bad), or a CSV with the columns run,label
// (a first row "run,label" is a header; labels good, bad, true, false).
// Values are case-sensitive. Errors name the file and the line; a JSON
// array, JSON records ({"run": …, "label": …}) and a CSV first row that is
// neither the header run,label nor a labelled run (id,label) say so.
func ReadLabels(path string) (Labels, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the labels file %s: %v", path, pathErrorText(err))
	}
	data = bytes.TrimPrefix(data, []byte{0xEF, 0xBB, 0xBF})
	var l Labels
	switch t := bytes.TrimSpace(data); {
	case len(t) > 0 && t[0] == '{':
		l, err = parseJSONLabels(data)
	case len(t) > 0 && t[0] == '[':
		// Read as CSV, an array gives "run "[1": label "2]"".
		err = fmt.Errorf("line %d: the JSON form of labels is one object, "+jsonForm+", not an array", lineAt(data, int64(bytes.IndexByte(data, '['))))
	default:
		l, err = parseCSVLabels(data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// jsonForm is the JSON form of a labels file, for messages.
const jsonForm = `{"RUN": "good"|"bad"|true|false, ...}`

func parseLabel(v string) (Label, bool) {
	switch v {
	case "good", "true":
		return Good, true
	case "bad", "false":
		return Bad, true
	}
	return Unlabelled, false
}

func lineAt(data []byte, off int64) int {
	return bytes.Count(data[:min(int(off), len(data))], []byte{'\n'}) + 1
}

func parseJSONLabels(data []byte) (Labels, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	syntax := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("line %d: malformed JSON: %v", lineAt(data, se.Offset), err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("line %d: the JSON object is not closed", lineAt(data, int64(len(data))))
		}
		return fmt.Errorf("line %d: %v", lineAt(data, dec.InputOffset()), err)
	}
	if _, err := dec.Token(); err != nil { // {
		return nil, syntax(err)
	}
	l := make(Labels)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntax(err)
		}
		run, _ := tok.(string)
		line := lineAt(data, dec.InputOffset())
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, syntax(err)
		}
		var label Label
		switch v := v.(type) {
		case bool:
			label = Bad
			if v {
				label = Good
			}
		case string:
			var ok bool
			if label, ok = parseLabel(v); !ok {
				return nil, fmt.Errorf("line %d: run %q: label %q is not one of good, bad, true, false%s", line, run, v, recordHint(run))
			}
		default:
			return nil, fmt.Errorf("line %d: run %q: the label must be \"good\", \"bad\", true or false%s", line, run, recordHint(run))
		}
		if _, dup := l[run]; dup {
			return nil, fmt.Errorf("line %d: run %q is labelled twice", line, run)
		}
		l[run] = label
	}
	if _, err := dec.Token(); err != nil { // }
		return nil, syntax(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("line %d: more after the labels object (want one JSON object)", lineAt(data, dec.InputOffset()))
	}
	return l, nil
}

func parseCSVLabels(data []byte) (Labels, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	l := make(Labels)
	for first := true; ; first = false {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("line %d: malformed CSV: %v", pe.Line, pe.Err)
			}
			return nil, err
		}
		line, _ := r.FieldPos(0)
		if len(rec) != 2 {
			return nil, fmt.Errorf("line %d: want two columns run,label, got %d (a labels file is a JSON object or a CSV run,label)", line, len(rec))
		}
		run, value := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
		if first && run == "run" && value == "label" {
			continue
		}
		label, ok := parseLabel(value)
		if !ok && first {
			// A header with other names (id,label; run,outcome) would
			// otherwise be "run "id": label "label" is not one of …".
			return nil, fmt.Errorf("line %d: the first row %q is neither the header run,label nor a run with a label (good, bad, true or false)", line, run+","+value)
		}
		if !ok {
			return nil, fmt.Errorf("line %d: run %q: label %q is not one of good, bad, true, false", line, run, value)
		}
		if _, dup := l[run]; dup {
			return nil, fmt.Errorf("line %d: run %q is labelled twice", line, run)
		}
		l[run] = label
	}
	return l, nil
}

// recordHint is what a JSON labels key that names a column ("run",
// "label") adds to its error: the file holds records ({"run": "a",
// "label": "good"}), not the one object that maps runs to labels.
func recordHint(key string) string {
	switch key {
	case "run", "label", "id", "run_id":
		return " (the JSON form is one object mapping each run to its label, " + jsonForm + ", not records with run and label fields)"
	}
	return ""
}

// Unmatched returns the runs l labels that r has no outcome for, sorted:
// a label whose run is not in the corpus is ignored (a typo in a run's
// name leaves that run unlabelled), and the command warns about these.
func (l Labels) Unmatched(r *Report) []string {
	if len(l) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(l))
	for i := range r.Outcomes {
		if _, ok := l[r.Outcomes[i].Run]; ok {
			seen[r.Outcomes[i].Run] = true
		}
	}
	var out []string
	for run := range l {
		if !seen[run] {
			out = append(out, run)
		}
	}
	slices.Sort(out)
	return out
}
