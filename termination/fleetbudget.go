package termination

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/agentstop/agentstop/internal/label"
	"go.yaml.in/yaml/v3"
)

// FleetBudget is a budget shared by every run with the same key value, per
// window, across processes: the policy's top-level fleet_budget key
// (contract §7). A Policy only parses and validates it; a stage with a fleet
// (package fleet, middleware.WithFleet(f)) enforces it, and replay or a stage
// without a fleet ignores it.
//
//	fleet_budget:
//	  key: label:tenant   # or stage
//	  window: 1h          # fixed windows aligned to the Unix epoch, >= 1s
//	  total_tokens: 2000000
//	  cost: 50
//	  pressure: 0.8
//
// The zero value of a limit means "no limit on this resource"; at least one
// limit is set in a valid FleetBudget. FleetBudget is comparable: two runs
// share a budget only when their FleetBudgets are equal (==).
type FleetBudget struct {
	// Key is "stage" (runs of the same stage share it) or "label:NAME"
	// (runs with the same value of label NAME share it).
	Key string
	// Window is the length of the budget's fixed windows, aligned to the
	// Unix epoch; at least one second.
	Window       time.Duration
	TotalTokens  int64   // limit on input + output tokens; 0: none
	InputTokens  int64   // limit on input tokens; 0: none
	OutputTokens int64   // limit on output tokens; 0: none
	Cost         float64 // limit on cost; 0: none
	// Pressure is the fraction of a limit at which every sharing run gets a
	// BudgetPressure{scope: fleet} warning, in (0,1); 0: no warning.
	Pressure float64
}

// fleetKeyStage is FleetBudget.Key for a budget shared by a stage's runs.
const fleetKeyStage = "stage"

// fleetKeyLabel prefixes FleetBudget.Key for a budget keyed by a label.
const fleetKeyLabel = "label:"

// Label returns the label name of a "label:NAME" key, and false for the
// "stage" key.
func (b FleetBudget) Label() (string, bool) {
	name, ok := strings.CutPrefix(b.Key, fleetKeyLabel)
	return name, ok
}

// Validate reports whether b is well formed, with an error naming the field
// in the policy file's terms (fleet_budget.window, ...).
func (b FleetBudget) Validate() error {
	if err := b.validate(); err != nil {
		return fmt.Errorf("fleet_budget.%w", err)
	}
	return nil
}

// validate is Validate with the field name first and no prefix.
func (b FleetBudget) validate() error {
	switch name, isLabel := b.Label(); {
	case b.Key == fleetKeyStage:
	case isLabel && label.ValidName(name):
	case isLabel:
		return fmt.Errorf("key: label name %q must be snake_case (a-z, 0-9, _; starting with a letter)", name)
	default:
		return fmt.Errorf(`key: must be "stage" or "label:NAME", got %q`, b.Key)
	}
	if b.Window < time.Second {
		return fmt.Errorf("window: must be at least 1s, got %s", b.Window)
	}
	for _, l := range []struct {
		name string
		v    int64
	}{{"total_tokens", b.TotalTokens}, {"input_tokens", b.InputTokens}, {"output_tokens", b.OutputTokens}} {
		if l.v < 0 {
			return fmt.Errorf("%s: must be a positive int, got %d", l.name, l.v)
		}
	}
	if b.Cost < 0 || math.IsNaN(b.Cost) || math.IsInf(b.Cost, 0) {
		return fmt.Errorf("cost: must be > 0, got %g", b.Cost)
	}
	if b.TotalTokens == 0 && b.InputTokens == 0 && b.OutputTokens == 0 && b.Cost == 0 {
		return errors.New("needs at least one of total_tokens, input_tokens, output_tokens, cost")
	}
	if b.Pressure != 0 && !(b.Pressure > 0 && b.Pressure < 1) {
		return fmt.Errorf("pressure: must be in (0,1), got %g", b.Pressure)
	}
	return nil
}

