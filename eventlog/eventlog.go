package eventlog

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// ScopeName is the instrumentation scope of the Writer's metric.
const ScopeName = "github.com/agentstop/agentstop/eventlog"

// Defaults of the options (their docs state them).
const (
	defaultMaxBytes = 64 << 20 // rotate at 64 MiB
	defaultMaxFiles = 5        // rotated files kept
	defaultBuffer   = 4096     // events buffered between the loops and the file
)

// Option configures a Writer.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	maxBytes       int64
	maxFiles       int
	buffer         int
	withoutContent bool
	meterProvider  metric.MeterProvider
	errs           []error
}

// WithMaxBytes rotates the log when writing a line would take it past n
// bytes (a line is never split; a single longer line goes to a file of its
// own). n must be positive. Default: 64 MiB.
func WithMaxBytes(n int64) Option {
	return optionFunc(func(c *config) {
		if n <= 0 {
			c.errs = append(c.errs, fmt.Errorf("WithMaxBytes: %d: want a positive number of bytes", n))
			return
		}
		c.maxBytes = n
	})
}

// WithMaxFiles keeps n rotated files (PATH.1 the newest, PATH.n the
// oldest; older ones are removed). n must be at least 1. Default: 5.
func WithMaxFiles(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("WithMaxFiles: %d: want at least 1", n))
			return
		}
		c.maxFiles = n
	})
}

// WithBuffer sets how many events may wait for the file; beyond that an
// event is dropped rather than waited for. n must be positive. Default:
// 4096.
func WithBuffer(n int) Option {
	return optionFunc(func(c *config) {
		if n <= 0 {
			c.errs = append(c.errs, fmt.Errorf("WithBuffer: %d: want a positive number of events", n))
			return
		}
		c.buffer = n
	})
}

// WithoutContent writes hashes in place of texts and tool arguments (see
// the package doc). Default: content is written.
func WithoutContent() Option {
	return optionFunc(func(c *config) { c.withoutContent = true })
}

// WithMeterProvider counts dropped events with mp's meter. A nil mp is
// ignored. Default: otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if mp != nil {
			c.meterProvider = mp
		}
	})
}

// record is one event waiting for the file.
type record struct {
	ev   termination.Event
	args *[]byte // the copy of ev.Args, from argsPool
	run  string
	// parent and stage are written on the run's first line in each file
	// (the goroutine knows which runs the current file has seen).
	parent string
	stage  string
	// end is an end record's line, already encoded (ev is then unused),
	// of the run endRun.
	end    []byte
	endRun string
	// raise: end is a raise record's line (§1), which does not end its run.
	raise bool
	// dropped is how many events of the run were dropped since the last
	// one written: the line says so, in a field replay ignores.
	dropped int64
}

// Writer writes the events of the runs it records to a JSON Lines file.
// It is safe for concurrent use. Close it to write what is buffered and to
// end its goroutine.
type Writer struct {
	path    string
	log     termination.LogFields // the log fields of the line being written (write)
	cfg     config
	queue   chan record
	stop    chan struct{}
	done    chan struct{}
	closing sync.RWMutex // Event holds it for reading while it enqueues; Close for writing to set closed
	closed  bool
	dropped atomic.Int64
	// lateReported is set once a line after Close has been reported.
	lateReported atomic.Bool
	once         sync.Once
	argsPool     sync.Pool
	drops        metric.Int64Counter
	nextID       atomic.Int64
	// overflow holds the end records that found the buffer full: they are
	// never dropped (a run's end is what replay needs most); kick wakes
	// the goroutine to write them.
	overflowMu sync.Mutex
	overflow   []record
	kick       chan struct{}

	// Owned by the goroutine.
	file     *os.File
	buf      *bufio.Writer
	size     int64
	reported int64 // drops already reported
	// inFile is the runs the current file has a line of and no end
	// record: their later lines carry no stage or parent.
	inFile map[string]struct{}
	err    error // the first write error, returned by Close
}

// New opens (creating or appending to) the log at path and starts the
// Writer's goroutine. Invalid options and a file that cannot be opened are
// errors naming the option or the file.
func New(path string, opts ...Option) (*Writer, error) {
	w, err := newWriter(path, opts)
	if err != nil {
		return nil, err
	}
	go w.loop()
	return w, nil
}

