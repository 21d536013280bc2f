// Command quickstart runs a small simulated fleet of agent stages — planner,
// researcher, coder, critic, summarizer, executor — whose scripted
// behaviours end with every termination cause of the contract within 15
// seconds, again and again. It serves their metrics on /metrics (OpenMetrics
// with trace exemplars) and prints a live table of why each stage stopped.
//
//	go run ./examples/quickstart                 # until Ctrl-C
//	go run ./examples/quickstart -duration 20s -listen 127.0.0.1:9464
//	go run ./examples/quickstart -redis redis://127.0.0.1:6379   # runs join the fleet
//
// No network, no API keys: the agents are scripts. Traces are sampled and
// kept in process, or sent over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/agentstop/agentstop/telemetry"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9464", "address to serve /metrics on")
	duration := flag.Duration("duration", 0, "how long to run (0: until Ctrl-C)")
	refresh := flag.Duration("refresh", time.Second, "how often to redraw the table (plain output: every 5 refreshes)")
	redisURL := flag.String("redis", "", "join the runs to the Redis fleet at this URL (redis:// or rediss://), with a tenant label")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	leave, err := joinRedis(ctx, *redisURL) // redis.go
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(2)
	}
	defer leave()
	if err := run(ctx, *listen, *duration, *refresh, os.Stdout); err != nil {
		stop()
		leave()
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run runs the fleet until ctx ends (Ctrl-C) or duration has passed,
// serving /metrics on listen and printing the table to stdout.
func run(ctx context.Context, listen string, duration, refresh time.Duration, stdout io.Writer) error {
	if duration < 0 {
		return fmt.Errorf("-duration must be >= 0, got %s", duration)
	}
	if refresh <= 0 {
		return fmt.Errorf("-refresh must be > 0, got %s", refresh)
	}
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}

	tel, err := telemetry.Setup(ctx, telemetry.WithServiceName("agentstop-quickstart"))
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Shutdown(sctx)
	}()

	// Built before the server starts, so that an error leaves nothing
	// running.
	fleet, err := newFleet(tel.Recorder())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", tel.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "agentstop quickstart: metrics at /metrics")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "quickstart: metrics server:", err)
		}
	}()
	traces := "sampled, kept in process"
	if tel.TracesExported {
		traces = "sampled, exported over OTLP"
	}
	fmt.Fprintf(stdout, "agentstop quickstart: metrics on http://%s/metrics; traces %s\n", ln.Addr(), traces)

	// fleet.run starts the workers and returns: it must have returned
	// before fleet.wait is called.
	fleet.run(ctx)

	table := &tableWriter{out: stdout, live: isTerminal(stdout), tally: fleet.tally}
	table.loop(ctx, refresh)
	// Ctrl-C or -duration: let the fleet's runs finish, then stop serving.
	fleet.wait()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	wg.Wait()
	table.final()
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
