//go:build unix

package importer

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used, all its threads (the
// garbage collector's too): what "per core" measures on a busy machine,
// where wall time also counts the time other processes held the cores.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
