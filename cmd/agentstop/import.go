package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentstop/agentstop/importer"
	"github.com/agentstop/agentstop/internal/human"
)

const importUsage = `Usage: agentstop import -from FORMAT [-o DIR] [-strict] [-messages FIELD] [-id FIELD] [-error-prefix P] FILE...|-

Converts other agents' logs to agentstop's JSON Lines events, so that replay
and backtest can evaluate them. FORMAT is one of the formats listed under
-from (docs/import.md says how each maps). "-" reads stdin, named "stdin" in
errors and in run names (stdin, or stdin#1, … for openai-chat without -id).
Without -o the runs go to stdout, once every file is read, as one stream
whose events carry "run" (and a run's first event its "parent"); with -o,
each run is written to DIR/RUN.jsonl as soon as it is read. It ends with one
line on stderr: "agentstop import: N runs, M events written to DEST;
skipped: K KIND, …", counting the entries a format leaves out (a
demonstration in a SWE-agent history, say); -strict makes any such entry an
error, and nothing is written (files written by -o before are removed).

Exit status: 0 when every file was converted; 2 when a file cannot be read or
an entry cannot be mapped (or, with -strict, is left out), with one line on
stderr naming the file and entry.

Example:
  agentstop import -from mini-swe-agent -o runs/ trajs/*.traj.json
  jq -c '.[]' chats.json | agentstop import -from openai-chat -id id - | agentstop backtest -policy p.yaml /dev/stdin
`

func runImport(args []string, sio stdio) int {
	fs := newFlags("import")
	from := fs.String("from", "", "the input `FORMAT`: "+strings.Join(importer.Formats(), ", ")+" (required)")
	dir := fs.String("o", "", "write each run to `DIR`/RUN.jsonl instead of one stream on stdout")
	strict := fs.Bool("strict", false, "an entry that the format leaves out (counted in the summary) is an error")
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
	if n := slices.Index(files, "-"); n >= 0 && slices.Index(files[n+1:], "-") >= 0 {
		return fail("- (stdin) is given twice: stdin can be read once")
	}
	opts := importer.Options{MessagesField: *messages, IDField: *id, ErrorPrefix: *errorPrefix}
	out := importer.Output{Unique: true} // without -o, keeps the runs: the stream is interleaved in time order
	var w *runFiles
	if *dir != "" {
		w = newRunFiles(*dir)
		out.Emit = w.write
	}
	for _, f := range files {
		var err error
		if f == "-" {
			// Named "stdin" in errors and in run names, as a file
			// called stdin would be (replay names it so too).
			err = importer.Import(*from, "stdin", sio.in, opts, &out)
		} else {
			err = importer.ImportFile(*from, f, opts, &out)
		}
		if err != nil {
			w.discard()
			return fail("%v", err)
		}
	}
	skipped := skippedText(out.Skipped())
	if *strict && skipped != "none" {
		w.discard()
		return fail("-strict: entries left out: %s (nothing written)", skipped)
	}
	runs, events, dest := len(out.Runs), 0, "stdout"
	if w != nil {
		runs, events, dest = len(w.files), w.events, *dir
	} else {
		if err := out.Runs.WriteStream(sio.out); err != nil {
			return fail("cannot write the events: %v", err)
		}
		for _, r := range out.Runs {
			events += len(r.Events)
		}
	}
	fmt.Fprintf(sio.err, "agentstop import: %s, %s written to %s; skipped: %s\n", human.Count(runs, "run"), human.Count(events, "event"), dest, skipped)
	return exitOK
}

// runFiles writes each run to DIR/RUN.jsonl (-o) as soon as the format
// completes it, so that an import into a directory holds one file's runs
// at a time, never all its input. An import that fails is undone: discard
// removes the files it wrote, and the directories it made.
type runFiles struct {
	dir    string
	made   string // the topmost directory of dir that did not exist before the import; "" for none
	files  []string
	events int
}

func newRunFiles(dir string) *runFiles {
	w := &runFiles{dir: filepath.Clean(dir)}
	for d := w.dir; ; {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		w.made = d
		up := filepath.Dir(d)
		if up == d {
			break
		}
		d = up
	}
	return w
}

// write writes one run's file.
func (w *runFiles) write(r importer.Run) error {
	files, err := importer.Runs{r}.WriteDir(w.dir)
	w.files = append(w.files, files...)
	if err == nil {
		w.events += len(r.Events)
	}
	return err
}

// discard removes what w wrote (nothing for a nil w: no -o).
func (w *runFiles) discard() {
	if w == nil {
		return
	}
	for _, f := range w.files {
		_ = os.Remove(f)
	}
	if w.made == "" {
		return
	}
	for d := w.dir; ; d = filepath.Dir(d) {
		_ = os.Remove(d) // only when empty: nothing of anyone else's goes
		if d == w.made || d == filepath.Dir(d) {
			return
		}
	}
}

// skippedText lists what was left out, "3 file-history-snapshot, 1 …", or
// says "none".
func skippedText(skipped []importer.Skipped) string {
	if len(skipped) == 0 {
		return "none"
	}
	parts := make([]string, len(skipped))
	for i, s := range skipped {
		parts[i] = fmt.Sprintf("%d %s", s.Count, s.Kind)
	}
	return strings.Join(parts, ", ")
}
