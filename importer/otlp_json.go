package importer

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// OTLP/JSON is the protobuf JSON mapping of ExportTraceServiceRequest, as
// the Collector's file exporter writes it (one request per line) and as
// protojson writes it. The two differ in ways this reader accepts both of:
// ids are hex (the OTLP/JSON rule, pdata) or base64 (protojson's bytes),
// enums are numbers (pdata) or names (protojson), 64-bit integers are
// strings or numbers.
//
// The reader is written for the size of a day of Collector output (§6:
// 100 MB/s per core): it cuts the input into requests with a scanner that
// jumps from quote to quote, and reads each request in one pass that
// decodes only what the mapping reads: the bulk of a GenAI span's bytes
// (prompts and completions in attributes the mapping does not read) is
// passed over, never decoded or copied. Only the request being read is
// held.

// readJSON streams OTLP/JSON requests, one after the other.
func (rd *otlpReader) readJSON(r *bufio.Reader) error {
	vr := valueReader{r: r}
	for {
		val, line, err := vr.next()
		if err != nil {
			return &EntryError{File: rd.file, Entry: "line " + strconv.Itoa(line), Err: err}
		}
		if val == nil {
			return nil
		}
		p := otlpJSON{b: val, rd: rd, line: line}
		if err := p.request(); err != nil {
			var ee *EntryError
			if errors.As(err, &ee) {
				return err
			}
			return p.fail(err)
		}
	}
}

// valueReader cuts a stream into top-level JSON objects, whatever their
// layout: one per line, several on a line, or one over many lines. A line
// that fits bufio's buffer is read in place; longer lines and objects
// over several lines are gathered in acc.
type valueReader struct {
	r    *bufio.Reader
	acc  []byte
	rest []byte // what is left of the line (or lines) read
	line int    // lines read so far
	eof  bool
}

// next returns the next object and the line it starts on; nil at the end.
// The slice is valid until the next call.
func (v *valueReader) next() ([]byte, int, error) {
	for {
		v.rest = trimLeftSpace(v.rest)
		if len(v.rest) > 0 {
			break
		}
		if v.eof {
			return nil, v.line, nil
		}
		if err := v.readLine(); err != nil {
			return nil, v.line, err
		}
	}
	start := v.line
	if c := v.rest[0]; c != '{' {
		if c == '[' || c == ']' || c == '}' {
			return nil, start, fmt.Errorf("want one ExportTraceServiceRequest object (resourceSpans) per line, got %s", jsonNoun(c))
		}
		return nil, start, fmt.Errorf("malformed JSON: want an ExportTraceServiceRequest object (resourceSpans), got %s", jsonNoun(c))
	}
	var st cutState
	end, done := st.scan(v.rest, 0)
	if !done {
		// The object goes on past this line: gather it in acc.
		v.acc = append(v.acc[:0], v.rest...)
		for !done {
			if v.eof {
				return nil, start, fmt.Errorf("the file looks truncated: the request that starts here does not end")
			}
			n := len(v.acc)
			if err := v.appendLine(); err != nil {
				return nil, start, err
			}
			end, done = st.scan(v.acc, n)
		}
		v.rest = v.acc
	}
	val := v.rest[:end]
	v.rest = v.rest[end:]
	return val, start, nil
}

// readLine makes the next line rest: in place when it fits the reader's
// buffer.
func (v *valueReader) readLine() error {
	chunk, err := v.r.ReadSlice('\n')
	switch err {
	case nil:
		v.line++
		v.rest = chunk
		return nil
	case io.EOF:
		v.eof = true
		if len(chunk) > 0 {
			v.line++
		}
		v.rest = chunk
		return nil
	case bufio.ErrBufferFull:
		v.acc = append(v.acc[:0], chunk...)
		err = v.appendLine()
		v.rest = v.acc
		return err
	}
	return err
}

// appendLine appends the rest of the line (with its newline) to acc.
func (v *valueReader) appendLine() error {
	for {
		chunk, err := v.r.ReadSlice('\n')
		v.acc = append(v.acc, chunk...)
		switch err {
		case nil:
			v.line++
			return nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			v.eof = true
			v.line++
			return nil
		}
		return err
	}
}

