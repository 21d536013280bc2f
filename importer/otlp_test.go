package importer

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/termination"
)

// The public samples of testdata/ (provenance in testdata/README.md) and
// what each must give: golden streams, and what is skipped.
var otlpSamples = []struct {
	file, golden string
	skipped      []Skipped
}{
	{"collector.jsonl", "collector.golden.jsonl", []Skipped{}},
	{"openai-v2.json", "openai-v2.golden.jsonl", []Skipped{}},
	{"openinference.json", "openinference.golden.jsonl", []Skipped{}},
	{"litellm.json", "litellm.golden.jsonl", []Skipped{{"other span", 1}}},
	{"openllmetry.json", "openllmetry.golden.jsonl", []Skipped{{"workflow span", 1}}},
	{"adk.jsonl", "adk.golden.jsonl", []Skipped{{"chain span", 2}}},
}

// importOTLP imports data as otlp and returns the runs and the skips.
func importOTLP(t testing.TB, file string, data []byte) ([]Run, []Skipped, error) {
	t.Helper()
	var runs []Run
	out := &Output{Emit: func(r Run) error { runs = append(runs, r); return nil }}
	err := Import("otlp", file, bytes.NewReader(data), Options{}, out)
	return runs, out.Skipped(), err
}

func stream(t testing.TB, runs []Run) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, Runs(runs).WriteStream(&b))
	return b.String()
}

// TestOTLPSamples imports each public sample, as JSON and converted to
// the file exporter's protobuf encoding, and compares the stream with its
// golden file: both encodings give the same runs.
func TestOTLPSamples(t *testing.T) {
	for _, tt := range otlpSamples {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			require.NoError(t, err)
			runs, skipped, err := importOTLP(t, tt.file, data)
			require.NoError(t, err)
			got := stream(t, runs)
			golden := filepath.Join("testdata", tt.golden)
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), got)
			assert.Equal(t, tt.skipped, skipped)
			dec := codec.NewDecoder(strings.NewReader(got))
			for {
				if _, err := dec.Next(); err != nil {
					require.ErrorContains(t, err, "EOF")
					break
				}
			}

			pruns, pskipped, err := importOTLP(t, tt.file, protoFile(t, data))
			require.NoError(t, err)
			assert.Equal(t, got, stream(t, pruns), "protobuf gives the same runs")
			assert.Equal(t, tt.skipped, pskipped)
		})
	}
}

// TestOTLPSampleMappings checks, sample by sample, the mapping choices the
// issue named: a trace without invoke_agent is one run, call_llm spans are
// model turns with their tokens, OpenInference attributes are read.
func TestOTLPSampleMappings(t *testing.T) {
	load := func(name string) []Run {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		runs, _, err := importOTLP(t, name, data)
		require.NoError(t, err)
		return runs
	}
	for _, name := range []string{"openai-v2.json", "openinference.json", "litellm.json"} {
		runs := load(name)
		require.Len(t, runs, 1, "%s: one run per trace without invoke_agent", name)
		require.Len(t, runs[0].Events, 1, name)
		ev := runs[0].Events[0]
		assert.Equal(t, termination.KindMessage, ev.Kind, "%s: the turn asked for a tool, so it is not final", name)
		assert.Equal(t, termination.Usage{InputTokens: 412, OutputTokens: 27}, ev.Usage, name)
		assert.Len(t, runs[0].ID, 32, "%s: named by its trace id", name)
	}
	assert.Equal(t, "gpt-4o-mini-2024-07-18", load("openinference.json")[0].Events[0].Model, "llm.model_name")

	adk := load("adk.jsonl")
	require.Len(t, adk, 2, "two traces, each with its agent_run span")
	assert.Equal(t, "chat_robot-ce03a2fd8844451c", adk[0].ID, "agent_run [NAME]: the agent's name")
	kinds := func(r Run) (out []string) {
		for _, e := range r.Events {
			out = append(out, e.Kind.String())
		}
		return out
	}
	assert.Equal(t, []string{"message", "tool_call", "tool_result", "final"}, kinds(adk[0]),
		"call_llm spans are model turns; the tool its span holds follows its message")
	assert.Equal(t, termination.Usage{InputTokens: 547, OutputTokens: 679}, adk[0].Events[3].Usage)
	assert.JSONEq(t, `{"city": "Beijing"}`, string(adk[1].Events[1].Args))
	assert.Equal(t, "call_4x60qqjspcwxfu3jtsw1m3sh", adk[1].Events[2].CallID)
}

