package otelsetup_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/agentstop/agentstop/internal/testutil"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry/otelsetup"
)

// grpcCollector is a fake OTLP/gRPC collector that accepts everything.
type grpcCollector struct {
	colltrace.UnimplementedTraceServiceServer
	traces, metrics atomic.Int64
}

func (c *grpcCollector) Export(context.Context, *colltrace.ExportTraceServiceRequest) (*colltrace.ExportTraceServiceResponse, error) {
	c.traces.Add(1)
	return &colltrace.ExportTraceServiceResponse{}, nil
}

type grpcMetrics struct {
	collmetrics.UnimplementedMetricsServiceServer
	c *grpcCollector
}

func (m grpcMetrics) Export(context.Context, *collmetrics.ExportMetricsServiceRequest) (*collmetrics.ExportMetricsServiceResponse, error) {
	m.c.metrics.Add(1)
	return &collmetrics.ExportMetricsServiceResponse{}, nil
}

// TestShutdownClosesGRPCConnections: with traces and metrics exported over
// OTLP/gRPC to a collector that works, Shutdown delivers, returns nil and
// leaves no client goroutine behind, although the collector still runs.
func TestShutdownClosesGRPCConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &grpcCollector{}
	srv := grpc.NewServer()
	colltrace.RegisterTraceServiceServer(srv, c)
	collmetrics.RegisterMetricsServiceServer(srv, grpcMetrics{c: c})
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	before := goleak.IgnoreCurrent()

	setOTLPEnv(t, ln.Addr().String(), "grpc", true)
	testutil.CaptureErrors(t)
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal())
	require.NoError(t, err)
	st, err := middleware.New("worker", middleware.WithParticipant(tel.Recorder()))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		runOnce(t, st)
		return c.traces.Load() > 0 && c.metrics.Load() > 0
	}, 20*time.Second, time.Millisecond, "nothing exported")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, tel.Shutdown(ctx))
	goleak.VerifyNone(t, before)
}