func trimLeftSpace(b []byte) []byte {
	return b[skipSpace(b, 0):]
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// cutState finds where a JSON object ends, resumably, jumping through
// strings from quote to quote.
type cutState struct {
	depth    int
	inString bool
	strStart int
}

// scan goes on from b[i]; it returns the index after the object and true,
// or len(b) and false when the object goes on.
func (s *cutState) scan(b []byte, i int) (int, bool) {
	for i < len(b) {
		if s.inString {
			k := bytes.IndexByte(b[i:], '"')
			if k < 0 {
				return len(b), false
			}
			q := i + k
			i = q + 1
			if !escapedQuote(b, s.strStart, q) {
				s.inString = false
			}
			continue
		}
		switch b[i] {
		case '"':
			s.inString, s.strStart = true, i
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth == 0 {
				return i + 1, true
			}
		}
		i++
	}
	return len(b), false
}

// escapedQuote reports whether the quote at b[q] is escaped: preceded by
// an odd number of backslashes after the string's opening quote at b[open].
func escapedQuote(b []byte, open, q int) bool {
	n := 0
	for p := q - 1; p > open && b[p] == '\\'; p-- {
		n++
	}
	return n%2 == 1
}

func jsonNoun(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	case ']', '}':
		return fmt.Sprintf("a stray %q", c)
	}
	if c == '-' || (c >= '0' && c <= '9') {
		return "a number"
	}
	return fmt.Sprintf("the character %q", c)
}

// otlpJSON reads one request in one pass.
type otlpJSON struct {
	b     []byte
	i     int
	depth int
	rd    *otlpReader
	line  int // the line the request starts on
	span  otlpSpan
	rawID []byte // the span's spanId as written, for errors
}

// syntaxError is malformed JSON at an offset of the request.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

// fail names the line of an error in the request: the line of the value
// at fault, for malformed JSON with encoding/json's account of it when it
// has one.
func (p *otlpJSON) fail(err error) error {
	off := p.i
	var se *syntaxError
	if errors.As(err, &se) {
		off = se.off
		var x any
		var jse *json.SyntaxError
		if jerr := json.Unmarshal(p.b, &x); errors.As(jerr, &jse) {
			off, err = int(jse.Offset)-1, fmt.Errorf("malformed JSON: %v", jse)
		} else {
			err = fmt.Errorf("malformed JSON: %s", se.msg)
		}
	}
	line := p.line + bytes.Count(p.b[:max(0, min(off, len(p.b)))], []byte{'\n'})
	return &EntryError{File: p.rd.file, Entry: "line " + strconv.Itoa(line), Err: err}
}

func (p *otlpJSON) syntax(want string) error {
	got := "the end"
	if p.i < len(p.b) {
		got = jsonNoun(p.b[p.i])
	}
	return &syntaxError{off: p.i, msg: "want " + want + ", got " + got}
}

// typeError is a field whose value has the wrong JSON type; a character
// that starts no value is malformed JSON.
func (p *otlpJSON) typeError(field, want string) error {
	c := p.b[p.i]
	if !bytes.ContainsRune([]byte(`{["tfn-0123456789`), rune(c)) {
		return p.syntax("a value")
	}
	return fmt.Errorf("%s: want %s, got %s", field, want, jsonNoun(c))
}

func (p *otlpJSON) ws() { p.i = skipSpace(p.b, p.i) }

func (p *otlpJSON) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// str reads a string and returns what is between its quotes, as written,
// and whether it holds escapes.
func (p *otlpJSON) str() ([]byte, bool, error) {
	if p.peek() != '"' {
		return nil, false, p.syntax("a string")
	}
	open := p.i
	j := open + 1
	for {
		k := bytes.IndexByte(p.b[j:], '"')
		if k < 0 {
			p.i = len(p.b)
			return nil, false, p.syntax(`a closing "`)
		}
		q := j + k
		if !escapedQuote(p.b, open, q) {
			p.i = q + 1
			raw := p.b[open+1 : q]
			return raw, bytes.IndexByte(raw, '\\') >= 0, nil
		}
		j = q + 1
	}
}

