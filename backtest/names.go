package backtest

import (
	"fmt"
	"path/filepath"
	"strings"
)

// uniqueNames returns a copy of policies whose names are unique, so that a
// report's table, JSON and CSV tell every candidate apart. A name that
// more than one candidate shares (x1/p.yaml and x2/p.yaml are both
// "p.yaml"; two -policies dirs a/policies and b/policies are both
// "policies") becomes, in each of them, the shortest suffix of their
// Sources, element by element, that differs among them: "x1/p.yaml" and
// "x2/p.yaml". Candidates without a Source, or with the same one, that
// still share a name are numbered in order: "p.yaml", "p.yaml (2)".
// Unique names are kept. Evaluate applies it to Config.Policies.
func uniqueNames(policies []Policy) []Policy {
	out := append([]Policy(nil), policies...)
	groups := map[string][]int{}
	for i, p := range out {
		groups[p.Name] = append(groups[p.Name], i)
	}
	for _, idx := range groups {
		if len(idx) > 1 {
			nameBySuffix(out, idx)
		}
	}
	numberDuplicates(out)
	return out
}

// nameBySuffix names the policies idx, which share a name, by the
// shortest suffix of their Sources that tells them apart, when every one
// has a Source and there is such a suffix.
func nameBySuffix(out []Policy, idx []int) {
	elems := make([][]string, len(idx))
	longest := 0
	for k, i := range idx {
		if out[i].Source == "" {
			return
		}
		elems[k] = strings.Split(filepath.ToSlash(filepath.Clean(out[i].Source)), "/")
		longest = max(longest, len(elems[k]))
	}
	for n := 2; n <= longest; n++ {
		names := make([]string, len(idx))
		seen := map[string]bool{}
		for k, e := range elems {
			names[k] = strings.Join(e[max(0, len(e)-n):], "/")
			seen[names[k]] = true
		}
		if len(seen) == len(idx) {
			for k, i := range idx {
				out[i].Name = names[k]
			}
			return
		}
	}
}

// numberDuplicates gives every later holder of a name still taken a
// number: "p.yaml (2)".
func numberDuplicates(out []Policy) {
	taken := map[string]bool{}
	for _, p := range out {
		taken[p.Name] = true
	}
	seen := map[string]bool{}
	for i := range out {
		name := out[i].Name
		if !seen[name] {
			seen[name] = true
			continue
		}
		for n := 2; ; n++ {
			if c := fmt.Sprintf("%s (%d)", name, n); !taken[c] {
				out[i].Name, taken[c], seen[c] = c, true, true
				break
			}
		}
	}
}
