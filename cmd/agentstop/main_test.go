package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
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
	code = run(args, stdio{in: strings.NewReader(stdin), out: &out, err: &errb, getenv: func(string) string { return "" }})
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
		evidence          []int
	}{
		"react_complete": {"natural_completion", "succeeded", 0, 8, []int{}},
		"runaway_search": {"stall", "failed", 9, 9, []int{3, 6, 9}}, // the three repeated calls
		"budget_burner":  {"budget_exhausted", "failed", 17, 17, []int{17}},
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
			Evidence         []int  `json:"evidence"`
		}
		require.NoError(t, json.Unmarshal(b, &got))
		assert.Equal(t, "replay", got.Stage, name)
		assert.Equal(t, want.tag, got.TerminationCause, name)
		assert.Equal(t, want.outcome, got.Outcome, name)
		assert.Equal(t, want.stoppedAt, got.StoppedAt, name)
		assert.Equal(t, want.events, got.Events, name)
		assert.Equal(t, want.evidence, got.Evidence, name)
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

// TestReplayLenient: -lenient replays a log cut off by a crash up to its
// truncated last line and says so in the result; without the flag the same
// log is bad input. A replay that stops before the cut never reaches it.
func TestReplayLenient(t *testing.T) {
	log, err := os.ReadFile("../../testdata/react_complete.jsonl")
	require.NoError(t, err)
	cut := string(log[:len(log)-20]) // inside the last event, no newline after it
	code, stdout, stderr := runCLI(t, cut, "replay", "-policy", policy, "-lenient", "-")
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	assert.Equal(t, true, res["truncated"])
	assert.Equal(t, "natural_completion", res["termination_cause"])
	assert.EqualValues(t, 7, res["events"], "the events before the cut line")
	assert.Contains(t, res, "duration")

	code, stdout, stderr = runCLI(t, cut, "replay", "-policy", policy, "-")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "agentstop replay: stdin: the log looks truncated at line 8: its last line ends inside an event, "+
		"with no newline after it (was the agent stopped while writing?); -lenient evaluates the events before it\n", stderr)

	// The stall of runaway_search fires on event 9: a cut after it is
	// never read, with or without -lenient, and the result is the golden one.
	log, err = os.ReadFile("../../testdata/runaway_search.jsonl")
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/runaway_search.golden")
	require.NoError(t, err)
	lines := strings.SplitAfter(string(log), "\n")
	require.Greater(t, len(lines), 10)
	cut = strings.Join(lines[:10], "") + lines[10][:len(lines[10])/2]
	for _, args := range [][]string{{"replay", "-policy", policy, "-"}, {"replay", "-policy", policy, "-lenient", "-"}} {
		code, stdout, stderr = runCLI(t, cut, args...)
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, string(want), stdout)
		assert.NotContains(t, stdout, "truncated")
	}
}

// writeFile writes content to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// assertUserTerms fails if a message leaks Go types, layouts or library
// internals instead of saying what to fix.
func assertUserTerms(t *testing.T, msg string) {
	t.Helper()
	for _, leak := range []string{"Go ", "int64", "float64", "struct", "unmarshal", "json:", "2006-01-02", "bufio", "token too long",
		"termination.", "invalid value"} {
		assert.NotContains(t, msg, leak)
	}
	// An os error as it comes ("open x: no such file", "read x: is a
	// directory") names the operation instead of what to fix.
	assert.NotRegexp(t, `(^|: )(open|read|stat) \S+: `, msg)
}

