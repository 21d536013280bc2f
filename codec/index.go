package codec

import (
	"bytes"
	"io"

	"github.com/agentstop/agentstop/internal/jsonscan"

	"github.com/agentstop/agentstop/termination"
)

// Index is what a first pass over a log of many runs learns for the
// replay that follows it one line at a time (replay.Runner): the line of
// each run's last event, where the run ends if nothing ends it sooner.
// It holds a few words per run, never the events.
type Index struct {
	slot    map[string]int // run → index into last
	last    []int          // the line of each run's last event
	unnamed int            // the line of the first event without run, 0 when none
	// live is each run's recorded cause (its end record's tag), and
	// incomplete the runs a line of which says the recorder dropped
	// events; nil in a log without them.
	live       map[string]string
	incomplete map[string]bool
}

// IndexRuns reads the JSON Lines log r to its end and returns where each
// run's last event is. Its lines are numbered as [Decoder] numbers them.
// It reads only each line's "run" (decoding a line whole only when its
// run cannot be read cheaply), and it reports nothing about bad lines:
// a line that does not decode names no run, and the pass stops at a line
// it cannot read (longer than the limit, a read error). The replay that
// follows reports those, in the order of the lines, as it would without
// the index.
func IndexRuns(r io.Reader) Index {
	x := Index{slot: map[string]int{}}
	d := NewDecoder(r)
	for {
		b, ok := d.scanLine()
		if !ok {
			return x
		}
		x.noteRecord(b)
		run, ok := lineRun(b)
		if !ok {
			if decodeEvent(b, &d.ev) != nil {
				continue // a bad line: the replay reports it
			}
			run = []byte(d.ev.Logged().Run)
		}
		if len(run) == 0 && x.unnamed == 0 {
			x.unnamed = d.line
		}
		if i, ok := x.slot[string(run)]; ok {
			x.last[i] = d.line
			continue
		}
		x.slot[string(run)] = len(x.last)
		x.last = append(x.last, d.line)
	}
}

// IsLast reports whether line (numbered as [Decoder.Line] numbers it) is
// the last line of run.
func (x Index) IsLast(run string, line int) bool {
	i, ok := x.slot[run]
	return ok && x.last[i] == line
}

// Runs returns how many runs the log holds (events without run count as
// the run "").
func (x Index) Runs() int { return len(x.last) }

// Unnamed returns the line of the first event without run, 0 when every
// event names its run.
func (x Index) Unnamed() int { return x.unnamed }

// lineRun returns the run of the event on the line data, as the decoder
// would decode it, without decoding the rest: every other member is only
// skipped. ok is false when it cannot tell (an escaped key, a run that is
// not a plain string, anything that is not a well-formed object): the
// caller then decodes the line whole.
func lineRun(data []byte) (run []byte, ok bool) {
	p := fastParser{Scanner: jsonscan.Scanner{Data: data}}
	p.SkipSpace()
	if !p.members(func(key []byte) bool {
		if string(key) != "run" {
			return p.Skip(0, fastMaxDepth)
		}
		start, simple, ascii := p.String()
		if start < 0 || !simple || !ascii {
			return false // a run with escapes or non-ASCII bytes is decoded whole
		}
		run = p.Data[start+1 : p.Pos-1] // a repeated "run": the last one counts, as in decoding
		return true
	}) {
		return nil, false
	}
	p.SkipSpace()
	return run, p.Pos == len(p.Data)
}

// noteRecord notes what the line b says of its run when it is an end
// record (the recorded cause) or says "dropped". Such lines are rare (one
// end record per run): they are decoded whole. A bad one is left for the
// replay to report.
func (x *Index) noteRecord(b []byte) {
	k := recordKind(b)
	dropped := bytes.Contains(b, []byte(`"dropped"`))
	if k != RecordEnd && !dropped {
		return
	}
	if k == RecordEnd {
		rec, err := decodeRecord(b, k)
		if err != nil {
			return
		}
		if x.live == nil {
			x.live = map[string]string{}
		}
		x.live[rec.Run] = rec.Tag()
		if rec.Dropped > 0 {
			x.markIncomplete(rec.Run)
		}
		return
	}
	var ev termination.Event
	if decodeEvent(b, &ev) == nil && ev.Logged().Dropped > 0 {
		x.markIncomplete(ev.Log.Run)
	}
}

func (x *Index) markIncomplete(run string) {
	if x.incomplete == nil {
		x.incomplete = map[string]bool{}
	}
	x.incomplete[run] = true
}

// Live returns the termination_cause of run's end record, "" when the
// run has none.
func (x *Index) Live(run string) string { return x.live[run] }

// Incomplete reports whether a line of run says that the recorder dropped
// some of its events.
func (x *Index) Incomplete(run string) bool { return x.incomplete[run] }
