package termination

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

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
			var f float64
			switch {
			case n.Decode(&f) != nil:
			case math.IsNaN(f):
				return "NaN (" + n.Value + ", not a number)"
			case math.IsInf(f, 0):
				return "infinity (" + n.Value + ")"
			case f != math.Trunc(f):
				return "a number with a fraction (" + n.Value + ")"
			}
			return "a number (" + n.Value + ")"
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

// isNumber reports whether n is a scalar int or float (NaN and the
// infinities included).
func isNumber(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float")
}

// intValue reads an int: written as one, or as a whole number with a
// fraction or an exponent (JSON writers write 25.0 and 1e6). A number
// beyond a 64-bit int is too large or too small (not "not an int"); NaN
// and fractions are not ints.
func intValue(p string, n *yaml.Node) (int, error) {
	i, r := intOf(n)
	switch r {
	case intTooLarge:
		return 0, perr(p, n, "is too large: must be an int of at most %d, got %s", math.MaxInt64, n.Value)
	case intTooSmall:
		return 0, perr(p, n, "is too small: must be an int of at least %d, got %s", math.MinInt64, n.Value)
	case notInt:
		return 0, perr(p, n, "must be an int, got %s", describe(n))
	}
	return i, nil
}

// intRead is what intOf made of a node.
type intRead uint8

const (
	isInt       intRead = iota
	notInt              // not a number, NaN, or a number with a fraction
	intTooLarge         // a whole number (or +infinity) beyond a 64-bit int
	intTooSmall         // a whole number (or -infinity) below a 64-bit int
)

// intOf reads n as an int, or says why it is none.
func intOf(n *yaml.Node) (int, intRead) {
	if !isNumber(n) {
		return 0, notInt
	}
	var f float64
	if n.Tag == "!!int" {
		var i int
		if err := n.Decode(&i); err == nil {
			return i, isInt
		}
		// Beyond int64 (a uint64, or a tagged !!int): say which way.
		f = math.Inf(1)
		if strings.HasPrefix(strings.TrimSpace(n.Value), "-") {
			f = math.Inf(-1)
		}
	} else if err := n.Decode(&f); err != nil || math.IsNaN(f) || (f != math.Trunc(f) && !math.IsInf(f, 0)) {
		return 0, notInt
	}
	switch {
	case f >= math.MaxInt64: // 2^63 as a float64: the first one out of range
		return 0, intTooLarge
	case f < math.MinInt64:
		return 0, intTooSmall
	}
	return int(f), isInt
}

// floatValue reads a number: an int, or a float that is neither NaN nor
// an infinity (no limit, threshold or tolerance means anything with them).
func floatValue(p string, n *yaml.Node) (float64, error) {
	if !isNumber(n) {
		return 0, perr(p, n, "must be a number, got %s", describe(n))
	}
	var f float64
	if err := n.Decode(&f); err != nil {
		return 0, perr(p, n, "must be a number, got %s", describe(n))
	}
	switch {
	case math.IsNaN(f):
		return 0, perr(p, n, "must be a number, got NaN (%s): NaN is not allowed", n.Value)
	case math.IsInf(f, 0):
		return 0, perr(p, n, "must be a finite number, got %s", n.Value)
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
	return d, nil
}

// nameList reads a name or a non-empty list of names. An empty list is
// refused here rather than read as "every name" (CompletionSignals's
// AnyHandoff watches every target): the policy must say which; empty names are the condition's to
// refuse.
func nameList(p string, n *yaml.Node) ([]string, error) {
	if n.Kind == yaml.ScalarNode {
		s, err := stringValue(p, n)
		if err != nil {
			return nil, err
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
		s, err := stringValue(fmt.Sprintf("%s[%d]", p, i), item)
		if err != nil {
			return nil, err
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
