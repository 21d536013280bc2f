package importer

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The OTLP/JSON shapes: the protobuf JSON mapping of
// ExportTraceServiceRequest, as the Collector's file exporter writes it
// (one request per line) and as protojson writes it. The two differ in
// ways this file accepts both of: ids are hex (the OTLP/JSON rule, pdata)
// or base64 (protojson's bytes), enums are numbers (pdata) or names
// (protojson), 64-bit integers are strings or numbers.
type jsonRequest struct {
	ResourceSpans []struct {
		ScopeSpans []jsonScopeSpans `json:"scopeSpans"`
		// The name before OTLP 0.15 (2022).
		InstrumentationLibrarySpans []jsonScopeSpans `json:"instrumentationLibrarySpans"`
	} `json:"resourceSpans"`
}

type jsonScopeSpans struct {
	Spans []jsonSpan `json:"spans"`
}

type jsonSpan struct {
	TraceID      string     `json:"traceId"`
	SpanID       string     `json:"spanId"`
	ParentSpanID string     `json:"parentSpanId"`
	Name         string     `json:"name"`
	Start        numberText `json:"startTimeUnixNano"`
	End          numberText `json:"endTimeUnixNano"`
	Attributes   []jsonAttr `json:"attributes"`
	Status       struct {
		Code    numberText `json:"code"`
		Message string     `json:"message"`
	} `json:"status"`
}

// jsonAttr is one attribute, kept only when the mapping reads its key:
// the others are passed over without decoding their value.
type jsonAttr struct {
	code attrCode
	key  string
	val  attrValue
}

type jsonAnyValue struct {
	StringValue *string    `json:"stringValue"`
	IntValue    numberText `json:"intValue"`
	DoubleValue numberText `json:"doubleValue"`
	BoolValue   *bool      `json:"boolValue"`
	ArrayValue  *struct {
		Values []jsonAnyValue `json:"values"`
	} `json:"arrayValue"`
}

// UnmarshalJSON reads {"key": K, "value": V}, decoding V only when K is
// one the mapping reads. b is valid JSON (the decoder checked it).
func (a *jsonAttr) UnmarshalJSON(b []byte) error {
	*a = jsonAttr{}
	var keyRaw, valRaw []byte
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return fmt.Errorf("an attribute: want an object with key and value, got %s", jsonKind(b))
	}
	for i = skipSpace(b, i+1); i < len(b) && b[i] == '"'; {
		end := stringEnd(b, i)
		name := b[i+1 : end-1]
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // the ':'
		vEnd := valueEnd(b, i)
		switch string(name) {
		case "key":
			keyRaw = b[i:vEnd]
			if !bytes.Contains(keyRaw, []byte{'\\'}) && len(keyRaw) >= 2 && attrCodeOf(keyRaw[1:len(keyRaw)-1]) == attrNone {
				return nil // the common case: a key the mapping does not read
			}
		case "value":
			valRaw = b[i:vEnd]
		}
		i = skipSpace(b, vEnd)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if keyRaw == nil {
		return nil
	}
	var key string
	if err := json.Unmarshal(keyRaw, &key); err != nil {
		return fmt.Errorf("an attribute key: want a string, got %s", jsonKind(keyRaw))
	}
	a.code = attrCodeOf([]byte(key))
	if a.code == attrNone || valRaw == nil {
		a.code = attrNone
		return nil
	}
	a.key = key
	var v jsonAnyValue
	if err := json.Unmarshal(valRaw, &v); err != nil {
		return fmt.Errorf("attribute %s: want an AnyValue object (stringValue, intValue, …), got %s", key, jsonKind(valRaw))
	}
	a.val = v.value()
	return nil
}

func (v *jsonAnyValue) value() attrValue {
	var out attrValue
	switch {
	case v.StringValue != nil:
		out.str, out.hasStr = *v.StringValue, true
	case v.IntValue != "":
		out.num, out.isInt = string(v.IntValue), true
	case v.DoubleValue != "":
		out.num, out.isFloat = string(v.DoubleValue), true
	case v.BoolValue != nil:
		out.num = strconv.FormatBool(*v.BoolValue)
	case v.ArrayValue != nil:
		for _, e := range v.ArrayValue.Values {
			if e.StringValue != nil {
				out.strs = append(out.strs, *e.StringValue)
			}
		}
	}
	return out
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the closing quote of the string that
// starts at b[i].
func stringEnd(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// valueEnd returns the index after the JSON value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && strings.IndexByte(",}] \t\r\n", b[j]) < 0 {
		j++
	}
	return j
}

// numberText is a 64-bit integer (or a double, or an enum) as OTLP/JSON
// writes it: a string (the protobuf JSON mapping) or a number; checked
// where it is read.
type numberText string

func (n *numberText) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) >= 2 && b[0] == '"' && !bytes.ContainsRune(b, '\\'):
		*n = numberText(b[1 : len(b)-1])
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*n = numberText(s)
	case string(b) == "null":
		*n = ""
	default:
		*n = numberText(b)
	}
	return nil
}

// lineCounter counts the lines of what a json.Decoder reads through it,
// so that a value's line is known without reading the file twice: it
// notes where each newline is and forgets those before the values already
// placed, so it holds no more than the decoder's buffer holds.
type lineCounter struct {
	r    io.Reader
	off  int64
	nl   []int64
	line int
}

func (c *lineCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	for i := 0; i < n; {
		j := bytes.IndexByte(p[i:n], '\n')
		if j < 0 {
			break
		}
		c.nl = append(c.nl, c.off+int64(i+j))
		i += j + 1
	}
	c.off += int64(n)
	return n, err
}