// newWriter is New without starting the goroutine.
func newWriter(path string, opts []Option) (*Writer, error) {
	cfg := config{maxBytes: defaultMaxBytes, maxFiles: defaultMaxFiles, buffer: defaultBuffer, meterProvider: otel.GetMeterProvider()}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, fmt.Errorf("eventlog: %w", err)
	}
	if path == "" {
		return nil, errors.New("eventlog: empty path")
	}
	w := &Writer{path: path, cfg: cfg, queue: make(chan record, cfg.buffer), stop: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1)}
	w.inFile = map[string]struct{}{}
	w.argsPool.New = func() any { b := make([]byte, 0, 256); return &b }
	var err error
	w.drops, err = cfg.meterProvider.Meter(ScopeName).Int64Counter("agentstop.eventlog.dropped",
		metric.WithUnit("{event}"), metric.WithDescription("Events the event log dropped because its buffer was full."))
	if err != nil {
		otel.Handle(err)
	}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

// Path returns the log's path.
func (w *Writer) Path() string { return w.path }

// Dropped returns how many events were dropped because the buffer was
// full (or came after Close).
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Join implements middleware.Participant: the run's events go to the log.
func (w *Writer) Join(ctx context.Context, run *middleware.Run) (context.Context, middleware.Part) {
	return w.startRun(ctx, run.Info())
}

// startRun starts the recording of the run info describes.
func (w *Writer) startRun(ctx context.Context, info middleware.RunInfo) (context.Context, middleware.Part) {
	id := info.RunID
	if id == "" {
		id = "run-" + strconv.FormatInt(w.nextID.Add(1), 10)
	}
	return ctx, &runRecorder{w: w, run: id, parent: info.ParentRunID, stage: info.Stage, policy: info.Policy}
}

// Close writes every event recorded before it, closes the file and ends
// the goroutine. It returns the first error writing the log met. Events
// and end records recorded after Close are dropped and counted (Dropped);
// the first is reported to otel.Handle, naming its run. Close is
// idempotent.
func (w *Writer) Close() error {
	w.once.Do(func() {
		// Wait for the Events enqueueing now: what they enqueue is
		// written; every later Event is dropped and counted.
		w.closing.Lock()
		w.closed = true
		w.closing.Unlock()
		close(w.stop)
	})
	<-w.done
	return w.err
}

type runRecorder struct {
	w       *Writer
	run     string
	parent  string
	stage   string
	policy  string
	ended   bool  // the end record is written (Stopped or End)
	dropped int64 // events dropped since the last one enqueued
}

// Event copies ev into the buffer, or drops it when the buffer is full. It
// never blocks. Its args are copied (the caller may reuse them); strings
// are immutable and shared.
func (r *runRecorder) Event(ev *termination.Event) {
	w := r.w
	w.closing.RLock()
	defer w.closing.RUnlock()
	if w.closed {
		w.dropLate(r.run)
		return
	}
	rec := record{ev: *ev, run: r.run, dropped: r.dropped}
	rec.parent, rec.stage = r.parent, r.stage
	if rec.ev.Time.IsZero() {
		rec.ev.Time = time.Now()
	}
	if len(ev.Args) > 0 {
		b := w.argsPool.Get().(*[]byte)
		*b = append((*b)[:0], ev.Args...)
		rec.args = b
		rec.ev.Args = nil
	}
	select {
	case w.queue <- rec:
		r.dropped = 0
	default:
		if rec.args != nil {
			w.argsPool.Put(rec.args)
		}
		r.dropped++
		w.dropped.Add(1)
	}
}

func (r *runRecorder) Warning(termination.Cause) {}
func (r *runRecorder) Error(error)               {}

// endLine is an end record (§1) as written, its fields in the contract's
// order.
type endLine struct {
	Kind      string          `json:"kind"`
	Run       string          `json:"run"`
	Parent    string          `json:"parent,omitempty"`
	Stage     string          `json:"stage"`
	Time      time.Time       `json:"time"`
	Cause     json.RawMessage `json:"cause"`
	Outcome   string          `json:"outcome"`
	StoppedAt int             `json:"stopped_at"`
	Events    int             `json:"events"`
	Policy    string          `json:"policy"`
	Shadow    json.RawMessage `json:"shadow,omitempty"`
	Dropped   int64           `json:"dropped,omitempty"`
}