func TestOTLPMapping(t *testing.T) {
	runs, err := importPath("otlp", "testdata/collector.jsonl", Options{})
	require.NoError(t, err)
	require.Len(t, runs, 2)
	planner, researcher := runs[0], runs[1]
	assert.Equal(t, "planner-eee19b7ec3c1b174", planner.ID)
	assert.Empty(t, planner.Parent)
	assert.Equal(t, planner.ID, researcher.Parent, "the enclosing invoke_agent span, through the delegate tool's span")
	assert.Equal(t, termination.KindFinal, planner.Events[len(planner.Events)-1].Kind)
	assert.Equal(t, termination.KindMessage, planner.Events[0].Kind, "a turn that requested a tool is not final")
	assert.Equal(t, "rate limited", researcher.Events[2].Err, "status Error: the status message")
	assert.Equal(t, "s1", researcher.Events[2].CallID)
	assert.Equal(t, termination.Usage{InputTokens: 350, OutputTokens: 25}, researcher.Events[3].Usage)
	assert.Equal(t, "gpt-4o-mini", researcher.Events[3].Model)
}

// A span of a test trace, written as OTLP/JSON by otlpLines.
type tspan struct {
	trace, id, parent, name string
	start, end              int
	attrs                   map[string]any
	failed                  bool
}

const (
	traceA = "5b8efff798038103d269b633813fc60c"
	traceB = "0af7651916cd43dd8448eb211c80319c"
)

