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
	assert.Equal(t, "agentstop import: 2 runs, 11 events written to "+dir+"; skipped: none\n", errOut)
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	require.NoError(t, err)
	assert.Len(t, files, 2)

	// The imported runs backtest.
	code, out, errOut = runCLI(t, "", "backtest", "-policy", bt+"strict.yaml", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "strict.yaml  2")
}

// TestImportStdin: "-" reads stdin, as in replay; its runs and errors are
// named "stdin". Stdin can be read once.
func TestImportStdin(t *testing.T) {
	traj, err := os.ReadFile(imp + "django__django-11099.traj.json")
	require.NoError(t, err)
	code, out, errOut := runCLI(t, string(traj), "import", "-from", "mini-swe-agent", "-")
	require.Equal(t, 0, code, errOut)
	want, err := os.ReadFile(imp + "django__django-11099.golden.jsonl")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Len(t, lines, strings.Count(string(want), "\n"), "the events of the file, read from stdin")
	for _, l := range lines {
		assert.Contains(t, l, `"run":"stdin"`)
	}
	assert.Regexp(t, `^agentstop import: 1 run, \d+ events written to stdout; skipped: none\n$`, errOut)

	chat, err := os.ReadFile(imp + "chat.json")
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "runs")
	code, _, errOut = runCLI(t, string(chat), "import", "-from", "openai-chat", "-o", dir, imp+"chat.json", "-")
	require.Equal(t, 0, code, errOut)
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "chat#1.jsonl"), filepath.Join(dir, "stdin#1.jsonl")}, files)

	for _, tc := range []struct{ name, stdin, want string }{
		{"twice", "", "agentstop import: - (stdin) is given twice: stdin can be read once\n"},
		{"empty", "", "agentstop import: stdin: empty file\n"},
		{"unmappable", `{"messages": 3}`, "agentstop import: stdin: messages: want a list of messages, got a number\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"import", "-from", "openai-chat", "-"}
			if tc.name == "twice" {
				args = append(args, "-")
			}
			code, out, errOut := runCLI(t, tc.stdin, args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Equal(t, tc.want, errOut)
		})
	}
}

// TestImportSummary: import ends with one line counting runs, events and
// what the format left out; -strict makes a left-out entry an error.
func TestImportSummary(t *testing.T) {
	code, out, errOut := runCLI(t, "", "import", "-from", "mini-swe-agent", imp+"mini-swe-agent-2-toolcall.traj.json", imp+"mini-swe-agent-1-local.traj.json")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "agentstop import: 2 runs, 20 events written to stdout; skipped: none\n", errOut)
	assert.Equal(t, 20, strings.Count(out, "\n"))

	demo := filepath.Join(t.TempDir(), "demo.traj")
	require.NoError(t, os.WriteFile(demo, []byte(`{"history": [{"role":"user","content":"d1","is_demo":true},{"role":"assistant","content":"d2","is_demo":true},`+
		`{"role":"user","content":"task"},{"role":"assistant","content":"done","action":"submit"}]}`), 0o644))
	code, out, errOut = runCLI(t, "", "import", "-from", "swe-agent", demo)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "agentstop import: 1 run, 2 events written to stdout; skipped: 2 demonstration message\n", errOut)
	assert.Equal(t, 2, strings.Count(out, "\n"))

	dir := filepath.Join(t.TempDir(), "runs")
	code, out, errOut = runCLI(t, "", "import", "-from", "swe-agent", "-strict", "-o", dir, demo)
	assert.Equal(t, 2, code)
	assert.Equal(t, "agentstop import: -strict: entries left out: 2 demonstration message (nothing written)\n", errOut)
	assert.Empty(t, out)
	assert.NoDirExists(t, dir)

	code, _, errOut = runCLI(t, "", "import", "-from", "swe-agent", "-strict", imp+"function_calling_simple.traj")
	assert.Equal(t, 0, code, "-strict with nothing left out")
	assert.Contains(t, errOut, "skipped: none")
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
		{"no format", []string{imp + "chat.json"}, "-from is required: one of openai-chat, mini-swe-agent, swe-agent, otlp, claude-code, codex, gemini-cli"},
		{"unknown format", []string{"-from", "csv", imp + "chat.json"}, `unknown format "csv"`},
		{"no file", []string{"-from", "otlp"}, "want at least one FILE"},
		{"openai flag on another format", []string{"-from", "otlp", "-id", "x", imp + "collector.jsonl"}, "-id applies to -from openai-chat only"},
		{"missing file", []string{"-from", "otlp", filepath.Join(dir, "none.jsonl")}, "cannot read"},
		{"unmappable entry", []string{"-from", "openai-chat", bad}, `bad.json: messages[1]: role "robot"`},
		{"existing output", []string{"-from", "openai-chat", "-o", dir, imp + "chat.json", imp + "chat.json"}, ""},
		{"a JSON document to a JSON Lines format", []string{"-from", "codex", imp + "gemini-session.json"},
			imp + "gemini-session.json: line 1: the file is a JSON document, not JSON Lines (one JSON object per line): its first object does not end on its first line (a pretty-printed object), and -from codex reads JSON Lines; the formats that read a JSON document are openai-chat, mini-swe-agent, swe-agent, otlp, gemini-cli"},
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
	b, err := os.ReadFile(filepath.Join(dir, "chat#1.jsonl"))
	require.NoError(t, err, "the earlier import's file stays")
	assert.NotEmpty(t, b)
}

