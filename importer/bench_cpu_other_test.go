//go:build !unix

package importer

import "time"

// processCPUTime is not measured here: the benchmarks report no MB/cpu-s.
func processCPUTime() time.Duration { return 0 }
