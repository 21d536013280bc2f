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
	"unicode"
)

// decodeOpenAIChat reads openai-chat. JSON Lines (a first line that is a
// whole object) is streamed: read line by line, each line's run handed
// on as soon as it is mapped, in memory one line at a time. Any other
// shape (a messages array, an array of objects, a pretty-printed
// document) is read whole.
func decodeOpenAIChat(file string, r io.Reader, o *Options, out *Output) error {
	lr := lineReader{br: bufio.NewReaderSize(r, 64<<10)}
	var head bytes.Buffer // what was read before the shape is known
	for {
		line, err := lr.next()
		if len(line) == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				return &EntryError{File: file, Err: fmt.Errorf("empty file")}
			}
			return fmt.Errorf("cannot read %s: %w", file, err)
		}
		if lr.line == 1 {
			line = bytes.TrimPrefix(line, []byte{0xEF, 0xBB, 0xBF})
		}
		head.Write(line)
		t := bytes.TrimSpace(line)
		if len(t) == 0 {
			continue
		}
		if t[0] != '{' || !json.Valid(t) {
			rest := io.MultiReader(bytes.NewReader(head.Bytes()), lr.br)
			return whole(func(file string, data []byte, o *Options) ([]Run, error) {
				return importOpenAIChat(file, data, o, out.Skip)
			})(file, rest, o, out)
		}
		return newChatStream(file, o, out).lines(&lr, lr.line, t)
	}
}

// lineReader reads lines of any length, each with its newline.
type lineReader struct {
	br   *bufio.Reader
	buf  []byte
	line int // the number of the last line returned
}

// next returns the next line, valid until the next call; at the end of
// the input, the last line (without newline, possibly empty) and io.EOF.
func (l *lineReader) next() ([]byte, error) {
	l.buf = l.buf[:0]
	for {
		frag, err := l.br.ReadSlice('\n')
		l.buf = append(l.buf, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil || len(l.buf) > 0 {
			l.line++
		}
		if err != nil && len(l.buf) > 0 && errors.Is(err, io.EOF) {
			return l.buf, nil
		}
		return l.buf, err
	}
}

// chatStream maps the lines of an openai-chat JSON Lines file.
type chatStream struct {
	file   string
	o      *Options
	out    *Output
	field  string
	fast   reflect.Type // {Messages *[]chatMessage `json:"FIELD"`; ID json.RawMessage `json:"IDFIELD"`}, or nil
	runs   int
	names  namer
	pend   []byte // the line read ahead, mapped when the next one is read
	pendAt int
	last   bool // the value being mapped is the file's last
}

func newChatStream(file string, o *Options, out *Output) *chatStream {
	c := &chatStream{file: file, o: o, out: out, field: o.MessagesField}
	if c.field == "" {
		c.field = "messages"
	}
	if o.IDField != c.field && validTag(c.field) && (o.IDField == "" || validTag(o.IDField)) {
		fields := []reflect.StructField{{Name: "Messages", Type: reflect.TypeFor[*[]chatMessage](), Tag: reflect.StructTag(`json:"` + c.field + `"`)}}
		if o.IDField != "" {
			fields = append(fields, reflect.StructField{Name: "ID", Type: reflect.TypeFor[json.RawMessage](), Tag: reflect.StructTag(`json:"` + o.IDField + `"`)})
		}
		c.fast = reflect.StructOf(fields)
	}
	return c
}

// validTag reports whether a field name can be a json struct tag as it
// is: what encoding/json accepts as a tag's name (letters, digits and
// some punctuation), and not "-". For another name encoding/json would
// fall back to the Go field's name, so such names take the slow path.
func validTag(name string) bool {
	if name == "" || name == "-" {
		return false
	}
	for _, c := range name {
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) && !strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c) {
			return false
		}
	}
	return true
}

// lines maps the first value (t, on line at) and every following line.
// A line is mapped once the next value is read, so that a file of one
// value names no line in its errors, as a JSON document does not.
func (c *chatStream) lines(lr *lineReader, at int, t []byte) error {
	c.pend, c.pendAt = append(c.pend[:0], t...), at
	multi := false
	for {
		line, err := lr.next()
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("cannot read %s: %w", c.file, err)
		}
		if next := bytes.TrimSpace(line); len(next) > 0 {
			if err := c.value(c.pend, "line "+strconv.Itoa(c.pendAt)); err != nil {
				return err
			}
			multi = true
			c.pend, c.pendAt = append(c.pend[:0], next...), lr.line
		}
		if err != nil { // io.EOF
			entry := ""
			if multi {
				entry = "line " + strconv.Itoa(c.pendAt)
			}
			c.last = true
			return c.value(c.pend, entry)
		}
	}
}

