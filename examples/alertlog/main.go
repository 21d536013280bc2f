// Command alertlog is the demo stack's pager: an Alertmanager webhook
// receiver that needs no credentials. It logs one line per alert of every
// notification it receives, keeps the latest ones in memory and shows them
// on a page, so that a user of `docker compose up` can watch the stall and
// budget alerts of the quickstart being routed and delivered.
//
//	go run ./examples/alertlog -listen 127.0.0.1:9095
//
// Endpoints:
//
//	POST /webhook       an Alertmanager webhook notification (version 4)
//	GET  /              the latest alerts, newest first, as plain text
//	GET  /api/alerts    the same as JSON (used by the dashboards' e2e test)
//
// A body that is not a webhook notification gets 400 with a message naming
// the problem; a body over 1 MiB gets 413.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
)

// maxBody bounds a notification's size.
const maxBody = 1 << 20

func main() {
	fs := flag.NewFlagSet("alertlog", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9095", "address to receive webhooks on")
	keep := fs.Int("keep", 200, "how many of the latest alerts to keep for / and /api/alerts")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "alertlog: unexpected argument %q (flags only; -h lists them)\n", fs.Arg(0))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen, *keep, os.Stdout); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "alertlog:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends. It prints the address it listens on, then one
// line per alert received.
func run(ctx context.Context, listen string, keep int, out io.Writer) error {
	if keep < 1 {
		return fmt.Errorf("-keep must be >= 1, got %d", keep)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	l := newLog(keep, out)
	srv := &http.Server{Handler: l.handler(), ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(out, "alertlog: receiving Alertmanager webhooks on http://%s/webhook; latest alerts on http://%s/\n", ln.Addr(), ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// notification is the part of Alertmanager's webhook payload (version 4)
// that alertlog reads.
type notification struct {
	Version  string  `json:"version"`
	Receiver string  `json:"receiver"`
	Status   string  `json:"status"`
	Alerts   []alert `json:"alerts"`
}

type alert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
}

// Received is one alert as received, kept for / and /api/alerts.
type Received struct {
	At          time.Time         `json:"at"`
	Receiver    string            `json:"receiver"`
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
}

// line is the log line of an alert: one line, whatever the labels and
// annotations hold (their line breaks and control characters are escaped,
// so that no text can start a line that looks like another alert).
func (r Received) line() string {
	var extra []string
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		if k != "alertname" && k != "severity" {
			extra = append(extra, oneLine(k)+"="+oneLine(r.Labels[k]))
		}
	}
	s := fmt.Sprintf("%s %s [%s] %s", r.At.UTC().Format(time.RFC3339), oneLine(strings.ToUpper(r.Status)), oneLine(r.Labels["severity"]), oneLine(r.Labels["alertname"]))
	if len(extra) > 0 {
		s += " " + strings.Join(extra, " ")
	}
	s += " receiver=" + oneLine(r.Receiver)
	if sum := r.Annotations["summary"]; sum != "" {
		s += ": " + oneLine(sum)
	}
	return s
}

// oneLine escapes control characters and Unicode line and paragraph
// separators in s as Go escapes (\n, \r, \x07, \u2028); the rest is kept.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, needsEscape) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if needsEscape(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func needsEscape(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
}

// alertLog keeps the latest alerts.
type alertLog struct {
	mu     sync.Mutex
	keep   int
	alerts []Received // oldest first
	out    io.Writer
	now    func() time.Time
}

func newLog(keep int, out io.Writer) *alertLog {
	return &alertLog{keep: keep, out: out, now: time.Now}
}

func (l *alertLog) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/webhook", l.receive)
	mux.HandleFunc("/api/alerts", l.list)
	mux.HandleFunc("/", l.page)
	return mux
}

// decode reads a notification and says what is wrong with it in the terms
// of the webhook format.
func decode(r io.Reader) (notification, error) {
	var n notification
	dec := json.NewDecoder(r)
	if err := dec.Decode(&n); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return n, err
		}
		return n, fmt.Errorf("the body is not an Alertmanager webhook notification (JSON object with version, receiver, alerts): %v", err)
	}
	if dec.More() {
		return n, errors.New("the body holds more than one JSON value")
	}
	switch {
	case n.Version != "4":
		return n, fmt.Errorf("version: want \"4\" (Alertmanager's webhook format), got %q", n.Version)
	case n.Receiver == "":
		return n, errors.New("receiver: missing")
	case len(n.Alerts) == 0:
		return n, errors.New("alerts: missing or empty")
	}
	for i, a := range n.Alerts {
		if a.Labels["alertname"] == "" {
			return n, fmt.Errorf("alerts[%d].labels.alertname: missing", i)
		}
		if a.Status != "firing" && a.Status != "resolved" {
			return n, fmt.Errorf("alerts[%d].status: want firing or resolved, got %q", i, a.Status)
		}
	}
	return n, nil
}

func (l *alertLog) receive(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "alertlog: POST an Alertmanager webhook notification to /webhook", http.StatusMethodNotAllowed)
		return
	}
	n, err := decode(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("alertlog: notification larger than %d MiB", maxBody>>20), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "alertlog: "+err.Error(), http.StatusBadRequest)
		return
	}
	at := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range n.Alerts {
		rec := Received{At: at, Receiver: n.Receiver, Status: a.Status, Labels: a.Labels, Annotations: a.Annotations, StartsAt: a.StartsAt}
		fmt.Fprintln(l.out, rec.line())
		if len(l.alerts) == l.keep {
			l.alerts = append(l.alerts[:0], l.alerts[1:]...)
		}
		l.alerts = append(l.alerts, rec)
	}
}

// latest returns the kept alerts, newest first.
func (l *alertLog) latest() []Received {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.alerts)
	slices.Reverse(out)
	return out
}

func (l *alertLog) list(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "alertlog: GET /api/alerts", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	alerts := l.latest()
	if alerts == nil {
		alerts = []Received{}
	}
	_ = json.NewEncoder(w).Encode(alerts)
}

func (l *alertLog) page(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	alerts := l.latest()
	fmt.Fprintf(w, "alertlog: %d alerts received from Alertmanager (latest first)\n\n", len(alerts))
	if len(alerts) == 0 {
		fmt.Fprintln(w, "None yet: Alertmanager posts here once an alert has fired for its `for:` duration.")
	}
	for _, a := range alerts {
		fmt.Fprintln(w, a.line())
	}
}
