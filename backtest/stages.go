package backtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentstop/agentstop/internal/label"
	"github.com/agentstop/agentstop/termination"
)

// policyExts are the policy file names LoadStagePolicies reads, STAGE
// and one of these.
var policyExts = []string{".yaml", ".yml", ".json"}

// LoadStagePolicies reads a directory of per-stage policies, DIR/STAGE.yaml
// each (what the quickstart's -record writes to DIR/policies), as one
// candidate named by the directory's last element (§4 "Recorded runs").
// Other files are ignored. A directory that does not exist, a policy file
// whose name is not a stage name, two files for one stage and a file that
// is not a valid policy are errors naming the directory or the file.
func LoadStagePolicies(dir string) (Policy, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return Policy{}, fmt.Errorf("-policies %s: %v", dir, pathErrorText(err))
	}
	if !fi.IsDir() {
		return Policy{}, fmt.Errorf("-policies %s: not a directory (want a directory holding STAGE.yaml per stage)", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Policy{}, fmt.Errorf("-policies %s: %v", dir, pathErrorText(err))
	}
	p := Policy{Name: filepath.Base(filepath.Clean(dir)), Source: dir, Stages: map[string]termination.Policy{}}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || !slices.Contains(policyExts, ext) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		stage := strings.TrimSuffix(e.Name(), ext)
		if err := label.ValidateStage(stage); err != nil {
			return Policy{}, fmt.Errorf("%s: the file's name is not STAGE%s: %v", path, ext, err)
		}
		if _, dup := p.Stages[stage]; dup {
			return Policy{}, fmt.Errorf("%s: a second policy file for stage %q in %s", path, stage, dir)
		}
		pol, err := LoadPolicy(path)
		if err != nil {
			return Policy{}, err
		}
		p.Stages[stage] = pol.Policy
	}
	return p, nil
}