// otlpLines writes each group of spans as one request line.
func otlpLines(groups ...[]tspan) []byte {
	var b bytes.Buffer
	for _, spans := range groups {
		var out []map[string]any
		for _, s := range spans {
			m := map[string]any{"traceId": s.trace, "spanId": s.id, "name": s.name,
				"startTimeUnixNano": strconv.Itoa(s.start), "endTimeUnixNano": strconv.Itoa(s.end)}
			if s.parent != "" {
				m["parentSpanId"] = s.parent
			}
			if s.failed {
				m["status"] = map[string]any{"code": 2, "message": "failed"}
			}
			keys := make([]string, 0, len(s.attrs))
			for k := range s.attrs {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var attrs []map[string]any
			for _, k := range keys {
				var v map[string]any
				switch x := s.attrs[k].(type) {
				case string:
					v = map[string]any{"stringValue": x}
				case int:
					v = map[string]any{"intValue": strconv.Itoa(x)}
				case []string:
					var vals []map[string]any
					for _, e := range x {
						vals = append(vals, map[string]any{"stringValue": e})
					}
					v = map[string]any{"arrayValue": map[string]any{"values": vals}}
				}
				attrs = append(attrs, map[string]any{"key": k, "value": v})
			}
			m["attributes"] = attrs
			out = append(out, m)
		}
		line, _ := json.Marshal(map[string]any{"resourceSpans": []any{map[string]any{"scopeSpans": []any{map[string]any{"spans": out}}}}})
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func sid(n int) string { return fmt.Sprintf("%016x", n) }

func chat(trace string, id, parent, start, end, in, out int) tspan {
	return tspan{trace: trace, id: sid(id), parent: sidOr(parent), name: "chat gpt-4o", start: start, end: end,
		attrs: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": in, "gen_ai.usage.output_tokens": out}}
}

func sidOr(n int) string {
	if n == 0 {
		return ""
	}
	return sid(n)
}

func kindsOf(r Run) string {
	var k []string
	for _, e := range r.Events {
		k = append(k, e.Kind.String())
	}
	return strings.Join(k, " ")
}

func TestOTLPRunsWithoutAgent(t *testing.T) {
	data := otlpLines(
		[]tspan{
			{trace: traceA, id: sid(1), name: "POST /ask", start: 1, end: 100, attrs: map[string]any{"http.request.method": "POST"}},
			chat(traceA, 2, 1, 2, 10, 100, 10),
			{trace: traceA, id: sid(3), parent: sid(1), name: "lookup", start: 11, end: 20,
				attrs: map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}},
		},
		[]tspan{
			chat(traceA, 4, 1, 21, 30, 120, 5),
			// Another trace: spans named only by their model and usage.
			{trace: traceB, id: sid(5), name: "openai.chat", start: 5, end: 9,
				attrs: map[string]any{"gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.prompt_tokens": 7}},
			{trace: traceB, id: sid(6), name: "SELECT", start: 6, end: 7, attrs: map[string]any{"db.system": "postgresql"}},
			{trace: traceB, id: sid(7), name: "embed", start: 6, end: 7, attrs: map[string]any{"gen_ai.operation.name": "embeddings", "gen_ai.usage.input_tokens": 3}},
		},
	)
	runs, skipped, err := importOTLP(t, "t.jsonl", data)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	assert.Equal(t, traceA, runs[0].ID, "one run per trace without invoke_agent, named by the trace")
	assert.Equal(t, "message tool_call tool_result final", kindsOf(runs[0]), "spans of one trace over two requests")
	assert.Equal(t, traceB, runs[1].ID)
	assert.Equal(t, "final", kindsOf(runs[1]))
	assert.Equal(t, termination.Usage{InputTokens: 7}, runs[1].Events[0].Usage)
	assert.Equal(t, []Skipped{{"database span", 1}, {"embeddings span", 1}, {"http span", 1}}, skipped)
}

func TestOTLPMissingParents(t *testing.T) {
	agent := func(id, parent int, name string, start, end int) tspan {
		return tspan{trace: traceA, id: sid(id), parent: sidOr(parent), name: "invoke_agent " + name, start: start, end: end}
	}
	data := otlpLines([]tspan{
		agent(1, 0, "planner", 1, 100),
		// 2 (a step span) was not exported: the tool and the chat under it
		// join the trace's run, the planner's.
		{trace: traceA, id: sid(3), parent: sid(2), name: "execute_tool search", start: 5, end: 9, failed: true},
		chat(traceA, 4, 2, 10, 20, 50, 5),
		// A sub-agent whose parent is missing: a child of the trace's top agent.
		agent(5, 99, "helper", 30, 40),
		chat(traceA, 6, 5, 31, 39, 10, 1),
	})
	runs, _, err := importOTLP(t, "t.jsonl", data)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	assert.Equal(t, "planner-"+sid(1), runs[0].ID, "invoke_agent NAME: the agent's name from the span name")
	assert.Equal(t, "tool_call tool_result final", kindsOf(runs[0]))
	assert.Equal(t, "search", runs[0].Events[0].Tool, "execute_tool NAME: the tool's name from the span name")
	assert.Equal(t, "failed", runs[0].Events[1].Err)
	assert.Equal(t, runs[0].ID, runs[1].Parent)
	assert.Equal(t, "helper", runs[1].Events[0].Source)

	// The case, with the agent span itself missing: one run per trace.
	runs, _, err = importOTLP(t, "t.jsonl", otlpLines([]tspan{
		{trace: traceA, id: sid(3), parent: sid(2), name: "execute_tool search", start: 5, end: 9},
		chat(traceA, 4, 2, 10, 20, 50, 5),
	}))
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, traceA, runs[0].ID)
}

func TestOTLPNestedModelSpans(t *testing.T) {
	callLLM := func(id, parent, start, end int, usage bool) tspan {
		s := tspan{trace: traceA, id: sid(id), parent: sidOr(parent), name: "call_llm", start: start, end: end, attrs: map[string]any{}}
		if usage {
			s.attrs["gen_ai.usage.input_tokens"], s.attrs["gen_ai.usage.output_tokens"] = 1000, 100
		}
		return s
	}
	tests := []struct {
		name    string
		spans   []tspan
		want    []termination.Usage
		skipped []Skipped
	}{
		{"outer and inner with usage: the inner counts",
			[]tspan{callLLM(1, 0, 1, 50, true), chat(traceA, 2, 1, 2, 40, 900, 90)},
			[]termination.Usage{{InputTokens: 900, OutputTokens: 90}}, []Skipped{{"nested model span", 1}}},
		{"through a span between them",
			[]tspan{callLLM(1, 0, 1, 50, true), {trace: traceA, id: sid(2), parent: sid(1), name: "POST", start: 2, end: 45}, chat(traceA, 3, 2, 3, 40, 900, 90)},
			[]termination.Usage{{InputTokens: 900, OutputTokens: 90}}, []Skipped{{"nested model span", 1}, {"other span", 1}}},
		{"outer with usage, inner without: the outer counts",
			[]tspan{callLLM(1, 0, 1, 50, true), callLLM(2, 1, 2, 40, false)},
			[]termination.Usage{{InputTokens: 1000, OutputTokens: 100}}, []Skipped{{"nested model span", 1}}},
		{"no usage in the nest: the innermost counts",
			[]tspan{callLLM(1, 0, 1, 50, false), callLLM(2, 1, 2, 40, false)},
			[]termination.Usage{{}}, []Skipped{{"nested model span", 1}}},
		{"two inner turns with usage: both count",
			[]tspan{callLLM(1, 0, 1, 50, true), chat(traceA, 2, 1, 2, 20, 900, 90), chat(traceA, 3, 1, 21, 40, 950, 95)},
			[]termination.Usage{{InputTokens: 900, OutputTokens: 90}, {InputTokens: 950, OutputTokens: 95}}, []Skipped{{"nested model span", 1}}},
		{"an agent between them ends the nest",
			[]tspan{callLLM(1, 0, 1, 50, true), {trace: traceA, id: sid(2), parent: sid(1), name: "invoke_agent sub", start: 2, end: 45}, chat(traceA, 3, 2, 3, 40, 900, 90)},
			[]termination.Usage{{InputTokens: 1000, OutputTokens: 100}}, []Skipped{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs, skipped, err := importOTLP(t, "t.jsonl", otlpLines(tt.spans))
			require.NoError(t, err)
			var got []termination.Usage
			for _, r := range runs {
				if r.ID == traceA {
					for _, e := range r.Events {
						got = append(got, e.Usage)
					}
				}
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.skipped, skipped)
		})
	}
}

func TestOTLPOpenInferenceTool(t *testing.T) {
	data := otlpLines([]tspan{
		{trace: traceA, id: sid(1), name: "Agent", start: 1, end: 100, attrs: map[string]any{"openinference.span.kind": "AGENT", "agent.name": "support"}},
		{trace: traceA, id: sid(2), parent: sid(1), name: "ChatCompletion", start: 2, end: 10, attrs: map[string]any{
			"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o", "llm.token_count.prompt": 400, "llm.token_count.completion": 20,
			"llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "lookup_order"}},
		{trace: traceA, id: sid(3), parent: sid(1), name: "lookup_order", start: 11, end: 12, attrs: map[string]any{
			"openinference.span.kind": "TOOL", "tool.name": "lookup_order", "input.value": `{"order_id": "A-1187"}`, "output.value": "shipped"}},
		{trace: traceA, id: sid(4), parent: sid(1), name: "ChatCompletion", start: 13, end: 20, attrs: map[string]any{
			"openinference.span.kind": "LLM", "llm.token_count.prompt": 450, "llm.token_count.completion": 30}},
		{trace: traceA, id: sid(5), parent: sid(1), name: "retrieve", start: 13, end: 20, attrs: map[string]any{"openinference.span.kind": "RETRIEVER"}},
	})
	runs, skipped, err := importOTLP(t, "t.jsonl", data)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	r := runs[0]
	assert.Equal(t, "support-"+sid(1), r.ID)
	assert.Equal(t, "message tool_call tool_result final", kindsOf(r))
	assert.Equal(t, termination.Usage{InputTokens: 400, OutputTokens: 20}, r.Events[0].Usage)
	assert.Equal(t, "gpt-4o", r.Events[0].Model)
	assert.JSONEq(t, `{"order_id": "A-1187"}`, string(r.Events[1].Args))
	assert.Equal(t, "shipped", r.Events[2].Text)
	assert.Equal(t, []Skipped{{"retriever span", 1}}, skipped)
}

func TestOTLPOlderUsageNames(t *testing.T) {
	data := `{"resourceSpans":[{"scopeSpans":[{"spans":[
{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"invoke_agent a","startTimeUnixNano":"1","endTimeUnixNano":"9"},
{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b175","parentSpanId":"eee19b7ec3c1b174","name":"chat m","startTimeUnixNano":"2","endTimeUnixNano":"3",
 "attributes":[{"key":"gen_ai.usage.prompt_tokens","value":{"intValue":"70"}},{"key":"gen_ai.usage.completion_tokens","value":{"intValue":7}}]}]}]}]}`
	runs, err := importData("otlp", "old.json", []byte(data), Options{})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, termination.Usage{InputTokens: 70, OutputTokens: 7}, runs[0].Events[0].Usage)
	assert.Equal(t, termination.KindFinal, runs[0].Events[0].Kind)
}

func TestOTLPOddShapes(t *testing.T) {
	// A cycle of parent links ends; a span seen twice is counted once.
	line := otlpLines([]tspan{
		chat(traceA, 1, 2, 1, 5, 10, 1),
		chat(traceA, 2, 1, 2, 6, 10, 1),
	})
	runs, skipped, err := importOTLP(t, "t.jsonl", append(line, line...))
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Len(t, runs[0].Events, 1, "in a cycle, one of the two is the inner one")
	assert.Equal(t, []Skipped{{"duplicate span", 2}, {"nested model span", 1}}, skipped)

	// A pretty-printed request followed by another: line numbers hold.
	pretty := "\ufeff{\n  \"resourceSpans\": []\n}\n\n" + `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"` + traceA + `","spanId":"x","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}` + "\n"
	_, _, err = importOTLP(t, "t.jsonl", []byte(pretty))
	require.EqualError(t, err, `t.jsonl: line 5 span x: spanId: want 8 bytes in hex, got "x"`)

	// An attribute whose value comes before its key.
	runs, _, err = importOTLP(t, "t.json", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"`+traceA+`","spanId":"`+sid(1)+
		`","name":"x","startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[{"value":{"intValue":"42"},"key":"gen_ai.usage.input_tokens"}]}]}]}]}`))
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, termination.Usage{InputTokens: 42}, runs[0].Events[0].Usage)

	// protojson's form: base64 ids, enum names, numbers for 64-bit integers.
	b64 := func(h string) string { b, _ := hex.DecodeString(h); return base64.StdEncoding.EncodeToString(b) }
	pj := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"` + b64(traceA) + `","spanId":"` + b64(sid(1)) +
		`","name":"execute_tool x","startTimeUnixNano":1,"endTimeUnixNano":2,"status":{"code":"STATUS_CODE_ERROR"},` +
		`"attributes":[{"key":"error.type","value":{"stringValue":"timeout"}}]}]}]}]}`
	runs, _, err = importOTLP(t, "t.json", []byte(pj))
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, "timeout", runs[0].Events[1].Err, "no status message: error.type")
}

