package eino

import "slices"

// Option configures [Forward], [Decode] and [NewHandler].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	finalAgents []string // nil: every agent's answer is final
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
