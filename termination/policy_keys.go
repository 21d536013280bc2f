package termination

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The readers of the policy keys: each checks its value's type and shape
// and builds the condition; the condition validates ranges and
// combinations (see parsePolicyNode).

// readCountLimit reads max_iterations or max_tool_calls: a positive int,
// or {limit, pressure} (max_tool_calls also per_tool).
func readCountLimit(res Resource) func(string, *yaml.Node, *Policy) (Condition, error) {
	keys := []string{"limit", "pressure"}
	if res == ResourceToolCalls {
		keys = append(keys, "per_tool")
	}
	return func(p string, v *yaml.Node, _ *Policy) (Condition, error) {
		c := &countLimit{res: res}
		if v.Kind != yaml.MappingNode {
			if _, r := intOf(v); r == notInt {
				return nil, perr(p, v, "must be an int or a mapping (%s), got %s", strings.Join(keys, ", "), describe(v))
			}
			n, err := intValue(p, v) // a number out of range says so
			if err != nil {
				return nil, err
			}
			c.limit = given(n)
			return c, nil
		}
		c.long = true
		err := mapping(p, v, keys, func(k, kp string, v *yaml.Node) error {
			switch k {
			case "limit":
				n, err := intValue(kp, v)
				c.limit = given(n)
				return err
			case "pressure":
				f, err := floatValue(kp, v)
				c.pressure = given(f)
				return err
			}
			c.perToolSet = true
			return entries(kp, v, func(tool, tp string, _, v *yaml.Node) error {
				n, err := intValue(tp, v)
				c.perTool = append(c.perTool, toolLimit{tool, n})
				return err
			})
		})
		c.sortPerTool()
		return c, err
	}
}

func readTimeout(p string, v *yaml.Node, _ *Policy) (Condition, error) {
	d, err := durationValue(p, v)
	if err != nil {
		return nil, err
	}
	return &timeoutAfter{limit: d}, nil
}

func readIdle(p string, v *yaml.Node, _ *Policy) (Condition, error) {
	d, err := durationValue(p, v)
	if err != nil {
		return nil, err
	}
	return &idleAfter{limit: d}, nil
}

// readPressure reads the pressure and grace keys of a budget.
func readPressure(b *budget, k, kp string, v *yaml.Node) error {
	if k == "pressure" {
		f, err := floatValue(kp, v)
		b.threshold = given(f)
		return err
	}
	n, err := intValue(kp, v)
	b.grace = &n
	return err
}

func readTokenBudget(p string, v *yaml.Node, _ *Policy) (Condition, error) {
	if err := budgetScalar(p, v, "total"); err != nil {
		return nil, err
	}
	b := &budget{name: "token_budget"}
	err := mapping(p, v, []string{"total", "input", "output", "pressure", "grace"}, func(k, kp string, v *yaml.Node) error {
		if k == "pressure" || k == "grace" {
			return readPressure(b, k, kp, v)
		}
		n, err := intValue(kp, v)
		res := map[string]Resource{"total": ResourceTotalTokens, "input": ResourceInputTokens, "output": ResourceOutputTokens}[k]
		b.limits = append(b.limits, resourceLimit{res, float64(n)})
		return err
	})
	slices.SortStableFunc(b.limits, func(a, b resourceLimit) int { return resourceRank(a.res) - resourceRank(b.res) })
	return b, err
}

// budgetScalar rejects a budget written as a bare amount (token_budget:
// 20000), naming the mapping it means ({total: 20000}): key is the
// amount's key.
func budgetScalar(p string, v *yaml.Node, key string) error {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" && v.Tag != "!!float" {
		return nil // the mapping's own error says what is wrong
	}
	return perr(p, v, "must be a mapping such as {%s: %s}, got %s", key, v.Value, describe(v))
}

func readCostBudget(p string, v *yaml.Node, _ *Policy) (Condition, error) {
	if err := budgetScalar(p, v, "limit"); err != nil {
		return nil, err
	}
	b := &budget{name: "cost_budget"}
	err := mapping(p, v, []string{"limit", "pressure", "grace"}, func(k, kp string, v *yaml.Node) error {
		if k != "limit" {
			return readPressure(b, k, kp, v)
		}
		f, err := floatValue(kp, v)
		b.limits = []resourceLimit{{ResourceCost, f}}
		return err
	})
	return b, err
}

