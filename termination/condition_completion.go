package termination

import (
	"fmt"
	"slices"
	"strings"
)

// ---- Completion conditions

// CompletionSignals are the signs that a run is done (§3), the policy
// file's text_mention, function_call, handoff, source_match and
// stop_message keys as one Go value. Each field set is a condition; the
// run stops when any of them fires, as in a flat policy. At least one is
// set. A list that is not nil but empty is an error, as an empty list is
// in a policy file.
//
//	termination.CompletionSignals{TextMention: "TERMINATE", TextSources: []string{"critic"}, Handoff: []string{"user"}}
type CompletionSignals struct {
	// TextMention fires Completed{condition: text_mention} when an event
	// other than input has text containing it (case-sensitive), from one
	// of TextSources when any are given.
	TextMention string
	TextSources []string
	// FunctionCall fires Completed{condition: function_call} on a
	// successful tool_result of one of these tools.
	FunctionCall []string
	// Handoff fires HandoffRequested on a handoff to one of these
	// targets; AnyHandoff on a handoff to any target (a policy file
	// cannot say this).
	Handoff    []string
	AnyHandoff bool
	// SourceMatch fires Completed{condition: source_match} on a message
	// or final event from one of these sources.
	SourceMatch []string
	// StopMessage fires Completed{condition: stop_message} on a stop
	// event.
	StopMessage bool
}

func (l CompletionSignals) condition() Condition {
	var out anyOf
	if l.TextMention != "" || l.TextSources != nil {
		out = append(out, &textMention{text: l.TextMention, textSet: l.TextMention != "", sources: slices.Clone(l.TextSources)})
	}
	if l.FunctionCall != nil {
		out = append(out, &functionCall{nameMatch{key: "function_call", names: slices.Clone(l.FunctionCall)}})
	}
	if l.Handoff != nil || l.AnyHandoff {
		out = append(out, &handoff{nameMatch{key: "handoff", names: slices.Clone(l.Handoff), any: l.AnyHandoff}})
	}
	if l.SourceMatch != nil {
		out = append(out, &sourceMatch{nameMatch{key: "source_match", names: slices.Clone(l.SourceMatch)}})
	}
	if l.StopMessage {
		out = append(out, &stopMessage{})
	}
	switch len(out) {
	case 0:
		return &unset{key: "completion signals", err: badSetting("completion signals", "",
			"needs at least one of TextMention, FunctionCall, Handoff, AnyHandoff, SourceMatch, StopMessage")}
	case 1:
		return out[0]
	}
	return out
}

// String describes the signals in the policy file's terms.
func (l CompletionSignals) String() string { return l.condition().String() }

// Validate reports a bad field, or none set.
func (l CompletionSignals) Validate() error {
	switch {
	case l.AnyHandoff && l.Handoff != nil:
		return badSetting("handoff", "", "AnyHandoff watches every target: leave Handoff out")
	case l.TextSources != nil && len(l.TextSources) == 0:
		return badSetting("text_mention", "sources", "needs at least one name")
	}
	cond := l.condition()
	signals, ok := cond.(anyOf)
	if !ok {
		return cond.Validate() // one signal, or none
	}
	for _, c := range signals {
		if err := c.Validate(); err != nil {
			return err
		}
	}
	return nil
}
func (l CompletionSignals) start() check { return l.condition().start() }

type textMention struct {
	text    string
	textSet bool // a policy may leave text out
	sources []string
}

func (c *textMention) String() string {
	if len(c.sources) == 0 {
		return fmt.Sprintf("text_mention: {text: %q}", c.text)
	}
	return fmt.Sprintf("text_mention: {text: %q, sources: %q}", c.text, c.sources)
}

func (c *textMention) Validate() error {
	switch {
	case !c.textSet:
		return badSetting("text_mention", "text", "is required")
	case c.text == "":
		return badSetting("text_mention", "text", "must not be empty")
	}
	return validNames("text_mention", "sources", c.sources, true)
}

