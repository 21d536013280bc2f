package label_test

import (
	"strings"
	"testing"

	"github.com/agentstop/agentstop/internal/label"
)

func TestValidateStage(t *testing.T) {
	valid := []string{"planner", "research-agent", "billing.v2", "s", "A1", "stage_1", "con2", "com10", "Analyst.eu-west", strings.Repeat("a", 128)}
	for _, name := range valid {
		if err := label.ValidateStage(name); err != nil {
			t.Errorf("ValidateStage(%q) = %v, want nil", name, err)
		}
	}
	invalid := map[string]string{
		"":                       "stage name is empty",
		"my stage!":              `has ' ' at byte 2`,
		"../x":                   `starts with '.'`,
		".hidden":                `starts with '.'`,
		"-flag":                  `starts with '-'`,
		"_x":                     `starts with '_'`,
		"a/b":                    `has '/' at byte 1`,
		`a\b`:                    `has '\\' at byte 1`,
		"a:b":                    `has ':' at byte 1`,
		"*":                      `starts with '*'`,
		"ends.":                  "ends with '.'",
		"café":                   `has 'é' at byte 3`,
		"nul":                    "device name on Windows",
		"CON.yaml":               "device name on Windows",
		"Lpt3":                   "device name on Windows",
		strings.Repeat("a", 129): "is 129 bytes, the limit is 128",
	}
	for name, want := range invalid {
		err := label.ValidateStage(name)
		if err == nil {
			t.Errorf("ValidateStage(%q) = nil, want an error containing %q", name, want)
			continue
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "A-Z a-z 0-9 . _ -") {
			t.Errorf("ValidateStage(%q) = %q, want it to contain %q and the rule", name, err, want)
		}
	}
}

func TestValidateLabels(t *testing.T) {
	if err := label.ValidateLabels(map[string]string{"tenant": "acme", "tier_2": ""}); err != nil {
		t.Error(err)
	}
	for _, l := range []map[string]string{{"Tenant": "x"}, {"2tier": "x"}, {"": "x"}, {"a-b": "x"}, {"t": strings.Repeat("x", 257)}} {
		if err := label.ValidateLabels(l); err == nil {
			t.Errorf("ValidateLabels(%v) = nil", l)
		}
	}
}

func TestParse(t *testing.T) {
	if k, v, err := label.Parse("tenant=a=b"); err != nil || k != "tenant" || v != "a=b" {
		t.Errorf("Parse = %q %q %v", k, v, err)
	}
	for _, bad := range []string{"tenant", "Tenant=x", "=x", "tenant=a\xff"} {
		if _, _, err := label.Parse(bad); err == nil {
			t.Errorf("Parse(%q) = nil error", bad)
		}
	}
}
