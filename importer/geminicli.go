package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// gmSession is a Gemini CLI conversation record (ConversationRecord):
// the JSON document of session-….json, or what the records of a
// session-….jsonl add up to.
type gmSession struct {
	SessionID string      `json:"sessionId"`
	Kind      string      `json:"kind"`
	Messages  []gmMessage `json:"messages"`
}

// gmMessage is one message record (MessageRecord).
type gmMessage struct {
	ID        string          `json:"id"`
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Content   json.RawMessage `json:"content"`
	Model     string          `json:"model"`
	ToolCalls []gmToolCall    `json:"toolCalls"`
	Tokens    *struct {
		Input    int64 `json:"input"`
		Output   int64 `json:"output"`
		Cached   int64 `json:"cached"`
		Thoughts int64 `json:"thoughts"`
		Tool     int64 `json:"tool"`
	} `json:"tokens"`
	entry string // where it is in the file, for errors
}

// gmToolCall is a tool call of a gemini message (ToolCallRecord).
type gmToolCall struct {
	ID            string          `json:"id"`
	Name          string          `json:"name"`
	Args          json.RawMessage `json:"args"`
	Result        json.RawMessage `json:"result"`
	Status        string          `json:"status"`
	Timestamp     string          `json:"timestamp"`
	ResultDisplay json.RawMessage `json:"resultDisplay"`
}

// importGeminiCLI reads a Gemini CLI session: the JSON document
// (session-….json) or the JSON Lines log that later versions write
// (session-….jsonl: a metadata record, message records — a message
// rewritten by a later record with its id — and $set / $rewindTo records).
func importGeminiCLI(file string, r io.Reader, _ *Options, out *Output) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", file, err)
	}
	data = bytes.TrimPrefix(data, []byte{0xEF, 0xBB, 0xBF})
	if len(bytes.TrimSpace(data)) == 0 {
		return &EntryError{File: file, Err: fmt.Errorf("empty file")}
	}
	var s gmSession
	if json.Valid(data) {
		if err := decodeAgentJSON(data, &s); err != nil {
			return &EntryError{File: file, Err: err}
		}
		if s.Messages == nil {
			return &EntryError{File: file, Err: fmt.Errorf("no messages: not a Gemini CLI session")}
		}
		for i := range s.Messages {
			s.Messages[i].entry = "messages[" + strconv.Itoa(i) + "]"
		}
	} else if first, _, _ := bytes.Cut(data, []byte("\n")); !json.Valid(bytes.TrimSpace(first)) {
		entry, truncated := gmSyntaxLine(data)
		if truncated {
			return &EntryError{File: file, Entry: entry, Err: fmt.Errorf("malformed JSON: the session document looks truncated (it ends inside a value)")}
		}
		return &EntryError{File: file, Entry: entry, Err: fmt.Errorf("malformed JSON: a session document that is not valid JSON")}
	} else if err := gmLog(file, data, &s); err != nil {
		return err
	}
	run, entry, err := gmRun(&s, file, out)
	if err != nil {
		return &EntryError{File: file, Entry: entry, Err: err}
	}
	if len(run.Events) == 0 {
		out.Skip("session without messages")
		return nil
	}
	return out.Run(run)
}

// gmLog replays the records of a JSON Lines session into s, as Gemini CLI
// loads it: a message record replaces the earlier one with its id in
// place; {"$rewindTo": ID} drops that message and every later one (all,
// when no message has the id); {"$set": {…}} updates the metadata, its
// messages replacing the whole list.
func gmLog(file string, data []byte, s *gmSession) error {
	index := map[string]int{}
	return agentLines("", file, bytes.NewReader(data), func(n int, line []byte) error {
		var rec struct {
			ID       *string         `json:"id"`
			RewindTo *string         `json:"$rewindTo"`
			Set      json.RawMessage `json:"$set"`
		}
		if err := decodeAgentJSON(line, &rec); err != nil {
			return err
		}
		entry := "line " + strconv.Itoa(n)
		switch {
		case rec.RewindTo != nil:
			i, ok := index[*rec.RewindTo]
			if !ok {
				i = 0
			}
			for _, m := range s.Messages[i:] {
				delete(index, m.ID)
			}
			s.Messages = s.Messages[:i]
		case rec.ID != nil:
			var m gmMessage
			if err := decodeAgentJSON(line, &m); err != nil {
				return err
			}
			m.entry = entry
			if i, ok := index[m.ID]; ok {
				s.Messages[i] = m
				return nil
			}
			index[m.ID] = len(s.Messages)
			s.Messages = append(s.Messages, m)
		case len(rec.Set) > 0:
			return gmSet(rec.Set, entry, s, index)
		default:
			var meta struct {
				gmSession
				ProjectHash string `json:"projectHash"`
			}
			if err := decodeAgentJSON(line, &meta); err != nil {
				return err
			}
			if meta.SessionID == "" || meta.ProjectHash == "" {
				return fmt.Errorf("not a record of a Gemini CLI session (want a message with an id, metadata with a sessionId and projectHash, $set or $rewindTo)")
			}
			s.SessionID, s.Kind = meta.SessionID, orElse(meta.Kind, s.Kind)
		}
		return nil
	})
}