// value maps one line's object to a run and hands it on.
func (c *chatStream) value(data []byte, entry string) error {
	c.runs++
	run, err := c.fastRun(data)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return &EntryError{File: c.file, Entry: entry, Err: lineSyntaxError(data, se, c.last)}
	case err != nil:
		return c.entryError(entry, err)
	case run == nil: // not the expected shape: the slow path names what is wrong
		d, err := chatDocOf(entry, data, c.field, c.o.IDField, false)
		if err != nil {
			return &EntryError{File: c.file, Entry: entry, Err: err}
		}
		events, err := chatEvents(d.messages, c.o.ErrorPrefix, c.out.Skip)
		if err != nil {
			return c.entryError(entry, err)
		}
		run = &Run{ID: d.id, Events: events}
	}
	if c.o.IDField == "" {
		run.ID = baseName(c.file) + "#" + strconv.Itoa(c.runs)
	}
	run.ID = c.names.unique(run.ID)
	return c.out.Run(*run)
}

// fastRun decodes a line in one pass into its messages and maps them. It
// returns nil, nil when the line is JSON but not of the expected shape
// (the slow path then says how), and a *json.SyntaxError when it is not
// JSON.
func (c *chatStream) fastRun(data []byte) (*Run, error) {
	if c.fast == nil {
		if !json.Valid(data) {
			var v any
			return nil, json.Unmarshal(data, &v)
		}
		return nil, nil
	}
	v := reflect.New(c.fast)
	if err := json.Unmarshal(data, v.Interface()); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, nil
	}
	msgs, _ := v.Elem().Field(0).Interface().(*[]chatMessage)
	if msgs == nil {
		return nil, nil
	}
	run := &Run{}
	if c.o.IDField != "" {
		idRaw, _ := v.Elem().Field(1).Interface().(json.RawMessage)
		if idRaw == nil {
			return nil, nil
		}
		var err error
		if run.ID, err = runName(idRaw, c.o.IDField); err != nil {
			return nil, err
		}
	}
	var err error
	run.Events, err = chatMessageEvents(*msgs, c.o.ErrorPrefix, c.out.Skip)
	return run, err
}

func (c *chatStream) entryError(entry string, err error) error {
	var ee *EntryError
	if errors.As(err, &ee) {
		ee.File = c.file
		if entry != "" {
			ee.Entry = entry + ": " + ee.Entry
		}
		return ee
	}
	return &EntryError{File: c.file, Entry: entry, Err: err}
}

// namer gives names that repeat #2, #3, … in order, as Runs.Uniquify does.
type namer struct {
	seen  map[string]bool
	last  map[string]int
	given map[string]string // rename: the name last given to a run of each id
}

func (n *namer) unique(id string) string {
	if n.seen == nil {
		n.seen, n.last = map[string]bool{}, map[string]int{}
	}
	if !n.seen[id] {
		n.seen[id] = true
		return id
	}
	for k := max(n.last[id], 1) + 1; ; k++ {
		if cand := id + "#" + strconv.Itoa(k); !n.seen[cand] {
			n.seen[cand], n.last[id] = true, k
			return cand
		}
	}
}

// lineSyntaxError says what is wrong with a line of JSON Lines that is not
// JSON, in the user's terms: a last line that ends inside a value is a
// file cut short (an agent stopped while writing), another line that does
// an object written over several lines; anything else is the fault and
// where it is, never encoding/json's "unexpected end of JSON input".
func lineSyntaxError(data []byte, se *json.SyntaxError, last bool) error {
	switch {
	case se.Offset >= int64(len(data)) && last:
		return fmt.Errorf("malformed JSON: the file looks truncated (its last line ends inside a value)")
	case se.Offset >= int64(len(data)):
		return fmt.Errorf("malformed JSON: the line ends inside a value (an object over several lines, or one cut short)")
	}
	return fmt.Errorf("malformed JSON at byte %d of the line: %s (a JSON Lines file holds one whole value per line)", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
}
