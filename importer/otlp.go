package importer

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// The OTLP/JSON shapes: the protobuf JSON mapping of
// ExportTraceServiceRequest, as the Collector's file exporter writes it
// (one request per line) and as protojson writes it. The two differ in
// ways this file accepts both of: ids are hex (the OTLP/JSON rule, pdata)
// or base64 (protojson's bytes), enums are numbers (pdata) or names
// (protojson), 64-bit integers are strings or numbers.
type otlpRequest struct {
	ResourceSpans []struct {
		ScopeSpans []struct {
			Spans []otlpSpan `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type otlpSpan struct {
	TraceID      string          `json:"traceId"`
	SpanID       string          `json:"spanId"`
	ParentSpanID string          `json:"parentSpanId"`
	Name         string          `json:"name"`
	Start        numberText      `json:"startTimeUnixNano"`
	End          numberText      `json:"endTimeUnixNano"`
	Attributes   []otlpAttribute `json:"attributes"`
	Status       struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	} `json:"status"`
}

type otlpAttribute struct {
	Key   string `json:"key"`
	Value struct {
		String *string         `json:"stringValue"`
		Int    *json.Number    `json:"intValue"`
		Double *json.Number    `json:"doubleValue"`
		Bool   *bool           `json:"boolValue"`
		Array  json.RawMessage `json:"arrayValue"`
	} `json:"value"`
}

// span is an OTLP span read for the mapping.
type span struct {
	entry      string // "line 2: span 00f067aa0ba902b7"
	id, parent string // hex
	trace      string
	name, op   string
	start, end time.Time
	attrs      map[string]string
	ints       map[string]int64
	rawAttrs   []otlpAttribute
	failed     bool
	statusMsg  string
	order      int
}

// The gen_ai.operation.name values that make a span a run, an inference
// (a model turn) or a tool execution.
var inferenceOps = []string{"chat", "generate_content", "text_completion"}

// importOTLP reads OTLP/JSON traces: one request per line (the
// Collector's file exporter) or one request in the whole file.
func importOTLP(file string, data []byte, _ *Options) ([]Run, error) {
	values, lines, err := jsonValues(data)
	if err != nil {
		return nil, &EntryError{File: file, Err: err}
	}
	var spans []*span
	for i, v := range values {
		entry := ""
		if len(values) > 1 {
			entry = "line " + strconv.Itoa(lines[i])
		}
		var req otlpRequest
		dec := json.NewDecoder(strings.NewReader(string(v)))
		dec.UseNumber()
		if err := dec.Decode(&req); err != nil {
			return nil, &EntryError{File: file, Entry: entry, Err: fmt.Errorf("not OTLP/JSON traces (an object with resourceSpans): %v", err)}
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for k := range ss.Spans {
					s, err := readSpan(&ss.Spans[k], len(spans))
					if err != nil {
						name := strings.TrimSpace(entry + " span " + ss.Spans[k].SpanID)
						return nil, &EntryError{File: file, Entry: name, Err: err}
					}
					s.entry = strings.TrimSpace(entry + " span " + s.id)
					spans = append(spans, s)
				}
			}
		}
	}
	if len(spans) == 0 {
		return nil, &EntryError{File: file, Err: fmt.Errorf("no spans")}
	}
	byID := make(map[string]*span, len(spans))
	for _, s := range spans {
		byID[s.trace+"/"+s.id] = s
	}
	// The run of a span: the nearest invoke_agent span above it (itself
	// for an invoke_agent span's parent link: the nearest above it).
	runOf := func(s *span) *span {
		seen := 0
		for p := byID[s.trace+"/"+s.parent]; p != nil && seen < len(spans); p = byID[p.trace+"/"+p.parent] {
			if p.op == "invoke_agent" {
				return p
			}
			seen++
		}
		return nil
	}
	type runState struct {
		run   Run
		span  *span
		items []*span
	}
	var runs []*runState
	states := map[*span]*runState{}
	for _, s := range spans {
		if s.op == "invoke_agent" {
			st := &runState{span: s, run: Run{ID: runID(s)}}
			if p := runOf(s); p != nil {
				st.run.Parent = runID(p)
			}
			states[s] = st
			runs = append(runs, st)
		}
	}
	if len(runs) == 0 {
		return nil, &EntryError{File: file, Err: fmt.Errorf("no invoke_agent span: every run is an invoke_agent span (gen_ai.operation.name)")}
	}
	for _, s := range spans {
		if s.op != "execute_tool" && !slices.Contains(inferenceOps, s.op) {
			continue
		}
		r := runOf(s)
		if r == nil {
			return nil, &EntryError{File: file, Entry: s.entry, Err: fmt.Errorf("a %s span under no invoke_agent span: it belongs to no run", s.op)}
		}
		states[r].items = append(states[r].items, s)
	}
	slices.SortStableFunc(runs, func(a, b *runState) int { return a.span.start.Compare(b.span.start) })
	out := make([]Run, 0, len(runs))
	for _, st := range runs {
		events, err := spanEvents(st.span, st.items)
		if err != nil {
			return nil, &EntryError{File: file, Entry: err.entry, Err: err.err}
		}
		st.run.Events = events
		out = append(out, st.run)
	}
	return out, nil
}

type spanError struct {
	entry string
	err   error
}

// spanEvents maps the inference and tool spans of one run to events, in
// time order: an inference span is a message at its end; an execute_tool
// span a tool_call at its start and a tool_result at its end.
func spanEvents(agent *span, items []*span) ([]termination.Event, *spanError) {
	type timed struct {
		at    time.Time
		order int
		ev    termination.Event
	}
	var evs []timed
	lastInference := -1
	var lastToolStart time.Time
	for i, s := range items {
		if s.op == "execute_tool" {
			if s.start.After(lastToolStart) {
				lastToolStart = s.start
			}
			continue
		}
		if lastInference < 0 || !s.end.Before(items[lastInference].end) {
			lastInference = i
		}
	}
	source := agent.attrs["gen_ai.agent.name"]
	if source == "" {
		source = "agent"
	}
	for i, s := range items {
		if s.op == "execute_tool" {
			tool := s.attrs["gen_ai.tool.name"]
			if tool == "" {
				return nil, &spanError{s.entry, fmt.Errorf("execute_tool span without gen_ai.tool.name")}
			}
			call := termination.Event{Kind: termination.KindToolCall, Tool: tool, CallID: s.attrs["gen_ai.tool.call.id"],
				Args: argsOf(s.attrs["gen_ai.tool.call.arguments"]), Time: s.start}
			res := termination.Event{Kind: termination.KindToolResult, Tool: tool, CallID: call.CallID,
				Text: s.attrs["gen_ai.tool.call.result"], Time: s.end}
			if s.failed {
				res.Err = s.statusMsg
				if res.Err == "" {
					res.Err = s.attrs["error.type"]
				}
				if res.Err == "" {
					res.Err = "error"
				}
			}
			evs = append(evs, timed{s.start, 2 * s.order, call}, timed{s.end, 2*s.order + 1, res})
			continue
		}
		in, out := s.ints["gen_ai.usage.input_tokens"], s.ints["gen_ai.usage.output_tokens"]
		if _, ok := s.ints["gen_ai.usage.input_tokens"]; !ok {
			in = s.ints["gen_ai.usage.prompt_tokens"] // the conventions' name before 1.27
		}
		if _, ok := s.ints["gen_ai.usage.output_tokens"]; !ok {
			out = s.ints["gen_ai.usage.completion_tokens"]
		}
		if in < 0 || out < 0 {
			return nil, &spanError{s.entry, fmt.Errorf("negative gen_ai.usage token count")}
		}
		model := s.attrs["gen_ai.request.model"]
		if model == "" {
			model = s.attrs["gen_ai.response.model"]
		}
		ev := termination.Event{Kind: termination.KindMessage, Source: source, Model: model, Time: s.end,
			Usage: termination.Usage{InputTokens: in, OutputTokens: out}}
		if i == lastInference && !requestsTool(s) && !lastToolStart.After(s.end) {
			ev.Kind = termination.KindFinal
		}
		evs = append(evs, timed{s.end, 2 * s.order, ev})
	}
	slices.SortStableFunc(evs, func(a, b timed) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.order - b.order
	})
	out := make([]termination.Event, len(evs))
	for i, e := range evs {
		out[i] = e.ev
	}
	if len(out) == 0 {
		// A run with no model turn and no tool: its span says it ran.
		out = append(out, termination.Event{Kind: termination.KindInput, Source: source, Time: agent.start})
	}
	return out, nil
}

// requestsTool reports whether an inference span's finish reasons say the
// model asked for a tool.
func requestsTool(s *span) bool {
	for _, a := range s.rawAttrs {
		if a.Key != "gen_ai.response.finish_reasons" || a.Value.Array == nil {
			continue
		}
		t := string(a.Value.Array)
		return strings.Contains(t, "tool_call") || strings.Contains(t, "tool_use") || strings.Contains(t, "function_call")
	}
	return false
}

func runID(s *span) string {
	if name := s.attrs["gen_ai.agent.name"]; name != "" {
		return name + "-" + s.id
	}
	return s.id
}

func readSpan(o *otlpSpan, order int) (*span, error) {
	s := &span{name: o.Name, order: order, attrs: map[string]string{}, ints: map[string]int64{}, rawAttrs: o.Attributes}
	var err error
	if s.id, err = otlpID(o.SpanID, 8); err != nil || s.id == "" {
		return nil, fmt.Errorf("spanId: want 8 bytes in hex, got %q", o.SpanID)
	}
	if s.parent, err = otlpID(o.ParentSpanID, 8); err != nil {
		return nil, fmt.Errorf("parentSpanId: want 8 bytes in hex, got %q", o.ParentSpanID)
	}
	if s.trace, err = otlpID(o.TraceID, 16); err != nil {
		return nil, fmt.Errorf("traceId: want 16 bytes in hex, got %q", o.TraceID)
	}
	if s.start, err = unixNano(o.Start); err != nil {
		return nil, fmt.Errorf("startTimeUnixNano: %v", err)
	}
	if s.end, err = unixNano(o.End); err != nil {
		return nil, fmt.Errorf("endTimeUnixNano: %v", err)
	}
	for _, a := range o.Attributes {
		switch v := a.Value; {
		case v.String != nil:
			s.attrs[a.Key] = *v.String
		case v.Int != nil:
			n, err := strconv.ParseInt(v.Int.String(), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("attribute %s: want an integer, got %s", a.Key, v.Int.String())
			}
			s.ints[a.Key] = n
			s.attrs[a.Key] = v.Int.String()
		case v.Double != nil:
			s.attrs[a.Key] = v.Double.String()
		case v.Bool != nil:
			s.attrs[a.Key] = strconv.FormatBool(*v.Bool)
		}
	}
	code := strings.Trim(string(o.Status.Code), `"`)
	s.failed = code == "2" || code == "STATUS_CODE_ERROR"
	s.statusMsg = o.Status.Message
	s.op = s.attrs["gen_ai.operation.name"]
	if s.op == "" {
		// Without the attribute, the span name's first word ("chat
		// gpt-4o", "execute_tool search", "invoke_agent planner").
		s.op, _, _ = strings.Cut(s.name, " ")
	}
	return s, nil
}

// otlpID reads a span or trace id: hex (OTLP/JSON) or base64 (protojson);
// "" for none. It returns lowercase hex.
func otlpID(v string, size int) (string, error) {
	if v == "" {
		return "", nil
	}
	if b, err := hex.DecodeString(v); err == nil && len(b) == size {
		return strings.ToLower(v), nil
	}
	if b, err := base64.StdEncoding.DecodeString(v); err == nil && len(b) == size {
		return hex.EncodeToString(b), nil
	}
	return "", fmt.Errorf("bad id")
}

// numberText is a 64-bit integer as OTLP/JSON writes it: a string (the
// protobuf JSON mapping) or a number; checked where it is read.
type numberText string

func (n *numberText) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*n = numberText(s)
		return nil
	}
	*n = numberText(b)
	return nil
}

func unixNano(n numberText) (time.Time, error) {
	if n == "" {
		return time.Time{}, fmt.Errorf("missing")
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || v < 0 {
		return time.Time{}, fmt.Errorf("want nanoseconds since the Unix epoch, got %s", string(n))
	}
	return time.Unix(0, v).UTC(), nil
}
