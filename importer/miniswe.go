package importer

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// submitMarker is the output line with which a mini-swe-agent run submits
// its work (older versions: MINI_SWE_AGENT_FINAL_OUTPUT).
var submitMarkers = []string{"COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT"}

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

type trajectory struct {
	Info     json.RawMessage `json:"info"`
	Messages []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls json.RawMessage `json:"tool_calls"`
		Extra     struct {
			Response struct {
				Created int64           `json:"created"`
				Model   string          `json:"model"`
				Usage   json.RawMessage `json:"usage"`
			} `json:"response"`
			Cost      *float64 `json:"cost"`
			Timestamp float64  `json:"timestamp"`
		} `json:"extra"`
	} `json:"messages"`
}

// importMiniSWEAgent reads a .traj.json: one run, named after the file.
func importMiniSWEAgent(file string, data []byte, _ *Options) ([]Run, error) {
	var t trajectory
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, &EntryError{File: file, Err: fmt.Errorf("not a mini-swe-agent trajectory (a JSON object with messages): %v", err)}
	}
	if t.Messages == nil {
		return nil, &EntryError{File: file, Err: fmt.Errorf("not a mini-swe-agent trajectory: no messages")}
	}
	var events []termination.Event
	task := false                  // the task's user message has been seen
	var pending *termination.Event // the tool_call awaiting its observation
	for i := 0; i < len(t.Messages); i++ {
		m := t.Messages[i]
		entry := fmt.Sprintf("messages[%d]", i)
		bad := func(format string, a ...any) error {
			return &EntryError{File: file, Entry: entry, Err: fmt.Errorf(format, a...)}
		}
		text, err := textOf(m.Content)
		if err != nil {
			return nil, bad("%v", err)
		}
		switch m.Role {
		case "system":
			events = append(events, termination.Event{Kind: termination.KindInput, Source: "system", Text: text})
		case "user":
			switch {
			case pending != nil:
				res, err := observation(text, pending)
				if err != nil {
					return nil, bad("%v", err)
				}
				events = append(events, res)
				pending = nil
			case !task:
				events = append(events, termination.Event{Kind: termination.KindInput, Source: "user", Text: text})
				task = true
			default:
				return nil, bad("a user message that follows no action: want the task, an observation or a format error")
			}
		case "assistant":
			if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" && string(m.ToolCalls) != "[]" {
				return nil, bad("tool_calls: a trajectory of the tool-calling agent; import it with -from openai-chat")
			}
			if pending != nil {
				return nil, bad("a response before the observation of the previous action")
			}
			msg := termination.Event{Kind: termination.KindMessage, Source: "agent", Text: text, Model: m.Extra.Response.Model}
			if msg.Usage, err = usage(m.Extra.Response.Usage); err != nil {
				return nil, bad("extra.response.%v", err)
			}
			switch cost, err := usageCost(m.Extra.Response.Usage); {
			case m.Extra.Cost != nil:
				msg.Cost = *m.Extra.Cost
			case err != nil:
				return nil, bad("extra.response.usage.cost: %v", err)
			default:
				msg.Cost = cost
			}
			if msg.Cost < 0 {
				return nil, bad("cost: negative")
			}
			switch {
			case m.Extra.Response.Created > 0:
				msg.Time = time.Unix(m.Extra.Response.Created, 0).UTC()
			case m.Extra.Timestamp > 0:
				sec := int64(m.Extra.Timestamp)
				msg.Time = time.Unix(sec, int64((m.Extra.Timestamp-float64(sec))*1e9)).UTC()
			}
			blocks := actionBlock.FindAllStringSubmatch(text, -1)
			if len(blocks) != 1 {
				// The format error: the agent rejects the response and
				// says so in the next user message, consumed here.
				events = append(events, msg)
				errText := fmt.Sprintf("format error: %d bash blocks, want exactly one", len(blocks))
				events = append(events, termination.Event{Kind: termination.KindError, Err: errText, Text: errText, Time: msg.Time})
				if i+1 < len(t.Messages) && t.Messages[i+1].Role == "user" {
					i++
				}
				continue
			}
			command := strings.TrimSpace(blocks[0][1])
			if submits(command) {
				msg.Kind = termination.KindFinal
				msg.Text = strings.TrimSpace(actionBlock.ReplaceAllString(text, ""))
				events = append(events, msg)
				// Its command's output (the submission) is not an event.
				if i+1 < len(t.Messages) && t.Messages[i+1].Role == "user" {
					i++
				}
				continue
			}
			args := marshalJSON(map[string]string{"command": command})
			call := termination.Event{Kind: termination.KindToolCall, Tool: ToolName(command), Args: args, Time: msg.Time}
			events = append(events, msg, call)
			pending = &call
		case "exit":
			// mini-swe-agent 2 ends with an exit message holding the
			// exit status: not an event of the loop.
		default:
			return nil, bad("role %q: want system, user or assistant", m.Role)
		}
	}
	if len(events) == 0 {
		return nil, &EntryError{File: file, Err: fmt.Errorf("no messages")}
	}
	return []Run{{ID: baseName(file), Events: events}}, nil
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

// observation maps the user message that follows an action to its
// tool_result.
func observation(text string, call *termination.Event) (termination.Event, error) {
	res := termination.Event{Kind: termination.KindToolResult, Tool: call.Tool}
	out := ""
	if m := outputTag.FindStringSubmatch(text); m != nil {
		out = m[1]
	} else if h := headTag.FindStringSubmatch(text); h != nil {
		out = h[1]
		if t := tailTag.FindStringSubmatch(text); t != nil {
			out += "\n…\n" + t[1]
		}
	}
	switch rc := returnCode.FindStringSubmatch(text); {
	case strings.Contains(text, "timed out") || (rc == nil && exception.MatchString(text) && strings.Contains(strings.ToLower(text), "timeout")):
		res.Err = "timeout: the command timed out and was killed"
	case rc != nil:
		if n, _ := strconv.Atoi(rc[1]); n != 0 {
			res.Err = "exit code " + rc[1]
		}
	case exception.MatchString(text):
		res.Err = "exception: " + strings.TrimSpace(exception.FindStringSubmatch(text)[1])
	default:
		return res, fmt.Errorf("an observation with neither <returncode> nor a timeout")
	}
	if out == "" && res.Err != "" {
		out = strings.TrimSpace(text)
	}
	res.Text = out
	return res, nil
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// ToolName names the tool a bash command runs, as §4.2 maps
// mini-swe-agent actions: the command's first word after leading "cd DIR
// &&" / "cd DIR;" prefixes and VAR=value assignments, without its path;
// "python -m X" (python3 too) is X, and "timeout N cmd" is cmd.
func ToolName(command string) string {
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
