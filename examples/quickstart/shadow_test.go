package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func TestWriteShadowPolicies(t *testing.T) {
	dir := t.TempDir()
	specs := []stageSpec{
		{name: "researcher", shadows: []shadowSpec{{name: "strict", policy: "max_tool_calls: 4\n"}, {name: "loose", policy: "max_tool_calls: 9\n"}}},
		{name: "coder", shadows: []shadowSpec{{name: "strict", policy: "max_iterations: 3\n"}}},
		{name: "critic"},
	}
	require.NoError(t, writeShadowPolicies(dir, specs))
	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	}))
	assert.ElementsMatch(t, []string{"shadow/strict/researcher.yaml", "shadow/loose/researcher.yaml", "shadow/strict/coder.yaml"}, files)
	b, err := os.ReadFile(filepath.Join(dir, "shadow", "strict", "coder.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "max_iterations: 3\n", string(b))
	data, err := os.ReadFile(filepath.Join(dir, "shadow", "loose", "researcher.yaml"))
	require.NoError(t, err)
	_, err = termination.ParsePolicy(data)
	assert.NoError(t, err)

	assert.ErrorContains(t, writeShadowPolicies(t.TempDir(), []stageSpec{{name: "x", shadows: []shadowSpec{{name: "../up", policy: "{}"}}}}),
		`stage x: shadow policy name: stage name "../up"`)
}

// TestQuickstartShadows: the quickstart's shadow candidates are valid
// shadow policies, and the researcher's has data for the dashboard: it
// would stop its endless and its repeating runs, not the answering one.
func TestQuickstartShadows(t *testing.T) {
	n := 0
	for _, spec := range stages {
		opts, err := spec.shadowOptions()
		require.NoError(t, err)
		n += len(opts)
		if spec.name != "researcher" {
			continue
		}
		stage, err := middleware.New(spec.name, append(opts, middleware.WithPolicy(termination.MustParsePolicy(spec.policy)))...)
		require.NoError(t, err)
		var stopped []bool
		for _, b := range spec.behaviours {
			_, run := stage.Start(t.Context())
			for i := 0; ; i++ {
				ev, ok := b.next(i)
				if !ok {
					break
				}
				if _, stop := run.Observe(ev); stop {
					break
				}
			}
			res := run.Finish(nil)
			stopped = append(stopped, res.Shadow["strict"] != nil)
		}
		assert.Equal(t, []bool{true, true, false}, stopped)
	}
	assert.Positive(t, n, "the quickstart runs at least one shadow candidate")
}
