package importer

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// submitMarkers are the output lines with which a mini-swe-agent run
// submits its work (older versions: MINI_SWE_AGENT_FINAL_OUTPUT; 1.0.0 to
// 1.0.2, published as micro-swe-agent: MICRO_SWE_AGENT_FINAL_OUTPUT).
var submitMarkers = []string{"COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT", "MICRO_SWE_AGENT_FINAL_OUTPUT"}

// actionBlock matches a bash action block: ```bash (the text-based agent
// of mini-swe-agent 1) or ```mswea_bash_command (version 2).
var actionBlock = regexp.MustCompile("(?s)```(?:bash|mswea_bash_command)[ \t]*\r?\n(.*?)\r?\n?```")

var (
	returnCode = regexp.MustCompile(`<returncode>\s*(-?\d+)\s*</returncode>`)
	outputTag  = regexp.MustCompile(`(?s)<output>\r?\n?(.*?)\r?\n?</output>`)
	headTag    = regexp.MustCompile(`(?s)<output_head>\r?\n?(.*?)\r?\n?</output_head>`)
	tailTag    = regexp.MustCompile(`(?s)<output_tail>\r?\n?(.*?)\r?\n?</output_tail>`)
	exception  = regexp.MustCompile(`(?s)<exception>(.*?)</exception>`)
)

// trajectory is a mini-swe-agent .traj.json: {"info": …, "messages": […]}
// (1.x and 2.x), or, in 1.x test data, the bare messages array.
type trajectory struct {
	Info     json.RawMessage `json:"info"`
	Messages []msweMessage   `json:"messages"`
}

// msweMessage is a message of a trajectory: OpenAI form plus the agent's
// extra.
type msweMessage struct {
	Role       string          `json:"role"`
	Type       string          `json:"type"` // set on items of the OpenAI Responses form
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Extra      msweExtra       `json:"extra"`
}

type msweExtra struct {
	Response      json.RawMessage `json:"response"`
	Cost          *float64        `json:"cost"`
	Timestamp     float64         `json:"timestamp"`
	ReturnCode    *int            `json:"returncode"`
	RawOutput     *string         `json:"raw_output"`
	ExceptionInfo string          `json:"exception_info"`
	ExceptionType string          `json:"exception_type"`
	InterruptType string          `json:"interrupt_type"`
	NActions      *int            `json:"n_actions"`
	ModelResponse *string         `json:"model_response"`
	ExitStatus    string          `json:"exit_status"`
	Submission    string          `json:"submission"`
}

// msweResponse is the part of the model's raw response (extra.response)
// that maps: its time, model, usage and, for a response rejected as a
// format error, its text.
type msweResponse struct {
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Usage   json.RawMessage `json:"usage"`
	Choices []struct {
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	} `json:"choices"`
}

// decodeMiniSWEAgent reads a .traj.json: one run, named after the file.
func decodeMiniSWEAgent(file string, r io.Reader, o *Options, out *Output) error {
	return whole(func(file string, data []byte, _ *Options) ([]Run, error) {
		return importMiniSWEAgent(file, data, out.Skip)
	})(file, r, o, out)
}

func importMiniSWEAgent(file string, data []byte, skip func(string)) ([]Run, error) {
	t, err := readTrajectory(data)
	if err != nil {
		return nil, &EntryError{File: file, Err: err}
	}
	m := msweMapper{file: file, calls: map[string]int{}, turn: -1, skip: skip}
	for i := 0; i < len(t.Messages); i++ {
		skip, err := m.message(t.Messages, i)
		if err != nil {
			return nil, err
		}
		i += skip
	}
	if len(m.events) == 0 {
		return nil, &EntryError{File: file, Err: fmt.Errorf("no messages")}
	}
	return []Run{{ID: baseName(file), Events: m.events}}, nil
}

