package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// ccLine is one line of a Claude Code session file.
type ccLine struct {
	Type        string     `json:"type"`
	SessionID   string     `json:"sessionId"`
	AgentID     string     `json:"agentId"`
	IsSidechain bool       `json:"isSidechain"`
	IsMeta      bool       `json:"isMeta"`
	IsSummary   bool       `json:"isCompactSummary"`
	IsAPIError  bool       `json:"isApiErrorMessage"`
	UUID        string     `json:"uuid"`
	ParentUUID  string     `json:"parentUuid"`
	Timestamp   string     `json:"timestamp"`
	Message     *ccMessage `json:"message"`
}

// ccMessage is a line's message, in Anthropic Messages form.
type ccMessage struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
	Usage   json.RawMessage `json:"usage"`
}

// ccBlock is a content block of a message.
type ccBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// ccRun is a run being built: the session's or one sub-agent's.
type ccRun struct {
	Run
	turns    map[string]int // message.id → index of its model turn
	withTool map[int]bool   // model turns that requested a tool
	tools    map[string]string
	last     int // the last model turn, -1 before the first
}

// ccSession maps one Claude Code file: its runs by key, in the order they
// first appear, and which sidechain each sidechain line belongs to.
type ccSession struct {
	file   string
	out    *Output
	runs   map[string]*ccRun
	order  []*ccRun
	chains map[string]string // a sidechain line's uuid → its run's key
}

// importClaudeCode reads a Claude Code session JSONL file: the session's
// own file or a sub-agent's (agent-ID.jsonl).
func importClaudeCode(file string, r io.Reader, _ *Options, out *Output) error {
	s := &ccSession{file: file, out: out, runs: map[string]*ccRun{}, chains: map[string]string{}}
	err := agentLines("claude-code", file, r, func(n int, data []byte) error {
		var l ccLine
		if err := decodeAgentJSON(data, &l); err != nil {
			return err
		}
		return s.line(&l)
	})
	if err != nil {
		return err
	}
	if len(s.order) == 0 {
		return &EntryError{File: file, Err: fmt.Errorf("no user or assistant lines: not a Claude Code session")}
	}
	for _, cr := range s.order {
		if cr.last >= 0 && !cr.withTool[cr.last] {
			cr.Events[cr.last].Kind = termination.KindFinal
		}
		if err := out.Run(cr.Run); err != nil {
			return err
		}
	}
	return nil
}

// line maps one line; lines that are not user or assistant lines are
// counted by their type.
func (s *ccSession) line(l *ccLine) error {
	switch l.Type {
	case "user", "assistant":
	case "":
		return fmt.Errorf("no type (want user, assistant, summary, …)")
	default:
		s.out.Skip(l.Type)
		return nil
	}
	if l.Message == nil {
		return fmt.Errorf("no message in this %s line", l.Type)
	}
	t, err := ccTime(l.Timestamp)
	if err != nil {
		return err
	}
	cr := s.run(l)
	if l.Type == "user" {
		return cr.user(l, t, s)
	}
	return cr.assistant(l, t, s)
}

// run finds or starts the run a line belongs to: its session's, or, for a
// sidechain line, its sub-agent's. A sidechain line belongs to the run of
// the line it follows (parentUuid); a sidechain's first line starts a run
// named SESSION/agent-ID by its agentId, or SESSION/sidechain-UUID by its
// uuid when Claude Code wrote no agentId (renamed by the first agentId
// that a later line of it carries).
func (s *ccSession) run(l *ccLine) *ccRun {
	session := l.SessionID
	if session == "" {
		session = baseName(s.file)
	}
	key, parent := session, ""
	agent := ""
	if l.IsSidechain {
		if l.AgentID != "" {
			agent = session + "/agent-" + l.AgentID
		}
		key = s.chains[l.ParentUUID]
		if key == "" || l.ParentUUID == "" {
			key = agent
		}
		if key == "" {
			key = session + "/sidechain-" + l.UUID
		}
		if l.UUID != "" {
			s.chains[l.UUID] = key
		}
		parent = session
	}
	cr := s.runs[key]
	if cr == nil {
		cr = &ccRun{Run: Run{ID: key, Parent: parent}, turns: map[string]int{}, withTool: map[int]bool{}, tools: map[string]string{}, last: -1}
		s.runs[key] = cr
		s.order = append(s.order, cr)
	}
	if agent != "" && cr.ID != agent && s.runs[agent] == nil {
		cr.ID = agent
		s.runs[agent] = cr
	}
	return cr
}

