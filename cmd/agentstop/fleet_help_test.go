package main

import (
	"strings"
	"testing"
)

// "agentstop CMD -h" shows the flags' defaults: the password in
// $AGENTSTOP_REDIS_URL must not be one of them (§7: never printed).
func TestFleetHelpHidesEnvPassword(t *testing.T) {
	env := map[string]string{"AGENTSTOP_REDIS_URL": "redis://ops:" + testPassword + "@127.0.0.1:1"}
	for _, c := range fleetCommands {
		code, out, errOut := runFleetCLI(t, env, c.name, "-h")
		if code != exitOK || !strings.Contains(out, "-redis") {
			t.Errorf("%s -h: exit %d, stdout %q", c.name, code, out)
		}
		if strings.Contains(out+errOut, testPassword) || strings.Contains(out+errOut, "ops:") {
			t.Errorf("%s -h shows the URL's credentials:\n%s%s", c.name, out, errOut)
		}
	}
}
