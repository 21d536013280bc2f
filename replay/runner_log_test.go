package replay_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// TestRunnerLog: Runner.Log over a log gives what Runs gives for its
// events, with the first pass's index (each run ends at its last line) or
// without it (the live runs end at the end of the log); a bad line is the
// decoder's error and no results; a truncated last line is that error,
// or, with WithLenient, the end of the log.
func TestRunnerLog(t *testing.T) {
	log := lines(
		`{"kind":"input","run":"p"}`,
		`{"kind":"tool_call","run":"c","parent":"p","tool":"t"}`,
		`{"kind":"tool_call","run":"c","tool":"t"}`,
		`{"kind":"tool_call","run":"c","tool":"t"}`,
		`{"kind":"final","run":"p"}`,
	)
	p := termination.MustParsePolicy("max_tool_calls: 1")
	var events []termination.Event
	dec := codec.NewDecoder(strings.NewReader(log))
	for {
		ev, err := dec.Next()
		if err != nil {
			break
		}
		events = append(events, ev)
	}
	want := replay.Runs(&p, events)
	require.Len(t, want, 2)

	idx := codec.IndexRuns(strings.NewReader(log))
	got, truncated, err := replay.NewRunner(&p, replay.WithIndex(&idx)).Log(strings.NewReader(log))
	require.NoError(t, err)
	assert.False(t, truncated)
	assert.Equal(t, want, got, "with the index")

	got, _, err = replay.NewRunner(&p).Log(strings.NewReader(log))
	require.NoError(t, err)
	require.Len(t, got, 2, "without the index every run still ends")
	assert.Equal(t, want[0].Cause, got[0].Cause)

	bad := strings.Replace(log, `{"kind":"final","run":"p"}`, `{"kind":"nope","run":"p"}`, 1)
	got, _, err = replay.NewRunner(&p).Log(strings.NewReader(bad))
	var de *codec.DecodeError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 5, de.Line)
	assert.Nil(t, got)

	cut := strings.TrimSuffix(log, "\n") + "\n" + `{"kind":"message","run":"p","te`
	_, _, err = replay.NewRunner(&p).Log(strings.NewReader(cut))
	assert.True(t, errors.Is(err, codec.ErrTruncated), "strict: %v", err)
	got, truncated, err = replay.NewRunner(&p, replay.WithLenient()).Log(bytes.NewReader([]byte(cut)))
	require.NoError(t, err)
	assert.True(t, truncated)
	assert.Equal(t, want, got, "lenient: the lines before the cut, as without it")
}
