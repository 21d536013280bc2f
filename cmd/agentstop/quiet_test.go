package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain silences go-redis before any test starts a Redis client in this
// process: setting its logger later, while a client's goroutines read it,
// would be a data race (quietRedisLog).
func TestMain(m *testing.M) {
	quietRedisLog()
	os.Exit(m.Run())
}

// TestFleetUnreachableOneLine runs the built command against a port where
// no Redis listens: go-redis's own log lines ("redis: … pool.go:762: redis:
// connection pool: failed to dial after 5 attempts …", twice for raise)
// must not reach stderr before the command's one line (§7). Only the
// binary shows it: go-redis's default logger writes to the process's
// stderr, not to the command's.
func TestFleetUnreachableOneLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "agentstop")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	const url = "redis://127.0.0.1:1"
	for _, args := range [][]string{
		{"raise", "-run", "0123456789abcdef0123456789abcdef", "-iterations", "+1"},
		{"runs"},
		{"stop", "-stage", "s", "-reason", "x"},
		{"block", "-stage", "s", "-reason", "x"},
		{"unblock", "-stage", "s"},
		{"blocks"},
		{"budgets"},
	} {
		t.Run(args[0], func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, append(args, "-redis", url)...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("exit: %v, want status 2", err)
			}
			want := "agentstop " + args[0] + ": cannot use redis at 127.0.0.1:1: "
			if got := stderr.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, want) {
				t.Errorf("stderr = %q, want one line starting %q", got, want)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}
