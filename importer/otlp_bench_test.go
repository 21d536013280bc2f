package importer

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// otlpCorpus generates about size bytes of OTLP/JSON as the Collector's
// file exporter writes it: one ExportTraceServiceRequest per line, each a
// trace of an agent (invoke_agent, four chat spans whose prompts and
// completions are about 1 KiB of code-like text with escapes, three
// execute_tool spans with arguments and a result, one HTTP span).
func otlpCorpus(size int) []byte {
	text := strings.Repeat(`func main() {\n\tfmt.Println(\"hello, \\\"world\\\"\")\n}\n`, 18) // ~1 KiB once unescaped
	attr := func(b *bytes.Buffer, k, v string) {
		fmt.Fprintf(b, `{"key":%q,"value":{"stringValue":"%s"}},`, k, v)
	}
	intAttr := func(b *bytes.Buffer, k string, v int) {
		fmt.Fprintf(b, `{"key":%q,"value":{"intValue":"%d"}},`, k, v)
	}
	var b bytes.Buffer
	for t := 0; b.Len() < size; t++ {
		trace := fmt.Sprintf("%032x", 0x5b8efff798038103+t)
		span := func(id, parent int, name string, start, end int, attrs func(*bytes.Buffer)) {
			fmt.Fprintf(&b, `{"traceId":"%s","spanId":"%016x",`, trace, t<<8+id)
			if parent > 0 {
				fmt.Fprintf(&b, `"parentSpanId":"%016x",`, t<<8+parent)
			}
			fmt.Fprintf(&b, `"name":%q,"kind":1,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[`, name, 1763370000000000000+t*1e9+start*1e6, 1763370000000000000+t*1e9+end*1e6)
			attrs(&b)
			b.Truncate(b.Len() - 1)
			b.WriteString(`],"status":{}},`)
		}
		b.WriteString(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"coder"}}]},"scopeSpans":[{"scope":{"name":"agent"},"spans":[`)
		for k := 0; k < 4; k++ {
			span(2+2*k, 1, "chat gpt-4o", 10+100*k, 60+100*k, func(b *bytes.Buffer) {
				attr(b, "gen_ai.operation.name", "chat")
				attr(b, "gen_ai.request.model", "gpt-4o")
				attr(b, "gen_ai.input.messages", text)
				attr(b, "gen_ai.output.messages", text[:len(text)/2])
				intAttr(b, "gen_ai.usage.input_tokens", 1000+k)
				intAttr(b, "gen_ai.usage.output_tokens", 50+k)
				fmt.Fprintf(b, `{"key":"gen_ai.response.finish_reasons","value":{"arrayValue":{"values":[{"stringValue":"tool_calls"}]}}},`)
			})
			if k == 3 {
				break
			}
			span(3+2*k, 1, "execute_tool edit", 61+100*k, 99+100*k, func(b *bytes.Buffer) {
				attr(b, "gen_ai.operation.name", "execute_tool")
				attr(b, "gen_ai.tool.name", "edit")
				attr(b, "gen_ai.tool.call.id", "call_"+strconv.Itoa(k))
				attr(b, "gen_ai.tool.call.arguments", `{\"path\":\"main.go\",\"line\":`+strconv.Itoa(k)+`}`)
				attr(b, "gen_ai.tool.call.result", text)
			})
		}
		span(20, 3, "GET", 62, 70, func(b *bytes.Buffer) {
			attr(b, "http.request.method", "GET")
			attr(b, "url.full", "https://example.com/api")
		})
		span(1, 0, "invoke_agent coder", 0, 400, func(b *bytes.Buffer) {
			attr(b, "gen_ai.operation.name", "invoke_agent")
			attr(b, "gen_ai.agent.name", "coder")
		})
		b.Truncate(b.Len() - 1)
		b.WriteString("]}]}]}\n")
	}
	return b.Bytes()
}

func benchmarkImportOTLP(b *testing.B, size int) {
	data := otlpCorpus(size)
	runs, _, err := importOTLP(b, "corpus.jsonl", data)
	if err != nil || len(runs) == 0 || len(runs[0].Events) != 10 {
		b.Fatalf("corpus: %d runs, err %v", len(runs), err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	cpu := processCPUTime()
	n := 0
	for b.Loop() {
		out := &Output{Emit: func(Run) error { return nil }}
		if err := Import("otlp", "corpus.jsonl", bytes.NewReader(data), Options{}, out); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if cpu := processCPUTime() - cpu; cpu > 0 {
		// Throughput per second of CPU: §6's "per core" on a shared machine.
		b.ReportMetric(float64(len(data))*float64(n)/1e6/cpu.Seconds(), "MB/cpu-s")
	}
}

// BenchmarkImportOTLP10MB and BenchmarkImportOTLP80MB measure §6's import
// row for OTLP/JSON: MB/s per core, and linearity (80 MB ≤ 10 × 10 MB).
func BenchmarkImportOTLP10MB(b *testing.B) { benchmarkImportOTLP(b, 10<<20) }

func BenchmarkImportOTLP80MB(b *testing.B) { benchmarkImportOTLP(b, 80<<20) }
