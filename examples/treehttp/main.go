// Command treehttp shows a tree of runs across two HTTP services (§8 of the
// contract): a planner service delegates to a researcher service over
// HTTP, and every researcher run is a child of the planner's run, in the
// same trace.
//
//	go run ./examples/treehttp
//
// Both services use otelhttp with one composite propagator: the W3C trace
// context and middleware.Propagator(), which carries the planner run's id
// and what is left of its limits (Run.Remaining). On the researcher's side
// a run started under the request's context is therefore the planner run's
// child (Run.Parent). Without a fleet (the default) the propagated
// remaining limits become its tree limits, and the planner charges what
// each researcher reports having spent to its own tree with Run.Charge when
// the call returns; the planner's tree: token budget stops the whole task
// when the researchers together have spent it.
//
// With -redis URL (each service has a fleet of its own on that Redis, as
// two processes would), the planner's tree limits are shared through the
// fleet instead: the request also names the planner's run as the holder
// of the tree (the agentstop-tree header), every researcher event is
// charged to it as it happens, and the researcher whose event spends the
// tree's budget ends with Cancelled{reason: parent} when the planner's
// limit fires; nothing is charged by hand. With -fleet local (both
// services share one in-process fleet, as two services deployed in one
// binary would) the researcher's run is linked to the planner's directly,
// as a child in the same process is, with the same outcome.
//
//	go run ./examples/treehttp -fleet local
//
// Both servers listen on 127.0.0.1 on free ports and stop when the task is
// done. No network beyond loopback, no API keys: the agents are scripts.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/redisfleet"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

func main() {
	mode := flag.String("fleet", "", `"local": share the tree's limits through one in-process fleet`)
	redisURL := flag.String("redis", "", "share the tree's limits through Redis at this URL, a fleet per service")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var fleets services
	switch {
	case *redisURL != "":
		var err error
		if fleets, err = redisFleets(ctx, *redisURL); err != nil {
			fmt.Fprintln(os.Stderr, "treehttp:", err)
			os.Exit(2)
		}
		defer fleets.close()
	case *mode == "local":
		local := fleet.NewLocal()
		fleets = services{planner: local, researcher: local}
	case *mode != "":
		fmt.Fprintf(os.Stderr, "treehttp: -fleet %q: the only fleet mode is \"local\" (or -redis URL)\n", *mode)
		os.Exit(2)
	}
	rep, err := run(ctx, fleets)
	if err != nil {
		fmt.Fprintln(os.Stderr, "treehttp:", err)
		os.Exit(1)
	}
	rep.print(os.Stdout)
}

// services are the fleets of the two services; zero: no fleet.
type services struct {
	planner, researcher fleet.Fleet
	close               func()
}

func (s services) options(f fleet.Fleet) []middleware.Option {
	if f == nil {
		return nil
	}
	return []middleware.Option{middleware.WithFleet(f)}
}

// redisFleets gives each service a fleet of its own on the Redis at url.
func redisFleets(ctx context.Context, url string) (services, error) {
	p, err := redisfleet.New(ctx, url)
	if err != nil {
		return services{}, err
	}
	r, err := redisfleet.New(ctx, url)
	if err != nil {
		p.Close(ctx)
		return services{}, err
	}
	return services{planner: p, researcher: r, close: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.Close(ctx)
		p.Close(ctx)
	}}, nil
}

// plannerPolicy gives the planner's run a tree: token budget over itself
// and its researchers, wherever they run.
const plannerPolicy = `
max_iterations: 20
tree:
  token_budget: {total: 5000, pressure: 0.5}
`

// researcherPolicy is the researcher service's own policy.
const researcherPolicy = `max_iterations: 10`

// research is what the researcher service answers: who it was, whose child,
// what it was given and what it spent.
type research struct {
	Run    string            `json:"run"`
	Parent string            `json:"parent"`
	Given  string            `json:"given"` // the remaining limits it received
	Cause  string            `json:"cause"`
	Usage  termination.Usage `json:"usage"`
	Cost   float64           `json:"cost"`
	Trace  string            `json:"trace"` // the request's trace id, as the researcher saw it
}

// report is what a run of the example shows.
type report struct {
	Planner     termination.Result
	PlannerID   string
	Researchers []research
	Traces      map[string]int // trace id -> spans recorded
}

func (r report) print(w io.Writer) {
	fmt.Fprintf(w, "planner run %s ended: %s\n", r.PlannerID, describe(r.Planner.Cause))
	for i, res := range r.Researchers {
		fmt.Fprintf(w, "  researcher %d: run %s, parent %s, given %q, spent %d tokens, ended: %s\n",
			i+1, res.Run, res.Parent, res.Given, res.Usage.Total(), res.Cause)
	}
	for id, n := range r.Traces {
		fmt.Fprintf(w, "trace %s: %d spans across both services\n", id, n)
	}
}

