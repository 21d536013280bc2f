// Command quickstart runs a small simulated fleet of agent stages — planner
// and its analysts, researcher, coder, fixer, critic, summarizer, executor —
// whose scripted behaviours end with every termination cause of the
// contract within 15 seconds, again and again. It serves their metrics on /metrics (OpenMetrics
// with trace exemplars) and prints a live table of why each stage stopped.
//
//	go run ./examples/quickstart                 # until Ctrl-C
//	go run ./examples/quickstart -duration 20s -listen 127.0.0.1:9464
//	go run ./examples/quickstart -h              # every flag
//	go run ./examples/quickstart -redis redis://127.0.0.1:6379   # runs join a Redis fleet
//
// Every run joins a fleet (package fleet): the in-process one by default,
// the Redis one with -redis. Each run carries a tenant label; the
// summarizer's tenants share a token budget per 10-second window, a
// simulated operator stops the executor's runs through the fleet and blocks
// the planner for one tenant now and then, so that the fleet's metrics
// (agent.fleet.*) move too.
//
// The planner is a tree of runs (docs/spec.md §8): it holds a tree: token
// budget and delegates to three analysts, runs of their own stage started
// under its run's context (its children). When they together spend the
// budget, the planner ends with BudgetExhausted{scope: tree} and the live
// analysts with Cancelled{reason: parent}; an analyst that crashes does not
// end the planner. The agent.tree.* metrics and the dashboard's Trees row
// show it.
//
// The researcher tries a stricter candidate policy in shadow
// (middleware.WithShadowPolicy, docs/spec.md §5.2): evaluated on every run
// beside the enforced one and never acting, it shows on the runs' spans and
// on agent.stage.shadow.stops, the dashboard's Shadow policies row.
//
// It starts with one entry per stage saying what its scripted runs do,
// folded to the terminal's width (the COLUMNS variable; 80 columns when it
// is unset or stdout is not a terminal), and shows beside the table the latest stops with their cause details (which
// limit or budget, which tool repeated). At Ctrl-C or the end of -duration
// it starts no new runs and lets the runs in flight finish by their own
// cause (for up to -drain); runs still going after that are interrupted
// and reported apart, never counted as cancelled.
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
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/agentstop/agentstop/eventlog"
	"github.com/agentstop/agentstop/fleet/redisfleet"
	"github.com/agentstop/agentstop/internal/human"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry/otelsetup"
)

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts, os.Stdout); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// options are the quickstart's flags. A new flag is a field here, one line
// in parseFlags and, when it can be wrong, a check in validate.
type options struct {
	listen   string        // -listen: where /metrics is served
	duration time.Duration // -duration: how long to run, 0 until Ctrl-C
	refresh  time.Duration // -refresh: how often the table is redrawn
	drain    time.Duration // -drain: how long runs in flight may take to finish at shutdown
	feed     int           // -feed: how many of the latest stops are shown
	redis    string        // -redis: the Redis fleet to join, "" for the in-process one
	record   string        // -record: the directory to record the runs in, "" for none
	// recorders are more recorders of every stage (tests).
	recorders []middleware.Participant
}

func defaultOptions() options {
	return options{listen: "127.0.0.1:9464", refresh: time.Second, drain: 5 * time.Second, feed: 8}
}

// parseFlags parses the command line. -h prints the flags to stderr and
// returns flag.ErrHelp.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := defaultOptions()
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: quickstart [flags]\n\nRuns a simulated agent fleet and serves its metrics. Flags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.listen, "listen", o.listen, "address to serve /metrics on")
	human.DurationVar(fs, &o.duration, "duration", o.duration, "how long to run (0: until Ctrl-C)")
	human.DurationVar(fs, &o.refresh, "refresh", o.refresh, "how often to redraw the table (plain output: every 5 refreshes)")
	human.DurationVar(fs, &o.drain, "drain", o.drain, "at shutdown, how long the runs in flight may take to finish before they are interrupted (and reported apart)")
	fs.IntVar(&o.feed, "feed", o.feed, "how many of the latest stops to show with their cause details (0: none)")
	fs.StringVar(&o.redis, "redis", o.redis, "join the runs to the Redis fleet at this URL (redis:// or rediss://) instead of an in-process fleet; a Redis Cluster as redis://host1:port1?addr=host2:port2&addr=…")
	fs.StringVar(&o.record, "record", o.record, "record every run into DIR/events.jsonl, each stage's policy into DIR/policies/STAGE.yaml and each shadow policy into DIR/shadow/NAME/STAGE.yaml, for agentstop replay -policies DIR/policies DIR/events.jsonl")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q: the quickstart takes flags only (-h lists them)", fs.Arg(0))
	}
	return o, o.validate()
}

