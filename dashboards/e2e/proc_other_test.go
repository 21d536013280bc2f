//go:build !linux

package e2e

import "os/exec"

// dieWithTest is a no-op where there is no parent-death signal; the
// quickstart still stops by itself after its -duration.
func dieWithTest(cmd *exec.Cmd) {}
