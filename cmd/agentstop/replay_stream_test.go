package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// wholeLogReplay is how replay printed a log of many runs before it
// streamed: every event decoded and held, then replay.Runs over
// them all.
func wholeLogReplay(t *testing.T, policyPath string, log []byte, stage string, lenient bool) string {
	t.Helper()
	data, err := os.ReadFile(policyPath)
	require.NoError(t, err)
	p, err := termination.ParsePolicy(data)
	require.NoError(t, err)
	var (
		events    []termination.Event
		truncated bool
	)
	dec := codec.NewDecoder(bytes.NewReader(log))
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if lenient && errors.Is(err, codec.ErrTruncated) {
			truncated = true
			break
		}
		require.NoError(t, err)
		events = append(events, ev)
	}
	var out bytes.Buffer
	for _, res := range replay.Runs(&p, events, replay.WithStage(stage)) {
		res.Truncated = truncated && len(res.Fired) == 0 // §4: only the runs that reached the cut line
		b, err := json.Marshal(res)
		require.NoError(t, err)
		out.Write(b)
		out.WriteByte('\n')
	}
	return out.String()
}

// TestReplayStreamedEqualsWholeLog: replay of a log of many runs, from a
// file and from stdin (copied to a temporary file, removed after), strict
// and -lenient over a truncated last line, prints what replay printed when
// it held the whole log: interleaved trees of real-sized runs, with a
// policy that stops runs (tree: limits, cascades, timeouts) and one that
// lets them end.
func TestReplayStreamedEqualsWholeLog(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := t.TempDir()
	strict := filepath.Join(dir, "strict.yaml")
	require.NoError(t, os.WriteFile(strict, []byte(`max_iterations: {limit: 4, pressure: 0.5}
stall: {repeats: 2}
timeout: 15s
tree: {max_tool_calls: 10, token_budget: {total: 60000, pressure: 0.5}, timeout: 30s}
`), 0o644))
	loose := filepath.Join(dir, "loose.yaml")
	require.NoError(t, os.WriteFile(loose, []byte(manyRunsTreePolicy), 0o644))

	logs := map[string][]byte{}
	tree, err := os.ReadFile("../../testdata/tree_planner.jsonl")
	require.NoError(t, err)
	logs["tree_planner"] = tree
	for seed := range uint64(4) {
		var b bytes.Buffer
		_, err := writeManyRuns(&b, seed, 20+int(seed)*15, 150_000)
		require.NoError(t, err)
		logs[fmt.Sprintf("generated-%d", seed)] = b.Bytes()
		cut := b.Bytes()[:b.Len()-300] // inside the last line
		logs[fmt.Sprintf("generated-%d-truncated", seed)] = cut
	}
	for name, log := range logs {
		path := filepath.Join(dir, name+".jsonl")
		require.NoError(t, os.WriteFile(path, log, 0o644))
		truncated := bytes.HasSuffix([]byte(name), []byte("truncated"))
		for _, pol := range []string{strict, loose} {
			for _, stdin := range []bool{false, true} {
				args := []string{"replay", "-policy", pol, "-stage", "s"}
				if truncated {
					args = append(args, "-lenient")
				}
				in := ""
				if stdin {
					args, in = append(args, "-"), string(log)
				} else {
					args = append(args, path)
				}
				code, stdout, stderr := runCLI(t, in, args...)
				require.Equal(t, 0, code, "%s %s stdin=%v: %s", name, pol, stdin, stderr)
				require.Equal(t, wholeLogReplay(t, pol, log, "s", truncated), stdout, "%s %s stdin=%v", name, pol, stdin)
			}
		}
		if truncated {
			// Strict, a truncated log prints its error only.
			code, stdout, stderr := runCLI(t, string(log), "replay", "-policy", strict, "-")
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, "looks truncated")
		}
	}
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, entries, "the copy of stdin is removed")
}

// TestReplayManyRunsBadLineLate: a bad line after runs have ended prints
// its error and no result, as when the log was read whole first.
func TestReplayManyRunsBadLineLate(t *testing.T) {
	log := `{"kind":"input","run":"a"}
{"kind":"final","run":"a","text":"done"}
{"kind":"input","run":"b"}
{"kind":"message","run":"b","usage":{"input_tokens":"many"}}
`
	path := filepath.Join(t.TempDir(), "runs.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(log), 0o644))
	code, stdout, stderr := runCLI(t, "", "replay", "-policy", policy, path)
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "agentstop replay: "+path+": line 4: usage.input_tokens: must be an integer, got a string\n", stderr)
}