// lineAt returns the line of byte offset pos; pos never goes back.
func (c *lineCounter) lineAt(pos int64) int {
	k := 0
	for k < len(c.nl) && c.nl[k] < pos {
		k++
	}
	c.line += k
	c.nl = c.nl[k:]
	return c.line + 1
}

// readJSON streams OTLP/JSON requests, one after the other.
func (rd *otlpReader) readJSON(r io.Reader) error {
	lc := &lineCounter{r: r}
	dec := json.NewDecoder(lc)
	for {
		if !dec.More() {
			break
		}
		start := dec.InputOffset() + leadingSpace(dec.Buffered())
		line := lc.lineAt(start)
		var req jsonRequest
		if err := dec.Decode(&req); err != nil {
			return rd.jsonError(err, line, lc)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range append(rs.ScopeSpans, rs.InstrumentationLibrarySpans...) {
				for k := range ss.Spans {
					if err := rd.addJSON(&ss.Spans[k], line); err != nil {
						return err
					}
				}
			}
		}
	}
	// More is false at the end, and before a stray ] or }: only the end
	// is fine.
	if _, err := dec.Token(); err != io.EOF {
		return &EntryError{File: rd.file, Entry: "line " + strconv.Itoa(lc.lineAt(dec.InputOffset())),
			Err: fmt.Errorf("malformed JSON: want one ExportTraceServiceRequest object per line")}
	}
	return nil
}

// leadingSpace counts the white space at the start of what the decoder
// has buffered.
func leadingSpace(r io.Reader) int64 {
	br, ok := r.(io.ByteReader)
	if !ok {
		return 0
	}
	var n int64
	for {
		c, err := br.ReadByte()
		if err != nil || (c != ' ' && c != '\n' && c != '\t' && c != '\r') {
			return n
		}
		n++
	}
}

// jsonError says in the user's terms what is wrong with the request that
// starts at line.
func (rd *otlpReader) jsonError(err error, line int, lc *lineCounter) error {
	entry := "line " + strconv.Itoa(line)
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		err = fmt.Errorf("the file looks truncated: the request that starts here does not end")
	case errors.As(err, &syn):
		entry = "line " + strconv.Itoa(lc.lineAt(syn.Offset))
		err = fmt.Errorf("malformed JSON: %v", syn)
	case errors.As(err, &typ) && typ.Field == "":
		err = fmt.Errorf("want an ExportTraceServiceRequest object (resourceSpans), got %s", jsonNoun(typ.Value))
	case errors.As(err, &typ):
		err = fmt.Errorf("%s: want %s, got %s", typ.Field, goKindNoun(typ.Type.Kind().String()), jsonNoun(typ.Value))
	}
	return &EntryError{File: rd.file, Entry: entry, Err: err}
}

func jsonNoun(v string) string {
	switch v {
	case "array", "object", "":
		return "an " + v
	}
	if strings.HasPrefix(v, "number") {
		return "a number"
	}
	return "a " + v
}

func goKindNoun(k string) string {
	switch k {
	case "slice":
		return "a list"
	case "struct", "ptr":
		return "an object"
	}
	return "a " + k
}

// addJSON reads one span of OTLP/JSON.
func (rd *otlpReader) addJSON(js *jsonSpan, line int) error {
	s := otlpSpan{name: js.Name, failed: js.Status.Code == "2" || js.Status.Code == "STATUS_CODE_ERROR", statusMsg: js.Status.Message}
	fail := func(err error) error {
		return &EntryError{File: rd.file, Entry: rd.entry(line, js.SpanID), Err: err}
	}
	if !jsonID(js.SpanID, s.id[:]) || js.SpanID == "" {
		return fail(fmt.Errorf("spanId: want 8 bytes in hex, got %q", js.SpanID))
	}
	if !jsonID(js.ParentSpanID, s.parent[:]) {
		return fail(fmt.Errorf("parentSpanId: want 8 bytes in hex, got %q", js.ParentSpanID))
	}
	s.hasParent = s.parent != [8]byte{}
	if !jsonID(js.TraceID, s.trace[:]) {
		return fail(fmt.Errorf("traceId: want 16 bytes in hex, got %q", js.TraceID))
	}
	var err error
	if s.start, err = unixNano(js.Start); err != nil {
		return fail(fmt.Errorf("startTimeUnixNano: %v", err))
	}
	if s.end, err = unixNano(js.End); err != nil {
		return fail(fmt.Errorf("endTimeUnixNano: %v", err))
	}
	for k := range js.Attributes {
		if a := &js.Attributes[k]; a.code != attrNone {
			if err := s.attrs.set(a.code, a.key, &a.val); err != nil {
				return fail(err)
			}
		}
	}
	return rd.add(&s, line)
}

// jsonID reads a span or trace id into dst: hex (OTLP/JSON) or base64
// (protojson); "" leaves dst zero.
func jsonID(v string, dst []byte) bool {
	if v == "" {
		return true
	}
	if len(v) == 2*len(dst) {
		if _, err := hex.Decode(dst, []byte(v)); err == nil {
			return true
		}
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) != len(dst) {
		return false
	}
	copy(dst, b)
	return true
}

func unixNano(n numberText) (int64, error) {
	if n == "" {
		return 0, fmt.Errorf("missing")
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("want nanoseconds since the Unix epoch, got %s", string(n))
	}
	return v, nil
}