func TestOTLPErrors(t *testing.T) {
	span := func(extra string) string {
		return `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","startTimeUnixNano":"1","endTimeUnixNano":"2"` + extra + `}]}]}]}`
	}
	tests := []struct{ name, text, err string }{
		{"empty", "", "f.json: empty file"},
		{"not otlp", `{"spans": []}`, "f.json: no spans: not OTLP traces"},
		{"an array", `[{"resourceSpans": []}]`, "f.json: line 1: want one ExportTraceServiceRequest object (resourceSpans) per line, got a list"},
		{"a field of the wrong type", `{"resourceSpans": {}}`, "f.json: line 1: resourceSpans: want a list, got an object"},
		{"a field of the wrong type in a pretty request", "{\n  \"resourceSpans\": [\n    {\"scopeSpans\": [\n      {\"spans\": 7}]}]}", "f.json: line 4: spans: want a list, got a number"},
		{"malformed line", span("") + "\n{\"resourceSpans\": [,]}\n", "f.json: line 2: malformed JSON: invalid character ','"},
		{"truncated", span("") + "\n" + span("")[:40], "f.json: line 2: the file looks truncated"},
		{"stray bracket", span("") + "\n]\n", "f.json: line 2: want one ExportTraceServiceRequest object (resourceSpans) per line, got a stray ']'"},
		{"not JSON", "hello", "f.json: line 1: malformed JSON: want an ExportTraceServiceRequest object (resourceSpans), got the character 'h'"},
		{"malformed deep inside", span(`,"attributes":[{"key":"x","value":{"stringValue":"a" "b"}}]`), "f.json: line 1: malformed JSON: invalid character '\"' after object key:value pair"},
		{"malformed on a later line of a pretty request", "{\n\"resourceSpans\": [\n{,}]}", "f.json: line 3: malformed JSON: invalid character ','"},
		{"bad span id", strings.Replace(span(""), "eee19b7ec3c1b174", "xyz", 1), `f.json: line 1 span xyz: spanId: want 8 bytes in hex, got "xyz"`},
		{"bad parent id", span(`,"parentSpanId":"12"`), `line 1 span eee19b7ec3c1b174: parentSpanId: want 8 bytes in hex, got "12"`},
		{"bad trace id", strings.Replace(span(""), "5b8efff798038103d269b633813fc60c", "5b8e", 1), `traceId: want 16 bytes in hex, got "5b8e"`},
		{"bad time", strings.Replace(span(""), `"1"`, `"soon"`, 1), "line 1 span eee19b7ec3c1b174: startTimeUnixNano: want nanoseconds since the Unix epoch, got soon"},
		{"no end", strings.Replace(span(""), `,"endTimeUnixNano":"2"`, "", 1), "endTimeUnixNano: missing"},
		{"tool span without a name", span(`,"name":"execute_tool"`), "line 1 span eee19b7ec3c1b174: an execute_tool span without gen_ai.tool.name"},
		{"bad token count", span(`,"name":"chat","attributes":[{"key":"gen_ai.usage.input_tokens","value":{"stringValue":"many"}}]`), `attribute gen_ai.usage.input_tokens: want a whole number of tokens, got "many"`},
		{"negative token count", span(`,"name":"chat","attributes":[{"key":"gen_ai.usage.output_tokens","value":{"intValue":"-3"}}]`), "attribute gen_ai.usage.output_tokens: a negative token count, -3"},
		{"bad attribute", span(`,"attributes":[3]`), "attributes[]: want an object, got a number"},
		{"bad attribute value", span(`,"attributes":[{"key":"gen_ai.agent.name","value":"x"}]`), "attribute gen_ai.agent.name: want an AnyValue object"},
		{"zstd", "\x28\xb5\x2f\xfd\x00", "compressed with zstd"},
		{"proto cut short", "\x00\x00\x01\x00abc", "f.json: message 1 (byte 0): the file looks truncated: 256 bytes announced, 3 present"},
		{"proto size cut short", "\x00\x00", "message 1 (byte 0): the file looks truncated: its 4-byte size is cut short"},
		{"not protobuf", "\x00\x00\x00\x02\xff\xff", "message 1 (byte 0): not an OTLP ExportTraceServiceRequest in protobuf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := importOTLP(t, "f.json", []byte(tt.text))
			require.ErrorContains(t, err, tt.err)
			assert.NotContains(t, err.Error(), "\n")
			assert.NotContains(t, err.Error(), "importer.", "no Go type in the message")
		})
	}
}