// readTrajectory decodes a trajectory object or a bare messages array.
func readTrajectory(data []byte) (trajectory, error) {
	var t trajectory
	switch jsonKind(data) {
	case "an array":
		if err := json.Unmarshal(data, &t.Messages); err != nil {
			return t, fmt.Errorf("not a mini-swe-agent trajectory: a list, but not of messages (objects with a role)")
		}
	case "an object":
		if err := json.Unmarshal(data, &t); err != nil {
			return t, fmt.Errorf("not a mini-swe-agent trajectory: %s", describeJSONError(err))
		}
		if t.Messages == nil {
			return t, fmt.Errorf("not a mini-swe-agent trajectory: no messages")
		}
	default:
		return t, fmt.Errorf("not a mini-swe-agent trajectory (an object with messages, or a list of messages), got %s", jsonKind(data))
	}
	return t, nil
}

// msweMapper maps one trajectory's messages in order.
type msweMapper struct {
	file    string
	events  []termination.Event
	task    bool               // the task's user message has been seen
	pending *termination.Event // a text action awaiting its observation
	calls   map[string]int     // tool-calling: call id → its tool_call event, until its result
	turn    int                // the index of the last agent turn's event; -1 before any
	exited  bool
	skip    func(string)
}

// message maps msgs[i]; it returns how many of the following messages it
// consumed too.
func (m *msweMapper) message(msgs []msweMessage, i int) (int, error) {
	msg := msgs[i]
	entry := fmt.Sprintf("messages[%d]", i)
	bad := func(format string, a ...any) error {
		return &EntryError{File: m.file, Entry: entry, Err: fmt.Errorf(format, a...)}
	}
	if m.exited {
		return 0, bad("a message after the exit message")
	}
	if msg.Role == "" && msg.Type != "" {
		return 0, bad("type %q: an item in the OpenAI Responses form, which this importer does not read (want messages with a role)", msg.Type)
	}
	text, err := textOf(msg.Content, m.skip)
	if err != nil {
		return 0, bad("%v", err)
	}
	switch msg.Role {
	case "system":
		m.events = append(m.events, termination.Event{Kind: termination.KindInput, Source: "system", Text: text})
	case "user":
		return 0, m.user(msg, text, bad)
	case "assistant":
		return m.assistant(msgs, i, text, bad)
	case "tool":
		return 0, m.toolResult(msg, text, bad)
	case "exit":
		m.exit(msg, text)
	case "":
		return 0, bad("no role")
	default:
		return 0, bad("role %q: want system, user, assistant, tool or exit", msg.Role)
	}
	return 0, nil
}

func (m *msweMapper) user(msg msweMessage, text string, bad func(string, ...any) error) error {
	switch {
	case msg.Extra.InterruptType == "FormatError":
		// 2.x: the rejected response is not a message of its own; this
		// one carries its response, usage and cost.
		turn, err := m.turnOf(msg.Extra, "")
		if err != nil {
			return bad("%v", err)
		}
		if msg.Extra.ModelResponse != nil {
			turn.Text = *msg.Extra.ModelResponse
		}
		m.addTurn(turn)
		m.formatError(formatErrorText(msg, text), turn.Time)
	case m.pending != nil:
		res, err := observation(msg, text, m.pending)
		if err != nil {
			return bad("%v", err)
		}
		m.events = append(m.events, res)
		m.pending = nil
	case !m.task || msg.Extra.InterruptType != "":
		// The task, or what the user typed in an interactive run.
		m.events = append(m.events, termination.Event{Kind: termination.KindInput, Source: "user", Text: text})
		m.task = true
	default:
		return bad("a user message that follows no action: want the task, an observation or a format error")
	}
	return nil
}

