package replay

import (
	"slices"
	"strings"
	"unicode"

	"github.com/agentstop/agentstop/termination"
)

// EvidenceEvent describes one event of a result's Evidence for people
// (agentstop replay -format table; [WithEvidence] hands them out): its
// kind, tool and the start of its text, so that a reader sees what made
// the cause without opening the log.
type EvidenceEvent struct {
	At   int              // the event's 1-based index, as in Evidence
	Kind termination.Kind // the event's kind
	Tool string           // the tool of a tool_call or tool_result, "" for other kinds
	// Text is the first 60 characters of the event's text (of
	// its error when it has no text: a failed tool_result, an error
	// event), white space folded to single spaces, cut on a character
	// boundary. Cut says that the text went on. A log recorded without
	// content (text_hash) has none.
	Text string
	Cut  bool
}

// evidenceTextLen is how many characters (runes) of an event's text an
// EvidenceEvent keeps.
const evidenceTextLen = 60

// WithEvidence makes a replay describe the events of each result's
// Evidence (their kind, tool and the start of their text) and hand them
// to describe: once for each result the replay returns, with that result
// and its events in Evidence's order (nil when it has no evidence),
// before the replay returns it, in the order the results are returned.
// The events are the caller's to keep; they are not part of the result
// or of its JSON form. They are noted as they are read: each live run
// keeps the notes of the events its conditions still hold in their
// windows (the indices its evidence can name), so memory stays bounded by
// the policy's windows, never by the log. The default is to keep none; a
// nil describe is ignored.
func WithEvidence(describe func(res termination.Result, events []EvidenceEvent)) Option {
	if describe == nil {
		return nil
	}
	return evidenceOption(describe)
}

type evidenceOption func(termination.Result, []EvidenceEvent)

func (o evidenceOption) apply(c *config) { c.describe = o }

// evidenceNotes keeps, for one run being replayed, the notes of the
// events its evidence may still name: the last event evaluated, and every
// event whose index a condition still holds (termination.Evaluator.HeldEvidence). Notes are added
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
func (n *evidenceNotes) note(e *termination.Evaluator, ev *termination.Event) {
	at := e.Progress().Events
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
func (n *evidenceNotes) prune(e *termination.Evaluator) {
	n.held = e.HeldEvidence(n.held[:0])
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
func noteOf(at int, ev *termination.Event) EvidenceEvent {
	x := EvidenceEvent{At: at, Kind: ev.Kind}
	if ev.Kind == termination.KindToolCall || ev.Kind == termination.KindToolResult {
		x.Tool = strings.Clone(ev.Tool)
	}
	text := ev.Text
	if strings.TrimSpace(text) == "" {
		text = ev.ErrorText()
	}
	x.Text, x.Cut = textStart(text, evidenceTextLen)
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
