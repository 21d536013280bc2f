package codec

import (
	"bytes"
	"io"

	"github.com/agentstop/agentstop/internal/jsonscan"

	"github.com/agentstop/agentstop/termination"
)

// Index is what a first pass over a log of many runs learns for the
// replay that follows it one line at a time (replay.Runner): the line of
// each run's last event, where the run ends if nothing ends it sooner,
// and the runs that start late (LateParent). It holds a few words per
// run, never the events.
type Index struct {
	slot    map[string]int // run → index into last
	last    []int          // the line of each run's last event
	unnamed int            // the line of the first event without run, 0 when none
	// live is each run's recorded cause (its end record's tag), and
	// incomplete the runs a line of which says the recorder dropped
	// events; nil in a log without them.
	live       map[string]string
	incomplete map[string]bool
	// late is what the first line of each run that starts late says of
	// it (its parent and stage): a run whose first line comes after the
	// first line of one of its descendants. nil when there are none.
	late map[string]runStart
}

// runStart is what a run's first line says of its place in a tree: its
// parent and its stage.
type runStart struct{ parent, stage string }

// IndexRuns reads the JSON Lines log r to its end and returns where each
// run's last event is, and which runs start late. Its lines are numbered
// as [Decoder] numbers them. It reads only each line's "run", "parent"
// and "stage" (decoding a line whole only when they cannot be read
// cheaply), and it reports nothing about bad lines:
// a line that does not decode names no run, and the pass stops at a line
// it cannot read (longer than the limit, a read error). The replay that
// follows reports those, in the order of the lines, as it would without
// the index.
func IndexRuns(r io.Reader) Index {
	x := Index{slot: map[string]int{}}
	var starts starts
	d := NewDecoder(r)
	for {
		b, ok := d.scanLine()
		if !ok {
			x.late = starts.late(x.slot)
			return x
		}
		raise := x.noteRecord(b) == RecordRaise
		ids, ok := lineIDs(b)
		if !ok {
			if decodeLineIDs(b, &d.ev, &ids) != nil {
				continue // a bad line: the replay reports it
			}
		}
		if len(ids.run) == 0 && x.unnamed == 0 {
			x.unnamed = d.line
		}
		if i, ok := x.slot[string(ids.run)]; ok {
			x.last[i] = d.line
			if !raise {
				starts.place(i, ids)
			}
			continue
		}
		x.slot[string(ids.run)] = len(x.last)
		x.last = append(x.last, d.line)
		starts.add(ids, !raise)
	}
}

// decodeLineIDs decodes the line b whole (an event or a record) for what
// lineIDs could not read cheaply.
func decodeLineIDs(b []byte, ev *termination.Event, ids *lineIDFields) error {
	if k := recordKind(b); k != 0 {
		rec, err := decodeRecord(b, k)
		if err != nil {
			return err
		}
		*ids = lineIDFields{[]byte(rec.Run), []byte(rec.Parent), []byte(rec.Stage)}
		return nil
	}
	if err := decodeEvent(b, ev); err != nil {
		return err
	}
	l := ev.Logged()
	*ids = lineIDFields{[]byte(l.Run), []byte(l.Parent), []byte(l.Stage)}
	return nil
}

