package termination

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Policy is a set of termination conditions read from YAML or JSON (JSON is
// YAML). A flat policy stops when any of its conditions fires; "any" and
// "all" take lists of policies and nest. The zero Policy never fires.
type Policy struct {
	cond  Condition
	fleet *FleetBudget // the top-level fleet_budget, if any (fleetbudget.go)
	tree  Condition    // the top-level tree: limits, if any (tree.go)
	hold  *Hold        // the top-level hold:, if any (hold.go)
	// limits: the policy has a limit that hold: can hold at (hold.go):
	// max_iterations, max_tool_calls, token_budget or cost_budget, at any
	// depth or under tree:.
	limits bool
	canon  []byte // the policy's canonical JSON (Hash), nil for the empty policy
}

// policyError is an invalid policy: Path names the key
// ("policy.token_budget.pressure"), Msg what is wrong with it.
type policyError struct {
	Path string
	Line int // 1-based line of the offending node, 0 when unknown
	Msg  string
}

func (e *policyError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s: %s (line %d)", e.Path, e.Msg, e.Line)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// ParsePolicy reads a policy. It is strict: unknown keys, wrong types and
// out-of-range values are an error naming the key path (and its line), because a typo
// must never silently disable a guard. Empty input is the empty policy.
// data is a string or a []byte (a file's contents).
func ParsePolicy[S ~string | ~[]byte](data S) (Policy, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader([]byte(data)))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return Policy{}, &policyError{Path: "policy", Msg: "not valid YAML or JSON: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	// A second document would be silently ignored: its guards disabled.
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return Policy{}, &policyError{Path: "policy", Msg: "not valid YAML or JSON: " + strings.TrimPrefix(err.Error(), "yaml: ")}
		}
		return Policy{}, &policyError{Path: "policy", Line: extra.Line, Msg: "more than one YAML document; put every condition in one"}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return Policy{cond: AnyOf()}, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return Policy{cond: AnyOf()}, nil
	}
	var p Policy
	c, err := parsePolicyNode("policy", root, &p)
	if err != nil {
		return Policy{}, err
	}
	if err := checkHold(root, &p); err != nil {
		return Policy{}, err
	}
	p.cond = c
	p.canon = canonicalPolicy(root)
	return p, nil
}

