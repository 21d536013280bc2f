package importer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// agentLines calls fn with each non-blank line of a JSON Lines file and
// its number (from 1), reading r once, line by line, so that a file is
// read in linear time and a line may be as long as it needs to be (a
// Claude Code line holding a tool result with a whole file in it runs to
// megabytes). A UTF-8 byte-order mark and a line's trailing \r are
// dropped. An error from fn that is not an *EntryError is wrapped in one
// naming the file and the line. For a format that reads only JSON Lines
// (format names it; "" for one that reads documents too), a first line
// that fn rejects and that starts a JSON document (an array, or an
// object that does not end on it) is an error saying so (documentError;
// Import adds the formats that read documents).
func agentLines(format, file string, r io.Reader, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	first := true
	for n := 1; ; n++ {
		line, err := readLine(br, &buf)
		if err != nil && err != io.EOF {
			return fmt.Errorf("cannot read %s: %w", file, err)
		}
		eof := err == io.EOF
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte{0xEF, 0xBB, 0xBF})
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			if ferr := fn(n, t); ferr != nil {
				var ee *EntryError
				if errors.As(ferr, &ee) {
					return ferr
				}
				switch {
				case eof && endsInsideValue(t):
					ferr = fmt.Errorf("malformed JSON: the file looks truncated (its last line ends inside a value)")
				case first && format != "":
					if derr := documentError(format, t); derr != nil {
						ferr = derr
					}
				}
				return &EntryError{File: file, Entry: "line " + strconv.Itoa(n), Err: ferr}
			}
			first = false
		}
		if eof {
			return nil
		}
	}
}

// readLine reads one line without its newline into *buf (reused), which
// it returns; io.EOF when the line is the last one.
func readLine(br *bufio.Reader, buf *[]byte) ([]byte, error) {
	*buf = (*buf)[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		*buf = append(*buf, chunk...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(*buf, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return *buf, err
		}
	}
}

// decodeAgentJSON decodes one entry into v, with an error in the user's
// terms: malformed JSON, or the field that holds the wrong kind of value
// ("isSidechain: want true or false, got a string").
func decodeAgentJSON(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "the entry"
		}
		return fmt.Errorf("%s: want %s, got %s", field, kindWord(te.Type), valueWord(te.Value))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		if se.Offset >= int64(len(data)) {
			// encoding/json says "unexpected end of JSON input".
			return fmt.Errorf("malformed JSON: the line ends inside a value (an object over several lines, or one cut short)")
		}
		return fmt.Errorf("malformed JSON: %s", strings.TrimPrefix(se.Error(), "json: "))
	}
	return fmt.Errorf("malformed JSON")
}

// kindWord names, in JSON's words, the kind of value a Go type holds.
func kindWord(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Pointer:
		return kindWord(t.Elem())
	}
	return "an object"
}

// valueWord turns encoding/json's name of a JSON value ("string",
// "number 1.5") into words.
func valueWord(v string) string {
	switch {
	case v == "string":
		return "a string"
	case v == "bool":
		return "true or false"
	case v == "array":
		return "a list"
	case v == "object":
		return "an object"
	case strings.HasPrefix(v, "number"):
		return "a number" + strings.TrimPrefix(v, "number")
	}
	return v
}

// endsInsideValue reports whether a line is JSON cut short: it ends
// inside a value (what an agent killed while writing leaves).
func endsInsideValue(line []byte) bool {
	var v any
	var se *json.SyntaxError
	err := json.Unmarshal(line, &v)
	return errors.As(err, &se) && se.Offset >= int64(len(line))
}

// errJSONDocument is wrapped by the error for a file of a JSON Lines
// format that is a JSON document instead (documentError).
var errJSONDocument = errors.New("the file is a JSON document, not JSON Lines (one JSON object per line)")

// documentError returns the error for the first line of a file given as
// format (a JSON Lines format) when that line starts a JSON document: an
// array, or an object that does not end on it (a pretty-printed object).
// Import adds the formats that read JSON documents. nil for another line.
func documentError(format string, line []byte) error {
	var what string
	switch {
	case line[0] == '[':
		what = "it starts with an array"
	case line[0] == '{' && !json.Valid(line):
		what = "its first object does not end on its first line (a pretty-printed object)"
	default:
		return nil
	}
	return fmt.Errorf("%w: %s, and -from %s reads JSON Lines", errJSONDocument, what, format)
}
