package importer

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// cxLine is one line of a Codex CLI rollout: {timestamp, type, payload};
// in a rollout written before the wrapper (2025) the line is the payload
// itself, the first line being the session's {id, timestamp, …}.
type cxLine struct {
	Timestamp  string          `json:"timestamp"`
	Type       string          `json:"type"`
	Payload    json.RawMessage `json:"payload"`
	RecordType string          `json:"record_type"`
	ID         string          `json:"id"`
}

// cxItem is a response_item payload (an OpenAI Responses API item) or an
// event_msg payload.
type cxItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Input     json.RawMessage `json:"input"`
	CallID    string          `json:"call_id"`
	ID        string          `json:"id"`
	Output    json.RawMessage `json:"output"`
	Action    json.RawMessage `json:"action"`
	Status    string          `json:"status"`
	Model     string          `json:"model"`
	Source    json.RawMessage `json:"source"`
	Info      *struct {
		Total struct {
			Input  int64 `json:"input_tokens"`
			Output int64 `json:"output_tokens"`
		} `json:"total_token_usage"`
	} `json:"info"`
}

// cxRollout is the state of one rollout's run.
type cxRollout struct {
	Run
	out      *Output
	model    string
	tools    map[string]string // call_id → tool
	turn     int               // the open model turn, -1 when none is open
	unpaid   int               // the last model turn no token_count has closed, -1 when none
	last     int               // the last model turn, -1 before the first
	withTool map[int]bool
	total    termination.Usage // the last token_count's running total
	pending  termination.Usage // spent with no model turn to put it on yet
	named    bool
}

// importCodex reads a Codex CLI rollout (rollout-….jsonl): one run.
func importCodex(file string, r io.Reader, _ *Options, out *Output) error {
	c := &cxRollout{Run: Run{ID: baseName(file)}, out: out, tools: map[string]string{}, turn: -1, unpaid: -1, last: -1, withTool: map[int]bool{}}
	lines := 0
	err := agentLines("codex", file, r, func(n int, data []byte) error {
		lines++
		var l cxLine
		if err := decodeAgentJSON(data, &l); err != nil {
			return err
		}
		t, err := ccTime(l.Timestamp)
		if err != nil {
			return err
		}
		if len(l.Payload) == 0 {
			return c.legacy(n, &l, data, t)
		}
		var p cxItem
		if err := decodeAgentJSON(l.Payload, &p); err != nil {
			return fmt.Errorf("payload: %w", err)
		}
		return c.entry(l.Type, &p, t)
	})
	if err != nil {
		return err
	}
	if lines == 0 {
		return &EntryError{File: file, Err: fmt.Errorf("empty file")}
	}
	if c.pending != (termination.Usage{}) {
		if c.last < 0 {
			out.Skip("token usage with no model turn")
		} else {
			c.Events[c.last].Usage = addUsage(c.Events[c.last].Usage, c.pending)
		}
	}
	if c.last >= 0 && !c.withTool[c.last] {
		c.Events[c.last].Kind = termination.KindFinal
	}
	return out.Run(c.Run)
}

// entry maps one line of a current rollout.
func (c *cxRollout) entry(typ string, p *cxItem, t time.Time) error {
	switch typ {
	case "session_meta":
		c.meta(p)
	case "turn_context":
		if p.Model != "" {
			c.model = p.Model
		}
	case "response_item":
		return c.item(p, t)
	case "event_msg":
		if p.Type != "token_count" {
			c.out.Skip("event_msg " + p.Type)
			return nil
		}
		c.tokenCount(p)
	case "compacted":
		c.out.Skip("compacted")
	default:
		return fmt.Errorf("type %q: not a line of a Codex rollout (want session_meta, turn_context, response_item, event_msg, compacted)", typ)
	}
	return nil
}

// legacy maps one line of a rollout written before the {timestamp, type,
// payload} wrapper: the session's line, a state line, or an item.
func (c *cxRollout) legacy(n int, l *cxLine, data []byte, t time.Time) error {
	switch {
	case l.RecordType != "":
		c.out.Skip("record_type " + l.RecordType)
		return nil
	case l.Type == "" && n == 1 && l.ID != "":
		c.meta(&cxItem{ID: l.ID})
		return nil
	case l.Type == "":
		return fmt.Errorf("no type (want a Codex rollout line)")
	}
	if !cxItemTypes[l.Type] {
		return fmt.Errorf("type %q: not a line of a Codex rollout (want session_meta, response_item, …, or an item of an older rollout)", l.Type)
	}
	var p cxItem
	if err := decodeAgentJSON(data, &p); err != nil {
		return err
	}
	return c.item(&p, t)
}

