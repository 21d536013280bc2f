//go:build unix

package importer

import (
	"syscall"
	"time"
)

// processCPUTime is the user and system CPU time the process has used.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