// gmSet applies a $set record.
func gmSet(raw json.RawMessage, entry string, s *gmSession, index map[string]int) error {
	var set struct {
		gmSession
		Messages *[]gmMessage `json:"messages"`
	}
	if err := decodeAgentJSON(raw, &set); err != nil {
		return fmt.Errorf("$set: %w", err)
	}
	if set.SessionID != "" {
		s.SessionID = set.SessionID
	}
	s.Kind = orElse(set.Kind, s.Kind)
	if set.Messages != nil {
		s.Messages = *set.Messages
		clear(index)
		for i := range s.Messages {
			s.Messages[i].entry = entry + " $set.messages[" + strconv.Itoa(i) + "]"
			index[s.Messages[i].ID] = i
		}
	}
	return nil
}

// orElse is s, or old when s is empty.
func orElse(s, old string) string {
	if s != "" {
		return s
	}
	return old
}

// gmRun maps a conversation to a run named by its sessionId; a
// sub-agent's conversation (kind "subagent") has for parent the session
// named by the directory that holds its file, where Gemini CLI keeps a
// sub-agent's conversations.
func gmRun(s *gmSession, file string, out *Output) (Run, string, error) {
	run := Run{ID: orElse(s.SessionID, baseName(file))}
	if dir := filepath.Base(filepath.Dir(file)); s.Kind == "subagent" && dir != "." && dir != "chats" && dir != string(filepath.Separator) {
		run.Parent = dir
	}
	last, lastTools := -1, false
	for i := range s.Messages {
		m := &s.Messages[i]
		if err := gmMessageEvents(m, &run, out, &last, &lastTools); err != nil {
			return Run{}, m.entry, err
		}
	}
	if last >= 0 && !lastTools {
		run.Events[last].Kind = termination.KindFinal
	}
	return run, "", nil
}

// gmMessageEvents maps one message.
func gmMessageEvents(m *gmMessage, run *Run, out *Output, last *int, lastTools *bool) error {
	t, err := ccTime(m.Timestamp)
	if err != nil {
		return err
	}
	text, err := gmText(m.Content)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	switch m.Type {
	case "user":
		run.Events = append(run.Events, termination.Event{Kind: termination.KindInput, Source: "user", Text: text, Time: t})
		return nil
	case "error":
		msg := orDefault(strings.TrimSpace(text), "error")
		run.Events = append(run.Events, termination.Event{Kind: termination.KindError, Source: "gemini-cli", Text: text, Err: msg, Time: t})
		return nil
	case "info", "warning":
		out.Skip(m.Type + " message")
		return nil
	case "gemini":
	case "":
		return fmt.Errorf("no type (want user, gemini, info, warning, error)")
	default:
		return fmt.Errorf("type %q (want user, gemini, info, warning, error)", m.Type)
	}
	ev := termination.Event{Kind: termination.KindMessage, Source: "agent", Text: text, Model: m.Model, Time: t}
	if k := m.Tokens; k != nil {
		ev.Usage = termination.Usage{InputTokens: k.Input + k.Tool, OutputTokens: k.Output + k.Thoughts}
		if k.Input < 0 || k.Output < 0 || k.Thoughts < 0 || k.Tool < 0 {
			return fmt.Errorf("tokens: negative token count")
		}
	}
	*last, *lastTools = len(run.Events), len(m.ToolCalls) > 0
	run.Events = append(run.Events, ev)
	for j, tc := range m.ToolCalls {
		evs, err := gmToolEvents(tc, t)
		if err != nil {
			return fmt.Errorf("toolCalls[%d]: %w", j, err)
		}
		run.Events = append(run.Events, evs...)
	}
	return nil
}