func readStall(p string, v *yaml.Node, _ *Policy) (Condition, error) {
	c := &stall{}
	ints := map[string]*setting[int]{"repeats": &c.repeats, "window": &c.window, "warn_at": &c.warnAt, "cycle": &c.cycle}
	keys := []string{"repeats", "window", "warn_at", "cycle", "token_tolerance", "same_result", "any_args", "ignore_tools"}
	err := mapping(p, v, keys, func(k, kp string, v *yaml.Node) error {
		switch k {
		case "any_args":
			b, err := boolValue(kp, v)
			c.anyArgs = b
			return err
		case "ignore_tools":
			names, err := nameList(kp, v)
			c.ignore, c.ignoreSet = names, true
			return err
		case "token_tolerance":
			f, err := floatValue(kp, v)
			c.tolerance = given(f)
			return err
		case "same_result":
			b, err := boolValue(kp, v)
			c.sameResult, c.sameResultSet = b, true
			return err
		}
		n, err := intValue(kp, v)
		*ints[k] = given(n)
		return err
	})
	return c, err
}

func readErrors(p string, v *yaml.Node, _ *Policy) (Condition, error) {
	c := &errorLimit{}
	err := mapping(p, v, []string{"consecutive", "total", "ignore_tools"}, func(k, kp string, v *yaml.Node) error {
		if k == "ignore_tools" {
			names, err := nameList(kp, v)
			c.ignore, c.ignoreSet = names, true
			return err
		}
		n, err := intValue(kp, v)
		if k == "consecutive" {
			c.consecutive = given(n)
		} else {
			c.total = given(n)
		}
		return err
	})
	return c, err
}

func readTextMention(p string, v *yaml.Node, _ *Policy) (Condition, error) {
	c := &textMention{}
	err := mapping(p, v, []string{"text", "sources"}, func(k, kp string, v *yaml.Node) error {
		var err error
		if k == "text" {
			c.text, err = stringValue(kp, v)
			c.textSet = true
			return err
		}
		c.sources, err = nameList(kp, v)
		return err
	})
	return c, err
}

// readNames reads function_call, handoff or source_match: a name or a
// list of names.
func readNames(key string) func(string, *yaml.Node, *Policy) (Condition, error) {
	return func(p string, v *yaml.Node, _ *Policy) (Condition, error) {
		names, err := nameList(p, v)
		if err != nil {
			return nil, err
		}
		switch key {
		case "function_call":
			return &functionCall{nameMatch{key: key, names: names}}, nil
		case "handoff":
			return &handoff{nameMatch{key: key, names: names, any: true}}, nil
		}
		return &sourceMatch{nameMatch{key: key, names: names}}, nil
	}
}

func readStopMessage(p string, v *yaml.Node, _ *Policy) (Condition, error) {
	b, err := boolValue(p, v)
	if err != nil || !b {
		return nil, err
	}
	return &stopMessage{}, nil
}

// readCombinator reads any: or all:, a non-empty list of policies.
func readCombinator(key, p string, v *yaml.Node, pol *Policy) (Condition, error) {
	{
		if v.Kind != yaml.SequenceNode {
			return nil, perr(p, v, "must be a list of policies, got %s", describe(v))
		}
		if len(v.Content) == 0 {
			return nil, perr(p, v, "must not be empty")
		}
		children := make([]Condition, len(v.Content))
		for i, item := range v.Content {
			ip := fmt.Sprintf("%s[%d]", p, i)
			if key == "all" && item.Kind == yaml.MappingNode && len(item.Content) == 0 {
				// An empty policy never fires, so the all: could never fire.
				return nil, perr(ip, item, "an empty policy never fires, so all: could not")
			}
			c, err := parsePolicyNode(ip, item, pol)
			if err != nil {
				return nil, err
			}
			children[i] = c
		}
		if key == "any" {
			return AnyOf(children...), nil
		}
		return AllOf(children...), nil
	}
}
