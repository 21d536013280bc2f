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
// naming the file and the line.
func agentLines(file string, r io.Reader, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
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
				if eof && endsInsideValue(t) {
					ferr = fmt.Errorf("malformed JSON: the file looks truncated (its last line ends inside a value)")
				}
				return &EntryError{File: file, Entry: "line " + strconv.Itoa(n), Err: ferr}
			}
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