// LateParent reports whether run starts late — its first line comes after
// the first line of one of its descendants, as for a planner that
// delegated before its first event was recorded — and then what that
// first line says: run's parent and stage. A replay starts such a run
// at its earliest descendant's first line, as it had started live before
// it (docs/spec.md §8).
func (x *Index) LateParent(run string) (parent, stage string, ok bool) {
	at, ok := x.late[run]
	return at.parent, at.stage, ok
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

// lineIDFields are the members of a line that place it in a tree of
// runs: its run, and on a run's first line its parent and stage.
type lineIDFields struct{ run, parent, stage []byte }

// lineIDs returns the run, parent and stage of the event (or record) on
// the line data, as the decoder would decode them, without decoding the
// rest: every other member is only skipped. ok is false when it cannot
// tell (an escaped key, one of them that is not a plain string, anything
// that is not a well-formed object): the caller then decodes the line
// whole.
func lineIDs(data []byte) (ids lineIDFields, ok bool) {
	p := fastParser{Scanner: jsonscan.Scanner{Data: data}}
	p.SkipSpace()
	if !p.members(func(key []byte) bool {
		var dst *[]byte
		switch string(key) {
		case "run":
			dst = &ids.run
		case "parent":
			dst = &ids.parent
		case "stage":
			dst = &ids.stage
		default:
			return p.Skip(0, fastMaxDepth)
		}
		start, simple, ascii := p.String()
		if start < 0 || !simple || !ascii {
			return false // one with escapes or non-ASCII bytes is decoded whole
		}
		*dst = p.Data[start+1 : p.Pos-1] // a repeated key: the last one counts, as in decoding
		return true
	}) {
		return lineIDFields{}, false
	}
	p.SkipSpace()
	return ids, p.Pos == len(p.Data)
}

// starts keeps, while IndexRuns reads, what each run's first line says of
// its place in a tree, in the order of the runs' first lines (the order
// of Index.last); late keeps only the runs that start late.
type starts struct {
	parents []string          // each run's parent, "" for none
	stages  []string          // each run's stage, interned
	stage   map[string]string // the stages seen, for interning
	// unplaced is the runs whose lines so far are raise records, which
	// name no stage or parent: their first event or end record places
	// them.
	unplaced map[int]bool
}

// add notes a new run, at its first line ids; placed is false when that
// line is a raise record.
func (s *starts) add(ids lineIDFields, placed bool) {
	s.parents = append(s.parents, "")
	s.stages = append(s.stages, "")
	i := len(s.parents) - 1
	if !placed {
		if s.unplaced == nil {
			s.unplaced = map[int]bool{}
		}
		s.unplaced[i] = true
		return
	}
	s.set(i, ids)
}

// place notes what a later line of run i says, when its earlier lines
// were raise records only.
func (s *starts) place(i int, ids lineIDFields) {
	if s.unplaced[i] {
		delete(s.unplaced, i)
		s.set(i, ids)
	}
}

func (s *starts) set(i int, ids lineIDFields) {
	s.parents[i] = string(ids.parent)
	st, ok := s.stage[string(ids.stage)]
	if !ok {
		if s.stage == nil {
			s.stage = map[string]string{}
		}
		st = string(ids.stage)
		s.stage[st] = st
	}
	s.stages[i] = st
}

// late returns the runs that start late: those whose first line comes
// after the first line of one of their descendants (slot numbers runs in
// the order of their first lines). Walking up from each run in that
// order, an ancestor with a later first line starts late; the walk stops
// at one that does not, or that an earlier run's walk marked (whose own
// ancestors that start later than this run's first line it marked too).
func (s *starts) late(slot map[string]int) map[string]runStart {
	up := make([]int, len(s.parents)) // each run's parent's slot, -1 for none in the log
	for i, p := range s.parents {
		up[i] = -1
		if j, ok := slot[p]; ok && p != "" {
			up[i] = j
		}
	}
	marked := make([]bool, len(up))
	any := false
	for i := range up {
		for j := up[i]; j > i && !marked[j]; j = up[j] {
			marked[j], any = true, true
		}
	}
	if !any {
		return nil
	}
	late := map[string]runStart{}
	for run, i := range slot {
		if marked[i] {
			late[run] = runStart{s.parents[i], s.stages[i]}
		}
	}
	return late
}

// noteRecord notes what the line b says of its run when it is an end
// record (the recorded cause) or says "dropped", and returns its record
// kind (0 for an event). Such lines are rare (one end record per run):
// they are decoded whole. A bad one is left for the replay to report.
func (x *Index) noteRecord(b []byte) RecordKind {
	k := recordKind(b)
	if k == RecordEnd || bytes.Contains(b, []byte(`"dropped"`)) {
		x.noteEnd(b, k)
	}
	return k
}

// noteEnd notes an end record's recorded cause, or a line's "dropped".
func (x *Index) noteEnd(b []byte, k RecordKind) {
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
