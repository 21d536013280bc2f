package importer

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// maxProtoMessage bounds the size a message may announce: a larger one is
// not the file exporter's framing (its requests are batches, megabytes at
// most), and reading it would hold that much memory.
const maxProtoMessage = 1 << 30

// readProto streams the file exporter's protobuf encoding: each
// ExportTraceServiceRequest (TracesData on the wire: the same message)
// preceded by its size, 4 bytes big-endian.
func (rd *otlpReader) readProto(r io.Reader) error {
	var head [4]byte
	var buf bytes.Buffer
	at := int64(0)
	for msg := 1; ; msg++ {
		entry := "message " + strconv.Itoa(msg) + " (byte " + strconv.FormatInt(at, 10) + ")"
		fail := func(err error) error { return &EntryError{File: rd.file, Entry: entry, Err: err} }
		n, err := io.ReadFull(r, head[:])
		if n == 0 && err == io.EOF {
			return nil
		}
		if err != nil {
			return fail(readErr(err, "its 4-byte size is cut short"))
		}
		size := binary.BigEndian.Uint32(head[:])
		if size > maxProtoMessage {
			return fail(fmt.Errorf("a size of %d bytes: not the file exporter's protobuf encoding (4-byte big-endian sizes, each followed by its message)", size))
		}
		// Read what is there rather than allocate what the size says: a
		// damaged size must not cost a gigabyte.
		buf.Reset()
		if n, err := io.CopyN(&buf, r, int64(size)); err != nil {
			return fail(readErr(err, fmt.Sprintf("%d bytes announced, %d present", size, n)))
		}
		if bytes.HasPrefix(buf.Bytes(), zstdMagic) {
			return fail(fmt.Errorf("compressed with zstd (the file exporter's compression: zstd): not read; export without compression"))
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(buf.Bytes(), &req); err != nil {
			return fail(fmt.Errorf("not an OTLP ExportTraceServiceRequest in protobuf: %v", err))
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, ps := range ss.Spans {
					if err := rd.addProto(ps, msg); err != nil {
						return err
					}
				}
			}
		}
		at += 4 + int64(size)
	}
}

func readErr(err error, short string) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("the file looks truncated: %s", short)
	}
	return err
}

// addProto reads one protobuf span.
func (rd *otlpReader) addProto(ps *tracepb.Span, msg int) error {
	s := otlpSpan{name: ps.Name, start: int64(ps.StartTimeUnixNano), end: int64(ps.EndTimeUnixNano)}
	fail := func(err error) error {
		return &EntryError{File: rd.file, Entry: rd.entry(msg, hex.EncodeToString(ps.SpanId)), Err: err}
	}
	if len(ps.SpanId) != 8 {
		return fail(fmt.Errorf("span_id: want 8 bytes, got %d", len(ps.SpanId)))
	}
	copy(s.id[:], ps.SpanId)
	switch len(ps.ParentSpanId) {
	case 0:
	case 8:
		copy(s.parent[:], ps.ParentSpanId)
		s.hasParent = s.parent != [8]byte{}
	default:
		return fail(fmt.Errorf("parent_span_id: want 8 bytes, got %d", len(ps.ParentSpanId)))
	}
	switch len(ps.TraceId) {
	case 0, 16:
		copy(s.trace[:], ps.TraceId)
	default:
		return fail(fmt.Errorf("trace_id: want 16 bytes, got %d", len(ps.TraceId)))
	}
	if s.start < 0 || s.end < 0 {
		return fail(fmt.Errorf("start or end time beyond the year 2262"))
	}
	if st := ps.Status; st != nil {
		s.failed = st.Code == tracepb.Status_STATUS_CODE_ERROR
		s.statusMsg = st.Message
	}
	for _, kv := range ps.Attributes {
		key := []byte(kv.Key)
		code := attrCodeOf(key)
		if code == attrNone {
			continue
		}
		v := protoValue(kv.Value)
		if err := s.attrs.set(code, key, &v); err != nil {
			return fail(err)
		}
	}
	return rd.add(&s, msg)
}

func protoValue(v *commonpb.AnyValue) attrValue {
	var out attrValue
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		out.str, out.hasStr = x.StringValue, true
	case *commonpb.AnyValue_IntValue:
		out.num = strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		out.num = strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		out.num = strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_ArrayValue:
		for _, e := range x.ArrayValue.GetValues() {
			if s, ok := e.GetValue().(*commonpb.AnyValue_StringValue); ok {
				out.strs = append(out.strs, s.StringValue)
			}
		}
	}
	return out
}