func TestReplayBadInput(t *testing.T) {
	dir := t.TempDir()
	badPolicy := writeFile(t, dir, "bad.yaml", "max_iterations: 25\ntoken_budget:\n  total: 1000\n  pressure: 1.5\n")
	typoPolicy := writeFile(t, dir, "typo.yaml", "max_tool_call: 3\n")
	missing := filepath.Join(dir, "missing.jsonl")
	events := func(name, content string) string { return writeFile(t, dir, name, content) }
	badTime := events("time.jsonl", "{\"kind\":\"input\"}\n{\"kind\":\"message\",\"time\":\"yesterday\"}\n")
	badTokens := events("tokens.jsonl", "{\"kind\":\"message\",\"usage\":{\"input_tokens\":\"12\"}}\n")
	typoUsage := events("usage.jsonl", "{\"kind\":\"input\"}\n\n{\"kind\":\"message\",\"usage\":{\"input_token\":12}}\n")
	notObject := events("array.jsonl", "{\"kind\":\"input\"}\n[1,2]\n")
	document := events("trajectory.traj", "{\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"hi\"}\n  ]\n}\n")
	array := events("events-array.txt", "[{\"kind\":\"input\"},{\"kind\":\"final\"}]")
	truncated := events("crashed.jsonl", "{\"kind\":\"input\"}\n{\"kind\":\"message\",\"text\":\"C:\\")
	long := events("long.jsonl", "{\"kind\":\"input\"}\n{\"kind\":\"message\",\"text\":\""+strings.Repeat("x", 16<<20)+"\"}\n")

	cases := []struct {
		name   string
		args   []string
		stderr string // exact
	}{
		{"malformed line", []string{"replay", "-policy", policy, "../../testdata/malformed.jsonl"},
			"agentstop replay: ../../testdata/malformed.jsonl: line 2: malformed JSON: the line ends inside an event (a string, object or array is not closed)\n"},
		{"unknown kind", []string{"replay", "-policy", policy, "../../testdata/unknown_kind.jsonl"},
			"agentstop replay: ../../testdata/unknown_kind.jsonl: line 3: unknown kind \"thinking\" (want one of input, message, tool_call, tool_result, handoff, stop, error, final)\n"},
		{"bad time", []string{"replay", "-policy", policy, badTime},
			"agentstop replay: " + badTime + ": line 2: time: must be an RFC 3339 timestamp such as 2026-11-20T09:00:04Z, got \"yesterday\"\n"},
		{"tokens as a string", []string{"replay", "-policy", policy, badTokens},
			"agentstop replay: " + badTokens + ": line 1: usage.input_tokens: must be an integer, got a string\n"},
		{"typo in a usage key", []string{"replay", "-policy", policy, typoUsage},
			"agentstop replay: " + typoUsage + ": line 3: usage: unknown key \"input_token\" (want input_tokens or output_tokens)\n"},
		{"not an object", []string{"replay", "-policy", policy, notObject},
			"agentstop replay: " + notObject + ": line 2: an event must be a JSON object, got an array\n"},
		{"a pretty-printed JSON document", []string{"replay", "-policy", policy, document},
			"agentstop replay: " + document + ": line 1: the file is a JSON document, not JSON Lines (one event object per line): " +
				"its first object does not end on its first line (a pretty-printed object); agentstop import converts agents' logs into events\n"},
		{"a JSON array of events", []string{"replay", "-policy", policy, "-lenient", array},
			"agentstop replay: " + array + ": line 1: the file is a JSON document, not JSON Lines (one event object per line): " +
				"it starts with an array (a list of events or of runs); agentstop import converts agents' logs into events\n"},
		{"a truncated log", []string{"replay", "-policy", policy, truncated},
			"agentstop replay: " + truncated + ": the log looks truncated at line 2: its last line ends inside an event, " +
				"with no newline after it (was the agent stopped while writing?); -lenient evaluates the events before it\n"},
		{"line too long", []string{"replay", "-policy", policy, long},
			"agentstop replay: " + long + ": line 2: longer than 16 MiB, the limit for one event\n"},
		{"events file is a directory", []string{"replay", "-policy", policy, dir},
			"agentstop replay: " + dir + " is a directory, not an events file (give a JSON Lines file, or - for stdin)\n"},
		{"missing events file", []string{"replay", "-policy", policy, missing},
			"agentstop replay: cannot open the events file " + missing + ": no such file or directory\n"},
		{"invalid policy value", []string{"replay", "-policy", badPolicy, "../../testdata/react_complete.jsonl"},
			"agentstop replay: " + badPolicy + ": policy.token_budget.pressure: must be in (0,1), got 1.5 (line 4)\n"},
		{"unknown policy key", []string{"replay", "-policy", typoPolicy, "../../testdata/react_complete.jsonl"},
			"agentstop replay: " + typoPolicy + ": policy.max_tool_call: unknown key (did you mean \"max_tool_calls\"?) (line 1)\n"},
		{"missing policy file", []string{"replay", "-policy", filepath.Join(dir, "nope.yaml"), "../../testdata/react_complete.jsonl"},
			"agentstop replay: cannot read the policy file " + filepath.Join(dir, "nope.yaml") + ": no such file or directory\n"},
		{"policy is a directory", []string{"replay", "-policy", dir, "../../testdata/react_complete.jsonl"},
			"agentstop replay: " + dir + " is a directory, not a policy file\n"},
		{"no policy", []string{"replay", "../../testdata/react_complete.jsonl"},
			"agentstop replay: -policy or -policies is required (see agentstop replay -h)\n"},
		{"no events file", []string{"replay", "-policy", policy},
			"agentstop replay: want exactly one events file (or - for stdin), got 0\n"},
		{"two events files", []string{"replay", "-policy", policy, "a.jsonl", "b.jsonl"},
			"agentstop replay: want exactly one events file (or - for stdin), got 2\n"},
		{"empty stage", []string{"replay", "-policy", policy, "-stage", " ", "../../testdata/react_complete.jsonl"},
			"agentstop replay: -stage \" \" starts with ' ': a stage name is 1 to 128 of the characters A-Z a-z 0-9 . _ - (a safe file name), starting with a letter or digit\n"},
		{"unknown -fail-on outcome", []string{"replay", "-policy", policy, "-fail-on", "faild", "../../testdata/react_complete.jsonl"},
			"agentstop replay: -fail-on: unknown outcome \"faild\" (want failed, skipped, or failed,skipped)\n"},
		{"-fail-on succeeded", []string{"replay", "-policy", policy, "-fail-on", "failed,succeeded", "../../testdata/react_complete.jsonl"},
			"agentstop replay: -fail-on: unknown outcome \"succeeded\" (want failed, skipped, or failed,skipped)\n"},
		{"-fail-on empty item", []string{"replay", "-policy", policy, "-fail-on", "failed,", "../../testdata/react_complete.jsonl"},
			"agentstop replay: -fail-on: empty outcome in \"failed,\" (want failed, skipped, or failed,skipped)\n"},
		{"bad flag", []string{"replay", "-polcy", policy, "x.jsonl"},
			"agentstop replay: flag provided but not defined: -polcy (see agentstop replay -h)\n"},
		{"flag without its value", []string{"replay", "x.jsonl", "-policy"},
			"agentstop replay: flag needs an argument: -policy (see agentstop replay -h)\n"},
		{"unknown command", []string{"replya"},
			"agentstop: unknown command \"replya\" (want one of replay, backtest, import, version, runs, stop, raise, block, unblock, blocks, budgets; see agentstop -h)\n"},
		{"help for an unknown command", []string{"help", "replya"},
			"agentstop: unknown command \"replya\" (want one of replay, backtest, import, version, runs, stop, raise, block, unblock, blocks, budgets; see agentstop -h)\n"},
		{"version with an argument", []string{"version", "now"},
			"agentstop version: takes no arguments, got \"now\"\n"},
		{"version with a flag", []string{"version", "-json"},
			"agentstop version: flag provided but not defined: -json (see agentstop version -h)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", tc.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout)
			assert.Equal(t, tc.stderr, stderr)
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line on stderr")
			assertUserTerms(t, stderr)
		})
	}
}