// TestImportDirUndone: with -o, runs are written as they are read; an
// import that fails later (an unmappable entry in a later file, a left-out
// entry with -strict) removes the files it wrote, and the directory it
// made, so that a failed import has written nothing. A directory that was
// there before stays, with what others put in it.
func TestImportDirUndone(t *testing.T) {
	demo := filepath.Join(t.TempDir(), "demo.traj")
	require.NoError(t, os.WriteFile(demo, []byte(`{"history": [{"role":"user","content":"d1","is_demo":true},`+
		`{"role":"user","content":"task"},{"role":"assistant","content":"done","action":"submit"}]}`), 0o644))
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`[{"role":"user","content":"x"},{"role":"robot"}]`), 0o644))
	for _, tc := range []struct {
		name, err string
		args      []string
	}{
		{"unmappable entry in a later file", `bad.json: messages[1]: role "robot"`, []string{"-from", "openai-chat", imp + "chat.json", imp + "chat.json", bad}},
		{"strict", "-strict: entries left out: 1 demonstration message (nothing written)", []string{"-from", "swe-agent", "-strict", imp + "function_calling_simple.traj", demo}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "runs")
			code, out, errOut := runCLI(t, "", append([]string{"import", "-o", dir}, tc.args...)...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Contains(t, errOut, tc.err)
			assert.NoDirExists(t, dir, "made by the import, emptied and removed")

			require.NoError(t, os.MkdirAll(dir, 0o755))
			other := filepath.Join(dir, "other.jsonl")
			require.NoError(t, os.WriteFile(other, []byte("{}\n"), 0o644))
			code, _, _ = runCLI(t, "", append([]string{"import", "-o", dir}, tc.args...)...)
			assert.Equal(t, 2, code)
			files, err := filepath.Glob(filepath.Join(dir, "*"))
			require.NoError(t, err)
			assert.Equal(t, []string{other}, files, "only the import's own files go")
		})
	}
	// Directories the import made above DIR go too; one that was there stays.
	base := t.TempDir()
	nested := filepath.Join(base, "out", "a", "b")
	code, _, _ := runCLI(t, "", "import", "-o", nested, "-from", "openai-chat", imp+"chat.json", bad)
	assert.Equal(t, 2, code)
	assert.NoDirExists(t, filepath.Join(base, "out"), "made by the import, up to the first that existed")
	assert.DirExists(t, base)

	// The same imports succeed once the bad input is left out: the files
	// were written (as they were read), and counted.
	dir := filepath.Join(t.TempDir(), "runs")
	code, _, errOut := runCLI(t, "", "import", "-o", dir, "-from", "openai-chat", imp+"chat.json", imp+"chat.json")
	require.Equal(t, 0, code, errOut)
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "chat#1#2.jsonl"), filepath.Join(dir, "chat#1.jsonl")}, files)
	assert.Regexp(t, `^agentstop import: 2 runs, \d+ events written to `, errOut)
}
