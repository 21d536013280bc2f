// Package label holds the rules of the label values the library writes and
// reads (contract §7): termination_cause values, run label names and
// values, and stage names. termination, middleware, fleet, telemetry and
// backtest check names with it; the errors name the rule in the user's
// terms.
package label

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ValidValue reports whether v can be a termination_cause value: a
// snake_case label (a-z, 0-9, _) of 1 to 64 characters, so that even an
// allow-list cannot smuggle a free-text string into a label.
func ValidValue(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// ValidName reports whether name can be a run label name: snake_case
// (a-z, 0-9, _), starting with a letter, 1 to 64 characters.
func ValidName(name string) bool {
	return ValidValue(name) && name[0] >= 'a' && name[0] <= 'z'
}

// MaxValue is the longest run label value, in bytes (contract §7).
const MaxValue = 256

// Parse parses a "k=v" label argument (a CLI's -label flag). The name must
// be snake_case, the value (which may be empty or contain "=") at most
// MaxValue bytes of UTF-8; the error names the problem.
func Parse(kv string) (name, value string, err error) {
	name, value, ok := strings.Cut(kv, "=")
	if !ok {
		return "", "", fmt.Errorf("label %q must be NAME=VALUE", kv)
	}
	if err := ValidateLabels(map[string]string{name: value}); err != nil {
		return "", "", err
	}
	return name, value, nil
}

// ValidateLabels checks run labels (contract §7): names snake_case
// ([ValidName]), values valid UTF-8 of at most [MaxValue] bytes (JSON,
// which carries them between processes, cannot hold other bytes
// unchanged). The error names the offending label.
func ValidateLabels(labels map[string]string) error {
	for k, v := range labels {
		if !ValidName(k) {
			return fmt.Errorf("label name %q must be snake_case (a-z, 0-9, _; starting with a letter; at most 64 characters)", k)
		}
		if len(v) > MaxValue {
			return fmt.Errorf("label %q: value is %d bytes, the limit is %d", k, len(v), MaxValue)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("label %q: value %q is not valid UTF-8", k, v)
		}
	}
	return nil
}

// maxStageName is the longest stage name, in bytes.
const maxStageName = 128

// ValidateStage checks a stage name. A stage name is a label value
// (contract §7) that is always a safe file name on every common file
// system (replay's -policies DIR reads DIR/STAGE.yaml): 1 to
// [maxStageName] bytes of the portable file name characters (A-Z, a-z,
// 0-9, '.', '_', '-'), starting with a letter or digit and not ending
// with '.', and not a name Windows reserves for a device (CON, PRN, AUX,
// NUL, COM1-9, LPT1-9, in any case, alone or before a '.'). So "planner",
// "research-agent" and "billing.v2" are stage names; "my stage!", "../x",
// ".hidden" and "nul" are not. The error says which rule the name breaks.
func ValidateStage(name string) error {
	const rule = "a stage name is 1 to 128 of the characters A-Z a-z 0-9 . _ - (a safe file name), starting with a letter or digit"
	switch {
	case name == "":
		return fmt.Errorf("stage name is empty: %s", rule)
	case len(name) > maxStageName:
		return fmt.Errorf("stage name %q is %d bytes, the limit is %d: %s", name, len(name), maxStageName, rule)
	case !alnum(name[0]):
		return fmt.Errorf("stage name %q starts with %q: %s", name, []rune(name)[0], rule)
	case name[len(name)-1] == '.':
		return fmt.Errorf("stage name %q ends with '.', which some file systems drop: %s", name, rule)
	}
	for i, r := range name {
		if r >= 0x80 || !alnum(byte(r)) && r != '.' && r != '_' && r != '-' {
			return fmt.Errorf("stage name %q has %q at byte %d: %s", name, r, i, rule)
		}
	}
	if reservedDevice(name) {
		return fmt.Errorf("stage name %q is a device name on Windows, not a file name: %s", name, rule)
	}
	return nil
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// reservedDevice reports whether name, up to its first '.', is a device
// name Windows reserves.
func reservedDevice(name string) bool {
	base, _, _ := strings.Cut(name, ".")
	switch strings.ToUpper(base) {
	case "CON", "PRN", "AUX", "NUL":
		return true
	}
	if len(base) == 4 {
		p := strings.ToUpper(base[:3])
		return (p == "COM" || p == "LPT") && base[3] >= '1' && base[3] <= '9'
	}
	return false
}