// End writes the run's end record: how it ended, which its events alone
// cannot say. It is never dropped: when the buffer is full it waits
// beside it (overflow), after the run's events.
func (r *runRecorder) End(res *termination.Result) { r.writeEnd(res) }

// Stopped writes the run's end record the moment its cause is decided
// (middleware.StopRecorder), so that the record comes before the lines of
// the cascade that ends its descendants and of whatever other runs do
// before the loop returns. Its outcome is the cause's default.
func (r *runRecorder) Stopped(res *termination.Result) { r.writeEnd(res) }

// writeEnd writes the run's end record, once.
func (r *runRecorder) writeEnd(res *termination.Result) {
	if r.ended {
		return
	}
	r.ended = true
	w := r.w
	cause, err := codec.MarshalCause(res.Cause)
	if err != nil {
		w.drop()
		otel.Handle(fmt.Errorf("eventlog: cannot record the end of run %s: %w", r.run, err))
		return
	}
	rec := endLine{Kind: "end", Run: r.run, Parent: r.parent, Stage: r.stage, Time: time.Now(),
		Cause: cause, Outcome: res.Outcome.String(), StoppedAt: res.StoppedAt, Events: res.Events,
		Policy: r.policy, Shadow: shadowVerdicts(res), Dropped: r.dropped}
	r.enqueue(rec, "the end", false)
}

