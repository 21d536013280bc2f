package importer

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentstop/agentstop/termination"
)

// sweTrajectory is a SWE-agent .traj: the model's view of the run
// (history, OpenAI messages with SWE-agent's fields), the steps as run
// (trajectory) and the outcome (info).
type sweTrajectory struct {
	History    *[]sweMessage `json:"history"`
	Trajectory []sweStep     `json:"trajectory"`
	Info       struct {
		ExitStatus *string `json:"exit_status"`
	} `json:"info"`
}

type sweMessage struct {
	Role        string         `json:"role"`
	Content     any            `json:"content"`
	Agent       string         `json:"agent"`
	Action      *string        `json:"action"`
	ToolCalls   []chatToolCall `json:"tool_calls"`
	ToolCallIDs []string       `json:"tool_call_ids"`
	IsDemo      bool           `json:"is_demo"`
}

// decodeSWEAgent reads a SWE-agent .traj: one run, named after the file.
func decodeSWEAgent(file string, r io.Reader, _ *Options, out *Output) error {
	data, err := readWhole(file, r)
	if err != nil {
		return err
	}
	var t sweTrajectory
	if k := jsonKind(data); k != "an object" {
		return &EntryError{File: file, Err: fmt.Errorf("not a SWE-agent trajectory (an object with history), got %s", k)}
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return &EntryError{File: file, Err: fmt.Errorf("not a SWE-agent trajectory: %s", describeJSONError(err))}
	}
	if t.History == nil {
		return &EntryError{File: file, Err: fmt.Errorf("not a SWE-agent trajectory: no history")}
	}
	m := sweMapper{file: file, out: out, calls: map[string]string{}, source: "agent", last: -1}
	extra := m.extraSteps(*t.History, t.Trajectory)
	for i, msg := range *t.History {
		if err := m.message(i, msg); err != nil {
			return err
		}
	}
	// The history is saved before the last step (often the submit) is
	// added to it; the steps it lacks are read from the trajectory.
	for k, s := range extra {
		if m.submitted || m.pending != "" {
			break
		}
		m.textAction(m.source, s.Thought, s.Action, k == len(extra)-1)
		if m.pending != "" {
			m.result(termination.Event{Kind: termination.KindToolResult, Tool: m.pending, Text: s.Output})
		}
	}
	if t.Info.ExitStatus != nil && *t.Info.ExitStatus != "submitted" && *t.Info.ExitStatus != "" {
		// Any other exit (a cost or context limit, a format error, an
		// autosubmission "submitted (exit_cost)") ended the run.
		msg := "exit status: " + *t.Info.ExitStatus
		m.events = append(m.events, termination.Event{Kind: termination.KindError, Err: msg, Text: msg})
	}
	if len(m.events) == 0 {
		return &EntryError{File: file, Err: fmt.Errorf("no messages")}
	}
	return out.Run(Run{ID: baseName(file), Events: m.events})
}

// sweStep is a step of a SWE-agent trajectory.
type sweStep = struct {
	Action  string `json:"action"`
	Thought string `json:"thought"`
	Output  string `json:"observation"`
}

// extraSteps finds the trajectory's steps after the history's last
// response (matched by its action; by count when the history records no
// actions) and sets m.last to that response's index when there are none.
func (m *sweMapper) extraSteps(history []sweMessage, steps []sweStep) []sweStep {
	last, responses := -1, 0
	for i, msg := range history {
		if msg.Role == "assistant" && !msg.IsDemo {
			last, responses = i, responses+1
		}
	}
	after := responses // steps mapped from the history
	if last >= 0 && history[last].Action != nil {
		after = len(steps)
		for k := len(steps) - 1; k >= 0; k-- {
			if strings.TrimSpace(steps[k].Action) == strings.TrimSpace(*history[last].Action) {
				after = k + 1
				break
			}
		}
	}
	if after >= len(steps) {
		m.last = last
		return nil
	}
	return steps[after:]
}

// readWhole reads a file that is one JSON document.
func readWhole(file string, r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", file, err)
	}
	data = []byte(strings.TrimPrefix(string(data), "\uFEFF"))
	if strings.TrimSpace(string(data)) == "" {
		return nil, &EntryError{File: file, Err: fmt.Errorf("empty file")}
	}
	return data, nil
}

// sweMapper maps one trajectory's history in order.
type sweMapper struct {
	file      string
	out       *Output
	events    []termination.Event
	calls     map[string]string // call id → tool, until its result
	pending   string            // a text action's tool, awaiting its observation
	turns     int               // assistant messages mapped
	last      int               // the index of the history's last response, -1 when the trajectory has more
	submitted bool              // the final turn has been mapped
	submitID  string            // the submit call's id: its result (the patch) is not an event
	textFinal bool              // the final turn was a text submit: its observation is not an event
	source    string            // the agent of the last response
}