func (c *textMention) start() check { return c }
func (c *textMention) observe(ev *Event, _ *progress, s *sink) {
	// A hashed text (a log recorded without content) cannot mention anything.
	// (A text shorter than c.text, most tool calls and results, is not
	// searched.)
	if ev == nil || ev.Kind == KindInput || len(ev.Text) < len(c.text) || ev.textHash() != "" || !strings.Contains(ev.Text, c.text) {
		return
	}
	if len(c.sources) > 0 && !slices.Contains(c.sources, ev.Source) {
		return
	}
	s.fire(Completed{Condition: conditionTextMention, Detail: c.text}, nil)
}

// nameMatch is FunctionCall, Handoff and SourceMatch: an event kind and a
// field matched against a list of names.
type nameMatch struct {
	key   string // policy key
	names []string
	any   bool // an empty list matches every name
}

func (c *nameMatch) String() string  { return fmt.Sprintf("%s: %q", c.key, c.names) }
func (c *nameMatch) Validate() error { return validNames(c.key, "", c.names, c.any) }
func (c *nameMatch) match(name string) bool {
	return (c.any && len(c.names) == 0) || slices.Contains(c.names, name)
}

type functionCall struct{ nameMatch }

func (c *functionCall) start() check { return c }
func (c *functionCall) observe(ev *Event, _ *progress, s *sink) {
	if ev != nil && ev.Kind == KindToolResult && ev.Err == "" && c.match(ev.Tool) {
		s.fire(Completed{Condition: conditionFunctionCall, Detail: ev.Tool}, nil)
	}
}

type handoff struct{ nameMatch }

func (c *handoff) start() check { return c }
func (c *handoff) observe(ev *Event, _ *progress, s *sink) {
	if ev != nil && ev.Kind == KindHandoff && c.match(ev.Target) {
		s.fire(HandoffRequested{Target: ev.Target, Source: ev.Source}, nil)
	}
}

type sourceMatch struct{ nameMatch }

func (c *sourceMatch) start() check { return c }
func (c *sourceMatch) observe(ev *Event, _ *progress, s *sink) {
	if ev != nil && (ev.Kind == KindMessage || ev.Kind == KindFinal) && c.match(ev.Source) {
		s.fire(Completed{Condition: conditionSourceMatch, Detail: ev.Source}, nil)
	}
}

type stopMessage struct{}

func (*stopMessage) String() string  { return "stop_message: true" }
func (*stopMessage) Validate() error { return nil }
func (c *stopMessage) start() check  { return c }
func (*stopMessage) observe(ev *Event, _ *progress, s *sink) {
	if ev != nil && ev.Kind == KindStop {
		s.fire(Completed{Condition: conditionStopMessage, Detail: ev.Text}, nil)
	}
}

// ---- Go functions

// CauseFunc fires whatever cause fn returns for an event: a Custom cause
// typically, or Completed{Condition: "predicate", Detail: name} for a
// predicate that says the run is done (§2); nil (a typed nil such as a nil
// *Custom included) means nothing fired. fn sees what the run spent,
// the event included. A panic in fn fires Failed{reason: panic} instead
// of crashing the loop. fn runs while the run evaluates the event (a live
// stage holds the run's lock): it must be quick and must not call back
// into the run.
func CauseFunc(name string, fn func(Event, Totals) Cause) Condition {
	return &funcCondition{name: name, fn: fn}
}

type funcCondition struct {
	name string
	fn   func(Event, Totals) Cause
}

func (c *funcCondition) String() string { return fmt.Sprintf("predicate: %q", c.name) }
func (c *funcCondition) Validate() error {
	if c.name == "" {
		return badSetting("predicate", "", "empty name")
	}
	if c.fn == nil {
		return badSetting(fmt.Sprintf("predicate %q", c.name), "", "nil func")
	}
	return nil
}
func (c *funcCondition) start() check { return c }
func (c *funcCondition) observe(ev *Event, p *progress, s *sink) {
	if ev == nil {
		return
	}
	if cause := c.call(ev, p); !nilCause(cause) {
		s.fire(cause, nil)
	}
}

func (c *funcCondition) call(ev *Event, p *progress) (cause Cause) {
	defer func() {
		if r := recover(); r != nil {
			cause = Failed{Reason: FailPanic, Err: fmt.Sprintf("predicate %q panicked: %v", c.name, r)}
		}
	}()
	return c.fn(*ev, p.Totals)
}
