package middleware

// RunOption configures one run of a stage, given to [Stage.Start].
type RunOption interface{ applyRun(*runConfig) }

type runOptionFunc func(*runConfig)

func (f runOptionFunc) applyRun(c *runConfig) { f(c) }

// runConfig is what a run was started with.
type runConfig struct {
	runIdentity
	parent string // WithParent (lineage.go): used at the start only
}

// runIdentity is what a run keeps of its RunOptions.
type runIdentity struct {
	agentID        string
	conversationID string
	labels         map[string]string
}

// WithAgentID sets the run's agent id (the span's gen_ai.agent.id).
// Default: none.
func WithAgentID(id string) RunOption {
	return runOptionFunc(func(c *runConfig) { c.agentID = id })
}

// WithConversationID sets the run's conversation id (the span's
// gen_ai.conversation.id). Default: none.
func WithConversationID(id string) RunOption {
	return runOptionFunc(func(c *runConfig) { c.conversationID = id })
}

// WithLabels gives the run labels (e.g. tenant) that a fleet uses to select
// runs and key shared budgets. They never become metric attributes. Names
// must be snake_case, values at most 256 bytes. Several calls merge; a later
// value for a name wins. Default: none.
func WithLabels(labels map[string]string) RunOption {
	return runOptionFunc(func(c *runConfig) {
		if len(labels) == 0 {
			return
		}
		if c.labels == nil {
			c.labels = make(map[string]string, len(labels))
		}
		for k, v := range labels {
			c.labels[k] = v
		}
	})
}