// assistant maps an assistant line: the first line of a reply
// (message.id) is its model turn, every line of it adds its text, tool
// calls and usage (the lines repeat the reply's usage: each count is the
// largest seen, so the reply is counted once).
func (cr *ccRun) assistant(l *ccLine, t time.Time, s *ccSession) error {
	m := l.Message
	text, blocks, err := ccContent(m.Content)
	if err != nil {
		return err
	}
	if l.IsAPIError {
		msg := strings.TrimSpace(text + ccBlockText(blocks))
		if msg == "" {
			msg = "API error"
		}
		cr.Events = append(cr.Events, termination.Event{Kind: termination.KindError, Source: "agent", Text: msg, Err: msg, Time: t})
		return nil
	}
	if m.Model == "<synthetic>" {
		s.out.Skip("synthetic assistant message")
		return nil
	}
	u, err := usage(m.Usage)
	if err != nil {
		return err
	}
	key := m.ID
	if key == "" {
		key = "line:" + l.UUID + ":" + l.Timestamp
	}
	turn, ok := cr.turns[key]
	if !ok {
		turn = len(cr.Events)
		cr.turns[key] = turn
		cr.last = turn
		cr.Events = append(cr.Events, termination.Event{Kind: termination.KindMessage, Source: "agent", Model: m.Model, Time: t})
	}
	ev := &cr.Events[turn]
	ev.Usage.InputTokens = max(ev.Usage.InputTokens, u.InputTokens)
	ev.Usage.OutputTokens = max(ev.Usage.OutputTokens, u.OutputTokens)
	addText(ev, text)
	for i, b := range blocks {
		switch {
		case b.Type == "text":
			addText(&cr.Events[turn], b.Text)
		case b.Type == "thinking" || b.Type == "redacted_thinking":
		case b.Type == "tool_use" || b.Type == "server_tool_use" || b.Type == "mcp_tool_use":
			if b.Name == "" {
				return fmt.Errorf("content[%d]: a %s block without a name", i, b.Type)
			}
			cr.tools[b.ID] = b.Name
			cr.withTool[turn] = true
			cr.Events = append(cr.Events, termination.Event{Kind: termination.KindToolCall, Source: "agent", Tool: b.Name, Args: ccArgs(b.Input), CallID: b.ID, Time: t})
		case strings.HasSuffix(b.Type, "tool_result"):
			if err := cr.toolResult(i, b, t); err != nil {
				return err
			}
		default:
			return fmt.Errorf("content[%d]: a block of type %q in an assistant message (want text, thinking, tool_use)", i, b.Type)
		}
	}
	return nil
}

// user maps a user line: its text (a prompt, or text Claude Code adds:
// isMeta, or the summary that replaces a compacted conversation,
// isCompactSummary) → one input; each tool_result block → tool_result. Images and
// documents are counted, not mapped.
func (cr *ccRun) user(l *ccLine, t time.Time, s *ccSession) error {
	text, blocks, err := ccContent(l.Message.Content)
	if err != nil {
		return err
	}
	source := "user"
	if l.IsMeta || l.IsSummary {
		source = "system"
	}
	input := -1
	addInput := func(x string) {
		if input < 0 {
			input = len(cr.Events)
			cr.Events = append(cr.Events, termination.Event{Kind: termination.KindInput, Source: source, Text: x, Time: t})
			return
		}
		addText(&cr.Events[input], x)
	}
	if blocks == nil {
		addInput(text)
	}
	for i, b := range blocks {
		switch b.Type {
		case "text":
			addInput(b.Text)
		case "tool_result":
			if err := cr.toolResult(i, b, t); err != nil {
				return err
			}
		case "image", "document":
			s.out.Skip(b.Type + " in a user message")
		default:
			return fmt.Errorf("content[%d]: a block of type %q in a user message (want text, tool_result, image)", i, b.Type)
		}
	}
	return nil
}

// toolResult maps a tool_result block to the result of the run's tool
// call with its id.
func (cr *ccRun) toolResult(i int, b ccBlock, t time.Time) error {
	tool, ok := cr.tools[b.ToolUseID]
	if !ok {
		return fmt.Errorf("content[%d]: tool_use_id %q: no earlier tool_use of this run has this id", i, b.ToolUseID)
	}
	text, blocks, err := ccContent(b.Content)
	if err != nil {
		return fmt.Errorf("content[%d]: %w", i, err)
	}
	text += ccBlockText(blocks)
	ev := termination.Event{Kind: termination.KindToolResult, Source: "tool", Tool: tool, CallID: b.ToolUseID, Text: text, Time: t}
	if b.IsError {
		ev.Err = strings.TrimSpace(text)
		if ev.Err == "" {
			ev.Err = "tool error"
		}
	}
	cr.Events = append(cr.Events, ev)
	return nil
}

// ccContent reads a message's content: a string (text) or a list of
// blocks (blocks non-nil).
func ccContent(raw json.RawMessage) (string, []ccBlock, error) {
	switch jsonKind(raw) {
	case "nothing", "null":
		return "", nil, nil
	case "a string":
		var s string
		err := json.Unmarshal(raw, &s)
		return s, nil, err
	case "an array":
		var blocks []ccBlock
		if err := decodeAgentJSON(raw, &blocks); err != nil {
			return "", nil, fmt.Errorf("content: %w", err)
		}
		if blocks == nil {
			blocks = []ccBlock{}
		}
		return "", blocks, nil
	}
	return "", nil, fmt.Errorf("content: want a string or a list of blocks, got %s", jsonKind(raw))
}

// ccBlockText joins the text blocks of a list.
func ccBlockText(blocks []ccBlock) string {
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == "text" && bl.Text != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

// addText appends text to an event's text, on a new line.
func addText(ev *termination.Event, text string) {
	switch {
	case text == "":
	case ev.Text == "":
		ev.Text = text
	default:
		ev.Text += "\n" + text
	}
}

// ccArgs is a tool call's input as the event's args, without
// insignificant whitespace (none for an empty input).
func ccArgs(input json.RawMessage) json.RawMessage {
	if k := jsonKind(input); k == "nothing" || k == "null" {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, input) != nil {
		return input
	}
	return b.Bytes()
}

// ccTime reads a line's timestamp (none is no time).
func ccTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("timestamp: want an RFC 3339 time, got %q", s)
	}
	return t, nil
}
