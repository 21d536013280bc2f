package middleware_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestArrows holds the one-way arrows of docs/architecture.md: the domain
// imports no room above it; codec, replay and tree import no run; the
// run's package imports none of its participants (fleet, telemetry,
// eventlog) nor the rooms of recorded runs; nothing imports cmd/ or
// examples/.
func TestArrows(t *testing.T) {
	const mod = "github.com/agentstop/agentstop/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, mod+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], mod) {
			continue
		}
		var own []string
		for _, p := range f[1:] {
			if strings.HasPrefix(p, mod) {
				own = append(own, strings.TrimPrefix(p, mod))
			}
		}
		imports[strings.TrimPrefix(f[0], mod)] = own
	}
	if len(imports) < 15 {
		t.Fatalf("go list found %d packages of the module:\n%s", len(imports), out)
	}
	forbidden := map[string][]string{
		"termination":      {"codec", "replay", "internal/tree", "internal/cascade", "middleware", "fleet", "telemetry", "eventlog", "backtest", "importer"},
		"internal/cascade": {"codec", "replay", "internal/tree", "middleware", "fleet", "telemetry", "eventlog", "backtest", "importer"},
		"codec":            {"replay", "internal/tree", "middleware", "fleet", "telemetry", "eventlog", "backtest", "importer"},
		"replay":           {"internal/tree", "middleware", "fleet", "telemetry", "eventlog", "backtest", "importer"},
		"internal/tree":    {"codec", "replay", "middleware", "fleet", "telemetry", "eventlog", "backtest", "importer"},
		"middleware":       {"codec", "replay", "fleet", "telemetry", "eventlog", "backtest", "importer"},
		"telemetry":        {"fleet", "eventlog", "replay", "backtest", "importer"},
		"eventlog":         {"fleet", "telemetry", "replay", "backtest", "importer"},
		"fleet":            {"telemetry", "eventlog", "replay", "backtest", "importer"},
	}
	for pkg, bad := range forbidden {
		own, ok := imports[pkg]
		if !ok {
			t.Errorf("package %s not found", pkg)
			continue
		}
		for _, p := range own {
			for _, b := range bad {
				if p == b || strings.HasPrefix(p, b+"/") {
					t.Errorf("%s imports %s: the arrow runs the wrong way (docs/architecture.md)", pkg, p)
				}
			}
		}
	}
	for pkg, own := range imports {
		if strings.HasPrefix(pkg, "cmd/") || strings.HasPrefix(pkg, "examples/") {
			continue
		}
		for _, p := range own {
			if strings.HasPrefix(p, "cmd/") || strings.HasPrefix(p, "examples/") {
				t.Errorf("%s imports %s", pkg, p)
			}
		}
	}
}