// Mismatch returns "" when b and other describe the same shared budget, and
// otherwise a sentence naming the first field that differs, for the
// Failed{invalid_input} of a run whose policy disagrees with the budget
// stored by the first run.
func (b FleetBudget) Mismatch(other FleetBudget) string {
	diff := func(field string, mine, theirs any) string {
		return fmt.Sprintf("fleet_budget.%s is %v here but %v in the shared budget", field, mine, theirs)
	}
	switch {
	case b.Key != other.Key:
		return diff("key", b.Key, other.Key)
	case b.Window != other.Window:
		return diff("window", b.Window, other.Window)
	case b.TotalTokens != other.TotalTokens:
		return diff("total_tokens", b.TotalTokens, other.TotalTokens)
	case b.InputTokens != other.InputTokens:
		return diff("input_tokens", b.InputTokens, other.InputTokens)
	case b.OutputTokens != other.OutputTokens:
		return diff("output_tokens", b.OutputTokens, other.OutputTokens)
	case b.Cost != other.Cost:
		return diff("cost", b.Cost, other.Cost)
	case b.Pressure != other.Pressure:
		return diff("pressure", b.Pressure, other.Pressure)
	}
	return ""
}

// Limits returns the budget's limits as (resource, limit) pairs in the
// contract's resource order (total_tokens, input_tokens, output_tokens,
// cost), skipping resources without a limit.
func (b FleetBudget) Limits() []BudgetUsage {
	var out []BudgetUsage
	if b.TotalTokens > 0 {
		out = append(out, BudgetUsage{Resource: ResourceTotalTokens, Limit: float64(b.TotalTokens)})
	}
	if b.InputTokens > 0 {
		out = append(out, BudgetUsage{Resource: ResourceInputTokens, Limit: float64(b.InputTokens)})
	}
	if b.OutputTokens > 0 {
		out = append(out, BudgetUsage{Resource: ResourceOutputTokens, Limit: float64(b.OutputTokens)})
	}
	if b.Cost > 0 {
		out = append(out, BudgetUsage{Resource: ResourceCost, Limit: b.Cost})
	}
	return out
}

// String describes the budget in the policy file's terms.
func (b FleetBudget) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "fleet_budget(key=%s, window=%s", b.Key, b.Window)
	if b.TotalTokens > 0 {
		fmt.Fprintf(&sb, ", total_tokens=%d", b.TotalTokens)
	}
	if b.InputTokens > 0 {
		fmt.Fprintf(&sb, ", input_tokens=%d", b.InputTokens)
	}
	if b.OutputTokens > 0 {
		fmt.Fprintf(&sb, ", output_tokens=%d", b.OutputTokens)
	}
	if b.Cost > 0 {
		fmt.Fprintf(&sb, ", cost=%g", b.Cost)
	}
	if b.Pressure > 0 {
		fmt.Fprintf(&sb, ", pressure=%g", b.Pressure)
	}
	sb.WriteString(")")
	return sb.String()
}

type fleetBudgetJSON struct {
	Key          string  `json:"key"`
	Window       string  `json:"window"`
	TotalTokens  int64   `json:"total_tokens,omitempty"`
	InputTokens  int64   `json:"input_tokens,omitempty"`
	OutputTokens int64   `json:"output_tokens,omitempty"`
	Cost         float64 `json:"cost,omitempty"`
	Pressure     float64 `json:"pressure,omitempty"`
}

// MarshalJSON writes the policy file's form, the window as a Go duration
// string ("1h0m0s").
func (b FleetBudget) MarshalJSON() ([]byte, error) {
	return json.Marshal(fleetBudgetJSON{Key: b.Key, Window: b.Window.String(), TotalTokens: b.TotalTokens,
		InputTokens: b.InputTokens, OutputTokens: b.OutputTokens, Cost: b.Cost, Pressure: b.Pressure})
}

// UnmarshalJSON reads the form MarshalJSON writes and validates it.
func (b *FleetBudget) UnmarshalJSON(data []byte) error {
	var raw fleetBudgetJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	w, err := time.ParseDuration(raw.Window)
	if err != nil {
		return fmt.Errorf(`fleet_budget.window: must be a Go duration such as "1h", got %q`, raw.Window)
	}
	out := FleetBudget{Key: raw.Key, Window: w, TotalTokens: raw.TotalTokens, InputTokens: raw.InputTokens,
		OutputTokens: raw.OutputTokens, Cost: raw.Cost, Pressure: raw.Pressure}
	if err := out.Validate(); err != nil {
		return err
	}
	*b = out
	return nil
}

