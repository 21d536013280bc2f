package fleet_test

import (
	"testing"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/fleettest"
)

func TestLocalSuite(t *testing.T) {
	fleettest.Run(t, func(t *testing.T) (fleet.Fleet, fleet.Control) {
		f := fleet.NewLocal()
		return f, f
	})
}
