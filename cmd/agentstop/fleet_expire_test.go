package main

import (
	"strings"
	"testing"
)

// A negative -expire is refused before any connection, with a message
// that does not contradict "-expire 0" (the default: until unblock).
func TestBlockNegativeExpire(t *testing.T) {
	code, out, errOut := runFleetCLI(t, map[string]string{"AGENTSTOP_REDIS_URL": "redis://127.0.0.1:1"},
		"block", "-stage", "s", "-reason", "x", "-expire", "-1s")
	if code != exitBad || out != "" || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q: want exit 2 and one line on stderr", code, out, errOut)
	}
	if strings.Contains(errOut, "> 0") || !strings.Contains(errOut, "-expire") || !strings.Contains(errOut, "-1s") {
		t.Errorf("stderr %q: want it to name -expire and -1s, and not to say \"> 0\" (0 is allowed)", errOut)
	}
}

// TestDurationFlagsSayWhatTheyWant: a bad value of any duration flag of the
// CLI (-expire 5, -wait soon) is refused before any connection with one
// line that says a duration such as 30m is wanted, not "parse error".
func TestDurationFlagsSayWhatTheyWant(t *testing.T) {
	env := map[string]string{"AGENTSTOP_REDIS_URL": "redis://127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"block", "-stage", "s", "-reason", "x", "-expire", "5"},
			`agentstop block: invalid value "5" for flag -expire: want a duration such as 30m, 90s or 1h30m; a number needs a unit: 5s, 5m or 5h (see agentstop block -h)` + "\n"},
		{[]string{"stop", "-all", "-reason", "x", "-wait", "soon"},
			`agentstop stop: invalid value "soon" for flag -wait: want a duration such as 30m, 90s or 1h30m (see agentstop stop -h)` + "\n"},
	} {
		code, out, errOut := runFleetCLI(t, env, tc.args...)
		if code != exitBad || out != "" || errOut != tc.want {
			t.Errorf("%v: exit %d, stdout %q, stderr\n%q\nwant exit 2 and\n%q", tc.args, code, out, errOut, tc.want)
		}
	}
	// -h names the value "duration", as the flag package does.
	for _, name := range []string{"block", "stop"} {
		_, out, _ := runFleetCLI(t, env, name, "-h")
		if !strings.Contains(out, " duration\n") || !strings.Contains(out, "(a duration such as 30m)") {
			t.Errorf("%s -h:\n%s", name, out)
		}
	}
	_, out, _ := runFleetCLI(t, env, "stop", "-h")
	if !strings.Contains(out, "(default 2s)") {
		t.Errorf("stop -h does not show -wait's default:\n%s", out)
	}
}