// assistant maps a response: text-based (one bash block) or tool-calling.
func (m *msweMapper) assistant(msgs []msweMessage, i int, text string, bad func(string, ...any) error) (int, error) {
	msg := msgs[i]
	if m.pending != nil {
		return 0, bad("a response before the observation of the previous action")
	}
	turn, err := m.turnOf(msg.Extra, text)
	if err != nil {
		return 0, bad("%v", err)
	}
	if len(msg.ToolCalls) > 0 {
		m.addTurn(turn)
		for k, c := range msg.ToolCalls {
			call, err := bashCall(c)
			if err != nil {
				return 0, bad("tool_calls[%d]: %v", k, err)
			}
			call.Time = turn.Time
			if c.ID != "" {
				m.calls[c.ID] = len(m.events)
			}
			m.events = append(m.events, call)
		}
		return 0, nil
	}
	nextUser := i+1 < len(msgs) && msgs[i+1].Role == "user"
	blocks := actionBlock.FindAllStringSubmatch(text, -1)
	if len(blocks) != 1 {
		// 1.x's format error: the agent rejects the response and says so
		// in the next user message, consumed here.
		m.addTurn(turn)
		m.formatError(fmt.Sprintf("format error: %d bash blocks, want exactly one", len(blocks)), turn.Time)
		return b2i(nextUser), nil
	}
	command := strings.TrimSpace(blocks[0][1])
	if submits(command) {
		turn.Kind = termination.KindFinal
		turn.Text = strings.TrimSpace(actionBlock.ReplaceAllString(text, ""))
		m.addTurn(turn)
		// Its command's output (the submission) is not an event.
		return b2i(nextUser), nil
	}
	m.addTurn(turn)
	call := termination.Event{Kind: termination.KindToolCall, Tool: toolName(command),
		Args: marshalJSON(map[string]string{"command": command}), Time: turn.Time}
	m.events = append(m.events, call)
	m.pending = &call
	return 0, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// turnOf reads a model turn's model, usage, cost and time from extra.
func (m *msweMapper) turnOf(x msweExtra, text string) (termination.Event, error) {
	ev := termination.Event{Kind: termination.KindMessage, Source: "agent", Text: text}
	var resp msweResponse
	switch jsonKind(x.Response) {
	case "nothing", "null":
	case "an object":
		if err := json.Unmarshal(x.Response, &resp); err != nil {
			return ev, fmt.Errorf("extra.response: %s", describeJSONError(err))
		}
	default:
		return ev, fmt.Errorf("extra.response: want the model's response as an object, got %s", jsonKind(x.Response))
	}
	if text == "" && len(resp.Choices) > 0 {
		ev.Text, _ = textOf(resp.Choices[0].Message.Content, nil)
	}
	ev.Model = resp.Model
	var err error
	if ev.Usage, err = usage(resp.Usage); err != nil {
		return ev, fmt.Errorf("extra.response.%v", err)
	}
	switch cost, err := usageCost(resp.Usage); {
	case x.Cost != nil:
		ev.Cost = *x.Cost
	case err != nil:
		return ev, fmt.Errorf("extra.response.usage.cost: %v", err)
	default:
		ev.Cost = cost
	}
	if ev.Cost < 0 {
		return ev, fmt.Errorf("cost: negative")
	}
	switch {
	case resp.Created > 0:
		ev.Time = time.Unix(resp.Created, 0).UTC()
	case x.Timestamp > 0:
		ev.Time = unixTime(x.Timestamp)
	}
	return ev, nil
}

// unixTime turns seconds since the epoch (Python's time.time()) into a
// time, to the microsecond that a float64 holds.
func unixTime(sec float64) time.Time {
	return time.UnixMicro(int64(math.Round(sec * 1e6))).UTC()
}

func (m *msweMapper) addTurn(turn termination.Event) {
	m.turn = len(m.events)
	m.events = append(m.events, turn)
}

func (m *msweMapper) formatError(text string, at time.Time) {
	m.events = append(m.events, termination.Event{Kind: termination.KindError, Err: text, Text: text, Time: at})
}

var errorTag = regexp.MustCompile(`(?s)<error>\s*(.*?)\s*</error>`)

// formatErrorText says why a 2.x response was rejected.
func formatErrorText(msg msweMessage, text string) string {
	switch e := errorTag.FindStringSubmatch(text); {
	case msg.Extra.NActions != nil:
		return fmt.Sprintf("format error: %d bash blocks, want exactly one", *msg.Extra.NActions)
	case e != nil:
		return "format error: " + e[1]
	}
	return "format error"
}

// bashCall maps a 2.x tool call of the bash tool.
func bashCall(c chatToolCall) (termination.Event, error) {
	if c.Function.Name == "" {
		return termination.Event{}, fmt.Errorf("no function name")
	}
	call := termination.Event{Kind: termination.KindToolCall, Tool: c.Function.Name, CallID: c.ID, Args: argsOf(c.Function.Arguments)}
	var a struct {
		Command *string `json:"command"`
	}
	if c.Function.Name == "bash" && json.Unmarshal([]byte(c.Function.Arguments), &a) == nil && a.Command != nil {
		call.Tool = toolName(*a.Command)
		if submits(*a.Command) {
			call.Tool = "submit"
		}
	}
	return call, nil
}

// toolResult maps a 2.x tool message to the result of its call.
func (m *msweMapper) toolResult(msg msweMessage, text string, bad func(string, ...any) error) error {
	k, ok := m.calls[msg.ToolCallID]
	if !ok {
		if msg.ToolCallID == "" {
			return bad("a tool message without tool_call_id")
		}
		return bad("tool_call_id %q: no earlier tool call awaits a result with this id", msg.ToolCallID)
	}
	delete(m.calls, msg.ToolCallID)
	res, err := observation(msg, text, &m.events[k])
	if err != nil {
		return bad("%v", err)
	}
	res.CallID = msg.ToolCallID
	m.events = append(m.events, res)
	return nil
}

// exit maps the message that ends a 2.x run: submitted, the last agent
// turn is the final one (its submitting call, which has no result, is
// dropped); any other exit status is an error event.
func (m *msweMapper) exit(msg msweMessage, text string) {
	m.exited = true
	last := len(m.events) - 1
	if msg.Extra.ExitStatus == "Submitted" && last >= 0 && m.events[last].Kind == termination.KindFinal {
		return // a text-based submission, final already
	}
	if msg.Extra.ExitStatus == "Submitted" && last >= 0 && m.turn >= 0 && m.events[m.turn].Kind == termination.KindMessage {
		// Drop the calls after the turn that got no result (the submit).
		kept := m.events[:m.turn+1]
		for _, ev := range m.events[m.turn+1:] {
			if _, unanswered := m.calls[ev.CallID]; ev.Kind != termination.KindToolCall || !unanswered {
				kept = append(kept, ev)
			}
		}
		m.events = kept
		m.events[m.turn].Kind = termination.KindFinal
		return
	}
	status := msg.Extra.ExitStatus
	if status == "" {
		status = "exit"
	}
	errText := status
	if t := strings.TrimSpace(text); t != "" && t != status {
		errText += ": " + t
	}
	var at time.Time
	if last >= 0 {
		at = m.events[last].Time
	}
	m.events = append(m.events, termination.Event{Kind: termination.KindError, Err: errText, Text: errText, Time: at})
}

// usageCost reads the cost a provider reports in its usage object (LiteLLM
// and OpenRouter write usage.cost); 0 when there is none.
func usageCost(raw json.RawMessage) (float64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var u struct {
		Cost *float64 `json:"cost"`
	}
	if err := json.Unmarshal(raw, &u); err != nil {
		return 0, fmt.Errorf("want a number")
	}
	if u.Cost == nil {
		return 0, nil
	}
	return *u.Cost, nil
}

func submits(command string) bool {
	for _, m := range submitMarkers {
		if strings.Contains(command, m) {
			return true
		}
	}
	return false
}

// observation maps the message that follows an action to its
// tool_result: 2.x records the return code, output and exception in
// extra; 1.x only in the text (<returncode>, <output>, <exception>).
func observation(msg msweMessage, text string, call *termination.Event) (termination.Event, error) {
	res := termination.Event{Kind: termination.KindToolResult, Tool: call.Tool}
	if msg.Extra.Timestamp > 0 {
		res.Time = unixTime(msg.Extra.Timestamp)
	}
	if x := msg.Extra; x.ReturnCode != nil {
		switch {
		case strings.Contains(x.ExceptionType, "Timeout") || strings.Contains(x.ExceptionInfo, "timed out"):
			res.Err = "timeout: the command timed out and was killed"
		case x.ExceptionInfo != "":
			res.Err = "exception: " + strings.TrimSpace(x.ExceptionInfo)
		case *x.ReturnCode != 0:
			res.Err = "exit code " + strconv.Itoa(*x.ReturnCode)
		}
		res.Text = text
		if x.RawOutput != nil {
			res.Text = *x.RawOutput
		}
		if res.Text == "" && x.ExceptionInfo != "" {
			res.Text = x.ExceptionInfo
		}
		return res, nil
	}
	out := ""
	if m := outputTag.FindStringSubmatch(text); m != nil {
		out = m[1]
	} else if h := headTag.FindStringSubmatch(text); h != nil {
		out = h[1]
		if t := tailTag.FindStringSubmatch(text); t != nil {
			out += "\n…\n" + t[1]
		}
	}
	// The command's return code comes before its output in mini-swe-agent's
	// templates; a <returncode> inside the output (a command that printed a
	// trajectory, or the partial output in a timeout message) is not it.
	rc := returnCode.FindStringSubmatch(beforeOutput(text))
	timedOut := rc == nil && (strings.Contains(text, "timed out") || exception.MatchString(text) && strings.Contains(strings.ToLower(text), "timeout"))
	if rc == nil && !timedOut {
		rc = returnCode.FindStringSubmatch(text) // a template that writes it after the output
	}
	switch {
	case timedOut:
		res.Err = "timeout: the command timed out and was killed"
	case rc != nil:
		if n, _ := strconv.Atoi(rc[1]); n != 0 {
			res.Err = "exit code " + rc[1]
		}
	case exception.MatchString(text):
		res.Err = "exception: " + strings.TrimSpace(exception.FindStringSubmatch(text)[1])
	default:
		return res, fmt.Errorf("an observation with neither <returncode> nor a timeout (nor extra.returncode)")
	}
	if out == "" && res.Err != "" {
		out = strings.TrimSpace(text)
	}
	res.Text = out
	return res, nil
}

// beforeOutput is text up to its first <output> or <output_head> tag.
func beforeOutput(text string) string {
	for _, tag := range []string{"<output>", "<output_head>"} {
		if i := strings.Index(text, tag); i >= 0 {
			text = text[:i]
		}
	}
	return text
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// toolName names the tool a bash command runs, as §4.2 maps
// mini-swe-agent actions: the command's first word after leading "cd DIR
// &&" / "cd DIR;" prefixes and VAR=value assignments, without its path;
// "python -m X" (python3 too) is X, and "timeout N cmd" is cmd.
func toolName(command string) string {
	words := shellWords(command)
	for len(words) > 0 {
		w := words[0]
		switch {
		case w == "cd":
			// Skip to after the first && or ; (a cd alone is cd).
			k := 1
			for k < len(words) && words[k] != "&&" && words[k] != ";" {
				k++
			}
			if k >= len(words)-1 {
				return "cd"
			}
			words = words[k+1:]
		case assignment.MatchString(w):
			words = words[1:]
		case w == "timeout":
			k := 1
			for k < len(words) && strings.HasPrefix(words[k], "-") {
				if (words[k] == "-s" || words[k] == "-k" || words[k] == "--signal" || words[k] == "--kill-after") && k+1 < len(words) {
					k++
				}
				k++
			}
			if k+1 >= len(words) {
				return "timeout"
			}
			words = words[k+1:] // the duration, then the command
		default:
			name := path.Base(w)
			if isPython(name) && len(words) > 2 && words[1] == "-m" {
				return words[2]
			}
			return name
		}
	}
	return ""
}

func isPython(name string) bool {
	if name == "python" || name == "python3" || name == "python2" {
		return true
	}
	rest, ok := strings.CutPrefix(name, "python3.")
	_, err := strconv.Atoi(rest)
	return ok && err == nil
}

// shellWords splits a command into words and the operators && ; as words
// of their own, honouring single and double quotes and backslashes; it is
// enough to find the first command's name, not a shell parser.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				j = len(s) - i - 1
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				cur.WriteByte(s[j])
				j++
			}
			inWord = true
			i = j
		case c == '\\' && i+1 < len(s):
			cur.WriteByte(s[i+1])
			inWord = true
			i++
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			flush()
		case c == ';':
			flush()
			words = append(words, ";")
		case c == '&' && i+1 < len(s) && s[i+1] == '&':
			flush()
			words = append(words, "&&")
			i++
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words
}