func TestReplayByteOrderMark(t *testing.T) {
	log, err := os.ReadFile("../../testdata/runaway_search.jsonl")
	require.NoError(t, err)
	path := writeFile(t, t.TempDir(), "bom.jsonl", "\xef\xbb\xbf"+string(log))
	code, stdout, stderr := runCLI(t, "", "replay", "-policy", policy, path)
	require.Equal(t, 0, code, stderr)
	want, err := os.ReadFile("testdata/runaway_search.golden")
	require.NoError(t, err)
	assert.Equal(t, string(want), stdout)
}

// TestReplayStopsReading: the lines after the stopping event are not read,
// so a corrupt tail does not turn a result into an error.
func TestReplayStopsReading(t *testing.T) {
	log, err := os.ReadFile("../../testdata/runaway_search.jsonl")
	require.NoError(t, err)
	code, stdout, stderr := runCLI(t, string(log)+"{not json\n", "replay", "-policy", policy, "-")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, `"termination_cause":"stall"`)
}

// TestReplayIgnoresFleetBudget: a policy with a fleet_budget is validated,
// replayed under its own limits, and the one stderr line says the shared
// budget was ignored (§7).
func TestReplayIgnoresFleetBudget(t *testing.T) {
	dir := t.TempDir()
	base, err := os.ReadFile(policy)
	require.NoError(t, err)
	withFleet := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(withFleet, append(base, []byte("\nfleet_budget: {key: stage, window: 1h, total_tokens: 10}\n")...), 0o600))
	code, stdout, stderr := runCLI(t, "", "replay", "-policy", withFleet, "../../testdata/runaway_search.jsonl")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "agentstop replay: "+withFleet+": fleet_budget is valid but ignored: replay evaluates one run without a fleet\n", stderr)
	want, err := os.ReadFile("testdata/runaway_search.golden")
	require.NoError(t, err)
	assert.Equal(t, string(want), stdout, "the run's own policy decides, as without fleet_budget")

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("fleet_budget: {key: stage, window: 10ms, total_tokens: 10}\n"), 0o600))
	code, _, stderr = runCLI(t, "", "replay", "-policy", bad, "../../testdata/runaway_search.jsonl")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "fleet_budget.window")
}

