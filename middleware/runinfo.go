package middleware

import (
	"fmt"

	"github.com/agentstop/agentstop/termination"
)

// RunInfo is what a run is known by ([Run.Info]): what a Participant
// records of it. The stage
// fills it; a caller of Start can set only the agent and conversation ids
// (WithAgentID, WithConversationID).
type RunInfo struct {
	// Stage is the stage's name (New).
	Stage string
	// Provider is the GenAI provider the stage's loop talks to
	// (WithProviderName; the span's gen_ai.provider.name); "" when not
	// given.
	Provider string
	// AgentID and ConversationID are the run's ids (WithAgentID,
	// WithConversationID); "" when not given.
	AgentID        string
	ConversationID string
	// RunID identifies the run (32 hex digits, 128 random bits; every
	// run has one, with or without a fleet).
	RunID string
	// ParentRunID is the id of the run's parent (§8: the run its context
	// descends from, WithParent, or a parent Propagator extracted); ""
	// for a run without one.
	ParentRunID string
	// CustomReasons is the stage's allow-list of custom termination_cause
	// values (WithCustomReasons): the only custom values a Recorder may
	// record as themselves; any other custom reason is recorded as
	// "custom". The recorder takes the tag from the typed cause
	// (termination.Tag with this list), never from a string a caller wrote
	// into the Result. Shared by every run of the stage: read only.
	CustomReasons []string
	// Policy names the stage's enforced policy, as an end record gives it
	// (§1): "sha256:" and the hex digest of its canonical JSON
	// (termination.Policy.Hash) for a stage whose conditions are one
	// policy (WithPolicy), or "code" for a stage whose conditions are Go
	// code (WithCondition, WithTreeLimits) or several policies.
	Policy string
}

// policyHash is RunInfo.Policy for the configuration: the one policy's
// hash, "code" otherwise (the empty stage's is the empty policy's).
func (c *config) policyHash() string {
	switch {
	case c.code || len(c.policies) > 1:
		return "code"
	case len(c.policies) == 1:
		return c.policies[0]
	}
	return termination.Policy{}.Hash()
}

// Allowed reports whether tag is in the stage's allow-list: the func to
// give termination.Tag.
func (i *RunInfo) Allowed(tag string) bool {
	for _, r := range i.CustomReasons {
		if r == tag {
			return true
		}
	}
	return false
}

// WithProviderName names the GenAI provider the stage's loop talks to
// ("openai", "anthropic", "gcp.gemini", … — the well-known values of the
// GenAI semantic conventions' gen_ai.provider.name), recorded on the run's
// span and the gen_ai.invoke_agent.duration metric. The conventions require
// it; it is left out when not given. It must be at most 64 bytes without
// spaces or control characters. Default: none.
func WithProviderName(name string) Option {
	return optionFunc(func(c *config) {
		if err := validProviderName(name); err != nil {
			c.errs = append(c.errs, fmt.Errorf("WithProviderName: %w", err))
			return
		}
		c.providerName = name
	})
}

func validProviderName(name string) error {
	if name == "" {
		return fmt.Errorf("empty name")
	}
	if len(name) > 64 {
		return fmt.Errorf("%q is longer than 64 bytes", name)
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("%q contains a space or control character", name)
		}
	}
	return nil
}