func TestOTLPProtoErrorsNameTheSpan(t *testing.T) {
	data := protoFile(t, otlpLines([]tspan{chat(traceA, 1, 0, 1, 2, 3, 4)}, []tspan{{trace: traceA, id: sid(2), name: "execute_tool", start: 1, end: 2}}))
	_, _, err := importOTLP(t, "t.bin", data)
	require.ErrorContains(t, err, "t.bin: message 2 span "+sid(2)+": an execute_tool span without gen_ai.tool.name")
}

// protoFile writes OTLP/JSON (one request per line, or one request) in
// the file exporter's protobuf encoding: each ExportTraceServiceRequest
// preceded by its size, 4 bytes big-endian (the fileexporter's
// exportMessageAsBuffer).
func protoFile(t testing.TB, data []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var req map[string]any
		require.NoError(t, dec.Decode(&req))
		base64IDs(req)
		b, err := json.Marshal(req)
		require.NoError(t, err)
		var msg coltracepb.ExportTraceServiceRequest
		require.NoError(t, protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, &msg))
		wire, err := proto.Marshal(&msg)
		require.NoError(t, err)
		out.Write(binary.BigEndian.AppendUint32(nil, uint32(len(wire))))
		out.Write(wire)
	}
	return out.Bytes()
}