func describe(c termination.Cause) string {
	b, err := codec.MarshalCause(c)
	if err != nil {
		return termination.Tag(c, nil)
	}
	return string(b)
}

// spans keeps the ended spans' trace ids in memory.
type spans struct {
	mu     sync.Mutex
	traces map[string]int
}

func (s *spans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (s *spans) OnEnd(sp sdktrace.ReadOnlySpan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.traces[sp.SpanContext().TraceID().String()]++
}
func (s *spans) Shutdown(context.Context) error   { return nil }
func (s *spans) ForceFlush(context.Context) error { return nil }

// run starts both services, asks the planner for one task and returns what
// happened.
func run(ctx context.Context, fleets services) (report, error) {
	rec := &spans{traces: map[string]int{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, middleware.Propagator())
	recorder := middleware.WithParticipant(telemetry.NewRecorder(telemetry.WithTracerProvider(tp)))

	researcher, err := middleware.New("researcher", append(fleets.options(fleets.researcher),
		middleware.WithPolicy(termination.MustParsePolicy(researcherPolicy)), recorder)...)
	if err != nil {
		return report{}, err
	}
	planner, err := middleware.New("planner", append(fleets.options(fleets.planner),
		middleware.WithPolicy(termination.MustParsePolicy(plannerPolicy)), recorder)...)
	if err != nil {
		return report{}, err
	}

	researchURL, stopResearch, err := serve(otelhttp.NewHandler(researchHandler(researcher), "research",
		otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(prop)))
	if err != nil {
		return report{}, err
	}
	defer stopResearch()
	client := &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport.(*http.Transport).Clone(),
		otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(prop))}
	defer client.CloseIdleConnections()

	var rep report
	pctx, prun := planner.Start(ctx)
	rep.PlannerID = prun.ID()
	for range 10 {
		// The planner thinks, then delegates.
		if _, stop := prun.Observe(termination.Event{Kind: termination.KindMessage, Source: "planner",
			Usage: termination.Usage{InputTokens: 80, OutputTokens: 20}}); stop {
			break
		}
		callCtx := pctx
		if fleets.planner != nil {
			// The fleet ends the researcher's run when the planner's
			// limit fires, and its answer says why: the call itself is
			// not cut off with the planner's context.
			callCtx = context.WithoutCancel(pctx)
		}
		res, err := delegate(callCtx, client, researchURL)
		if errors.Is(err, context.Canceled) || pctx.Err() != nil && err != nil {
			break
		}
		if err != nil {
			prun.Finish(err)
			return rep, err
		}
		rep.Researchers = append(rep.Researchers, res)
		if fleets.planner == nil {
			// No fleet: the caller charges what the callee spent to its
			// tree (a fleet charged it as it was spent).
			prun.Charge(res.Usage, res.Cost)
		}
		if _, stopped := prun.Cause(); stopped {
			break
		}
	}
	rep.Planner = prun.Finish(nil)
	tp.ForceFlush(context.Background())
	rec.mu.Lock()
	rep.Traces = rec.traces
	rec.mu.Unlock()
	return rep, nil
}

// delegate asks the researcher service for one piece of research, under
// the planner run's context: otelhttp injects the trace context and the
// planner run's link.
func delegate(ctx context.Context, client *http.Client, url string) (research, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return research{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return research{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return research{}, fmt.Errorf("research: %s", resp.Status)
	}
	var res research
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return research{}, fmt.Errorf("research: %w", err)
	}
	return res, nil
}

// researchHandler is the researcher service: each request is one run,
// started under the request's context, so it is the caller's run's child.
func researchHandler(stage *middleware.Stage) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, run := stage.Start(r.Context())
		given := run.Remaining().String()
		for range 3 {
			if _, stop := run.Observe(termination.Event{Kind: termination.KindMessage, Source: "researcher",
				Usage: termination.Usage{InputTokens: 500, OutputTokens: 100}, Cost: 0.001}); stop {
				break
			}
			if ctx.Err() != nil {
				break
			}
		}
		res := run.Finish(nil)
		out := research{Run: run.ID(), Parent: run.Parent(), Given: given, Cause: describe(res.Cause),
			Usage: res.Tokens, Cost: res.Cost, Trace: traceID(r.Context())}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}

// serve serves h on a free port of 127.0.0.1 and returns its URL and a
// function that stops it.
func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return "http://" + ln.Addr().String() + "/research", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

func traceID(ctx context.Context) string { return trace.SpanContextFromContext(ctx).TraceID().String() }
