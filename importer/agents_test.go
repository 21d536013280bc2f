package importer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/termination"
)

// TestAgentImportGolden imports each agent session of testdata/ (Claude
// Code, Codex, Gemini CLI) and compares the stream with its golden file,
// then checks that every line decodes as a §1 event.
func TestAgentImportGolden(t *testing.T) {
	tests := []struct {
		format, file, golden string
	}{
		{"claude-code", "claude-code-session.jsonl", "claude-code-session.golden.jsonl"},
		{"claude-code", "agent-showcol1.jsonl", "agent-showcol1.golden.jsonl"},
		{"codex", "codex-rollout.jsonl", "codex-rollout.golden.jsonl"},
		{"codex", "codex-legacy.jsonl", "codex-legacy.golden.jsonl"},
		{"gemini-cli", "gemini-session.json", "gemini-session.golden.jsonl"},
		{"gemini-cli", "gemini-session.jsonl", "gemini-session.golden.jsonl"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			runs, err := importPath(tt.format, filepath.Join("testdata", tt.file), Options{})
			require.NoError(t, err)
			var b bytes.Buffer
			require.NoError(t, WriteStream(&b, runs))
			golden := filepath.Join("testdata", tt.golden)
			if *update {
				require.NoError(t, os.WriteFile(golden, b.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), b.String())
			dec := termination.NewDecoder(bytes.NewReader(b.Bytes()))
			for {
				_, err := dec.Next()
				if err != nil {
					require.ErrorContains(t, err, "EOF")
					break
				}
			}
		})
	}
}