// enqueue encodes a record line (an end or raise record) and hands it to
// the writer, never dropping it: an end record that finds the buffer full
// waits beside it (overflow); a raise record waits for room, so that it
// stays in line order before the run's next event (raises are rare, and
// the writer never waits for a run).
func (r *runRecorder) enqueue(v any, what string, raise bool) {
	w := r.w
	line, err := json.Marshal(v)
	if err != nil {
		w.drop()
		otel.Handle(fmt.Errorf("eventlog: cannot record %s of run %s: %w", what, r.run, err))
		return
	}
	w.closing.RLock()
	defer w.closing.RUnlock()
	if w.closed {
		w.dropLate(r.run)
		return
	}
	rec := record{end: line, endRun: r.run, raise: raise}
	if raise {
		w.queue <- rec
		return
	}
	select {
	case w.queue <- rec:
	default:
		w.overflowMu.Lock()
		w.overflow = append(w.overflow, rec)
		w.overflowMu.Unlock()
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// raiseLine is a raise record (§1): what a raise added to the run's limits.
type raiseLine struct {
	Kind   string          `json:"kind"`
	Run    string          `json:"run"`
	Time   time.Time       `json:"time"`
	Limits json.RawMessage `json:"limits"`
}

// Held and Released are middleware.HoldRecorder's: a hold leaves no line
// of its own (the event that reached the limit is the run's last line
// before the raise or the end record).
func (r *runRecorder) Held(termination.Cause) {}

// Released is called when a held run goes on or ends; see Held.
func (r *runRecorder) Released() {}

// Raised writes a raise record (§1), in line order before the run's next
// event, so that replay applies the raise where it happened; like an end
// record it is never dropped (enqueue).
func (r *runRecorder) Raised(l termination.Limits) {
	r.enqueue(raiseLine{Kind: "raise", Run: r.run, Time: time.Now(), Limits: raiseLimitsJSON(l)}, "a raise", true)
}

// raiseLimitsJSON is a raise record's limits: the amounts l has, by the §2
// resource names.
func raiseLimitsJSON(l termination.Limits) json.RawMessage {
	m := map[string]any{}
	add := func(has termination.LimitMask, name string, v any) {
		if l.Has&has != 0 {
			m[name] = v
		}
	}
	add(termination.LimitTotalTokens, "total_tokens", l.TotalTokens)
	add(termination.LimitInputTokens, "input_tokens", l.InputTokens)
	add(termination.LimitOutputTokens, "output_tokens", l.OutputTokens)
	add(termination.LimitCost, "cost", l.Cost)
	add(termination.LimitIterations, "iterations", l.Iterations)
	add(termination.LimitToolCalls, "tool_calls", l.ToolCalls)
	b, _ := json.Marshal(m)
	return b
}

// shadowVerdicts is the end record's "shadow" (§5.2): the verdict of
// each of the stage's shadow policies (null for one that would not have
// stopped the run), or nil (no key) for a stage without any.
func shadowVerdicts(res *termination.Result) json.RawMessage {
	if len(res.Shadow) == 0 {
		return nil
	}
	b, err := json.Marshal(res.Shadow)
	if err != nil {
		otel.Handle(fmt.Errorf("eventlog: cannot record the shadow verdicts of run %s: %w", res.Run, err))
		return nil
	}
	return b
}

func (w *Writer) drop() { w.dropped.Add(1) }

// dropLate drops a line of run that came after Close: counted as any
// drop, and reported to otel.Handle the first time, since the log then
// lacks the rest of the run, its end record included.
func (w *Writer) dropLate(run string) {
	w.dropped.Add(1)
	if w.lateReported.CompareAndSwap(false, true) {
		otel.Handle(fmt.Errorf("eventlog: %s: run %s recorded a line after Close: it is dropped, as every later one (Writer.Dropped counts them), so the log lacks the rest of the run; close the log once the runs it records have ended", w.path, run))
	}
}

// writeOverflow writes the end records that found the buffer full.
func (w *Writer) writeOverflow() {
	w.overflowMu.Lock()
	lines := w.overflow
	w.overflow = nil
	w.overflowMu.Unlock()
	for i := range lines {
		w.write(&lines[i])
	}
}

// loop is the Writer's goroutine: it writes records until Close, then
// what is left in the buffer.
func (w *Writer) loop() {
	defer close(w.done)
	for {
		select {
		case rec := <-w.queue:
			w.write(&rec)
			// Write the rest of a burst, then flush once.
			for more := true; more; {
				select {
				case rec := <-w.queue:
					w.write(&rec)
				default:
					more = false
				}
			}
			w.writeOverflow()
			w.flush()
			w.reportDrops()
		case <-w.kick:
			// Write what the queue holds first: the end records come
			// after their runs' events.
			for more := true; more; {
				select {
				case rec := <-w.queue:
					w.write(&rec)
				default:
					more = false
				}
			}
			w.writeOverflow()
			w.flush()
		case <-w.stop:
			for {
				select {
				case rec := <-w.queue:
					w.write(&rec)
					continue
				default:
				}
				break
			}
			w.writeOverflow()
			w.flush()
			w.reportDrops()
			if err := w.file.Close(); err != nil && w.err == nil {
				w.err = err
			}
			return
		}
	}
}

// write encodes one record as a line and writes it, rotating first when
// the line would take the file past its size.
func (w *Writer) write(rec *record) {
	if rec.end != nil {
		w.writeLine(append(rec.end, '\n'))
		if !rec.raise {
			delete(w.inFile, rec.endRun)
		}
		return
	}
	ev := rec.ev
	if rec.args != nil {
		ev.Args = *rec.args
	}
	// The line's log fields are the writer's own (ev is encoded, then
	// dropped): no allocation per line.
	w.log = ev.Logged()
	w.log.Run, w.log.Dropped = rec.run, rec.dropped
	ev.Log = &w.log
	if w.cfg.withoutContent {
		hideContent(&ev)
	}
	line, err := w.encode(&ev, rec)
	if err != nil && len(ev.Args) > 0 && !json.Valid(ev.Args) {
		// A model's malformed arguments, which the live run took as they
		// are: the line keeps the event with the args' hash, the value
		// replay compares as the live run compared the args.
		ev.Log.ArgsHash, ev.Args = codec.ArgsHash(ev.Args), nil
		line, err = w.encode(&ev, rec)
	}
	if err == nil && w.size > 0 && w.size+int64(len(line))+1 > w.cfg.maxBytes {
		// Rotate first: the line may then be its run's first in the new
		// file, with the run's stage and parent.
		w.rotate()
		line, err = w.encode(&ev, rec)
	}
	if rec.args != nil {
		w.argsPool.Put(rec.args)
	}
	if err != nil {
		w.fail(fmt.Errorf("eventlog: cannot encode a %s event of run %s: %w", ev.Kind, rec.run, err))
		return
	}
	if _, seen := w.inFile[rec.run]; !seen {
		w.inFile[rec.run] = struct{}{}
	}
	w.writeLine(append(line, '\n'))
}

// encode encodes ev, with the run's stage and parent when it is the run's
// first line in the current file, so that a rotated file's part of a run
// is a run of its own.
func (w *Writer) encode(ev *termination.Event, rec *record) ([]byte, error) {
	ev.Log.Parent, ev.Log.Stage = "", ""
	if _, seen := w.inFile[rec.run]; !seen {
		ev.Log.Parent, ev.Log.Stage = rec.parent, rec.stage
	}
	return json.Marshal(lineJSON{plainEvent(*ev), ev.Log})
}

// lineJSON is an event's line: Event's own JSON form (its log fields flat
// beside the others), written by encoding/json directly rather than
// through Event.MarshalJSON, which the writer would pay for twice.
type lineJSON struct {
	plainEvent
	*termination.LogFields
}

// plainEvent is termination.Event without its JSON methods.
type plainEvent termination.Event

// writeLine writes one line, rotating first when it would take the file
// past its size.
func (w *Writer) writeLine(line []byte) {
	if w.size > 0 && w.size+int64(len(line)) > w.cfg.maxBytes {
		w.rotate()
	}
	n, err := w.buf.Write(line)
	w.size += int64(n)
	if err != nil {
		w.fail(fmt.Errorf("eventlog: cannot write %s: %w", w.path, err))
	}
}

// hideContent replaces texts and args with their §1 hashes. ev.Log, when
// set, is ev's own (the writer's), and is written in place.
func hideContent(ev *termination.Event) {
	if ev.Log == nil {
		ev.Log = new(termination.LogFields)
	}
	l := ev.Log
	if len(ev.Args) > 0 && string(ev.Args) != "null" {
		l.ArgsHash, ev.Args = codec.ArgsHash(ev.Args), nil
	}
	switch ev.Kind {
	case termination.KindToolResult:
		if ev.Text != "" || ev.Err != "" {
			l.TextHash, ev.Text = codec.ResultHash(ev.Text, ev.Err), ""
		}
	default:
		if ev.Text != "" {
			l.TextHash, ev.Text = codec.TextHash(ev.Text), ""
		}
	}
	if ev.Err != "" {
		ev.Err = "error"
	}
}

func (w *Writer) open() error {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("eventlog: cannot open the log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("eventlog: cannot open the log: %w", err)
	}
	w.file, w.size = f, fi.Size()
	if w.buf == nil {
		w.buf = bufio.NewWriterSize(f, 64<<10)
	} else {
		w.buf.Reset(f)
	}
	return nil
}

// rotate closes the log, shifts PATH.(k) to PATH.(k+1) (removing the
// oldest), renames PATH to PATH.1 and opens a new PATH.
func (w *Writer) rotate() {
	clear(w.inFile) // the new file has no line of any run yet
	w.flush()
	if err := w.file.Close(); err != nil {
		w.fail(fmt.Errorf("eventlog: cannot close %s to rotate it: %w", w.path, err))
	}
	n := w.cfg.maxFiles
	os.Remove(w.path + "." + strconv.Itoa(n))
	for k := n - 1; k >= 1; k-- {
		os.Rename(w.path+"."+strconv.Itoa(k), w.path+"."+strconv.Itoa(k+1))
	}
	if err := os.Rename(w.path, w.path+".1"); err != nil {
		w.fail(fmt.Errorf("eventlog: cannot rotate %s: %w", w.path, err))
	}
	if err := w.open(); err != nil {
		w.fail(err)
		// Keep writing nowhere rather than crash: the error is reported
		// and returned by Close.
		w.file, _ = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		w.buf.Reset(w.file)
	}
}

func (w *Writer) flush() {
	if err := w.buf.Flush(); err != nil {
		w.fail(fmt.Errorf("eventlog: cannot write %s: %w", w.path, err))
	}
}

// fail reports a write error to otel.Handle; the first is kept for Close.
func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
	otel.Handle(err)
}

// reportDrops counts the drops since the last report on the metric and
// reports them to otel.Handle, once per burst.
func (w *Writer) reportDrops() {
	total := w.dropped.Load()
	n := total - w.reported
	if n <= 0 {
		return
	}
	w.reported = total
	if w.drops != nil {
		w.drops.Add(context.Background(), n)
	}
	otel.Handle(fmt.Errorf("eventlog: dropped %d events (%d in all): the buffer of %d events was full; the log misses them", n, total, w.cfg.buffer))
}

var (
	_ middleware.Participant  = (*Writer)(nil)
	_ middleware.StopRecorder = (*runRecorder)(nil)
)

// A run's recorder records end records and raise records.
var (
	_ middleware.StopRecorder = (*runRecorder)(nil)
	_ middleware.HoldRecorder = (*runRecorder)(nil)
)
