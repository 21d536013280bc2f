// Package operator holds the defaults of an operator's requests to a fleet
// (fleet.StopRequest, BlockRequest, RaiseRequest): who a request is by and
// how long it waits for confirmations. The fleets fill them in; the CLI
// shows them as its flags' defaults.
package operator

import (
	"os"
	"os/user"
	"time"
)

// Wait is how long a stop or a raise waits for the owning processes'
// confirmations by default.
const Wait = 2 * time.Second

// Name is who an operator's request (a stop, a block, a raise) is by when
// it does not say:
// "USER@HOST" from the OS, or what of it is known ("unknown" when
// neither is).
func Name() string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	switch {
	case name != "" && host != "":
		return name + "@" + host
	case name != "":
		return name
	case host != "":
		return "@" + host
	}
	return "unknown"
}
