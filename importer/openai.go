package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentstop/agentstop/termination"
)

// chatMessage is an OpenAI Chat Completions message.
type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content"` // a string, null or a list of parts; decoded once
	Name       string         `json:"name"`
	ToolCalls  []chatToolCall `json:"tool_calls"`
	ToolCallID string         `json:"tool_call_id"`
	// FunctionCall is the legacy single call (before tool_calls), whose
	// result is a "function" message named by the function.
	FunctionCall *struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function_call"`
	Model string          `json:"model"`
	Usage json.RawMessage `json:"usage"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatDoc is one run's worth of input: its messages and where they came
// from, for names and errors.
type chatDoc struct {
	entry    string // "" for the whole file, "line 3", "[2]"
	id       string // the -id field's value, when given
	messages []json.RawMessage
}

// importOpenAIChat reads a messages array, an object holding one, or an
// array or JSON Lines of such objects.
func importOpenAIChat(file string, data []byte, o *Options, skip func(string)) ([]Run, error) {
	field := o.MessagesField
	if field == "" {
		field = "messages"
	}
	values, lines, err := jsonValues(data)
	if err != nil {
		return nil, &EntryError{File: file, Err: err}
	}
	var docs []chatDoc
	switch {
	case len(values) == 1 && isArrayOfMessages(values[0]):
		d, err := chatDocOf("", values[0], field, o.IDField, true)
		if err != nil {
			return nil, &EntryError{File: file, Err: err}
		}
		docs = append(docs, d)
	case len(values) == 1 && jsonKind(values[0]) == "an array":
		var items []json.RawMessage
		if err := json.Unmarshal(values[0], &items); err != nil {
			return nil, &EntryError{File: file, Err: err}
		}
		for i, it := range items {
			entry := "[" + strconv.Itoa(i) + "]"
			d, err := chatDocOf(entry, it, field, o.IDField, false)
			if err != nil {
				return nil, &EntryError{File: file, Entry: entry, Err: err}
			}
			docs = append(docs, d)
		}
	default:
		for i, v := range values {
			entry := ""
			if len(values) > 1 {
				entry = "line " + strconv.Itoa(lines[i])
			}
			d, err := chatDocOf(entry, v, field, o.IDField, false)
			if err != nil {
				return nil, &EntryError{File: file, Entry: entry, Err: err}
			}
			docs = append(docs, d)
		}
	}
	if len(docs) == 0 {
		return nil, &EntryError{File: file, Err: fmt.Errorf("no runs: an empty list")}
	}
	base := baseName(file)
	runs := make([]Run, 0, len(docs))
	for i, d := range docs {
		id := d.id
		if o.IDField == "" {
			id = base + "#" + strconv.Itoa(i+1)
		}
		events, err := chatEvents(d.messages, o.ErrorPrefix, skip)
		if err != nil {
			var ee *EntryError
			if errors.As(err, &ee) {
				ee.File = file
				if d.entry != "" {
					ee.Entry = d.entry + ": " + ee.Entry
				}
				return nil, ee
			}
			return nil, &EntryError{File: file, Entry: d.entry, Err: err}
		}
		runs = append(runs, Run{ID: id, Events: events})
	}
	Runs(runs).Uniquify()
	return runs, nil
}

// jsonValues splits data into its top-level JSON values (one for a JSON
// document, one per line for JSON Lines), with the line each starts on.
// It is linear in data: lines are counted forward from the previous
// value, never again from the start.
func jsonValues(data []byte) ([]json.RawMessage, []int, error) {
	return jsonValuesCounted(data, &lineCounter{data: data, line: 1})
}

func jsonValuesCounted(data []byte, lc *lineCounter) ([]json.RawMessage, []int, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var values []json.RawMessage
	var lines []int
	for {
		start := dec.InputOffset()
		var v json.RawMessage
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		// The value starts after the whitespace that precedes it.
		at := int(start)
		for at < len(data) && (data[at] == ' ' || data[at] == '\n' || data[at] == '\r' || data[at] == '\t') {
			at++
		}
		line := lc.lineAt(at)
		if err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return nil, nil, fmt.Errorf("line %d: malformed JSON: %v", lc.lineAt(int(se.Offset)), err)
			}
			return nil, nil, fmt.Errorf("line %d: malformed JSON: %v", line, err)
		}
		values = append(values, v)
		lines = append(lines, line)
	}
	return values, lines, nil
}

// lineCounter tells the line of an offset in data, counting newlines
// forward from the last offset asked about: over offsets that only grow,
// data is scanned once.
type lineCounter struct {
	data    []byte
	at      int // newlines before at are counted in line
	line    int
	scanned int // bytes counted over, in all (for the test of linearity)
}

// lineAt returns the 1-based line of offset off (clamped to the data).
func (c *lineCounter) lineAt(off int) int {
	off = min(max(off, 0), len(c.data))
	if off < c.at { // not expected; stay correct anyway
		c.scanned += off
		return bytes.Count(c.data[:off], []byte{'\n'}) + 1
	}
	c.scanned += off - c.at
	c.line += bytes.Count(c.data[c.at:off], []byte{'\n'})
	c.at = off
	return c.line
}

// isArrayOfMessages reports whether v is an array whose first element is
// an object with a role: a bare messages list.
func isArrayOfMessages(v json.RawMessage) bool {
	var items []struct {
		Role *string `json:"role"`
	}
	if json.Unmarshal(v, &items) != nil || len(items) == 0 {
		return false
	}
	return items[0].Role != nil
}

func chatDocOf(entry string, v json.RawMessage, field, idField string, bare bool) (chatDoc, error) {
	d := chatDoc{entry: entry}
	if bare {
		if idField != "" {
			return d, fmt.Errorf("-id %s: the file is a bare list of messages, with no field naming the run", idField)
		}
		return d, json.Unmarshal(v, &d.messages)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(v, &obj); err != nil {
		return d, fmt.Errorf("want an object with %q or a list of messages, got %s", field, jsonKind(v))
	}
	raw, ok := lookupField(obj, field)
	if !ok {
		return d, fmt.Errorf("no %q field (name the field holding the messages with -messages)", field)
	}
	if err := json.Unmarshal(raw, &d.messages); err != nil || jsonKind(raw) != "an array" {
		return d, fmt.Errorf("%s: want a list of messages, got %s", field, jsonKind(raw))
	}
	if idField != "" {
		idRaw, ok := lookupField(obj, idField)
		if !ok {
			return d, fmt.Errorf("no %q field (-id)", idField)
		}
		var err error
		if d.id, err = runName(idRaw, idField); err != nil {
			return d, err
		}
	}
	return d, nil
}

// lookupField finds a field as encoding/json matches a struct's: by its
// exact name, else by a name that differs only in case, so that a file
// reads the same whichever way it is decoded.
func lookupField(obj map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	if v, ok := obj[name]; ok {
		return v, true
	}
	for k, v := range obj {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return nil, false
}

// runName reads the value of the -id field: a string or a number.
func runName(idRaw json.RawMessage, idField string) (string, error) {
	var id string
	if err := json.Unmarshal(idRaw, &id); err == nil {
	} else if n := bytes.TrimSpace(idRaw); jsonKind(n) == "a number" {
		id = string(n)
	} else {
		return "", fmt.Errorf("%s: want a string or a number naming the run, got %s", idField, jsonKind(idRaw))
	}
	if id == "" {
		return "", fmt.Errorf("%s: empty run name", idField)
	}
	return id, nil
}

// textOf reads a message's content: a string, null, or a list of parts
// whose text parts are joined with newlines; each other part (an image,
// a file) is counted by skip, when not nil.
func textOf(raw json.RawMessage, skip func(string)) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("content: want a string or a list of parts, got %s", jsonKind(raw))
	}
	return textOfValue(v, skip)
}

// nonTextPart is the kind of a content part that is not text, for the
// summary of what an import left out.
const nonTextPart = "non-text content part"

// textOfValue is textOf of a content decoded into an any.
func textOfValue(v any, skip func(string)) (string, error) {
	switch c := v.(type) {
	case nil:
		return "", nil
	case string:
		return c, nil
	case []any:
		var b strings.Builder
		n := 0
		for _, p := range c {
			part, ok := p.(map[string]any)
			if !ok {
				return "", fmt.Errorf("content: want a string or a list of parts (objects), got a list holding %s", kindOfValue(p))
			}
			switch part["type"] {
			case "text", "input_text", "output_text":
				if n > 0 {
					b.WriteByte('\n')
				}
				t, _ := part["text"].(string)
				b.WriteString(t)
				n++
			default:
				if skip != nil {
					skip(nonTextPart)
				}
			}
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("content: want a string or a list of parts, got %s", kindOfValue(v))
}

// kindOfValue names the kind of a decoded JSON value.
func kindOfValue(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "true or false"
	case float64:
		return "a number"
	case []any:
		return "a list"
	}
	return "an object"
}

// chatEvents maps one run's messages, given as raw JSON: each is decoded
// on its own, so that one that is not a message is named.
func chatEvents(raws []json.RawMessage, errorPrefix string, skip func(string)) ([]termination.Event, error) {
	msgs := make([]chatMessage, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &msgs[i]); err != nil {
			why := fmt.Errorf("want a message object with a role, got %s", jsonKind(raw))
			if jsonKind(raw) == "an object" {
				why = errors.New(describeJSONError(err))
			}
			return nil, &EntryError{Entry: fmt.Sprintf("messages[%d]", i), Err: why}
		}
	}
	return chatMessageEvents(msgs, errorPrefix, skip)
}

// chatMessageEvents maps one run's decoded messages.
func chatMessageEvents(msgs []chatMessage, errorPrefix string, skip func(string)) ([]termination.Event, error) {
	lastAssistant := -1
	for i := range msgs {
		if msgs[i].Role == "assistant" {
			lastAssistant = i
		}
	}
	events := make([]termination.Event, 0, len(msgs)+len(msgs)/2)
	calls := map[string]string{} // call id → tool
	for i, m := range msgs {
		bad := func(format string, a ...any) error {
			return &EntryError{Entry: "messages[" + strconv.Itoa(i) + "]", Err: fmt.Errorf(format, a...)}
		}
		text, err := textOfValue(m.Content, skip)
		if err != nil {
			return nil, bad("%v", err)
		}
		switch m.Role {
		case "system", "developer", "user":
			events = append(events, termination.Event{Kind: termination.KindInput, Source: m.Role, Text: text})
		case "assistant":
			u, err := usage(m.Usage)
			if err != nil {
				return nil, bad("%v", err)
			}
			kind := termination.KindMessage
			if i == lastAssistant && len(m.ToolCalls) == 0 && m.FunctionCall == nil {
				kind = termination.KindFinal
			}
			events = append(events, termination.Event{Kind: kind, Source: "agent", Text: text, Model: m.Model, Usage: u})
			if fc := m.FunctionCall; fc != nil {
				if fc.Name == "" {
					return nil, bad("function_call: no function name")
				}
				events = append(events, termination.Event{Kind: termination.KindToolCall, Tool: fc.Name, Args: argsOf(fc.Arguments)})
			}
			for k, c := range m.ToolCalls {
				if c.Function.Name == "" {
					return nil, bad("tool_calls[%d]: no function name", k)
				}
				if c.ID != "" {
					calls[c.ID] = c.Function.Name
				}
				events = append(events, termination.Event{Kind: termination.KindToolCall, Tool: c.Function.Name,
					Args: argsOf(c.Function.Arguments), CallID: c.ID})
			}
		case "tool", "function":
			tool, ok := calls[m.ToolCallID]
			if m.Role == "function" {
				tool, ok = m.Name, m.Name != ""
			}
			if !ok {
				if m.ToolCallID == "" {
					return nil, bad("a tool message without tool_call_id")
				}
				return nil, bad("tool_call_id %q: no earlier assistant tool call has this id", m.ToolCallID)
			}
			ev := termination.Event{Kind: termination.KindToolResult, Tool: tool, CallID: m.ToolCallID, Text: text}
			if errorPrefix != "" && strings.HasPrefix(text, errorPrefix) {
				ev.Err = text
			}
			events = append(events, ev)
		case "":
			return nil, bad("no role")
		case "exit":
			return nil, bad("role \"exit\": a mini-swe-agent 2 trajectory; import it with -from mini-swe-agent")
		default:
			return nil, bad("role %q: want system, developer, user, assistant or tool", m.Role)
		}
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("no messages")
	}
	return events, nil
}
