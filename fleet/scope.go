package fleet

// ScopeName is the instrumentation scope of the fleet's own metrics
// (agent.fleet.*, see "Telemetry" above), recorded by Local and by
// package redisfleet.
const ScopeName = "github.com/agentstop/agentstop/fleet"
