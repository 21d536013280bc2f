package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Timings of the span export gate (see spanGate), documented on Setup;
// variables so that tests can shorten them.
var (
	// exportStall is how long one span export may take before the
	// collector is taken for unreachable (a blackhole: connections accepted,
	// never answered) and the export is aborted.
	exportStall = 2 * time.Second
	// exportRetry is the first pause in span exports after a failed one;
	// each failed retry doubles it, up to exportRetryMax.
	exportRetry    = time.Second
	exportRetryMax = time.Minute
)

// errExportStalled is the cause of an export aborted by the gate.
var errExportStalled = errors.New("no answer from the collector")

// spanGate keeps an exporter that is down from costing the traced loop
// anything. Its cost would come from the batch span processor: with any
// span processor registered, the SDK copies every ending span into a
// snapshot for it, even when its queue is full and the span is dropped, and
// a refusing collector makes the processor convert and send every batch
// only to fail (and report each failure to otel.Handle).
//
// So the gate watches the exports: when one fails, or takes longer than
// the stall timeout (then it is aborted), it reports once to otel.Handle,
// unregisters the batch span processor from the tracer provider (spans then
// end with no processor: no snapshot, no queue), and after a pause
// registers a fresh one to try again; the pause doubles after each failed
// try and is reset by a successful export. Spans ended while detached are
// not exported (they are not queued either: an outage must not grow
// memory). The gate's goroutine is owned by Telemetry and ends on Shutdown.
type spanGate struct {
	exp        sdktrace.SpanExporter
	tp         *sdktrace.TracerProvider
	stall      time.Duration
	retryMin   time.Duration
	retryMax   time.Duration
	aborted    context.Context // cancelled by Shutdown: aborts exports in flight
	abort      context.CancelFunc
	kick       chan struct{} // the exporter went down: detach
	done       chan struct{} // closed by close
	closeOnce  sync.Once
	wg         sync.WaitGroup
	processors int // batch span processors registered so far (tests)

	mu       sync.Mutex
	bsp      sdktrace.SpanProcessor // registered, nil while detached
	down     bool
	closed   bool
	retry    time.Duration
	lastErr  error
	lost     int                // spans not delivered since the last successful export
	inflight context.CancelFunc // aborts the export in flight
}

func newSpanGate(exp sdktrace.SpanExporter, tp *sdktrace.TracerProvider) *spanGate {
	aborted, abort := context.WithCancel(context.Background())
	g := &spanGate{exp: exp, tp: tp, stall: exportStall, retryMin: exportRetry, retryMax: exportRetryMax,
		aborted: aborted, abort: abort, kick: make(chan struct{}, 1), done: make(chan struct{}), retry: exportRetry}
	return g
}

// start registers the first batch span processor and starts the gate's
// goroutine.
func (g *spanGate) start() {
	g.attach()
	g.wg.Add(1)
	go g.loop()
}

// attach registers a fresh batch span processor (configured by the
// OTEL_BSP_* variables) exporting through the gate.
func (g *spanGate) attach() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	bsp := sdktrace.NewBatchSpanProcessor(gatedExporter{g})
	g.bsp = bsp
	g.down = false
	g.processors++
	g.mu.Unlock()
	g.tp.RegisterSpanProcessor(bsp)
}

func (g *spanGate) loop() {
	defer g.wg.Done()
	for {
		select {
		case <-g.done:
			return
		case <-g.kick:
		}
		g.mu.Lock()
		bsp, cancel, pause := g.bsp, g.inflight, g.retry
		g.bsp = nil
		g.mu.Unlock()
		if cancel != nil {
			cancel() // a stalled export: the processor's shutdown must not wait for it
		}
		if bsp != nil {
			// Shuts the processor down: what it still holds goes through
			// ExportSpans, which drops it at once while down.
			g.tp.UnregisterSpanProcessor(bsp)
		}
		t := time.NewTimer(pause)
		select {
		case <-g.done:
			t.Stop()
			return
		case <-t.C:
		}
		g.mu.Lock()
		g.retry = min(2*g.retry, g.retryMax)
		g.mu.Unlock()
		g.attach()
	}
}

// export sends one batch, unless the exporter is down (the batch is then
// dropped at once). Failures are reported here, once per outage, not to
// the batch span processor (which would report every batch).
func (g *spanGate) export(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	g.mu.Lock()
	if g.down || g.closed && g.aborted.Err() != nil {
		g.lost += len(spans)
		g.mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	g.inflight = func() { cancel(errExportStalled) }
	g.mu.Unlock()
	defer cancel(nil)
	stopAbort := context.AfterFunc(g.aborted, func() { cancel(errors.New("aborted by Shutdown")) })
	defer stopAbort()
	stall := time.AfterFunc(g.stall, func() { g.fail(fmt.Errorf("%w within %s", errExportStalled, g.stall), 0) })
	err := g.exp.ExportSpans(ctx, spans)
	stall.Stop()
	g.mu.Lock()
	g.inflight = nil
	g.mu.Unlock()
	if err == nil && ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	if err != nil {
		g.fail(err, len(spans))
		return nil
	}
	g.mu.Lock()
	g.lost, g.lastErr, g.retry = 0, nil, g.retryMin
	g.mu.Unlock()
	return nil
}

// fail records a failed (or stalled) export of n spans and, the first time
// in an outage, reports it and wakes the gate's goroutine to detach.
func (g *spanGate) fail(err error, n int) {
	g.mu.Lock()
	g.lost += n
	if g.down { // already reported: keep the outage's first error
		g.mu.Unlock()
		return
	}
	g.down = true
	g.lastErr = err
	pause, closed := g.retry, g.closed
	g.mu.Unlock()
	if closed {
		return // Shutdown returns it
	}
	otel.Handle(fmt.Errorf("otelsetup: exporting spans: %w; spans are dropped, not queued, for %s, then export is tried again", err, pause))
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// close stops the gate's goroutine; the tracer provider's Shutdown then
// flushes the processor still registered, if any.
func (g *spanGate) close() {
	g.closeOnce.Do(func() {
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
		close(g.done)
	})
	g.wg.Wait()
}

// detached reports whether no batch span processor is registered (tests).
func (g *spanGate) detached() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.bsp == nil
}

// err is the export error Shutdown reports: the last failure, when spans
// were lost since the last successful export.
func (g *spanGate) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lastErr == nil && g.lost == 0 {
		return nil
	}
	if g.lastErr == nil {
		return fmt.Errorf("otelsetup: traces: %d spans not delivered", g.lost)
	}
	return fmt.Errorf("otelsetup: traces: %d spans not delivered: %w", g.lost, g.lastErr)
}

// gatedExporter is the exporter the batch span processors see. Its
// Shutdown does not shut the real exporter down: processors come and go
// with the outages; Telemetry.Shutdown shuts the exporter down once.
type gatedExporter struct{ g *spanGate }

func (e gatedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	return e.g.export(ctx, spans)
}

func (gatedExporter) Shutdown(context.Context) error { return nil }
