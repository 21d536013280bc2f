package e2e

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill cmd if the test binary dies before its
// cleanup runs, so no quickstart or Prometheus outlives a crashed test.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