func (o options) validate() error {
	switch {
	case o.listen == "":
		return errors.New("-listen must not be empty")
	case o.duration < 0:
		return fmt.Errorf("-duration must be >= 0, got %s", o.duration)
	case o.refresh <= 0:
		return fmt.Errorf("-refresh must be > 0, got %s", o.refresh)
	case o.drain < 0:
		return fmt.Errorf("-drain must be >= 0, got %s", o.drain)
	case o.feed < 0 || o.feed > 1000:
		return fmt.Errorf("-feed must be between 0 and 1000, got %d", o.feed)
	}
	if o.redis != "" {
		if err := redisfleet.CheckURL(o.redis); err != nil {
			return fmt.Errorf("-redis: %w", err)
		}
	}
	return nil
}

// run runs the fleet until ctx ends (Ctrl-C) or -duration has passed,
// serving /metrics on -listen and printing the table to stdout.
func run(ctx context.Context, o options, stdout io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}

	tel, err := otelsetup.Setup(ctx, otelsetup.WithServiceName("agentstop-quickstart"))
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Shutdown(sctx)
	}()

	// The fleet's metrics go to the same /metrics as the stages'.
	member, err := joinFleet(ctx, o.redis, tel.MeterProvider) // join.go
	if err != nil {
		return err
	}
	defer member.close()
	// Built before the server starts, so that an error leaves nothing
	// running.
	recs := append([]middleware.Participant{tel.Recorder()}, o.recorders...)
	if o.record != "" {
		log, err := startRecording(o.record)
		if err != nil {
			return err
		}
		// Closed after the runs have drained (defers run last first).
		defer func() {
			if err := log.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "quickstart: -record:", err)
			}
		}()
		recs = append(recs, log)
	}
	fleet, err := newFleetRecorded(recs, member, o.feed)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
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
	fmt.Fprintf(stdout, "agentstop quickstart: metrics on http://%s/metrics; traces %s; runs join %s\n", ln.Addr(), traces, member.where)

	table := &tableWriter{out: stdout, live: human.IsTerminal(stdout), width: human.Width(stdout, os.Getenv), tally: fleet.tally}
	table.scenarios()

	// fleet.run starts the workers and returns: it must have returned
	// before fleet.wait is called.
	fleet.run(ctx)
	table.loop(ctx, o.refresh)
	// Ctrl-C or -duration: no new runs; the runs in flight finish (for up
	// to -drain), then the server stops.
	fleet.wait(o.drain)
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	wg.Wait()
	table.final()
	return nil
}

// startRecording makes dir, writes each stage's policy to
// dir/policies/STAGE.yaml and opens dir/events.jsonl, where every run is
// recorded with its stage and an end record (package eventlog), so that
// agentstop replay -policies dir/policies dir/events.jsonl replays each
// run as it ran.
func startRecording(dir string) (*eventlog.Writer, error) {
	pdir := filepath.Join(dir, "policies")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		return nil, fmt.Errorf("-record: %w", err)
	}
	for _, spec := range stages {
		if err := os.WriteFile(filepath.Join(pdir, spec.name+".yaml"), []byte(spec.policy), 0o644); err != nil {
			return nil, fmt.Errorf("-record: %w", err)
		}
	}
	if err := writeShadowPolicies(dir, stages); err != nil { // DIR/shadow/NAME/STAGE.yaml (§5.2)
		return nil, fmt.Errorf("-record: %w", err)
	}
	log, err := eventlog.New(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("-record: %w", err)
	}
	return log, nil
}