// FleetBudget returns the policy's top-level fleet_budget, or nil when it
// has none. The returned value is a copy.
func (p Policy) FleetBudget() *FleetBudget {
	if p.fleet == nil {
		return nil
	}
	b := *p.fleet
	return &b
}

// readFleetBudget reads the fleet_budget key's value at path into pol. It
// returns no condition: a fleet_budget is enforced by a stage's fleet, not
// by the Evaluator. The key is allowed only at the top level of a policy.
func readFleetBudget(path string, v *yaml.Node, pol *Policy) (Condition, error) {
	b, err := parseFleetBudget(path, v)
	if err != nil {
		return nil, err
	}
	pol.fleet = &b
	return nil, nil
}

func parseFleetBudget(p string, v *yaml.Node) (FleetBudget, error) {
	var b FleetBudget
	keys := []string{"key", "window", "total_tokens", "input_tokens", "output_tokens", "cost", "pressure"}
	err := mapping(p, v, keys, func(k, kp string, v *yaml.Node) error {
		switch k {
		case "key":
			s, err := stringValue(kp, v)
			if err != nil {
				return err
			}
			b.Key = s
		case "window":
			d, err := durationValue(kp, v)
			if err != nil {
				return err
			}
			b.Window = d
		case "total_tokens", "input_tokens", "output_tokens":
			i, err := intValue(kp, v)
			if err != nil {
				return err
			}
			if i <= 0 {
				return perr(kp, v, "must be a positive int, got %d", i)
			}
			switch k {
			case "total_tokens":
				b.TotalTokens = int64(i)
			case "input_tokens":
				b.InputTokens = int64(i)
			default:
				b.OutputTokens = int64(i)
			}
		case "cost":
			f, err := floatValue(kp, v)
			if err != nil {
				return err
			}
			if !(f > 0) || math.IsInf(f, 0) {
				return perr(kp, v, "must be > 0, got %g", f)
			}
			b.Cost = f
		case "pressure":
			f, err := floatValue(kp, v)
			if err != nil {
				return err
			}
			if !(f > 0 && f < 1) {
				return perr(kp, v, "must be in (0,1), got %g", f)
			}
			b.Pressure = f
		}
		return nil
	})
	if err != nil {
		return FleetBudget{}, err
	}
	if b.Key == "" {
		return FleetBudget{}, perr(p+".key", v, `is required ("stage" or "label:NAME")`)
	}
	if b.Window == 0 {
		return FleetBudget{}, perr(p+".window", v, `is required (a Go duration such as "1h")`)
	}
	if err := b.validate(); err != nil {
		// validate names the field first: "window: must be ...".
		field, msg, _ := strings.Cut(err.Error(), ": ")
		if strings.HasPrefix(field, "needs") {
			return FleetBudget{}, perr(p, v, "%s", err.Error())
		}
		return FleetBudget{}, perr(p+"."+field, v, "%s", msg)
	}
	return b, nil
}

// AddWarning records a warning that came from outside the event stream (a
// fleet's shared budget crossing its pressure threshold): it joins the
// run's warnings, in order, and WarningsSince reports it. A stopped
// Evaluator ignores it and reports false.
func (e *Evaluator) AddWarning(c Cause) bool {
	if e.cause != nil || nilCause(c) {
		return false
	}
	e.sink.warn(c)
	return true
}

// StopOnEvent ends the run with c as if it had fired on the last observed
// event (StoppedAt is that event, Fired is [c]), unless it has already
// stopped; it reports whether c became the cause. A fleet's shared budget
// exhausted by the run's own spending stops the run this way.
func (e *Evaluator) StopOnEvent(c Cause) bool {
	if !e.Stop(c) {
		return false
	}
	e.ending().stoppedAt = e.progress.Events
	if e.ending().stoppedAt > 0 {
		e.ending().evidence = []int{e.ending().stoppedAt} // the event that crossed the shared limit
	}
	return true
}
