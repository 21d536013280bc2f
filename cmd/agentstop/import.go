package main

import (
	"fmt"
	"strings"

	"github.com/agentstop/agentstop/importer"
)

const importUsage = `Usage: agentstop import -from FORMAT [-o DIR] [-messages FIELD] [-id FIELD] [-error-prefix P] FILE...

Converts other agents' logs to agentstop's JSON Lines events, so that replay
and backtest can evaluate them. FORMAT is one of openai-chat, mini-swe-agent,
otlp, claude-code, codex or gemini-cli (docs/import.md says how each maps).
Without -o the runs go to stdout as one stream whose events carry "run" (and
a run's first event its "parent"); with -o, each run is written to
DIR/RUN.jsonl.

Exit status: 0 when every file was converted; 2 when a file cannot be read or
an entry cannot be mapped, with one line on stderr naming the file and entry.

Example:
  agentstop import -from mini-swe-agent -o runs/ trajs/*.traj.json
`

func runImport(args []string, sio stdio) int {
	fs := newFlags("import")
	from := fs.String("from", "", "the input `FORMAT`: "+strings.Join(importer.Formats(), ", ")+" (required)")
	dir := fs.String("o", "", "write each run to `DIR`/RUN.jsonl instead of one stream on stdout")
	messages := fs.String("messages", "", "openai-chat: the `FIELD` holding the list of messages (default \"messages\")")
	id := fs.String("id", "", "openai-chat: the `FIELD` naming the run (default: runs are named FILE#N)")
	errorPrefix := fs.String("error-prefix", "", "openai-chat: a tool message whose content starts with `P` is a failed tool result")
	files, code, done := parseFlags(fs, args, importUsage, sio)
	if done {
		return code
	}
	fail := func(format string, a ...any) int { return failf(sio, "import", format, a...) }
	if *from == "" {
		return fail("-from is required: one of %s", strings.Join(importer.Formats(), ", "))
	}
	if len(files) == 0 {
		return fail("want at least one FILE to import")
	}
	if *from != "openai-chat" {
		for name, v := range map[string]string{"-messages": *messages, "-id": *id, "-error-prefix": *errorPrefix} {
			if v != "" {
				return fail("%s applies to -from openai-chat only", name)
			}
		}
	}
	opts := importer.Options{MessagesField: *messages, IDField: *id, ErrorPrefix: *errorPrefix}
	var runs []importer.Run
	out := importer.NewOutput(func(r importer.Run) error { runs = append(runs, r); return nil })
	for _, f := range files {
		if err := importer.ImportFile(*from, f, opts, out); err != nil {
			return fail("%v", err)
		}
	}
	importer.Uniquify(runs)
	if *dir == "" {
		if err := importer.WriteStream(sio.out, runs); err != nil {
			return fail("cannot write the events: %v", err)
		}
		return exitOK
	}
	written, err := importer.WriteDir(*dir, runs)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(sio.err, "agentstop import: %d runs written to %s\n", len(written), *dir)
	return exitOK
}
