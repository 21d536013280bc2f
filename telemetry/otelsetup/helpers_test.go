package otelsetup_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry/otelsetup"
	"github.com/agentstop/agentstop/termination"
)

// observe runs one callback-style run of st over events and returns its
// result.
func observe(st *middleware.Stage, events ...termination.Event) termination.Result {
	_, run := st.Start(context.Background())
	for _, ev := range events {
		if _, stop := run.Observe(ev); stop {
			break
		}
	}
	return run.Finish(nil)
}

func msg(source, text string, in, out int64) termination.Event {
	return termination.Event{Kind: termination.KindMessage, Source: source, Text: text,
		Usage: termination.Usage{InputTokens: in, OutputTokens: out}}
}

func call(tool, args string) termination.Event {
	return termination.Event{Kind: termination.KindToolCall, Tool: tool, Args: []byte(args)}
}

func result(tool, err string) termination.Event {
	return termination.Event{Kind: termination.KindToolResult, Tool: tool, Err: err}
}

// errorSink captures what is sent to otel.Handle while installed.
type errorSink struct {
	mu   sync.Mutex
	errs []error
}

func (e *errorSink) Handle(err error) {
	e.mu.Lock()
	e.errs = append(e.errs, err)
	e.mu.Unlock()
}

func (e *errorSink) all() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return errors.Join(e.errs...)
}

func (e *errorSink) list() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.errs...)
}

// captureErrors installs an errorSink as the global OTel error handler for
// the test. Tests that use it must not run in parallel.
func captureErrors(t testing.TB) *errorSink {
	t.Helper()
	sink := &errorSink{}
	otel.SetErrorHandler(sink)
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Print(err) })) })
	return sink
}

// TestSetupCardinalityLimit: Setup's SDK limit caps the series per
// instrument even when the stage limit would allow more.
func TestSetupCardinalityLimit(t *testing.T) {
	reader := metric.NewManualReader()
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithCardinalityLimit(10),
		otelsetup.WithMetricReader(reader), otelsetup.WithSampler(sdktrace.NeverSample()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	st := func(i int) *middleware.Stage {
		s, err := middleware.New(fmt.Sprintf("s%d", i), middleware.WithRecorder(tel.Recorder()))
		require.NoError(t, err)
		return s
	}
	for i := range 50 {
		observe(st(i))
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var n int
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				n = len(d.DataPoints)
			case metricdata.Histogram[int64]:
				n = len(d.DataPoints)
			case metricdata.Histogram[float64]:
				n = len(d.DataPoints)
			}
			assert.LessOrEqual(t, n, 10, m.Name)
		}
	}
}
