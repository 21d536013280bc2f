package eino

import "slices"

// Option configures [Forward], [Decode] and [NewHandler]. A later option
// of the same kind replaces an earlier one.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	finalAgents []string // nil: every agent's answer is final
	model       string   // model of responses the framework does not name
	source      string   // source of events that name no agent
}

func newConfig(opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	return c
}

// WithFinalAgents names the agents whose answers (a model response that
// requests no tool) are final events; the answers of every other agent are
// message events. Use it for workflows in which an answer does not end the
// loop — the writer and critic of a LoopAgent answer on every round, and a
// run of such answers must still count as iterations and be able to stall.
// Default: every agent's answer is final, which is right for a
// ChatModelAgent run alone or with transfers.
func WithFinalAgents(names ...string) Option {
	names = slices.Clone(names)
	if names == nil {
		names = []string{}
	}
	return optionFunc(func(c *config) { c.finalAgents = names })
}

func (c *config) isFinalAgent(name string) bool {
	return c.finalAgents == nil || slices.Contains(c.finalAgents, name)
}

// WithModel names the model of the message and final events that eino
// does not name it for (contract §1 model). eino's agent events carry no
// model (schema.Message and its ResponseMeta have no field for it), so
// with [Forward] and [Decode] every model response gets this name; a
// [Handler] reports the model its chat model callbacks name (their
// Config.Model) and uses this name only for a response whose callback
// names none. One name serves the whole run: give it for an agent, or
// agents, on one model. Default: empty (no model).
func WithModel(name string) Option {
	return optionFunc(func(c *config) { c.model = name })
}

// WithSource names the agent of a [Handler]'s events: eino's callbacks do
// not say which agent a model or tool call belongs to, so a Handler's
// events have no source without it, and [WithFinalAgents] then checks this
// name. [Forward] and [Decode] take each event's source from its
// AgentName, and use this name only for an agent event without one.
// Default: empty.
func WithSource(name string) Option {
	return optionFunc(func(c *config) { c.source = name })
}
