package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const imp = "../../importer/testdata/"

func TestImportCommand(t *testing.T) {
	code, out, errOut := runCLI(t, "", "import", "-from", "mini-swe-agent", imp+"django__django-11099.traj.json")
	require.Equal(t, 0, code, errOut)
	want, err := os.ReadFile(imp + "django__django-11099.golden.jsonl")
	require.NoError(t, err)
	assert.Equal(t, string(want), out)

	code, out, errOut = runCLI(t, "", "import", "-from", "openai-chat", "-messages", "traj", "-id", "instance_id", imp+"batch.jsonl")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"run":"task-a#2"`)

	// The same file twice: the second's runs get #2.
	code, out, errOut = runCLI(t, "", "import", "-from", "openai-chat", "-error-prefix", "ERROR:", imp+"chat.json", imp+"chat.json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"run":"chat#1#2"`)
	assert.Contains(t, out, `"error":"ERROR: permission denied"`)

	dir := filepath.Join(t.TempDir(), "runs")
	code, _, errOut = runCLI(t, "", "import", "-from", "otlp", "-o", dir, imp+"collector.jsonl")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "agentstop import: 2 runs written to "+dir+"\n", errOut)
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	require.NoError(t, err)
	assert.Len(t, files, 2)

	// The imported runs backtest.
	code, out, errOut = runCLI(t, "", "backtest", "-policy", bt+"strict.yaml", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "strict.yaml  2")
}

func TestImportBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`[{"role":"user","content":"x"},{"role":"robot"}]`), 0o644))
	tests := []struct {
		name string
		args []string
		err  string
	}{
		{"no format", []string{imp + "chat.json"}, "-from is required: one of openai-chat, mini-swe-agent, otlp, claude-code, codex, gemini-cli"},
		{"unknown format", []string{"-from", "csv", imp + "chat.json"}, `unknown format "csv"`},
		{"no file", []string{"-from", "otlp"}, "want at least one FILE"},
		{"openai flag on another format", []string{"-from", "otlp", "-id", "x", imp + "collector.jsonl"}, "-id applies to -from openai-chat only"},
		{"missing file", []string{"-from", "otlp", filepath.Join(dir, "none.jsonl")}, "cannot read"},
		{"unmappable entry", []string{"-from", "openai-chat", bad}, `bad.json: messages[1]: role "robot"`},
		{"existing output", []string{"-from", "openai-chat", "-o", dir, imp + "chat.json", imp + "chat.json"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, "", append([]string{"import"}, tt.args...)...)
			if tt.err == "" {
				assert.Equal(t, 0, code, errOut)
				return
			}
			assert.Equal(t, 2, code)
			assert.Contains(t, errOut, tt.err)
			assert.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
		})
	}
	code, _, errOut := runCLI(t, "", "import", "-from", "openai-chat", "-o", dir, imp+"chat.json")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "cannot write run chat#1", "an existing file is never overwritten")
}