// cxItemTypes are the response items a rollout holds.
var cxItemTypes = map[string]bool{
	"message": true, "reasoning": true, "function_call": true, "function_call_output": true,
	"custom_tool_call": true, "custom_tool_call_output": true, "local_shell_call": true,
	"web_search_call": true, "ghost_snapshot": true, "compaction": true,
}

// meta names the run after the session, and its parent after the thread
// that spawned it (a sub-agent's session).
func (c *cxRollout) meta(p *cxItem) {
	if c.named || p.ID == "" {
		return
	}
	c.ID, c.named = p.ID, true
	var src struct {
		SubAgent struct {
			ThreadSpawn struct {
				Parent string `json:"parent_thread_id"`
			} `json:"thread_spawn"`
		} `json:"subagent"`
	}
	if jsonKind(p.Source) == "an object" && json.Unmarshal(p.Source, &src) == nil {
		c.Parent = src.SubAgent.ThreadSpawn.Parent
	}
}

// item maps a response item.
func (c *cxRollout) item(p *cxItem, t time.Time) error {
	switch p.Type {
	case "message":
		text, err := cxText(p.Content)
		if err != nil {
			return err
		}
		if p.Role == "assistant" {
			addText(&c.Events[c.open(t)], text)
			return nil
		}
		if p.Role == "" {
			return fmt.Errorf("a message without a role")
		}
		c.turn = -1
		c.Events = append(c.Events, termination.Event{Kind: termination.KindInput, Source: p.Role, Text: text, Time: t})
	case "reasoning":
		c.open(t)
	case "function_call", "custom_tool_call", "local_shell_call", "web_search_call":
		return c.call(p, t)
	case "function_call_output", "custom_tool_call_output":
		return c.result(p, t)
	case "ghost_snapshot", "compaction":
		c.out.Skip("response_item " + p.Type)
	default:
		return fmt.Errorf("response_item of type %q: not an item this importer knows (want message, reasoning, function_call, function_call_output, custom_tool_call, …)", p.Type)
	}
	return nil
}

// open returns the open model turn, starting one (a message event) when
// none is open.
func (c *cxRollout) open(t time.Time) int {
	if c.turn >= 0 {
		return c.turn
	}
	c.turn = len(c.Events)
	c.unpaid, c.last = c.turn, c.turn
	c.Events = append(c.Events, termination.Event{Kind: termination.KindMessage, Source: "agent", Model: c.model, Time: t, Usage: c.pending})
	c.pending = termination.Usage{}
	return c.turn
}

// call maps a tool call item; a web search, which has no output item, is
// its own result too.
func (c *cxRollout) call(p *cxItem, t time.Time) error {
	turn := c.open(t)
	ev := termination.Event{Kind: termination.KindToolCall, Source: "agent", Tool: p.Name, CallID: p.CallID, Time: t}
	switch p.Type {
	case "function_call":
		ev.Args = cxArgs(p.Arguments)
	case "custom_tool_call":
		ev.Args = cxArgs(p.Input)
	case "local_shell_call":
		ev.Tool, ev.Args = "local_shell", ccArgs(p.Action)
	case "web_search_call":
		ev.Tool, ev.Args = "web_search", ccArgs(p.Action)
	}
	if ev.CallID == "" {
		ev.CallID = p.ID
	}
	if ev.Tool == "" {
		return fmt.Errorf("a %s without a name", p.Type)
	}
	c.withTool[turn] = true
	c.Events = append(c.Events, ev)
	if p.Type == "web_search_call" {
		res := termination.Event{Kind: termination.KindToolResult, Source: "tool", Tool: ev.Tool, CallID: ev.CallID, Time: t}
		if p.Status == "failed" {
			res.Err = "web search failed"
		}
		c.Events = append(c.Events, res)
		return nil
	}
	if ev.CallID != "" {
		c.tools[ev.CallID] = ev.Tool
	}
	return nil
}

// result maps a tool's output to the result of the call with its call_id.
func (c *cxRollout) result(p *cxItem, t time.Time) error {
	c.turn = -1
	tool, ok := c.tools[p.CallID]
	if !ok {
		return fmt.Errorf("%s: call_id %q: no earlier tool call has this id", p.Type, p.CallID)
	}
	text, failed, err := cxOutput(p.Output)
	if err != nil {
		return err
	}
	ev := termination.Event{Kind: termination.KindToolResult, Source: "tool", Tool: tool, CallID: p.CallID, Text: text, Err: failed, Time: t}
	c.Events = append(c.Events, ev)
	return nil
}