// text reads a string value, decoded.
func (p *otlpJSON) text(field string) (string, error) {
	if c := p.peek(); c != '"' {
		if c == 0 {
			return "", p.syntax("a value")
		}
		return "", p.typeError(field, "a string")
	}
	start := p.i
	raw, esc, err := p.str()
	if err != nil || !esc {
		return string(raw), err
	}
	s, ok := unquote(raw)
	if !ok {
		return "", &syntaxError{off: start, msg: "a malformed string"}
	}
	return s, nil
}

// unquote decodes the escapes of a JSON string's contents.
func unquote(raw []byte) (string, bool) {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		k := bytes.IndexByte(raw[i:], '\\')
		if k < 0 {
			out = append(out, raw[i:]...)
			break
		}
		out = append(out, raw[i:i+k]...)
		i += k
		if i+1 >= len(raw) {
			return "", false
		}
		c := raw[i+1]
		i += 2
		switch c {
		case '"', '\\', '/':
			out = append(out, c)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n := unicodeEscape(raw[i-2:])
			if n == 0 {
				return "", false
			}
			out = utf8.AppendRune(out, r)
			i += n - 2
		default:
			return "", false
		}
	}
	return string(out), true
}

// unicodeEscape reads \uXXXX, or a surrogate pair of them, at the start of
// b; n is the bytes read, 0 when malformed.
func unicodeEscape(b []byte) (rune, int) {
	hex4 := func(b []byte) rune {
		if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
			return -1
		}
		v, err := strconv.ParseUint(string(b[2:6]), 16, 16)
		if err != nil {
			return -1
		}
		return rune(v)
	}
	r := hex4(b)
	if r < 0 {
		return 0, 0
	}
	if utf16.IsSurrogate(r) {
		if r2 := hex4(b[6:]); r2 >= 0 {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r, 6
}

// number reads a number, or a string holding one (64-bit integers and
// enums in the protobuf JSON mapping), as written.
func (p *otlpJSON) number(field string) ([]byte, error) {
	switch c := p.peek(); {
	case c == '"':
		raw, _, err := p.str()
		return raw, err
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.i
		for p.i < len(p.b) && isNumberByte(p.b[p.i]) {
			p.i++
		}
		return p.b[start:p.i], nil
	case c == 'n':
		return nil, p.literal("null")
	case c == 0:
		return nil, p.syntax("a value")
	}
	return nil, p.typeError(field, "a number")
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func (p *otlpJSON) literal(word string) error {
	if !bytes.HasPrefix(p.b[p.i:], []byte(word)) {
		return p.syntax("a value")
	}
	p.i += len(word)
	return nil
}

// maxDepth bounds the nesting of values passed over (a request nests a
// few levels; a kvlistValue a few more).
const maxDepth = 256

// skip passes over one value, checking its structure.
func (p *otlpJSON) skip() error {
	switch c := p.peek(); {
	case c == '"':
		_, _, err := p.str()
		return err
	case c == '{':
		return p.object("", func([]byte) error { return p.skip() })
	case c == '[':
		return p.array("", p.skip)
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := p.number("")
		return err
	}
	return p.syntax("a value")
}

// object reads an object, handing each member's key to member, which
// reads the member's value. A null stands for an empty object.
func (p *otlpJSON) object(field string, member func(key []byte) error) error {
	switch p.peek() {
	case '{':
	case 'n':
		return p.literal("null")
	case 0:
		return p.syntax("a value")
	default:
		if field == "" {
			return p.syntax("a value")
		}
		return p.typeError(field, "an object")
	}
	if p.depth++; p.depth > maxDepth {
		return &syntaxError{off: p.i, msg: "values nested too deep"}
	}
	p.i++
	if p.peek() == '}' {
		p.i++
		p.depth--
		return nil
	}
	for {
		key, esc, err := p.str()
		if err != nil {
			return err
		}
		if esc {
			key = unescapeKey(key)
		}
		if p.peek() != ':' {
			return p.syntax("a colon")
		}
		p.i++
		if err := member(key); err != nil {
			return err
		}
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			p.depth--
			return nil
		default:
			return p.syntax("a comma or a closing }")
		}
	}
}

func unescapeKey(raw []byte) []byte {
	var s string
	if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) != nil {
		return raw
	}
	return []byte(s)
}

