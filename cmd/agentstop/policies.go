package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentstop/agentstop/backtest"
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

// loadStagePolicies reads a -policies DIR (backtest.LoadStagePolicies).
func loadStagePolicies(dir string) (*stagePolicies, error) {
	p, err := backtest.LoadStagePolicies(dir)
	if err != nil {
		return nil, err
	}
	s := &stagePolicies{dir: dir, byName: map[string]*termination.Policy{}}
	for stage := range p.Stages {
		pol := p.Stages[stage]
		s.byName[stage] = &pol
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