// gmToolEvents maps a tool call to its tool_call and, once it has ended
// (status success, error or cancelled), its tool_result; a call still
// pending when the file was written (validating, scheduled,
// awaiting_approval, executing) has no result.
func gmToolEvents(tc gmToolCall, msgTime time.Time) ([]termination.Event, error) {
	if tc.Name == "" {
		return nil, fmt.Errorf("a tool call without a name")
	}
	t, err := ccTime(tc.Timestamp)
	if err != nil {
		return nil, err
	}
	if t.IsZero() {
		t = msgTime
	}
	call := termination.Event{Kind: termination.KindToolCall, Source: "agent", Tool: tc.Name, Args: ccArgs(tc.Args), CallID: tc.ID, Time: t}
	text, failure, err := gmResult(tc.Result)
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	res := termination.Event{Kind: termination.KindToolResult, Source: "tool", Tool: tc.Name, CallID: tc.ID, Text: text, Time: t}
	switch tc.Status {
	case "success":
	case "error":
		var display string
		if jsonKind(tc.ResultDisplay) == "a string" {
			_ = json.Unmarshal(tc.ResultDisplay, &display)
		}
		res.Err = orElse(failure, orElse(strings.TrimSpace(display), orElse(strings.TrimSpace(text), "tool error")))
	case "cancelled":
		res.Err = "cancelled"
	case "validating", "scheduled", "awaiting_approval", "executing":
		return []termination.Event{call}, nil
	case "":
		return nil, fmt.Errorf("no status (want success, error, cancelled, …)")
	default:
		return nil, fmt.Errorf("status %q (want success, error, cancelled, validating, scheduled, awaiting_approval, executing)", tc.Status)
	}
	return []termination.Event{call, res}, nil
}

// gmPart is a part of a Gemini content (@google/genai Part), as far as
// the importer reads it.
type gmPart struct {
	Text             string `json:"text"`
	Thought          bool   `json:"thought"`
	FunctionResponse *struct {
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

// gmParts reads a PartListUnion: a string, a part, or a list of strings
// and parts.
func gmParts(raw json.RawMessage) ([]gmPart, error) {
	switch jsonKind(raw) {
	case "nothing", "null":
		return nil, nil
	case "a string":
		var s string
		err := json.Unmarshal(raw, &s)
		return []gmPart{{Text: s}}, err
	case "an object":
		var p gmPart
		if err := decodeAgentJSON(raw, &p); err != nil {
			return nil, err
		}
		return []gmPart{p}, nil
	case "an array":
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, err
		}
		var parts []gmPart
		for i, it := range items {
			if k := jsonKind(it); k != "a string" && k != "an object" {
				return nil, fmt.Errorf("[%d]: want a string or a part, got %s", i, k)
			}
			p, err := gmParts(it)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			parts = append(parts, p...)
		}
		return parts, nil
	}
	return nil, fmt.Errorf("want a string or a list of parts, got %s", jsonKind(raw))
}

// gmText is the text of a content, thoughts left out.
func gmText(raw json.RawMessage) (string, error) {
	parts, err := gmParts(raw)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		if !p.Thought {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// gmResult reads a tool call's result: its text (a function response's
// output, then any text parts) and the error a function response
// reports.
func gmResult(raw json.RawMessage) (text, failure string, err error) {
	parts, err := gmParts(raw)
	if err != nil {
		return "", "", err
	}
	var texts []string
	for _, p := range parts {
		if p.FunctionResponse != nil {
			out, fail := gmResponse(p.FunctionResponse.Response)
			texts = append(texts, out)
			failure = orElse(failure, fail)
			continue
		}
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), failure, nil
}

// gmResponse reads a function response: {output} and {error} (strings),
// or any other object as its JSON.
func gmResponse(raw json.RawMessage) (output, failure string) {
	var r struct {
		Output json.RawMessage `json:"output"`
		Error  json.RawMessage `json:"error"`
	}
	if jsonKind(raw) != "an object" || json.Unmarshal(raw, &r) != nil {
		return strings.TrimSpace(string(raw)), ""
	}
	str := func(v json.RawMessage) string {
		var s string
		if jsonKind(v) == "a string" && json.Unmarshal(v, &s) == nil {
			return s
		}
		if k := jsonKind(v); k == "nothing" || k == "null" {
			return ""
		}
		return string(v)
	}
	output, failure = str(r.Output), str(r.Error)
	if output == "" && failure == "" {
		output = string(raw)
	}
	if output == "" {
		output = failure
	}
	return output, failure
}

// gmSyntaxLine names the line of a document's first syntax error, and
// whether the document ends inside a value.
func gmSyntaxLine(data []byte) (string, bool) {
	var v any
	var se *json.SyntaxError
	if err := json.Unmarshal(data, &v); errors.As(err, &se) && se.Offset <= int64(len(data)) {
		trimmed := bytes.TrimRight(data, " \t\r\n")
		at := min(se.Offset, int64(len(trimmed)))
		return "line " + strconv.Itoa(bytes.Count(data[:at], []byte("\n"))+1), se.Offset >= int64(len(trimmed))
	}
	return "", false
}
