package termination

import (
	"fmt"
	"slices"
	"strings"
)

// ---- Completion conditions

// TextMention fires Completed{condition: text_mention} when an event other
// than input has text containing text (case-sensitive), optionally only
// from the given sources.
func TextMention(text string, sources ...string) Condition {
	return &textMention{text: text, textSet: true, sources: slices.Clone(sources)}
}

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
func (c *textMention) observe(ev *Event, _ *Progress, s *sink) {
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

// FunctionCall fires Completed{condition: function_call} on a successful
// tool_result of one of the named tools.
func FunctionCall(tools ...string) Condition {
	return &functionCall{nameMatch{key: "function_call", names: slices.Clone(tools)}}
}

type functionCall struct{ nameMatch }

func (c *functionCall) start() check { return c }
func (c *functionCall) observe(ev *Event, _ *Progress, s *sink) {
	if ev != nil && ev.Kind == KindToolResult && ev.Err == "" && c.match(ev.Tool) {
		s.fire(Completed{Condition: conditionFunctionCall, Detail: ev.Tool}, nil)
	}
}

// Handoff fires HandoffRequested on a handoff to one of the targets, or to
// any target when none is given.
func Handoff(targets ...string) Condition {
	return &handoff{nameMatch{key: "handoff", names: slices.Clone(targets), any: true}}
}

type handoff struct{ nameMatch }

func (c *handoff) start() check { return c }
func (c *handoff) observe(ev *Event, _ *Progress, s *sink) {
	if ev != nil && ev.Kind == KindHandoff && c.match(ev.Target) {
		s.fire(HandoffRequested{Target: ev.Target, Source: ev.Source}, nil)
	}
}

// SourceMatch fires Completed{condition: source_match} on a message or final
// event from one of the sources.
func SourceMatch(sources ...string) Condition {
	return &sourceMatch{nameMatch{key: "source_match", names: slices.Clone(sources)}}
}

type sourceMatch struct{ nameMatch }

func (c *sourceMatch) start() check { return c }
func (c *sourceMatch) observe(ev *Event, _ *Progress, s *sink) {
	if ev != nil && (ev.Kind == KindMessage || ev.Kind == KindFinal) && c.match(ev.Source) {
		s.fire(Completed{Condition: conditionSourceMatch, Detail: ev.Source}, nil)
	}
}

// StopMessage fires Completed{condition: stop_message} on a stop event.
func StopMessage() Condition { return &stopMessage{} }

type stopMessage struct{}

func (*stopMessage) String() string  { return "stop_message: true" }
func (*stopMessage) Validate() error { return nil }
func (c *stopMessage) start() check  { return c }
func (*stopMessage) observe(ev *Event, _ *Progress, s *sink) {
	if ev != nil && ev.Kind == KindStop {
		s.fire(Completed{Condition: conditionStopMessage, Detail: ev.Text}, nil)
	}
}

// ---- Go functions

// Predicate fires Completed{condition: predicate, detail: name} on an event
// for which fn returns true. A panic in fn fires Failed{reason: panic}
// instead of crashing the loop. fn runs while the run evaluates the event (a
// live stage holds the run's lock): it must be quick and must not call back
// into the run.
func Predicate(name string, fn func(Event) bool) Condition {
	return &funcCondition{name: name, pred: fn}
}

// CauseFunc fires whatever cause fn returns (a Custom cause, typically) for an
// event; nil (a typed nil such as a nil *Custom included) means nothing
// fired. fn sees the run's progress including the
// event. A panic in fn fires Failed{reason: panic}. Like Predicate's, fn
// must be quick and must not call back into the run.
func CauseFunc(name string, fn func(Event, Progress) Cause) Condition {
	return &funcCondition{name: name, fn: fn}
}

type funcCondition struct {
	name string
	pred func(Event) bool
	fn   func(Event, Progress) Cause
}

func (c *funcCondition) String() string { return fmt.Sprintf("predicate: %q", c.name) }
func (c *funcCondition) Validate() error {
	if c.name == "" {
		return badSetting("predicate", "", "empty name")
	}
	if c.pred == nil && c.fn == nil {
		return badSetting(fmt.Sprintf("predicate %q", c.name), "", "nil func")
	}
	return nil
}
func (c *funcCondition) start() check { return c }
func (c *funcCondition) observe(ev *Event, p *Progress, s *sink) {
	if ev == nil {
		return
	}
	if cause := c.call(ev, p); !nilCause(cause) {
		s.fire(cause, nil)
	}
}

func (c *funcCondition) call(ev *Event, p *Progress) (cause Cause) {
	defer func() {
		if r := recover(); r != nil {
			cause = Failed{Reason: FailPanic, Err: fmt.Sprintf("predicate %q panicked: %v", c.name, r)}
		}
	}()
	if c.pred != nil {
		if c.pred(*ev) {
			return Completed{Condition: conditionPredicate, Detail: c.name}
		}
		return nil
	}
	return c.fn(*ev, *p)
}