// array reads a list, calling elem for each element. A null stands for an
// empty list.
func (p *otlpJSON) array(field string, elem func() error) error {
	switch p.peek() {
	case '[':
	case 'n':
		return p.literal("null")
	case 0:
		return p.syntax("a value")
	default:
		if field == "" {
			return p.syntax("a value")
		}
		return p.typeError(field, "a list")
	}
	if p.depth++; p.depth > maxDepth {
		return &syntaxError{off: p.i, msg: "values nested too deep"}
	}
	p.i++
	if p.peek() == ']' {
		p.i++
		p.depth--
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			p.depth--
			return nil
		default:
			return p.syntax("a comma or a closing ]")
		}
	}
}

// request reads {"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}.
func (p *otlpJSON) request() error {
	err := p.object("", func(key []byte) error {
		if string(key) != "resourceSpans" {
			return p.skip()
		}
		return p.array("resourceSpans", func() error {
			return p.object("resourceSpans[]", func(key []byte) error {
				switch string(key) {
				case "scopeSpans", "instrumentationLibrarySpans": // the latter before OTLP 0.15
					return p.array(string(key), p.scopeSpans)
				}
				return p.skip()
			})
		})
	})
	if err != nil {
		return err
	}
	if p.ws(); p.i != len(p.b) {
		return p.syntax("the end of the request")
	}
	return nil
}

func (p *otlpJSON) scopeSpans() error {
	return p.object("scopeSpans[]", func(key []byte) error {
		if string(key) != "spans" {
			return p.skip()
		}
		return p.array("spans", func() error {
			p.span, p.rawID = otlpSpan{}, nil
			var times [2][]byte
			var ids [3][]byte
			err := p.object("spans[]", func(key []byte) error {
				return p.spanMember(key, &ids, &times)
			})
			if err != nil {
				return err
			}
			if err := p.spanFields(ids, times); err != nil {
				return p.spanError(err)
			}
			return p.rd.add(&p.span, p.line)
		})
	})
}

func (p *otlpJSON) spanMember(key []byte, ids *[3][]byte, times *[2][]byte) error {
	var err error
	switch string(key) {
	case "traceId":
		ids[0], _, err = p.str()
	case "spanId":
		ids[1], _, err = p.str()
		p.rawID = ids[1]
	case "parentSpanId":
		ids[2], _, err = p.str()
	case "name":
		p.span.name, err = p.text("name")
	case "startTimeUnixNano":
		times[0], err = p.number("startTimeUnixNano")
	case "endTimeUnixNano":
		times[1], err = p.number("endTimeUnixNano")
	case "attributes":
		err = p.array("attributes", p.attribute)
	case "status":
		err = p.object("status", func(key []byte) error {
			switch string(key) {
			case "code":
				code, err := p.number("status.code")
				p.span.failed = string(code) == "2" || string(code) == "STATUS_CODE_ERROR"
				return err
			case "message":
				var err error
				p.span.statusMsg, err = p.text("status.message")
				return err
			}
			return p.skip()
		})
	default:
		err = p.skip()
	}
	return err
}

// spanError names the span an error is about.
func (p *otlpJSON) spanError(err error) error {
	var se *syntaxError
	if errors.As(err, &se) {
		return err
	}
	return &EntryError{File: p.rd.file, Entry: p.rd.entry(p.line, string(p.rawID)), Err: err}
}

// spanFields checks and converts the ids and times of the span read.
func (p *otlpJSON) spanFields(ids [3][]byte, times [2][]byte) error {
	s := &p.span
	if len(ids[1]) == 0 || !jsonID(ids[1], s.id[:]) {
		return fmt.Errorf("spanId: want 8 bytes in hex, got %q", ids[1])
	}
	if !jsonID(ids[2], s.parent[:]) {
		return fmt.Errorf("parentSpanId: want 8 bytes in hex, got %q", ids[2])
	}
	s.hasParent = s.parent != [8]byte{}
	if !jsonID(ids[0], s.trace[:]) {
		return fmt.Errorf("traceId: want 16 bytes in hex, got %q", ids[0])
	}
	var err error
	if s.start, err = unixNano(times[0]); err != nil {
		return fmt.Errorf("startTimeUnixNano: %v", err)
	}
	if s.end, err = unixNano(times[1]); err != nil {
		return fmt.Errorf("endTimeUnixNano: %v", err)
	}
	return nil
}

