package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentstop/agentstop/internal/human"
	"github.com/agentstop/agentstop/termination"
)

// stagePolicies is a -policies DIR: each stage's policy, DIR/STAGE.yaml
// (§4 "Recorded runs").
type stagePolicies struct {
	dir    string
	byName map[string]*termination.Policy
}

// of returns the policy of stage, false when DIR has no file for it.
func (s *stagePolicies) of(stage string) (*termination.Policy, bool) {
	p, ok := s.byName[stage]
	return p, ok
}

// policyExts are the file names -policies reads, in the order tried.
var policyExts = []string{".yaml", ".yml", ".json"}

// loadStagePolicies reads every DIR/STAGE.yaml (or .yml, .json). A
// directory that does not exist, a file whose name is not a stage name,
// two files for one stage and a file that is not a valid policy are
// errors naming the directory or the file.
func loadStagePolicies(dir string) (*stagePolicies, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("-policies %s: %v", dir, pathErrorText(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("-policies %s: not a directory (want a directory holding STAGE.yaml per stage)", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("-policies %s: %v", dir, pathErrorText(err))
	}
	s := &stagePolicies{dir: dir, byName: map[string]*termination.Policy{}}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || !slices.Contains(policyExts, ext) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		stage := strings.TrimSuffix(e.Name(), ext)
		if err := termination.ValidateStageName(stage); err != nil {
			return nil, fmt.Errorf("%s: the file's name is not STAGE%s: %v", path, ext, err)
		}
		if _, dup := s.byName[stage]; dup {
			return nil, fmt.Errorf("%s: a second policy file for stage %q in %s", path, stage, dir)
		}
		data, err := readFile(path, "policy")
		if err != nil {
			return nil, err
		}
		p, err := termination.ParsePolicy(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		s.byName[stage] = &p
	}
	return s, nil
}

// leftOutLine is the stderr line for the runs left without a policy.
func leftOutLine(left map[string]int) string {
	names := make([]string, 0, len(left))
	n := 0
	for stage, k := range left {
		names = append(names, stage)
		n += k
	}
	slices.Sort(names)
	return fmt.Sprintf("%s left out: no policy for stage %s (give -policies DIR with STAGE.yaml, or -policy FILE for the rest)",
		human.Count(n, "run"), strings.Join(names, ", "))
}
