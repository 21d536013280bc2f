package importer

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/agentstop/agentstop/termination"
)

// The otlp format reads traces in either encoding of the Collector's file
// exporter, found by the file's first byte: OTLP/JSON (one
// ExportTraceServiceRequest per line, or requests laid out any other way;
// otlp_json.go) or protobuf (each request preceded by its size in 4 bytes,
// big-endian; otlp_proto.go). Both hand each span to an otlpReader, which
// keeps only what the mapping needs of it (otlpNode for every span,
// otlpRecord for the spans that become events) and maps the traces when
// the input ends: a trace's spans can be spread over the whole file, and
// a run cannot be named or ended before its last span is seen.

// otlpSpan is one span as either encoding reads it.
type otlpSpan struct {
	trace      [16]byte
	id, parent [8]byte
	hasParent  bool
	name       string
	start, end int64 // Unix nanoseconds
	failed     bool
	statusMsg  string
	attrs      spanAttrs
}

// spanKind is what a span is to the mapping.
type spanKind uint8

const (
	kindOther spanKind = iota
	kindAgent
	kindTool
	kindModel
)

// otlpNode is what is held of every span until the input ends: its place
// in its trace, and the links worked out when the trace is mapped.
type otlpNode struct {
	trace     int32
	parent    [8]byte
	hasParent bool
	kind      spanKind
	usage     bool  // a model turn that carries token counts
	rec       int32 // its otlpRecord, -1 for a span that is not mapped

	state     uint8 // 0 new, 1 being resolved, 2 resolved
	parentIdx int32 // the parent's node, -1 when it has none or it is missing
	agent     int32 // the nearest agent span above it, -1 for none
	modelAnc  int32 // the nearest model turn above it (below its agent), -1 for none
	orphan    bool  // the nearest agent above it is lost: its chain ends at a missing parent
	ancUsage  bool  // a model turn with usage is above it (below its agent)
	descUsage bool  // a model turn with usage is below it (above its agent's children)
	modelDesc bool  // a model turn is below it
}

// otlpRecord is what is held of a span that becomes events or a run.
type otlpRecord struct {
	node         int32
	id           [8]byte
	loc          int32 // the line or message it came from
	name         string
	model        string
	usage        termination.Usage
	requestsTool bool
	callID       string
	args, result string
	err          string // a failed tool's error
	start, end   int64
	// A model turn whose span holds the tools it asked for (Google ADK's
	// call_llm): the first of them, whose call its message precedes.
	toolInside int32
}

type otlpTrace struct {
	id    [16]byte
	nodes []int32
}

type spanKey struct {
	trace [16]byte
	id    [8]byte
}

// otlpReader collects the spans of one file and maps them at its end.
type otlpReader struct {
	file    string
	out     *Output
	locName string // "line" (JSON) or "message" (protobuf)
	byID    map[spanKey]int32
	nodes   []otlpNode
	recs    []otlpRecord
	traces  []otlpTrace
	traceOf map[[16]byte]int32
}

// decodeOTLP is the otlp format: it streams the file, JSON or protobuf.
func decodeOTLP(file string, r io.Reader, _ *Options, out *Output) error {
	br := bufio.NewReaderSize(r, 64<<10)
	rd := &otlpReader{file: file, out: out, byID: map[spanKey]int32{}, traceOf: map[[16]byte]int32{}}
	head, err := br.Peek(4)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return fmt.Errorf("cannot read %s: %w", file, err)
	}
	if bytes.HasPrefix(head, []byte{0xEF, 0xBB, 0xBF}) {
		_, _ = br.Discard(3) // a UTF-8 byte-order mark
		head, _ = br.Peek(1)
	}
	switch {
	case len(head) == 0:
		return &EntryError{File: file, Err: fmt.Errorf("empty file")}
	case bytes.HasPrefix(head, zstdMagic):
		return &EntryError{File: file, Err: fmt.Errorf("compressed with zstd (the file exporter's compression: zstd): decompress it first (zstd -d)")}
	case isProtoStart(head[0]):
		rd.locName = "message"
		err = rd.readProto(br)
	default:
		rd.locName = "line"
		err = rd.readJSON(br)
	}
	if err != nil {
		return err
	}
	return rd.finish()
}

var zstdMagic = []byte{0x28, 0xB5, 0x2F, 0xFD}

// isProtoStart reports whether a file's first byte starts a 4-byte
// big-endian size rather than JSON: a control byte that is not white
// space (a message under 16 MiB starts with 0).
func isProtoStart(b byte) bool {
	return b < 0x20 && b != ' ' && b != '\t' && b != '\n' && b != '\r'
}

// entry names a span for an error: "line 3 span 00f067aa0ba902b7".
func (rd *otlpReader) entry(loc int, spanID string) string {
	e := rd.locName + " " + strconv.Itoa(loc)
	if spanID != "" {
		if strings.ContainsFunc(spanID, func(r rune) bool { return !strings.ContainsRune(idChars, r) }) {
			spanID = strconv.Quote(spanID) // not an id: show it as written, on one line
		}
		e += " span " + spanID
	}
	return e
}

// idChars are those of hex and base64 ids.
const idChars = "0123456789abcdefABCDEFGHIJKLMNOPQRSTUVWXYZghijklmnopqrstuvwxyz+/="

