package termination

import (
	"slices"
	"strings"
	"unicode"
)

// EvidenceTextLen is how many characters (runes) of an event's text an
// [EvidenceEvent] keeps.
const EvidenceTextLen = 60

// EvidenceEvent describes one event of a [Result]'s Evidence for people
// (agentstop replay -format table): its kind, tool and the start of its
// text, so that a reader sees what made the cause without opening the log.
type EvidenceEvent struct {
	At   int    // the event's 1-based index, as in Evidence
	Kind Kind   // the event's kind
	Tool string // the tool of a tool_call or tool_result, "" for other kinds
	// Text is the first EvidenceTextLen characters of the event's text (of
	// its error when it has no text: a failed tool_result, an error
	// event), white space folded to single spaces, cut on a character
	// boundary. Cut says that the text went on. A log recorded without
	// content (text_hash) has none.
	Text string
	Cut  bool
}

// WithEvidenceEvents makes a replay describe the events of each result's
// Evidence in Result.EvidenceEvents (their kind, tool and the start of
// their text). The events are noted as they are read: each live run keeps
// the notes of the events its conditions still hold in their windows
// (the indices its evidence can name), so memory stays bounded by the
// policy's windows, never by the log. The default is to keep none.
func WithEvidenceEvents() ReplayOption { return evidenceOption{} }

type evidenceOption struct{}

func (evidenceOption) apply(c *replayConfig) { c.evidence = true }

// evidenceNotes keeps, for one run being replayed, the notes of the
// events its evidence may still name: the last event evaluated, and every
// event whose index a condition still holds (heldEvents). Notes are added
// for every event and pruned to those now and then, so the notes grow
// with the indices the conditions hold (at most their windows: a stall's
// window, an error streak or errors.total, a final or warning event of a
// limit) plus a constant, amortized over the events seen.
type evidenceNotes struct {
	notes   []EvidenceEvent // ascending At
	pruneAt int             // prune when notes grow past this
	held    []int           // scratch for prune
}

// minNotes is the fewest notes kept between two prunes.
const minNotes = 64

// note notes ev, the e's last evaluated event, if e evaluated it.
func (n *evidenceNotes) note(e *Evaluator, ev *Event) {
	at := e.progress.Events
	if at == 0 || (len(n.notes) > 0 && n.notes[len(n.notes)-1].At == at) {
		return // not evaluated (a timeout fired before it), or noted
	}
	n.notes = append(n.notes, noteOf(at, ev))
	if len(n.notes) > max(n.pruneAt, minNotes) {
		n.prune(e)
	}
}

// prune drops the notes of the events that no evidence of e can name any
// more.
func (n *evidenceNotes) prune(e *Evaluator) {
	n.held = n.held[:0]
	heldEvents(e.root, func(at int) { n.held = append(n.held, at) })
	slices.Sort(n.held)
	last := n.notes[len(n.notes)-1].At
	kept := n.notes[:0]
	for _, x := range n.notes {
		if _, ok := slices.BinarySearch(n.held, x.At); ok || x.At == last {
			kept = append(kept, x)
		}
	}
	clear(n.notes[len(kept):])
	n.notes = kept
	n.pruneAt = 2 * len(kept)
}

// describe returns the notes of the events of evidence, in its order; an
// index with no note (not reached: every index evidence names is held)
// gets its index alone.
func (n *evidenceNotes) describe(evidence []int) []EvidenceEvent {
	if len(evidence) == 0 {
		return nil
	}
	out := make([]EvidenceEvent, 0, len(evidence))
	for _, at := range evidence {
		i, ok := slices.BinarySearchFunc(n.notes, at, func(x EvidenceEvent, at int) int { return x.At - at })
		if ok {
			out = append(out, n.notes[i])
		} else {
			out = append(out, EvidenceEvent{At: at})
		}
	}
	return out
}

// noteOf describes ev, the at-th event. The strings are copies, so that a
// note never holds the event's whole text.
func noteOf(at int, ev *Event) EvidenceEvent {
	x := EvidenceEvent{At: at, Kind: ev.Kind}
	if ev.Kind == KindToolCall || ev.Kind == KindToolResult {
		x.Tool = strings.Clone(ev.Tool)
	}
	text := ev.Text
	if strings.TrimSpace(text) == "" {
		text = ev.ErrorText()
	}
	x.Text, x.Cut = textStart(text, EvidenceTextLen)
	return x
}

// textStart returns the first n runes of s with white space folded to
// single spaces (leading and trailing white space dropped), and whether s
// went on after them.
func textStart(s string, n int) (string, bool) {
	var b strings.Builder
	runes, space := 0, false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = runes > 0
			continue
		}
		need := 1
		if space {
			need = 2
		}
		if runes+need > n {
			return b.String(), true
		}
		if space {
			b.WriteByte(' ')
			runes, space = runes+1, false
		}
		b.WriteRune(r) // an invalid byte becomes U+FFFD, as printed
		runes++
	}
	return b.String(), false
}

// indexHolder is implemented by the checks that keep event indices for
// their evidence (see witness): heldEvents calls f with each of them.
type indexHolder interface{ heldEvents(f func(at int)) }

// heldEvents calls f with every event index c keeps for its evidence.
func heldEvents(c check, f func(at int)) {
	if h, ok := c.(indexHolder); ok {
		h.heldEvents(f)
	}
}

func (a *anyCheck) heldEvents(f func(int)) {
	for _, ch := range a.children {
		heldEvents(ch, f)
	}
}

func (a *allCheck) heldEvents(f func(int)) {
	for _, at := range a.proof {
		f(at)
	}
	for _, ch := range a.children {
		heldEvents(ch, f)
	}
}

func (c *stallCheck) heldEvents(f func(int)) {
	for _, r := range [...]*ring[keyAt]{&c.calls, &c.msgs, &c.results} {
		for _, k := range r.buf {
			f(k.at)
		}
	}
	for _, t := range c.tokens.buf {
		f(t.at)
	}
}

func (c *errorCheck) heldEvents(f func(int)) {
	for _, r := range [...]*ring[int]{&c.resultIdx, &c.errorIdx, &c.allIdx} {
		for _, at := range r.buf {
			f(at)
		}
	}
}

func (c *countCheck) heldEvents(f func(int)) { f(c.finalAt) }

func (b *budgetCheck) heldEvents(f func(int)) {
	f(b.warnedAt)
	for _, st := range b.state {
		f(st.finalAt)
		f(st.finalWarnAt)
	}
}
