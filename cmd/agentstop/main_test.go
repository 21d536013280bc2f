package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/termination"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const policy = "../../testdata/policy.yaml"

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// TestReplayGolden runs each recorded run in testdata/ with
// testdata/policy.yaml and compares stdout with the exact expected JSON.
func TestReplayGolden(t *testing.T) {
	for _, name := range []string{"react_complete", "runaway_search", "budget_burner"} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", "replay", "-policy", policy, "../../testdata/"+name+".jsonl")
			require.Equal(t, 0, code, stderr)
			assert.Empty(t, stderr)
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(stdout), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), stdout)
			assert.Equal(t, 1, strings.Count(stdout, "\n"), "one JSON object on one line")
			var res termination.Result
			require.NoError(t, json.Unmarshal([]byte(stdout), &res), "stdout reads back as a Result")
		})
	}
}

// The goldens say what the spec says about each run; these assertions keep
// an -update from silently blessing a regression.
func TestReplayGoldenMeaning(t *testing.T) {
	cases := map[string]struct {
		tag, outcome      string
		stoppedAt, events int
	}{
		"react_complete": {"natural_completion", "succeeded", 0, 8},
		"runaway_search": {"stall", "failed", 9, 9},
		"budget_burner":  {"budget_exhausted", "failed", 17, 17},
	}
	for name, want := range cases {
		b, err := os.ReadFile(filepath.Join("testdata", name+".golden"))
		require.NoError(t, err)
		var got struct {
			Stage            string `json:"stage"`
			TerminationCause string `json:"termination_cause"`
			Outcome          string `json:"outcome"`
			StoppedAt        int    `json:"stopped_at"`
			Events           int    `json:"events"`
		}
		require.NoError(t, json.Unmarshal(b, &got))
		assert.Equal(t, "replay", got.Stage, name)
		assert.Equal(t, want.tag, got.TerminationCause, name)
		assert.Equal(t, want.outcome, got.Outcome, name)
		assert.Equal(t, want.stoppedAt, got.StoppedAt, name)
		assert.Equal(t, want.events, got.Events, name)
	}
}

func TestReplayStage(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "replay", "-policy", policy, "-stage", "research", "../../testdata/runaway_search.jsonl")
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(stdout, `{"stage":"research","termination_cause":"stall",`), stdout)
}

func TestReplayStdin(t *testing.T) {
	log, err := os.ReadFile("../../testdata/runaway_search.jsonl")
	require.NoError(t, err)
	code, stdout, stderr := runCLI(t, string(log), "replay", "-policy", policy, "-")
	require.Equal(t, 0, code, stderr)
	want, err := os.ReadFile("testdata/runaway_search.golden")
	require.NoError(t, err)
	assert.Equal(t, string(want), stdout)

	// Errors on stdin name it.
	code, stdout, stderr = runCLI(t, "{\"kind\":\"input\"}\n{\"kind\":\"nap\"}\n", "replay", "-policy", policy, "-")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "agentstop replay: stdin: line 2: unknown kind \"nap\" (want one of input, message, tool_call, tool_result, handoff, stop, error, final)\n", stderr)
}

func TestReplayBadInput(t *testing.T) {
	dir := t.TempDir()
	badPolicy := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(badPolicy, []byte("max_iterations: 25\ntoken_budget:\n  total: 1000\n  pressure: 1.5\n"), 0o600))
	typoPolicy := filepath.Join(dir, "typo.yaml")
	require.NoError(t, os.WriteFile(typoPolicy, []byte("max_tool_call: 3\n"), 0o600))
	missing := filepath.Join(dir, "missing.jsonl")

	cases := []struct {
		name   string
		args   []string
		stderr string // exact
	}{
		{"malformed line", []string{"replay", "-policy", policy, "../../testdata/malformed.jsonl"},
			"agentstop replay: ../../testdata/malformed.jsonl: line 2: malformed JSON: unexpected end of JSON input\n"},
		{"unknown kind", []string{"replay", "-policy", policy, "../../testdata/unknown_kind.jsonl"},
			"agentstop replay: ../../testdata/unknown_kind.jsonl: line 3: unknown kind \"thinking\" (want one of input, message, tool_call, tool_result, handoff, stop, error, final)\n"},
		{"invalid policy value", []string{"replay", "-policy", badPolicy, "../../testdata/react_complete.jsonl"},
			"agentstop replay: " + badPolicy + ": policy.token_budget.pressure: must be in (0,1), got 1.5 (line 4)\n"},
		{"unknown policy key", []string{"replay", "-policy", typoPolicy, "../../testdata/react_complete.jsonl"},
			"agentstop replay: " + typoPolicy + ": policy.max_tool_call: unknown key (did you mean \"max_tool_calls\"?) (line 1)\n"},
		{"missing events file", []string{"replay", "-policy", policy, missing},
			"agentstop replay: open " + missing + ": no such file or directory\n"},
		{"missing policy file", []string{"replay", "-policy", filepath.Join(dir, "nope.yaml"), "../../testdata/react_complete.jsonl"},
			"agentstop replay: open " + filepath.Join(dir, "nope.yaml") + ": no such file or directory\n"},
		{"no policy", []string{"replay", "../../testdata/react_complete.jsonl"},
			"agentstop replay: -policy is required (see agentstop replay -h)\n"},
		{"no events file", []string{"replay", "-policy", policy},
			"agentstop replay: want exactly one events file (or - for stdin), got 0\n"},
		{"two events files", []string{"replay", "-policy", policy, "a.jsonl", "b.jsonl"},
			"agentstop replay: want exactly one events file (or - for stdin), got 2\n"},
		{"empty stage", []string{"replay", "-policy", policy, "-stage", " ", "../../testdata/react_complete.jsonl"},
			"agentstop replay: -stage must not be empty\n"},
		{"unknown command", []string{"replya"},
			"agentstop: unknown command \"replya\" (want replay; see agentstop -h)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", tc.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout)
			assert.Equal(t, tc.stderr, stderr)
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line on stderr")
		})
	}
}

func TestReplayBadFlag(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "replay", "-polcy", policy, "x.jsonl")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "agentstop replay: flag provided but not defined: -polcy (see agentstop replay -h)\n", stderr)
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"replay", "-h"}, {"replay", "--help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", args...)
			assert.Equal(t, 0, code)
			assert.Empty(t, stderr)
			assert.Contains(t, stdout, "agentstop replay -policy POLICY.yaml [-stage NAME] EVENTS.jsonl|-")
			assert.Contains(t, stdout, "Example:\n  agentstop replay -policy testdata/policy.yaml testdata/runaway_search.jsonl\n")
			if args[0] == "replay" {
				assert.Contains(t, stdout, "-policy")
				assert.Contains(t, stdout, "-stage")
				assert.Contains(t, stdout, `(default "replay")`)
			}
		})
	}
	// No arguments: usage on stderr, exit 2.
	code, stdout, stderr := runCLI(t, "")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "Usage:")
}

func TestReplayFlagsAfterFile(t *testing.T) {
	code, out, errOut := runCLI(t, "", "replay", "../../testdata/runaway_search.jsonl", "-policy", "../../testdata/policy.yaml", "-stage", "researcher")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"stage":"researcher","termination_cause":"stall"`)

	code, _, errOut = runCLI(t, "", "replay", "-policy", "../../testdata/policy.yaml", "a.jsonl", "b.jsonl")
	assert.Equal(t, 2, code)
	assert.Equal(t, "agentstop replay: want exactly one events file (or - for stdin), got 2\n", errOut)
}