func (m *sweMapper) message(i int, msg sweMessage) error {
	bad := func(format string, a ...any) error {
		return &EntryError{File: m.file, Entry: "history[" + strconv.Itoa(i) + "]", Err: fmt.Errorf(format, a...)}
	}
	if msg.IsDemo {
		m.out.Skip("demonstration message")
		return nil
	}
	if m.submitted {
		switch {
		case msg.Role == "user" && m.textFinal:
			m.textFinal = false // the submission's output: not an event
			return nil
		case msg.Role == "tool" && len(msg.ToolCallIDs) == 1 && msg.ToolCallIDs[0] == m.submitID && m.submitID != "":
		default:
			return bad("a message after the submission")
		}
	}
	text, err := textOfValue(msg.Content, m.out.Skip)
	if err != nil {
		return bad("%v", err)
	}
	if msg.Role == "assistant" && msg.Agent != "" {
		m.source = msg.Agent
	}
	source := m.source
	switch msg.Role {
	case "system":
		m.events = append(m.events, termination.Event{Kind: termination.KindInput, Source: "system", Text: text})
	case "user":
		if m.pending != "" { // the observation of a text action
			m.result(termination.Event{Kind: termination.KindToolResult, Tool: m.pending, Text: text})
			return nil
		}
		m.events = append(m.events, termination.Event{Kind: termination.KindInput, Source: "user", Text: text})
	case "assistant":
		if m.pending != "" {
			return bad("a response before the observation of the previous action")
		}
		if len(msg.ToolCalls) == 0 {
			action := ""
			if msg.Action != nil {
				action = *msg.Action
			}
			m.textAction(source, text, action, i == m.last)
			return nil
		}
		return m.toolCalls(source, text, msg.ToolCalls, i == m.last, bad)
	case "tool":
		return m.toolResult(msg, text, bad)
	case "":
		return bad("no role")
	default:
		return bad("role %q: want system, user, assistant or tool", msg.Role)
	}
	return nil
}

// toolCalls maps a function-calling response; a call of submit in the
// last response makes it the final turn, the call and its output (the
// patch) not emitted. (An earlier submit, a CTF flag found wrong, is a
// tool call like any other.)
func (m *sweMapper) toolCalls(source, text string, calls []chatToolCall, last bool, bad func(string, ...any) error) error {
	m.turns++
	turn := termination.Event{Kind: termination.KindMessage, Source: source, Text: text}
	var evs []termination.Event
	for k, c := range calls {
		if c.Function.Name == "" {
			return bad("tool_calls[%d]: no function name", k)
		}
		if c.Function.Name == "submit" && last {
			turn.Kind = termination.KindFinal
			m.submitted, m.submitID = true, c.ID
			continue
		}
		tool := c.Function.Name
		var a struct {
			Command *string `json:"command"`
		}
		if tool == "bash" && json.Unmarshal([]byte(c.Function.Arguments), &a) == nil && a.Command != nil {
			tool = toolName(*a.Command)
		}
		if c.ID != "" {
			m.calls[c.ID] = tool
		}
		evs = append(evs, termination.Event{Kind: termination.KindToolCall, Tool: tool, Args: argsOf(c.Function.Arguments), CallID: c.ID})
	}
	m.events = append(append(m.events, turn), evs...)
	return nil
}

// textAction maps a response whose action is a command line (SWE-agent
// before function calling, or a step only in the trajectory): the
// action's first word is the tool, as for mini-swe-agent; submit in the
// last response makes it final.
func (m *sweMapper) textAction(source, text, action string, last bool) {
	m.turns++
	action = strings.TrimSpace(action)
	turn := termination.Event{Kind: termination.KindMessage, Source: source, Text: text}
	if action == "" {
		m.events = append(m.events, turn)
		return
	}
	if last && (action == "submit" || strings.HasPrefix(action, "submit ")) {
		turn.Kind = termination.KindFinal
		m.submitted, m.textFinal = true, true
		m.events = append(m.events, turn)
		return
	}
	m.pending = toolName(action)
	m.events = append(m.events, turn, termination.Event{Kind: termination.KindToolCall, Tool: m.pending,
		Args: marshalJSON(map[string]string{"command": action})})
}

func (m *sweMapper) result(ev termination.Event) {
	m.events = append(m.events, ev)
	m.pending = ""
}

// toolResult maps a tool message: tool_call_ids names its one call.
func (m *sweMapper) toolResult(msg sweMessage, text string, bad func(string, ...any) error) error {
	if len(msg.ToolCallIDs) != 1 {
		return bad("tool_call_ids: want the id of the one call this is the result of, got %d ids", len(msg.ToolCallIDs))
	}
	id := msg.ToolCallIDs[0]
	if m.submitted && id == m.submitID {
		m.submitID = "" // the submission's output: not an event
		return nil
	}
	tool, ok := m.calls[id]
	if !ok {
		return bad("tool_call_ids: %q: no earlier tool call awaits a result with this id", id)
	}
	delete(m.calls, id)
	m.result(termination.Event{Kind: termination.KindToolResult, Tool: tool, CallID: id, Text: text})
	return nil
}