func TestReplayFailOn(t *testing.T) {
	cases := []struct {
		log, failOn string
		code        int
		stderr      string
	}{
		{"runaway_search", "", 0, ""},
		{"runaway_search", "failed", 1, "agentstop replay: outcome failed (termination_cause stall) is listed in -fail-on\n"},
		{"runaway_search", "failed,skipped", 1, "agentstop replay: outcome failed (termination_cause stall) is listed in -fail-on\n"},
		{"budget_burner", " skipped , failed ", 1, "agentstop replay: outcome failed (termination_cause budget_exhausted) is listed in -fail-on\n"},
		{"runaway_search", "skipped", 0, ""},
		{"react_complete", "failed", 0, ""},
		{"react_complete", "failed,skipped", 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.log+" "+tc.failOn, func(t *testing.T) {
			args := []string{"replay", "-policy", policy}
			if tc.failOn != "" {
				args = append(args, "-fail-on", tc.failOn)
			}
			code, stdout, stderr := runCLI(t, "", append(args, "../../testdata/"+tc.log+".jsonl")...)
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.stderr, stderr)
			want, err := os.ReadFile("testdata/" + tc.log + ".golden")
			require.NoError(t, err)
			assert.Equal(t, string(want), stdout, "the result is printed whatever the exit status")
		})
	}
}

func TestUsage(t *testing.T) {
	// agentstop -h lists every command of the table with its summary.
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		code, stdout, stderr := runCLI(t, "", args...)
		assert.Equal(t, 0, code)
		assert.Empty(t, stderr)
		for _, c := range commands {
			assert.Contains(t, stdout, "  "+c.name)
			assert.Contains(t, stdout, c.summary)
		}
		assert.Contains(t, stdout, "Example:\n  agentstop replay -policy testdata/policy.yaml testdata/runaway_search.jsonl\n")
	}
	// Every command's -h prints its usage and lists its flags, on stdout.
	flags := map[string][]string{
		"replay":   {"-policy", "-stage", "(default replay)", "-fail-on", "-format", "-lenient"},
		"backtest": {"-policy", "-labels", "-all", "-lenient", "-format", "-j", "-max-false-stops"},
		"import":   {"-from", "-o", "-strict", "-messages", "-id", "-error-prefix"},
		"version":  {},
		"runs":     {"-redis", "-json", "-run", "-stage", "-label", "-all", "-prefix", "-held"},
		"raise":    {"-redis", "-run", "-iterations", "-tool-calls", "-tokens", "-input-tokens", "-output-tokens", "-cost", "-wait", "-by", "-json"},
		"stop":     {"-redis", "-reason", "-run", "-stage", "-label", "-all", "-wait", "-by", "-json"},
		"block":    {"-redis", "-reason", "-stage", "-label", "-all", "-expire", "-by", "-json"},
		"unblock":  {"-redis", "-stage", "-label", "-all", "-json"},
		"blocks":   {"-redis", "-json"},
		"budgets":  {"-redis", "-json"},
	}
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, stdout, stderr := runCLI(t, "", args...)
				assert.Equal(t, 0, code)
				assert.Empty(t, stderr)
				assert.True(t, strings.HasPrefix(stdout, "Usage: agentstop "+c.name), stdout)
				want, ok := flags[c.name]
				require.True(t, ok, "add the flags of %s to this test", c.name)
				for _, f := range want {
					assert.Contains(t, stdout, f)
				}
			})
		}
	}
	assert.Contains(t, func() string { _, out, _ := runCLI(t, "", "replay", "-h"); return out }(),
		"agentstop replay -policy POLICY.yaml [-policies DIR] [-stage NAME] [-lenient] [-format json|table] [-fail-on failed[,skipped]] EVENTS.jsonl|-")

	// No arguments: one line on stderr, exit 2.
	code, stdout, stderr := runCLI(t, "")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "agentstop: want a command, one of replay, backtest, import, version, runs, stop, raise, block, unblock, blocks, budgets (see agentstop -h)\n", stderr)
}

