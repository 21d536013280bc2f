// Package testutil holds the test helpers that several packages of the
// module share: events in a line, a callback-style run, a buffer safe for
// concurrent use, a sink for OpenTelemetry's global error handler, and an
// event producer and live Forward benchmark body for the benchmarks.
//
// It imports package middleware, so only middleware's external tests
// (package middleware_test) can use it, not its in-package ones.
package testutil

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"os"
	"slices"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// Observe runs one callback-style run of st over events, up to the one
// that stops it, and returns its result.
func Observe(st *middleware.Stage, events ...termination.Event) termination.Result {
	_, run := st.Start(context.Background())
	for _, ev := range events {
		if _, stop := run.Observe(ev); stop {
			break
		}
	}
	return run.Finish(nil)
}

// Msg is a message event from source with its token usage.
func Msg(source, text string, in, out int64) termination.Event {
	return termination.Event{Kind: termination.KindMessage, Source: source, Text: text,
		Usage: termination.Usage{InputTokens: in, OutputTokens: out}}
}

// Call is a tool_call event of tool with JSON args.
func Call(tool, args string) termination.Event {
	return termination.Event{Kind: termination.KindToolCall, Tool: tool, Args: []byte(args)}
}

// Result is a tool_result event of tool; a non-empty err makes it failed.
func Result(tool, err string) termination.Event {
	return termination.Event{Kind: termination.KindToolResult, Tool: tool, Err: err}
}

// SyncBuffer is a bytes.Buffer safe for a writer and a reader in
// different goroutines.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what has been written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ErrorSink collects what is sent to otel.Handle while it is installed
// ([CaptureErrors]).
type ErrorSink struct {
	mu   sync.Mutex
	errs []error
}

// Handle records err; it implements otel.ErrorHandler.
func (e *ErrorSink) Handle(err error) {
	e.mu.Lock()
	e.errs = append(e.errs, err)
	e.mu.Unlock()
}

// All returns every error recorded so far, joined (nil when none).
func (e *ErrorSink) All() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return errors.Join(e.errs...)
}

// List returns a copy of the errors recorded so far, in order.
func (e *ErrorSink) List() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.errs)
}

// CaptureErrors installs an ErrorSink as the global OTel error handler
// for the test and restores a logging handler when it ends. Tests that use
// it must not run in parallel.
func CaptureErrors(t testing.TB) *ErrorSink {
	t.Helper()
	sink := &ErrorSink{}
	otel.SetErrorHandler(sink)
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Print(err) })) })
	return sink
}

// BenchForward is the body of a live Forward benchmark, one event per op:
// a run of stage started with opts forwards b.N events, cycling through
// evs, from a producer that honours the run's context; it fails b unless
// every event comes out and the run completes naturally.
func BenchForward(b *testing.B, stage *middleware.Stage, evs []termination.Event, opts ...middleware.RunOption) {
	b.Helper()
	b.ReportAllocs()
	ctx, run := stage.Start(context.Background(), opts...)
	in := Produce(ctx, b.N, evs)
	b.ResetTimer()
	n := 0
	for range middleware.Forward(run, in, func(ev termination.Event) termination.Event { return ev }) {
		n++
	}
	b.StopTimer()
	if res := run.Wait(); n != b.N || res.Tag() != termination.TagNaturalCompletion {
		b.Fatalf("forwarded %d of %d events; cause %v", n, b.N, res.Cause)
	}
}

// Produce sends n events, cycling through evs, on the channel it returns,
// which it closes after; it stops early when ctx is done.
func Produce(ctx context.Context, n int, evs []termination.Event) <-chan termination.Event {
	in := make(chan termination.Event)
	go func() {
		defer close(in)
		for i := range n {
			select {
			case in <- evs[i%len(evs)]:
			case <-ctx.Done():
				return
			}
		}
	}()
	return in
}

// DecodeFile decodes every event of the log at path, failing t on any
// error but the end of the file.
func DecodeFile(t testing.TB, path string) []termination.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []termination.Event
	dec := codec.NewDecoder(f)
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}

// ReplayLog replays a recorded log of many runs (events, end and raise
// records) as agentstop replay does: a first pass finds each run's last
// line (codec.IndexRuns), the second hands every line to a replay.Runner
// with p (nil: the policies opts give). It returns the results in the
// order the runs ended, and the runs left out by stage.
func ReplayLog(t testing.TB, log io.ReadSeeker, p *termination.Policy, opts ...replay.Option) ([]termination.Result, map[string]int) {
	t.Helper()
	idx := codec.IndexRuns(log)
	if _, err := log.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	rp := replay.NewRunner(p, append(opts, replay.WithIndex(&idx))...)
	out, _, err := rp.Log(log)
	if err != nil {
		t.Fatal(err)
	}
	return out, rp.LeftOut()
}
