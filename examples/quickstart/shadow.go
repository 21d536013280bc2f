package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// shadowSpec is a candidate policy a stage tries in shadow (spec §5.2):
// evaluated beside the enforced one on every run, never acting. Its
// verdicts are on the runs' spans, on agent.stage.shadow.stops and in
// their results.
type shadowSpec struct {
	name   string // a label value: the policy's name on metrics and spans
	policy string // YAML, written as is by writeShadowPolicies
}

// shadowOptions are the stage's WithShadowPolicy options.
func (s stageSpec) shadowOptions() ([]middleware.Option, error) {
	var opts []middleware.Option
	for _, sh := range s.shadows {
		p, err := termination.ParsePolicy(sh.policy)
		if err != nil {
			return nil, fmt.Errorf("stage %s: shadow policy %s: %w", s.name, sh.name, err)
		}
		opts = append(opts, middleware.WithShadowPolicy(sh.name, p))
	}
	return opts, nil
}

// writeShadowPolicies writes each stage's shadow policies to
// DIR/shadow/NAME/STAGE.yaml (spec §5.2), the text the stage parsed, so
// that backtesting a recording in DIR with -policies DIR/shadow/NAME
// gives the shadow verdicts the runs had live. Stage and policy names are
// safe file names (middleware.New and WithShadowPolicy refuse others); a
// name that is not one file name inside DIR is an error, and nothing is
// written outside DIR.
func writeShadowPolicies(dir string, specs []stageSpec) error {
	for _, s := range specs {
		for _, sh := range s.shadows {
			if err := fileName(s.name); err != nil {
				return fmt.Errorf("shadow policy %s: %w", sh.name, err)
			}
			if err := fileName(sh.name); err != nil {
				return fmt.Errorf("stage %s: shadow policy name: %w", s.name, err)
			}
			sub := filepath.Join(dir, "shadow", sh.name)
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(sub, s.name+".yaml"), []byte(sh.policy), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// fileName checks that name is one file name inside a directory: no
// separator, no "..", not empty.
func fileName(name string) error {
	if !filepath.IsLocal(name) || strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("stage name %q is not a file name inside the directory", name)
	}
	return nil
}