func TestVersion(t *testing.T) {
	real := readBuildInfo
	t.Cleanup(func() { readBuildInfo = real })
	cases := []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"installed at a tag", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.4.0"}}, true, "agentstop v1.4.0\n"},
		{"built in a checkout", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v0.0.0-20261123110000-eb9b3d4a1b2c+dirty"}}, true,
			"agentstop v0.0.0-20261123110000-eb9b3d4a1b2c+dirty\n"},
		{"no version recorded", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, true, "agentstop (devel)\n"},
		{"empty version", &debug.BuildInfo{Main: debug.Module{Path: modulePath}}, true, "agentstop (devel)\n"},
		{"a dependency of another main module", &debug.BuildInfo{Main: debug.Module{Path: "example.com/tool", Version: "v9.9.9"},
			Deps: []*debug.Module{{Path: "go.yaml.in/yaml/v3", Version: "v3.0.6"}, {Path: modulePath, Version: "v1.2.3"}}}, true, "agentstop v1.2.3\n"},
		{"no build information", nil, false, "agentstop (devel)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			readBuildInfo = func() (*debug.BuildInfo, bool) { return tc.info, tc.ok }
			for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
				code, stdout, stderr := runCLI(t, "", args...)
				assert.Equal(t, 0, code)
				assert.Empty(t, stderr)
				assert.Equal(t, tc.want, stdout)
			}
		})
	}
}

// TestBinary builds the command and runs it as a user would: exit statuses,
// one line on stderr, the version.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "agentstop")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	runBin := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), stdout.String(), stderr.String()
		}
		require.NoError(t, err)
		return 0, stdout.String(), stderr.String()
	}
	code, stdout, _ := runBin("version")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `^agentstop (v\S+|\(devel\))\n$`, stdout)

	code, stdout, stderr := runBin("replay", "-policy", policy, "-fail-on", "failed", "../../testdata/runaway_search.jsonl")
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout, `"termination_cause":"stall"`)
	assert.Equal(t, "agentstop replay: outcome failed (termination_cause stall) is listed in -fail-on\n", stderr)

	code, _, stderr = runBin("replay", "-policy", policy, "../../testdata/malformed.jsonl")
	assert.Equal(t, 2, code)
	assert.Equal(t, "agentstop replay: ../../testdata/malformed.jsonl: line 2: malformed JSON: the line ends inside an event (a string, object or array is not closed)\n", stderr)

	code, stdout, _ = runBin("-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "version")
}

func TestReplayFlagsAfterFile(t *testing.T) {
	code, out, errOut := runCLI(t, "", "replay", "../../testdata/runaway_search.jsonl", "-policy", "../../testdata/policy.yaml", "-stage", "researcher", "-fail-on", "skipped")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"stage":"researcher","termination_cause":"stall"`)

	code, _, errOut = runCLI(t, "", "replay", "-policy", "../../testdata/policy.yaml", "a.jsonl", "b.jsonl")
	assert.Equal(t, 2, code)
	assert.Equal(t, "agentstop replay: want exactly one events file (or - for stdin), got 2\n", errOut)
}

// TestReadmeReplayExample: the README's replay example shows what the
// command prints for it.
func TestReadmeReplayExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "## Replay recorded runs\n")
	require.True(t, ok, "README has a replay section")
	_, block, ok := strings.Cut(section, "```json\n")
	require.True(t, ok)
	block, _, _ = strings.Cut(block, "```")
	code, stdout, stderr := runCLI(t, "", "replay", "-policy", "../../testdata/policy.yaml", "../../testdata/runaway_search.jsonl")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, block, stdout)
}
