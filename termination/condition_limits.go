package termination

// The limit structs (IterationLimits, ToolCallLimits, TokenLimits,
// CostLimit, StallLimits, ErrorLimits) are Conditions: each stands for the
// condition its doc describes, which is built from it where a condition
// enters (AnyOf, AllOf, NewEvaluator, TreeLimits; see lower).

// limitStruct is a limit struct: it builds the condition it stands for.
type limitStruct interface{ condition() Condition }

// lower returns the condition a limit struct stands for, and c itself for
// any other condition (nil included).
func lower(c Condition) Condition {
	if l, ok := c.(limitStruct); ok {
		return l.condition()
	}
	return c
}

// lowerAll returns a copy of cs with every limit struct lowered.
func lowerAll(cs []Condition) []Condition {
	if cs == nil {
		return nil
	}
	out := make([]Condition, len(cs))
	for i, c := range cs {
		out[i] = lower(c)
	}
	return out
}

// String describes the limit in the policy file's terms.
func (l IterationLimits) String() string { return l.condition().String() }

// Validate reports the first bad setting, in the policy file's terms.
func (l IterationLimits) Validate() error { return l.condition().Validate() }

// start makes the run's check of the limit given as a Go value: the limit
// and its check in one allocation, as many as a limit built once (a
// policy's) takes per run.
func (l IterationLimits) start() check {
	o := &ownedCount{lim: l.limit()}
	o.chk.countLimit = &o.lim
	return &o.chk
}

// ownedCount is the per-run state of an IterationLimits given as a Go
// value: its limit and the check that counts against it.
type ownedCount struct {
	lim countLimit
	chk countCheck
}

// String describes the limit in the policy file's terms.
func (l ToolCallLimits) String() string { return l.condition().String() }

// Validate reports the first bad setting, in the policy file's terms.
func (l ToolCallLimits) Validate() error { return l.condition().Validate() }
func (l ToolCallLimits) start() check    { return l.condition().start() }

// String describes the budget in the policy file's terms.
func (l TokenLimits) String() string { return l.condition().String() }

// Validate reports the first bad setting, in the policy file's terms.
func (l TokenLimits) Validate() error { return l.condition().Validate() }
func (l TokenLimits) start() check    { return l.condition().start() }

// String describes the budget in the policy file's terms.
func (l CostLimit) String() string { return l.condition().String() }

// Validate reports the first bad setting, in the policy file's terms.
func (l CostLimit) Validate() error { return l.condition().Validate() }
func (l CostLimit) start() check    { return l.condition().start() }

// String describes the stall detection in the policy file's terms.
func (l StallLimits) String() string { return l.condition().String() }

// Validate reports the first bad setting, in the policy file's terms.
func (l StallLimits) Validate() error { return l.condition().Validate() }
func (l StallLimits) start() check    { return l.condition().start() }

// String describes the error threshold in the policy file's terms.
func (l ErrorLimits) String() string { return l.condition().String() }

// Validate reports the first bad setting, in the policy file's terms.
func (l ErrorLimits) Validate() error { return l.condition().Validate() }
func (l ErrorLimits) start() check    { return l.condition().start() }

// unset is the condition of a limit struct with nothing set (TimeLimits{},
// CompletionSignals{}): it never fires, and its Validate reports the
// struct's own error wherever it stands (alone, in a combinator, in tree
// limits), so that an unset limit is never silently dropped.
type unset struct {
	key string // the condition's name in errors and String
	err error  // what Validate reports
}

func (u *unset) String() string  { return u.key + ": {}" }
func (u *unset) Validate() error { return u.err }
func (u *unset) start() check    { return neverCheck{} }
