package termination

import "slices"

// Dispatch by event kind: an AnyOf calls each child only for the kinds of
// events the child acts on, so that an event costs an interface call only
// to the conditions that can care about it (a max_iterations limit never
// sees a tool_result). A check that does not implement kindFiltered is
// called for everything.

// kindSet is a set of event kinds: bit k for Kind k, bit 0 for a clock
// tick (a live timeout timer, no event).
type kindSet uint16

const (
	tickKind  kindSet = 1
	allEvents kindSet = (1<<(KindFinal+1) - 1) &^ tickKind
	allKinds          = allEvents | tickKind
)

func kinds(ks ...Kind) kindSet {
	var s kindSet
	for _, k := range ks {
		s |= 1 << k
	}
	return s
}

// kindFiltered is implemented by the checks that act on some kinds of
// events only: for any other event, and for a clock tick unless tickKind
// is in the set, their observe does nothing at all (no state changes), so
// it need not be called.
type kindFiltered interface{ kinds() kindSet }

// textFiltered is implemented by the checks that act only on events whose
// text is at least minText bytes long (0: any): for any other event their
// observe does nothing at all, so it need not be called.
type textFiltered interface{ minText() int }

// minText of a text_mention: a shorter text cannot contain its text.
func (c *textMention) minText() int { return len(c.text) }

// checkKinds is the set of kinds c acts on.
func checkKinds(c check) kindSet {
	if f, ok := c.(kindFiltered); ok {
		return f.kinds()
	}
	return allKinds
}

var (
	iterationKinds = kinds(KindMessage)
	toolCallKinds  = kinds(KindToolCall)
)

func (s statelessCount) kinds() kindSet { return s.countLimit.countedKinds() }
func (c *countCheck) kinds() kindSet {
	if c.res == ResourceIterations {
		return iterationKinds | kinds(KindFinal) // a final is noted for the evidence
	}
	return c.countLimit.countedKinds()
}
func (*timeoutAfter) kinds() kindSet { return tickKind }
func (*idleAfter) kinds() kindSet    { return tickKind }

// countedKinds is the kind counted() accepts.
func (c *countLimit) countedKinds() kindSet {
	if c.res == ResourceIterations {
		return iterationKinds
	}
	return toolCallKinds
}

func (*budgetCheck) kinds() kindSet { return allEvents }

// kinds of a stall check: every tool call (the cycle's and repeats'
// window), the model turns for repeats (messages, token plateau), and
// tool results for same_result only.
func (c *stallCheck) kinds() kindSet {
	ks := kinds(KindToolCall)
	if c.repeats.set {
		ks |= kinds(KindMessage, KindFinal)
		if c.sameResult {
			ks |= kinds(KindToolResult)
		}
	}
	return ks
}
func (*errorCheck) kinds() kindSet {
	return kinds(KindToolResult, KindError, KindMessage, KindFinal)
}
func (*textMention) kinds() kindSet   { return allEvents &^ kinds(KindInput) }
func (*functionCall) kinds() kindSet  { return kinds(KindToolResult) }
func (*handoff) kinds() kindSet       { return kinds(KindHandoff) }
func (*sourceMatch) kinds() kindSet   { return kinds(KindMessage, KindFinal) }
func (*stopMessage) kinds() kindSet   { return kinds(KindStop) }
func (*funcCondition) kinds() kindSet { return allEvents }
func (neverCheck) kinds() kindSet     { return 0 }

func (a *anyCheck) kinds() kindSet { return unionKinds(a.children) }
func (a *allCheck) kinds() kindSet { return unionKinds(a.children) }

func unionKinds(children []check) kindSet {
	var ks kindSet
	for _, ch := range children {
		ks |= checkKinds(ch)
	}
	return ks
}

// usesCallKey reports whether a stall check is in c: only then is a tool
// call's key (its tool and canonical args) computed.
func usesCallKey(c check) bool {
	switch c := c.(type) {
	case *stallCheck:
		return true
	case *anyCheck:
		return slices.ContainsFunc(c.children, usesCallKey)
	case *allCheck:
		return slices.ContainsFunc(c.children, usesCallKey)
	}
	return false
}