// base64IDs turns OTLP/JSON's hex ids into protojson's base64.
func base64IDs(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && slices.Contains([]string{"traceId", "spanId", "parentSpanId"}, k) {
				b, _ := hex.DecodeString(s)
				x[k] = base64.StdEncoding.EncodeToString(b)
				continue
			}
			base64IDs(e)
		}
	case []any:
		for _, e := range x {
			base64IDs(e)
		}
	}
}

// FuzzOTLP feeds the otlp format arbitrary bytes, seeded with the samples
// in both encodings: it maps them or fails with a one-line error, never
// panics or hangs, and what it maps is made of valid events.
func FuzzOTLP(f *testing.F) {
	for _, s := range otlpSamples {
		data, err := os.ReadFile(filepath.Join("testdata", s.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(protoFile(f, data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runs, _, err := importOTLP(t, "f", data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a multi-line error: %q", err)
			}
			return
		}
		for _, r := range runs {
			for i, ev := range r.Events {
				if err := ev.Validate(); err != nil {
					t.Fatalf("run %s event %d: %v", r.ID, i, err)
				}
			}
		}
	})
}

// TestOTLPReaderShapes reads the same requests however the input is laid
// out and however the reader hands it over: one byte at a time, lines
// longer than the read buffer, several requests on a line, a request over
// many lines, no newline at the end.
func TestOTLPReaderShapes(t *testing.T) {
	long := strings.Repeat(`x\"{[`, 40000) // 200 KB of a string full of escapes and brackets
	spans := []tspan{
		{trace: traceA, id: sid(1), name: "invoke_agent a", start: 1, end: 100},
		{trace: traceA, id: sid(2), parent: sid(1), name: "execute_tool t", start: 2, end: 3,
			attrs: map[string]any{"gen_ai.tool.call.result": long, "gen_ai.input.messages": long}},
		chat(traceA, 3, 1, 4, 5, 10, 1),
	}
	lines := otlpLines(spans[:1], spans[1:2], spans[2:])
	want, _, err := importOTLP(t, "t.jsonl", lines)
	require.NoError(t, err)
	require.Len(t, want, 1)
	assert.True(t, want[0].Events[1].Text == long, "the result read whole")

	var pretty bytes.Buffer
	for _, l := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
		require.NoError(t, json.Indent(&pretty, l, "", "  "))
		pretty.WriteString("\n\n")
	}
	shapes := map[string][]byte{
		"one line":           bytes.ReplaceAll(bytes.TrimSpace(lines), []byte("\n"), nil),
		"no newline at end":  bytes.TrimSpace(lines),
		"pretty":             pretty.Bytes(),
		"CRLF and blank":     bytes.ReplaceAll(lines, []byte("\n"), []byte("\r\n\r\n")),
		"spaces between":     bytes.ReplaceAll(lines, []byte("}\n{"), []byte("}  \t {")),
		"leading blank line": append([]byte("\n\n"), lines...),
	}
	for name, data := range shapes {
		t.Run(name, func(t *testing.T) {
			for _, r := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader} {
				var runs []Run
				out := &Output{Emit: func(x Run) error { runs = append(runs, x); return nil }}
				require.NoError(t, Import("otlp", "t.jsonl", r(bytes.NewReader(data)), Options{}, out))
				assert.Equal(t, stream(t, want), stream(t, runs))
			}
		})
	}
}

func TestUnquote(t *testing.T) {
	for _, in := range []string{`a\"b\\c\/d\n\t\r\b\f`, `\u00e9\u4e2d`, `\ud83d\ude00 smile`, `\ud83d alone`, `plain`} {
		var want string
		require.NoError(t, json.Unmarshal([]byte(`"`+in+`"`), &want))
		got, ok := unquote([]byte(in))
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{`\x`, `\u12`, `end\`} {
		_, ok := unquote([]byte(bad))
		assert.False(t, ok, bad)
	}
}
