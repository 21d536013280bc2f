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
