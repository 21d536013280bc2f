package genkitstop

import (
	"github.com/firebase/genkit/go/ai"

	"github.com/agentstop/agentstop/termination"
)

// Option configures [Middleware], [Generate] and [GenerateStream]. An
// Option is also an ai.GenerateOption, so it goes among genkit's options
// in a call of Generate or GenerateStream (which take it out before they
// call genkit); given to genkit directly, it does nothing. A later option
// of the same kind replaces an earlier one.
type Option interface {
	ai.GenerateOption
	apply(*config)
}

type config struct {
	model  string // model of responses that do not name theirs
	source string // source of every event
}

// option is an Option: f configures agentstop, and the embedded
// ai.GenerateOption is genkit's no-op (a WithMiddleware with none), so
// that an Option is accepted, and ignored, wherever genkit takes options.
type option struct {
	ai.GenerateOption
	f func(*config)
}

func (o option) apply(c *config) { o.f(c) }

func newOption(f func(*config)) Option {
	return option{GenerateOption: ai.WithMiddleware(), f: f}
}

// WithModel names the model of the run's message and final events
// (contract §1 model). genkit does not tell a model middleware which model
// it calls (ai.ModelRequest and ai.ModelResponse have no model field), so
// give the name you give ai.WithModelName. A response that names the model
// that served it (the compat_oai plugin's Custom "model", e.g.
// "gpt-4o-2024-08-06") keeps that name. Default: empty (no model).
func WithModel(name string) Option {
	return newOption(func(c *config) { c.model = name })
}

// WithSource names the agent of the run's events (genkit's generation has
// no agent name). Default: empty.
func WithSource(name string) Option {
	return newOption(func(c *config) { c.source = name })
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// splitOptions takes the Options out of genkit's options, and the nil
// options (genkit would panic on them).
func splitOptions(opts []ai.GenerateOption) (config, []ai.GenerateOption) {
	var ours []Option
	rest := make([]ai.GenerateOption, 0, len(opts)+1)
	for _, o := range opts {
		if o == nil {
			continue
		}
		if ao, ok := o.(Option); ok {
			ours = append(ours, ao)
			continue
		}
		rest = append(rest, o)
	}
	return newConfig(ours), rest
}

// name fills in what c names and ev does not.
func (c *config) name(ev termination.Event) termination.Event {
	if ev.Source == "" {
		ev.Source = c.source
	}
	if ev.Model == "" && (ev.Kind == termination.KindMessage || ev.Kind == termination.KindFinal) {
		ev.Model = c.model
	}
	return ev
}

// responseModel is the model a response names, if any: the compat_oai
// plugin puts the served model in Custom (with the system fingerprint).
func responseModel(resp *ai.ModelResponse) string {
	if m, ok := resp.Custom.(map[string]any); ok {
		if s, ok := m["model"].(string); ok {
			return s
		}
	}
	return ""
}
