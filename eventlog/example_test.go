package eventlog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentstop/agentstop/eventlog"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Record a stage's runs as a backtest corpus: the event log is one more
// recorder of the stage.
func ExampleWriter() {
	dir, _ := os.MkdirTemp("", "eventlog")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "events.jsonl")

	log, err := eventlog.New(path, eventlog.WithoutContent(), eventlog.WithMaxBytes(256<<20))
	if err != nil {
		panic(err)
	}
	defer log.Close() // writes what is buffered
	stage, err := middleware.New("coder",
		middleware.WithPolicy(termination.MustParsePolicy("max_tool_calls: 50")),
		middleware.WithParticipant(log))
	if err != nil {
		panic(err)
	}

	_, run := stage.Start(context.Background())
	run.Observe(termination.Event{Kind: termination.KindInput, Text: "Fix the flaky test"})
	run.Observe(termination.Event{Kind: termination.KindToolCall, Tool: "bash", Args: []byte(`{"command": "go test ./..."}`)})
	run.Finish(nil)

	log.Close()
	data, _ := os.ReadFile(path)
	for line := range strings.Lines(string(data)) {
		fmt.Println(strings.Contains(line, `"run":"`+run.ID()+`"`), strings.Contains(line, "go test"), strings.Contains(line, `"kind":"end"`))
	}
	// Output:
	// true false false
	// true false false
	// true false true
}