// add takes one span read at loc (a line or a message number).
func (rd *otlpReader) add(s *otlpSpan, loc int) error {
	key := spanKey{s.trace, s.id}
	if _, dup := rd.byID[key]; dup {
		rd.out.Skip("duplicate span")
		return nil
	}
	kind, skip := classify(s)
	if kind == kindOther {
		rd.out.Skip(skip)
	}
	t, ok := rd.traceOf[s.trace]
	if !ok {
		t = int32(len(rd.traces))
		rd.traceOf[s.trace] = t
		rd.traces = append(rd.traces, otlpTrace{id: s.trace})
	}
	n := otlpNode{trace: t, parent: s.parent, hasParent: s.hasParent, kind: kind, rec: -1}
	if kind != kindOther {
		rec, err := record(s, kind)
		if err != nil {
			return &EntryError{File: rd.file, Entry: rd.entry(loc, hex.EncodeToString(s.id[:])), Err: err}
		}
		rec.node, rec.loc = int32(len(rd.nodes)), int32(loc)
		n.rec = int32(len(rd.recs))
		n.usage = kind == kindModel && s.attrs.hasUsage()
		rd.recs = append(rd.recs, rec)
	}
	rd.byID[key] = int32(len(rd.nodes))
	rd.traces[t].nodes = append(rd.traces[t].nodes, int32(len(rd.nodes)))
	rd.nodes = append(rd.nodes, n)
	return nil
}

// The operation names of model turns: the GenAI conventions' inference
// operations and Google ADK's call_llm.
var inferenceOps = []string{"chat", "generate_content", "text_completion", "call_llm"}

// classify says what a span is; for a span left out, the kind counted.
func classify(s *otlpSpan) (spanKind, string) {
	a := &s.attrs
	op := a.op
	if op == "" {
		// Without the attribute, the span name's first word ("chat
		// gpt-4o", "execute_tool search", "invoke_agent planner").
		op, _, _ = strings.Cut(s.name, " ")
	}
	switch {
	case op == "invoke_agent" || a.oiKind == "AGENT" || a.tlKind == "agent":
		return kindAgent, ""
	case op == "execute_tool" || a.oiKind == "TOOL" || a.tlKind == "tool":
		return kindTool, ""
	case op == "embeddings" || a.oiKind == "EMBEDDING":
		return kindOther, "embeddings span"
	case op == "create_agent":
		return kindOther, "create_agent span"
	case slices.Contains(inferenceOps, op) || a.oiKind == "LLM" ||
		a.llmRequestType == "chat" || a.llmRequestType == "completion" ||
		a.hasUsage() || a.requestModel != "":
		return kindModel, ""
	case a.category != "":
		return kindOther, a.category + " span"
	}
	switch a.oiKind {
	case "CHAIN", "RETRIEVER", "RERANKER", "GUARDRAIL", "EVALUATOR", "PROMPT":
		return kindOther, strings.ToLower(a.oiKind) + " span"
	}
	switch a.tlKind {
	case "workflow", "task":
		return kindOther, a.tlKind + " span"
	}
	return kindOther, "other span"
}

func (a *spanAttrs) hasUsage() bool {
	return slices.Contains(a.hasToken[:], true)
}

// record keeps what the mapping needs of an agent, tool or model span.
func record(s *otlpSpan, kind spanKind) (otlpRecord, error) {
	a := &s.attrs
	r := otlpRecord{id: s.id, start: s.start, end: s.end, toolInside: -1}
	switch kind {
	case kindAgent:
		r.name = firstOf(a.agentName, a.oiAgentName)
		if r.name == "" && a.tlKind == "agent" {
			r.name = a.tlName
		}
		if rest, ok := strings.CutPrefix(s.name, "invoke_agent "); r.name == "" && ok {
			r.name = strings.TrimSpace(rest)
		}
		if rest, ok := strings.CutPrefix(s.name, "agent_run ["); r.name == "" && ok {
			r.name = strings.TrimSuffix(rest, "]") // Google ADK before invoke_agent spans
		}
		if r.name == "" && a.oiKind == "AGENT" {
			r.name = s.name
		}
	case kindTool:
		r.name = firstOf(a.toolName, a.oiToolName)
		if r.name == "" && a.tlKind == "tool" {
			r.name = firstOf(a.tlName, s.name)
		}
		if rest, ok := strings.CutPrefix(s.name, "execute_tool "); r.name == "" && ok {
			r.name = strings.TrimSpace(rest)
		}
		if r.name == "" && a.oiKind == "TOOL" {
			r.name = s.name
		}
		if r.name == "" {
			return r, fmt.Errorf("an execute_tool span without gen_ai.tool.name (and no tool name after execute_tool in its name)")
		}
		r.callID = firstOf(a.toolCallID, a.oiToolCallID)
		r.args = firstOf(a.toolArgs, a.inputValue, a.oiTool, a.tlInput)
		r.result = firstOf(a.toolRes, a.outputValue, a.tlOutput)
		if s.failed {
			r.err = firstOf(s.statusMsg, a.errorType, "error")
		}
	case kindModel:
		r.model = firstOf(a.requestModel, a.responseModel, a.llmModel)
		r.usage = termination.Usage{
			InputTokens:  a.firstToken(tokGenAIIn, tokOldIn, tokOIIn),
			OutputTokens: a.firstToken(tokGenAIOut, tokOldOut, tokOIOut),
		}
		r.requestsTool = a.requestsTool
	}
	return r, nil
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// firstToken is the first of the named token counts that the span has.
func (a *spanAttrs) firstToken(slots ...int) int64 {
	for _, s := range slots {
		if a.hasToken[s] {
			return a.tokens[s]
		}
	}
	return 0
}