// canonicalPolicy is the policy's JSON form with keys sorted and no
// insignificant whitespace (encoding/json sorts a map's keys).
func canonicalPolicy(root *yaml.Node) []byte {
	var v any
	if root.Decode(&v) != nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// Hash returns "sha256:" and the hex digest of the policy's canonical
// JSON: its JSON form with keys sorted and no insignificant whitespace
// (§1 end records). Two files that say the same thing in other words
// (YAML or JSON, another key order, comments) have the same hash; the
// empty policy's canonical JSON is {}.
func (p Policy) Hash() string {
	c := p.canon
	if c == nil {
		c = []byte("{}")
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// MustParsePolicy is ParsePolicy that panics on error, for policies fixed at
// compile time.
func MustParsePolicy[S ~string | ~[]byte](data S) Policy {
	p, err := ParsePolicy(data)
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

// policyKey is a key of a policy mapping: its name, whether it is allowed
// only at the top level of a policy (not under any: or all:), and how to
// read its value. read returns the key's condition, nil for none (such as
// stop_message: false); it checks the value's type and shape only: the
// condition's own validation checks ranges and combinations, and
// parsePolicyNode reports its error at the key the user wrote. A key that
// sets more than a condition sets it on pol.
type policyKey struct {
	name     string
	topLevel bool
	// read reads the key's value; nil for the keys whose readers refer
	// back to this table (any:, all: and tree:), which parsePolicyNode
	// calls by name (a table that held them would refer to itself).
	read func(path string, v *yaml.Node, pol *Policy) (Condition, error)
}

// policyKeys are the keys a policy mapping may hold, in the contract's
// order. To add a key, append it here.
var policyKeys = []policyKey{
	{name: "max_iterations", read: readCountLimit(ResourceIterations)},
	{name: "max_tool_calls", read: readCountLimit(ResourceToolCalls)},
	{name: "timeout", read: readTimeout},
	{name: "idle", read: readIdle},
	{name: "token_budget", read: readTokenBudget},
	{name: "cost_budget", read: readCostBudget},
	{name: "stall", read: readStall},
	{name: "errors", read: readErrors},
	{name: "text_mention", read: readTextMention},
	{name: "function_call", read: readNames("function_call")},
	{name: "handoff", read: readNames("handoff")},
	{name: "source_match", read: readNames("source_match")},
	{name: "stop_message", read: readStopMessage},
	{name: "any"},
	{name: "all"},
	{name: "fleet_budget", topLevel: true, read: readFleetBudget},
	{name: "tree", topLevel: true},
	{name: "hold", topLevel: true, read: readHold},
}

func policyKeyNames() []string {
	names := make([]string, len(policyKeys))
	for i, k := range policyKeys {
		names[i] = k.name
	}
	return names
}

func findPolicyKey(name string) policyKey {
	for _, k := range policyKeys {
		if k.name == name {
			return k
		}
	}
	return policyKey{}
}

func perr(path string, n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &policyError{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// entries iterates a mapping node's entries, rejecting non-scalar and
// duplicate keys.
func entries(path string, n *yaml.Node, f func(key, path string, k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return perr(path, n, "must be a mapping, got %s", describe(n))
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return perr(path, k, "keys must be strings")
		}
		kp := keyPath(path, k.Value)
		if seen[k.Value] {
			return perr(kp, k, "duplicate key")
		}
		seen[k.Value] = true
		if err := f(k.Value, kp, k, v); err != nil {
			return err
		}
	}
	return nil
}

// keyPath appends a key to a key path: as written when it is a plain name
// (letters, digits, _ and -), quoted otherwise, so that a key with a dot,
// a space or a newline still makes a one-line, unambiguous path
// (policy.max_tool_calls.per_tool."web.fetch").
func keyPath(path, key string) string {
	plain := key != ""
	for _, r := range key {
		plain = plain && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}
	if !plain {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapping iterates a mapping node's keys, rejecting duplicates and keys not
// in allowed (with a "did you mean" when one is close).
func mapping(path string, n *yaml.Node, allowed []string, f func(key, path string, v *yaml.Node) error) error {
	return entries(path, n, func(key, kp string, k, v *yaml.Node) error {
		if !contains(allowed, key) {
			msg := "unknown key"
			if s := suggest(key, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += " (the keys here: " + strings.Join(allowed, ", ") + ")"
			}
			return perr(kp, k, "%s", msg)
		}
		return f(key, kp, v)
	})
}

// parsePolicyNode reads the policy mapping n at path: each key's
// condition, validated by the condition itself, the whole an AnyOf (or the
// one condition).
func parsePolicyNode(path string, n *yaml.Node, pol *Policy) (Condition, error) {
	top := path == "policy"
	var conds []Condition
	err := mapping(path, n, policyKeyNames(), func(key, p string, v *yaml.Node) error {
		k := findPolicyKey(key)
		if k.topLevel && !top {
			return perr(p, v, "allowed only at the top level of a policy")
		}
		var c Condition
		var err error
		switch key {
		case "any", "all":
			c, err = readCombinator(key, p, v, pol)
		case "tree":
			c, err = readTree(p, v, pol)
		default:
			c, err = k.read(p, v, pol)
		}
		if err != nil || c == nil {
			return err
		}
		if err := c.Validate(); err != nil {
			return settingErr(path, n, err)
		}
		pol.limits = pol.limits || isHoldableKey(key)
		conds = append(conds, c)
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

// settingErr turns a condition's validation error into a *policyError at
// the key the user wrote: the error's path ("token_budget.pressure",
// "any[1].stall.window") is looked up in the policy mapping n at path.
func settingErr(path string, n *yaml.Node, err error) error {
	var se *settingError
	if !errors.As(err, &se) {
		return perr(path, n, "%s", err)
	}
	sub, at := locate(n, joinPath(se.cond, se.setting))
	return perr(joinPath(path, sub), at, "%s", se.msg)
}

// locate follows a setting path ("max_tool_calls.per_tool.search",
// "function_call[0]") into the document from n and returns the path as
// written and the node it names. A key the document leaves out is named
// at the mapping that lacks it; a path that goes on into a scalar (the
// short forms: max_iterations: 25, function_call: approve) stops at it.
func locate(n *yaml.Node, setting string) (string, *yaml.Node) {
	path, at, rest := "", n, setting
	for rest != "" {
		switch at.Kind {
		case yaml.MappingNode:
			best := -1
			for i := 0; i+1 < len(at.Content); i += 2 {
				k := at.Content[i].Value
				if strings.HasPrefix(rest, k) && (len(rest) == len(k) || rest[len(k)] == '.' || rest[len(k)] == '[') &&
					(best < 0 || len(k) > len(at.Content[best].Value)) {
					best = i // the longest key that fits: tool names may hold dots
				}
			}
			if best < 0 {
				return joinPath(path, rest), at
			}
			k := at.Content[best].Value
			path, at, rest = keyPath(path, k), at.Content[best+1], strings.TrimPrefix(rest[len(k):], ".")
		case yaml.SequenceNode:
			end := strings.IndexByte(rest, ']')
			if !strings.HasPrefix(rest, "[") || end < 0 {
				return joinPath(path, rest), at
			}
			i, err := strconv.Atoi(rest[1:end])
			if err != nil || i < 0 || i >= len(at.Content) {
				return joinPath(path, rest), at
			}
			path, at, rest = path+rest[:end+1], at.Content[i], strings.TrimPrefix(rest[end+1:], ".")
		default:
			return path, at
		}
	}
	return path, at
}

// Conditions returns the policy's top-level conditions, one per key of a
// flat policy (and the children of a top-level any:), in the order the
// policy file lists them; the policy stops a run when any of them fires.
// Evaluated on its own, each says when that condition alone would have
// fired (the backtest command's -all). An empty policy has none.
func (p Policy) Conditions() []Condition {
	switch c := p.Condition().(type) {
	case anyOf:
		out := make([]Condition, 0, len(c))
		for _, ch := range c {
			if ch != nil {
				out = append(out, ch)
			}
		}
		return out
	default:
		return []Condition{c}
	}
}
