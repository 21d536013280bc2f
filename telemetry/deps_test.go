package telemetry_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// forbiddenDeps are import path prefixes package telemetry must not pull
// in: it depends on the OpenTelemetry API only, like otelhttp, so that
// importing the Recorder costs no SDK, exporter, gRPC or Prometheus client.
// (go.opentelemetry.io/auto/sdk is not in the list: the API's own global
// package imports it, as the hook for auto-instrumentation.)
var forbiddenDeps = []string{
	"go.opentelemetry.io/otel/sdk",
	"go.opentelemetry.io/otel/exporters",
	"go.opentelemetry.io/contrib",
	"go.opentelemetry.io/proto",
	"google.golang.org/grpc",
	"google.golang.org/protobuf",
	"github.com/prometheus",
	"github.com/agentstop/agentstop/telemetry/otelsetup",
}

// TestAPIOnly: go list -deps ./telemetry (the package, not its tests)
// lists no SDK, exporter, contrib or gRPC package.
func TestAPIOnly(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goTool); err != nil {
		goTool = "go"
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "go list -deps: %s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "go.opentelemetry.io/otel/trace", "the list is package telemetry's dependencies")
	for _, d := range deps {
		for _, f := range forbiddenDeps {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("package telemetry depends on %s (%s is not the OpenTelemetry API)", d, f)
			}
		}
	}
}
