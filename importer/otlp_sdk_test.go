package importer

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentstop/agentstop/termination"
)

// TestOTLPFromSDK records an agent's spans with the OpenTelemetry SDK as
// an instrumented agent would (the GenAI conventions' invoke_agent, chat
// and execute_tool spans, a sub-agent inside a tool), writes them as
// OTLP/JSON with protojson (base64 ids, enum names, as the protobuf JSON
// mapping has it) and imports them.
func TestOTLPFromSDK(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := tp.Tracer("agent")
	ctx := context.Background()

	ctx, agent := tr.Start(ctx, "invoke_agent coder", trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "coder")))
	_, chat := tr.Start(ctx, "chat gpt-4o", trace.WithAttributes(attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.request.model", "gpt-4o"), attribute.Int("gen_ai.usage.input_tokens", 900),
		attribute.Int("gen_ai.usage.output_tokens", 30), attribute.StringSlice("gen_ai.response.finish_reasons", []string{"tool_calls"})))
	chat.End()
	toolCtx, tool := tr.Start(ctx, "execute_tool review", trace.WithAttributes(attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", "review"), attribute.String("gen_ai.tool.call.id", "call_7"),
		attribute.String("gen_ai.tool.call.arguments", `{"file": "main.go"}`)))
	subCtx, sub := tr.Start(toolCtx, "invoke_agent reviewer", trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "reviewer")))
	_, subChat := tr.Start(subCtx, "chat gpt-4o-mini", trace.WithAttributes(attribute.String("gen_ai.operation.name", "chat"),
		attribute.Int("gen_ai.usage.input_tokens", 200), attribute.Int("gen_ai.usage.output_tokens", 10)))
	subChat.End()
	sub.End()
	tool.SetStatus(codes.Error, "review failed")
	tool.End()
	_, last := tr.Start(ctx, "chat gpt-4o", trace.WithAttributes(attribute.String("gen_ai.operation.name", "chat"),
		attribute.Int("gen_ai.usage.input_tokens", 1000), attribute.Int("gen_ai.usage.output_tokens", 50)))
	last.End()
	agent.End()
	require.NoError(t, tp.Shutdown(context.Background()))

	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "agent"}}},
	}}}
	for _, s := range rec.Ended() {
		req.ResourceSpans[0].ScopeSpans[0].Spans = append(req.ResourceSpans[0].ScopeSpans[0].Spans, spanProto(s))
	}
	data, err := protojson.Marshal(req)
	require.NoError(t, err)

	runs, err := importData("otlp", "sdk.json", data, Options{})
	require.NoError(t, err)
	require.Len(t, runs, 2)
	coder, reviewer := runs[0], runs[1]
	assert.Equal(t, "coder-"+agent.SpanContext().SpanID().String(), coder.ID, "ids in base64 read as the span's hex id")
	assert.Equal(t, coder.ID, reviewer.Parent)
	kinds := func(r Run) (out []termination.Kind) {
		for _, e := range r.Events {
			out = append(out, e.Kind)
		}
		return out
	}
	assert.Equal(t, []termination.Kind{termination.KindMessage, termination.KindToolCall, termination.KindToolResult, termination.KindFinal}, kinds(coder))
	assert.Equal(t, "review failed", coder.Events[2].Err)
	assert.JSONEq(t, `{"file": "main.go"}`, string(coder.Events[1].Args))
	assert.Equal(t, termination.Usage{InputTokens: 900, OutputTokens: 30}, coder.Events[0].Usage)
	assert.Equal(t, []termination.Kind{termination.KindFinal}, kinds(reviewer))
}

// spanProto is the OTLP protobuf form of a span recorded by the SDK.
func spanProto(s sdktrace.ReadOnlySpan) *tracepb.Span {
	tid, sid := s.SpanContext().TraceID(), s.SpanContext().SpanID()
	p := &tracepb.Span{
		TraceId: tid[:], SpanId: sid[:], Name: s.Name(), Kind: tracepb.Span_SPAN_KIND_INTERNAL,
		StartTimeUnixNano: uint64(s.StartTime().UnixNano()), EndTimeUnixNano: uint64(s.EndTime().UnixNano()),
	}
	if s.Parent().IsValid() {
		psid := s.Parent().SpanID()
		p.ParentSpanId = psid[:]
	}
	if s.Status().Code == codes.Error {
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: s.Status().Description}
	}
	for _, kv := range s.Attributes() {
		v := &commonpb.AnyValue{}
		switch kv.Value.Type() {
		case attribute.STRING:
			v.Value = &commonpb.AnyValue_StringValue{StringValue: kv.Value.AsString()}
		case attribute.INT64:
			v.Value = &commonpb.AnyValue_IntValue{IntValue: kv.Value.AsInt64()}
		case attribute.STRINGSLICE:
			arr := &commonpb.ArrayValue{}
			for _, x := range kv.Value.AsStringSlice() {
				arr.Values = append(arr.Values, &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: x}})
			}
			v.Value = &commonpb.AnyValue_ArrayValue{ArrayValue: arr}
		}
		p.Attributes = append(p.Attributes, &commonpb.KeyValue{Key: string(kv.Key), Value: v})
	}
	return p
}
