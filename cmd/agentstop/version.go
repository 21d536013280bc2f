package main

import (
	"fmt"
	"runtime/debug"
)

const versionUsage = `Usage: agentstop version

Prints the agentstop module version recorded in the binary: the tagged version
(v1.2.3) for one installed with
  go install github.com/agentstop/agentstop/cmd/agentstop@v1.2.3
the version Go derives from git for a build in a checkout (a pseudo-version,
"+dirty" with local changes), and "(devel)" when the build records none
(go run, -buildvcs=false, a source tree without git).
`

// readBuildInfo is debug.ReadBuildInfo; tests replace it.
var readBuildInfo = debug.ReadBuildInfo

// modulePath is the module whose version "agentstop version" prints.
const modulePath = "github.com/agentstop/agentstop"

func runVersion(args []string, sio stdio) int {
	fs := newFlags("version")
	rest, code, done := parseFlags(fs, args, versionUsage, sio)
	if done {
		return code
	}
	if len(rest) > 0 {
		return failf(sio, "version", "takes no arguments, got %q", rest[0])
	}
	fmt.Fprintf(sio.out, "agentstop %s\n", moduleVersion())
	return exitOK
}

// moduleVersion returns the version of the agentstop module in this
// binary's build information, or "(devel)" when there is none.
func moduleVersion() string {
	info, ok := readBuildInfo()
	if !ok {
		return "(devel)"
	}
	if info.Main.Path == modulePath && info.Main.Version != "" {
		return info.Main.Version
	}
	// Built into another main module (a tool's go.mod requiring agentstop).
	for _, dep := range info.Deps {
		if dep.Path == modulePath && dep.Version != "" {
			return dep.Version
		}
	}
	return "(devel)"
}