// tokenCount turns a token_count event's running total into the delta
// spent since the previous one, put on the model turn it closes (or, when
// it closes none, on the next one). A total smaller than the previous one
// (the counter restarted) counts from zero.
func (c *cxRollout) tokenCount(p *cxItem) {
	c.turn = -1
	if p.Info == nil {
		c.out.Skip("event_msg token_count without usage")
		return
	}
	total := termination.Usage{InputTokens: max(p.Info.Total.Input, 0), OutputTokens: max(p.Info.Total.Output, 0)}
	delta := termination.Usage{InputTokens: total.InputTokens - c.total.InputTokens, OutputTokens: total.OutputTokens - c.total.OutputTokens}
	if delta.InputTokens < 0 || delta.OutputTokens < 0 {
		delta = total
	}
	c.total = total
	switch {
	case delta == termination.Usage{}:
	case c.unpaid >= 0:
		c.Events[c.unpaid].Usage = addUsage(c.Events[c.unpaid].Usage, delta)
		c.unpaid = -1
	default:
		c.pending = addUsage(c.pending, delta)
	}
}

func addUsage(a, b termination.Usage) termination.Usage {
	return termination.Usage{InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens}
}

// cxText joins the text parts of a message's content (input_text,
// output_text; a plain string too).
func cxText(raw json.RawMessage) (string, error) {
	switch jsonKind(raw) {
	case "nothing", "null":
		return "", nil
	case "a string":
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case "an array":
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := decodeAgentJSON(raw, &parts); err != nil {
			return "", fmt.Errorf("content: %w", err)
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Text == "" {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(p.Text)
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("content: want a list of parts, got %s", jsonKind(raw))
}

// cxArgs is a call's arguments: the JSON a string holds (argsOf), or the
// value itself.
func cxArgs(raw json.RawMessage) json.RawMessage {
	if jsonKind(raw) == "a string" {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return argsOf(s)
		}
	}
	return ccArgs(raw)
}

// cxExitCode finds the exit code in the header Codex writes above a shell
// command's output ("Exit code: 1", "Process exited with code 1").
var cxExitCode = regexp.MustCompile(`(?m)^(?:Exit code:|Process exited with code) (-?\d+)\s*$`)

// cxOutput reads a tool's output: a string, a list of content items, or
// {content, success}. A failed call is its error: success false, or a
// shell command's non-zero exit code ("exit code N"), which Codex writes
// as {"output": …, "metadata": {"exit_code": N}} or in a header above
// "Output:" ("Exit code: N", "Process exited with code N").
func cxOutput(raw json.RawMessage) (text, failed string, err error) {
	switch jsonKind(raw) {
	case "an array":
		text, err = cxText(raw)
		return text, "", err
	case "an object":
		var o struct {
			Content json.RawMessage `json:"content"`
			Success *bool           `json:"success"`
		}
		if err := decodeAgentJSON(raw, &o); err != nil {
			return "", "", fmt.Errorf("output: %w", err)
		}
		if text, err = cxText(o.Content); err != nil {
			return "", "", fmt.Errorf("output: %w", err)
		}
		if o.Success != nil && !*o.Success {
			failed = orDefault(strings.TrimSpace(text), "tool failed")
		}
		return text, failed, nil
	case "a string":
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", "", err
		}
	case "nothing", "null":
		return "", "", nil
	default:
		return "", "", fmt.Errorf("output: want a string, got %s", jsonKind(raw))
	}
	var shell struct {
		Metadata struct {
			ExitCode *int `json:"exit_code"`
		} `json:"metadata"`
	}
	if strings.HasPrefix(text, "{") && json.Unmarshal([]byte(text), &shell) == nil && shell.Metadata.ExitCode != nil {
		if code := *shell.Metadata.ExitCode; code != 0 {
			failed = "exit code " + strconv.Itoa(code)
		}
	} else if m := cxExitCode.FindStringSubmatch(cxHeader(text)); m != nil && m[1] != "0" {
		failed = "exit code " + m[1]
	}
	return text, failed, nil
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// cxHeader is the part of a shell output above its "Output:" line (the
// first lines when there is none), where Codex writes the exit code.
func cxHeader(text string) string {
	if i := strings.Index(text, "\nOutput:"); i >= 0 {
		return text[:i]
	}
	if len(text) > 200 {
		return text[:200]
	}
	return text
}