// attribute reads {"key": K, "value": V}, decoding V only when K is one
// the mapping reads.
func (p *otlpJSON) attribute() error {
	var code attrCode
	var key []byte
	keyed := false
	valueAt := -1
	err := p.object("attributes[]", func(k []byte) error {
		switch string(k) {
		case "key":
			raw, esc, err := p.str()
			if err != nil {
				return err
			}
			if esc {
				raw = unescapeKey(raw)
			}
			keyed, code = true, attrCodeOf(raw)
			key = raw
			return nil
		case "value":
			if !keyed {
				valueAt = p.i // the key comes after: read it then
				return p.skip()
			}
			return p.attrValue(code, key)
		}
		return p.skip()
	})
	if err != nil || valueAt < 0 || code == attrNone {
		return err
	}
	end := p.i
	p.i = valueAt
	err = p.attrValue(code, key)
	p.i = end
	return err
}

// attrValue reads an AnyValue for the attribute with the given code.
func (p *otlpJSON) attrValue(code attrCode, key []byte) error {
	if code == attrNone {
		return p.skip()
	}
	var v attrValue
	if err := p.anyValue(key, &v, true); err != nil {
		return err
	}
	if err := p.span.attrs.set(code, key, &v); err != nil {
		return p.spanError(err)
	}
	return nil
}

// anyValue reads {"stringValue": …} and the other kinds of value; in a
// list (nested false) only string values are kept.
func (p *otlpJSON) anyValue(key []byte, v *attrValue, top bool) error {
	if c := p.peek(); c != '{' && c != 'n' && c != 0 {
		return p.spanError(fmt.Errorf("attribute %s: want an AnyValue object (stringValue, intValue, …), got %s", shown(key), jsonNoun(c)))
	}
	return p.object("", func(k []byte) error {
		var err error
		switch string(k) {
		case "stringValue":
			var s string
			s, err = p.text("stringValue")
			if top {
				v.str, v.hasStr = s, true
			} else {
				v.strs = append(v.strs, s)
			}
		case "intValue", "doubleValue":
			var raw []byte
			raw, err = p.number(string(k))
			if top {
				v.num = string(raw)
			}
		case "boolValue":
			c := p.peek()
			err = p.skip()
			if top && (c == 't' || c == 'f') {
				v.num = strconv.FormatBool(c == 't')
			}
		case "arrayValue":
			if !top {
				return p.skip()
			}
			err = p.object("arrayValue", func(k []byte) error {
				if string(k) != "values" {
					return p.skip()
				}
				return p.array("values", func() error { return p.anyValue(key, v, false) })
			})
		default:
			err = p.skip()
		}
		return err
	})
}

// jsonID reads a span or trace id into dst: hex (OTLP/JSON) or base64
// (protojson); an empty one leaves dst zero.
func jsonID(v []byte, dst []byte) bool {
	if len(v) == 0 {
		return true
	}
	if len(v) == 2*len(dst) {
		if _, err := hex.Decode(dst, v); err == nil {
			return true
		}
	}
	var b [24]byte
	n, err := base64.StdEncoding.Decode(b[:], v[:min(len(v), 32)])
	if err != nil || n != len(dst) || base64.StdEncoding.EncodedLen(n) != len(v) {
		return false
	}
	copy(dst, b[:n])
	return true
}

// unixNano reads nanoseconds since the Unix epoch.
func unixNano(n []byte) (int64, error) {
	if len(n) == 0 {
		return 0, fmt.Errorf("missing")
	}
	var v int64
	for _, c := range n {
		if c < '0' || c > '9' || v > (1<<63-1-9)/10 {
			return 0, fmt.Errorf("want nanoseconds since the Unix epoch, got %s", shown(n))
		}
		v = v*10 + int64(c-'0')
	}
	return v, nil
}
