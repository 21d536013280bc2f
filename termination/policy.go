package termination

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Policy is a set of termination conditions read from YAML or JSON (JSON is
// YAML). A flat policy stops when any of its conditions fires; "any" and
// "all" take lists of policies and nest. The zero Policy never fires.
type Policy struct {
	cond  Condition
	fleet *FleetBudget // the top-level fleet_budget, if any (fleetbudget.go)
}

// PolicyError is an invalid policy: Path names the key
// ("policy.token_budget.pressure"), Msg what is wrong with it.
type PolicyError struct {
	Path string
	Line int // 1-based line of the offending node, 0 when unknown
	Msg  string
}

func (e *PolicyError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s: %s (line %d)", e.Path, e.Msg, e.Line)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// ParsePolicy reads a policy. It is strict: unknown keys, wrong types and
// out-of-range values are a *PolicyError naming the key path, because a typo
// must never silently disable a guard. Empty input is the empty policy.
func ParsePolicy(data []byte) (Policy, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return Policy{}, &PolicyError{Path: "policy", Msg: "not valid YAML or JSON: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	// A second document would be silently ignored: its guards disabled.
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return Policy{}, &PolicyError{Path: "policy", Msg: "not valid YAML or JSON: " + strings.TrimPrefix(err.Error(), "yaml: ")}
		}
		return Policy{}, &PolicyError{Path: "policy", Line: extra.Line, Msg: "more than one YAML document; put every condition in one"}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return Policy{cond: AnyOf()}, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return Policy{cond: AnyOf()}, nil
	}
	c, err := parsePolicyNode("policy", root)
	if err != nil {
		return Policy{}, err
	}
	return Policy{cond: c, fleet: fleetBudgetOf(root)}, nil
}

// LoadPolicy reads and parses the policy file at path; errors name the file.
func LoadPolicy(path string) (Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Policy{}, err
	}
	p, err := ParsePolicy(data)
	if err != nil {
		return Policy{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// MustParsePolicy is ParsePolicy that panics on error, for policies fixed at
// compile time.
func MustParsePolicy(data string) Policy {
	p, err := ParsePolicy([]byte(data))
	if err != nil {
		panic(err)
	}
	return p
}

// Condition returns the policy as a Condition.
func (p Policy) Condition() Condition {
	if p.cond == nil {
		return AnyOf()
	}
	return p.cond
}

// String describes the policy.
func (p Policy) String() string { return p.Condition().String() }

// policyKeys are the keys a policy mapping may hold, for error messages.
var policyKeys = []string{"max_iterations", "max_tool_calls", "timeout", "token_budget", "cost_budget",
	"stall", "errors", "text_mention", "function_call", "handoff", "source_match", "stop_message", "any", "all", "fleet_budget"}

func perr(path string, n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &PolicyError{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// mapping iterates a mapping node's keys, rejecting duplicates and keys not
// in allowed.
func mapping(path string, n *yaml.Node, allowed []string, f func(key, path string, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return perr(path, n, "must be a mapping, got %s", describe(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return perr(path, k, "keys must be strings")
		}
		key := k.Value
		kp := path + "." + key
		if !contains(allowed, key) {
			msg := "unknown key"
			if s := suggest(key, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			return perr(kp, k, "%s", msg)
		}
		if seen[key] {
			return perr(kp, k, "duplicate key")
		}
		seen[key] = true
		if err := f(key, kp, v); err != nil {
			return err
		}
	}
	return nil
}

func parsePolicyNode(path string, n *yaml.Node) (Condition, error) {
	var conds []Condition
	add := func(c Condition, p string, n *yaml.Node) error {
		if err := c.validate(); err != nil {
			// The condition names its own key; report the caller's path.
			msg := err.Error()
			if i := strings.Index(msg, ": "); i >= 0 {
				msg = msg[i+2:]
			}
			return perr(p, n, "%s", msg)
		}
		conds = append(conds, c)
		return nil
	}
	err := mapping(path, n, policyKeys, func(key, p string, v *yaml.Node) error {
		switch key {
		case "max_iterations", "max_tool_calls":
			i, err := intValue(p, v)
			if err != nil {
				return err
			}
			if i <= 0 {
				return perr(p, v, "must be a positive int, got %d", i)
			}
			if key == "max_iterations" {
				conds = append(conds, MaxIterations(i))
			} else {
				conds = append(conds, MaxToolCalls(i))
			}
		case "timeout":
			d, err := durationValue(p, v)
			if err != nil {
				return err
			}
			return add(TimeoutAfter(d), p, v)
		case "token_budget":
			return parseTokenBudget(p, v, &conds)
		case "cost_budget":
			return parseCostBudget(p, v, &conds)
		case "stall":
			var l StallLimits
			if err := mapping(p, v, []string{"repeats", "token_tolerance"}, func(k, kp string, v *yaml.Node) error {
				if k == "repeats" {
					i, err := intValue(kp, v)
					if err != nil {
						return err
					}
					if i < 2 {
						return perr(kp, v, "must be an int >= 2, got %d", i)
					}
					l.Repeats = i
					return nil
				}
				f, err := floatValue(kp, v)
				if err != nil {
					return err
				}
				if !(f >= 0 && f < 1) {
					return perr(kp, v, "must be in [0,1), got %g", f)
				}
				l.TokenTolerance = f
				return nil
			}); err != nil {
				return err
			}
			if l.Repeats == 0 {
				return perr(p+".repeats", v, "is required")
			}
			conds = append(conds, Stall(l))
		case "errors":
			var l ErrorLimits
			if err := mapping(p, v, []string{"consecutive", "total"}, func(k, kp string, v *yaml.Node) error {
				i, err := intValue(kp, v)
				if err != nil {
					return err
				}
				if i <= 0 {
					return perr(kp, v, "must be a positive int, got %d", i)
				}
				if k == "consecutive" {
					l.Consecutive = i
				} else {
					l.Total = i
				}
				return nil
			}); err != nil {
				return err
			}
			if l.Consecutive == 0 && l.Total == 0 {
				return perr(p, v, "needs consecutive or total")
			}
			conds = append(conds, Errors(l))
		case "text_mention":
			var text string
			var sources []string
			hasText := false
			if err := mapping(p, v, []string{"text", "sources"}, func(k, kp string, v *yaml.Node) error {
				if k == "text" {
					s, err := stringValue(kp, v)
					if err != nil {
						return err
					}
					if s == "" {
						return perr(kp, v, "must not be empty")
					}
					text, hasText = s, true
					return nil
				}
				var err error
				sources, err = nameList(kp, v)
				return err
			}); err != nil {
				return err
			}
			if !hasText {
				return perr(p+".text", v, "is required")
			}
			conds = append(conds, TextMention(text, sources...))
		case "function_call", "handoff", "source_match":
			names, err := nameList(p, v)
			if err != nil {
				return err
			}
			switch key {
			case "function_call":
				conds = append(conds, FunctionCall(names...))
			case "handoff":
				conds = append(conds, Handoff(names...))
			default:
				conds = append(conds, SourceMatch(names...))
			}
		case "stop_message":
			b, err := boolValue(p, v)
			if err != nil {
				return err
			}
			if b {
				conds = append(conds, StopMessage())
			}
		case "fleet_budget":
			return parseFleetBudgetKey(p, v)
		case "any", "all":
			if v.Kind != yaml.SequenceNode {
				return perr(p, v, "must be a list of policies, got %s", describe(v))
			}
			if len(v.Content) == 0 {
				return perr(p, v, "must not be empty")
			}
			children := make([]Condition, len(v.Content))
			for i, item := range v.Content {
				ip := fmt.Sprintf("%s[%d]", p, i)
				if key == "all" && item.Kind == yaml.MappingNode && len(item.Content) == 0 {
					// An empty policy never fires, so the all: could never fire.
					return perr(ip, item, "an empty policy never fires, so all: could not")
				}
				c, err := parsePolicyNode(ip, item)
				if err != nil {
					return err
				}
				children[i] = c
			}
			if key == "any" {
				conds = append(conds, AnyOf(children...))
			} else {
				conds = append(conds, AllOf(children...))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(conds) == 1 {
		return conds[0], nil
	}
	return AnyOf(conds...), nil
}

func parsePressure(p string, v *yaml.Node, k, kp string, pr *Pressure) (bool, error) {
	switch k {
	case "pressure":
		f, err := floatValue(kp, v)
		if err != nil {
			return true, err
		}
		if !(f > 0 && f < 1) {
			return true, perr(kp, v, "must be in (0,1), got %g", f)
		}
		pr.Threshold = f
		return true, nil
	case "grace":
		i, err := intValue(kp, v)
		if err != nil {
			return true, err
		}
		if i < 0 {
			return true, perr(kp, v, "must be an int >= 0, got %d", i)
		}
		pr.Grace = GraceTurns(i)
		return true, nil
	}
	return false, nil
}

func checkGrace(p string, n *yaml.Node, pr Pressure) error {
	if pr.Grace != nil && pr.Threshold == 0 {
		return perr(p+".grace", n, "needs pressure")
	}
	return nil
}

func parseTokenBudget(p string, v *yaml.Node, conds *[]Condition) error {
	var l TokenLimits
	err := mapping(p, v, []string{"total", "input", "output", "pressure", "grace"}, func(k, kp string, v *yaml.Node) error {
		if ok, err := parsePressure(p, v, k, kp, &l.Pressure); ok {
			return err
		}
		i, err := intValue(kp, v)
		if err != nil {
			return err
		}
		if i <= 0 {
			return perr(kp, v, "must be a positive int, got %d", i)
		}
		switch k {
		case "total":
			l.Total = int64(i)
		case "input":
			l.Input = int64(i)
		default:
			l.Output = int64(i)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if l.Total == 0 && l.Input == 0 && l.Output == 0 {
		return perr(p, v, "needs at least one of total, input, output")
	}
	if err := checkGrace(p, v, l.Pressure); err != nil {
		return err
	}
	*conds = append(*conds, TokenBudget(l))
	return nil
}

func parseCostBudget(p string, v *yaml.Node, conds *[]Condition) error {
	var l CostLimit
	hasLimit := false
	err := mapping(p, v, []string{"limit", "pressure", "grace"}, func(k, kp string, v *yaml.Node) error {
		if ok, err := parsePressure(p, v, k, kp, &l.Pressure); ok {
			return err
		}
		f, err := floatValue(kp, v)
		if err != nil {
			return err
		}
		if !(f > 0) || math.IsInf(f, 0) {
			return perr(kp, v, "must be > 0, got %g", f)
		}
		l.Limit, hasLimit = f, true
		return nil
	})
	if err != nil {
		return err
	}
	if !hasLimit {
		return perr(p+".limit", v, "is required")
	}
	if err := checkGrace(p, v, l.Pressure); err != nil {
		return err
	}
	*conds = append(*conds, CostBudget(l))
	return nil
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!bool":
			return "a bool (" + n.Value + ")"
		case "!!int":
			return "an int (" + n.Value + ")"
		case "!!float":
			return "a number (" + n.Value + ")"
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

func intValue(p string, n *yaml.Node) (int, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		// JSON writes 25.0 as a float; accept it when it is whole.
		if n.Kind == yaml.ScalarNode && n.Tag == "!!float" {
			if f, err := strconv.ParseFloat(n.Value, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				return int(f), nil
			}
		}
		return 0, perr(p, n, "must be an int, got %s", describe(n))
	}
	var i int
	if err := n.Decode(&i); err != nil {
		return 0, perr(p, n, "must be an int, got %s", describe(n))
	}
	return i, nil
}

func floatValue(p string, n *yaml.Node) (float64, error) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		return 0, perr(p, n, "must be a number, got %s", describe(n))
	}
	var f float64
	if err := n.Decode(&f); err != nil || math.IsNaN(f) {
		return 0, perr(p, n, "must be a number, got %s", describe(n))
	}
	return f, nil
}

func boolValue(p string, n *yaml.Node) (bool, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, perr(p, n, "must be true or false, got %s", describe(n))
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		return false, perr(p, n, "must be true or false, got %s", describe(n))
	}
	return b, nil
}

func stringValue(p string, n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return "", perr(p, n, "must be a string, got %s", describe(n))
	}
	return n.Value, nil
}

func durationValue(p string, n *yaml.Node) (time.Duration, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return 0, perr(p, n, `must be a Go duration string such as "2m", got %s`, describe(n))
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		return 0, perr(p, n, `must be a Go duration such as "2m" or "90s", got %q`, n.Value)
	}
	if d <= 0 {
		return 0, perr(p, n, "must be > 0, got %s", n.Value)
	}
	return d, nil
}

// nameList reads a name or a list of names.
func nameList(p string, n *yaml.Node) ([]string, error) {
	if n.Kind == yaml.ScalarNode {
		s, err := stringValue(p, n)
		if err != nil {
			return nil, err
		}
		if s == "" {
			return nil, perr(p, n, "must not be empty")
		}
		return []string{s}, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, perr(p, n, "must be a name or a list of names, got %s", describe(n))
	}
	if len(n.Content) == 0 {
		return nil, perr(p, n, "must not be empty")
	}
	names := make([]string, len(n.Content))
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", p, i)
		s, err := stringValue(ip, item)
		if err != nil {
			return nil, err
		}
		if s == "" {
			return nil, perr(ip, item, "must not be empty")
		}
		names[i] = s
	}
	return names, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// suggest returns the allowed key closest to key, when it is close.
func suggest(key string, allowed []string) string {
	type cand struct {
		k string
		d int
	}
	var cands []cand
	for _, a := range allowed {
		if d := editDistance(key, a); d <= 2 || (len(key) > 3 && strings.HasPrefix(a, key)) {
			cands = append(cands, cand{a, d})
		}
	}
	if len(cands) == 0 {
		return ""
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].d < cands[j].d })
	return cands[0].k
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
