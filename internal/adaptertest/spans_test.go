package adaptertest_test

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

// spanSet builds the spans of one run of stage "s", by hand, so that each
// case can break one thing the recorder would get right.
type spanSet struct {
	run   tracetest.SpanStub
	tools []tracetest.SpanStub
}

var (
	traceID = trace.TraceID{1}
	runID   = trace.SpanID{1}
)

func newSpanSet(model string) *spanSet {
	run := tracetest.SpanStub{
		Name:        "invoke_agent s",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: runID}),
	}
	if model != "" {
		run.Attributes = []attribute.KeyValue{telemetry.KeyGenAIRequestModel.String(model)}
	}
	return &spanSet{run: run}
}

// tool adds an execute_tool span, child of the run, with call id id ("":
// none), failed or not.
func (ss *spanSet) tool(name, id string, failed bool) *spanSet {
	s := tracetest.SpanStub{
		Name:        "execute_tool " + name,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: trace.SpanID{byte(2 + len(ss.tools))}}),
		Parent:      trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: runID}),
	}
	if id != "" {
		s.Attributes = append(s.Attributes, telemetry.KeyGenAIToolCallID.String(id))
	}
	if failed {
		s.Status = sdktrace.Status{Code: codes.Error, Description: "tool call failed"}
		s.Attributes = append(s.Attributes, telemetry.KeyErrorType.String(telemetry.ToolError))
	}
	ss.tools = append(ss.tools, s)
	return ss
}

// edit changes the last execute_tool span.
func (ss *spanSet) edit(f func(*tracetest.SpanStub)) *spanSet {
	f(&ss.tools[len(ss.tools)-1])
	return ss
}

func (ss *spanSet) spans() []sdktrace.ReadOnlySpan {
	return append(tracetest.SpanStubs{ss.run}, ss.tools...).Snapshots()
}

func TestCheckSpans(t *testing.T) {
	call := func(tool, id string) termination.Event {
		return termination.Event{Kind: termination.KindToolCall, Tool: tool, CallID: id}
	}
	result := func(tool, id, err string) termination.Event {
		return termination.Event{Kind: termination.KindToolResult, Tool: tool, CallID: id, Err: err}
	}
	withIDs := []termination.Event{call("a", "1"), call("a", "2"), result("a", "2", ""), result("a", "1", "boom")}
	withoutIDs := []termination.Event{call("a", ""), call("a", ""), result("a", "", "boom"), result("a", "", "")}
	ids := adaptertest.SpanWant{Stage: "s", Model: "m", CallIDs: true, Answered: true}
	for _, tc := range []struct {
		name   string
		spans  *spanSet
		events []termination.Event
		want   adaptertest.SpanWant
		err    string
	}{
		{"Paired", newSpanSet("m").tool("a", "2", false).tool("a", "1", true), withIDs, ids, ""},
		{"PairedWithoutIDs", newSpanSet("").tool("a", "", true).tool("a", "", false), withoutIDs, adaptertest.SpanWant{Stage: "s"}, ""},
		{"RunawayLastCallUnanswered", newSpanSet("m").tool("a", "1", false),
			[]termination.Event{call("a", "1"), result("a", "1", ""), call("a", "2")}, adaptertest.SpanWant{Stage: "s", Model: "m", CallIDs: true}, ""},
		{"NoRunSpan", &spanSet{run: tracetest.SpanStub{Name: "invoke_agent other"}}, nil, ids, "no invoke_agent s span"},
		{"WrongModel", newSpanSet("other").tool("a", "2", false).tool("a", "1", true), withIDs, ids, "gen_ai.request.model = \"other\""},
		{"NoModel", newSpanSet("").tool("a", "2", false).tool("a", "1", true), withIDs, ids, "gen_ai.request.model = \"\""},
		{"IDsDropped", newSpanSet("m").tool("a", "", false).tool("a", "", true), withIDs, ids, "has no gen_ai.tool.call.id"},
		{"IDMissing", newSpanSet("m").tool("a", "2", false), withIDs, ids, `tool call id "1" (a call to a) is on 0 execute_tool spans`},
		{"IDTwice", newSpanSet("m").tool("a", "2", false).tool("a", "1", true).tool("a", "1", true), withIDs, ids, `is on 2 execute_tool spans`},
		{"UnknownID", newSpanSet("m").tool("a", "2", false).tool("a", "1", true).tool("a", "9", false), withIDs, ids, `"9" answers no tool call`},
		{"WrongToolName", newSpanSet("m").tool("a", "2", false).tool("b", "1", true), withIDs, ids, `is on span "execute_tool b"`},
		{"NotAChild", newSpanSet("m").tool("a", "2", false).tool("a", "1", true).edit(func(s *tracetest.SpanStub) {
			s.Parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: trace.SpanID{9}})
		}), withIDs, ids, "is not a child of the run's invoke_agent s span"},
		{"FailedNotError", newSpanSet("m").tool("a", "2", false).tool("a", "1", false), withIDs, ids, "has status Unset, want Error"},
		{"FailedWrongErrorType", newSpanSet("m").tool("a", "2", false).tool("a", "1", true).edit(func(s *tracetest.SpanStub) {
			s.Attributes = []attribute.KeyValue{telemetry.KeyGenAIToolCallID.String("1"), telemetry.KeyErrorType.String("boom")}
		}), withIDs, ids, `error.type "boom", want "tool_error"`},
		{"SucceededAsError", newSpanSet("m").tool("a", "2", true).tool("a", "1", true), withIDs, ids, "without error has status Error"},
		{"ResultLostID", newSpanSet("m").tool("a", "1", false),
			[]termination.Event{call("a", "1"), call("a", "2"), result("a", "1", ""), result("a", "", "")}, ids, `tool call id "2" (a call to a) is on no execute_tool span`},
		{"FailuresWithoutIDs", newSpanSet("").tool("a", "", false).tool("a", "", false), withoutIDs, adaptertest.SpanWant{Stage: "s"}, "0 execute_tool a spans with status Error, want 1"},
		{"SpansWithoutIDsMissing", newSpanSet("").tool("a", "", true), withoutIDs, adaptertest.SpanWant{Stage: "s"}, "1 execute_tool a spans without a call id, want 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := adaptertest.CheckSpans(tc.spans.spans(), tc.events, tc.want)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}
