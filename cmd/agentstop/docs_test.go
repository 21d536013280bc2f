package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBacktestDocsRunAsWritten runs the worked example of docs/backtest.md
// and of the README as written: every "$ agentstop …" line of their
// console blocks, from a directory holding docs/backtest/, each command's
// output compared with the lines shown under it (stdout, then stderr; a
// "> FILE" at the end sends stdout to FILE).
func TestBacktestDocsRunAsWritten(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	for _, doc := range []string{"docs/backtest.md", "README.md"} {
		t.Run(doc, func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join(root, doc))
			require.NoError(t, err)
			dir := t.TempDir()
			require.NoError(t, os.CopyFS(filepath.Join(dir, "docs", "backtest"), os.DirFS(filepath.Join(root, "docs", "backtest"))))
			t.Chdir(dir)
			commands := 0
			for _, block := range consoleBlocks(string(text)) {
				for _, c := range block {
					commands++
					args := strings.Fields(c.line)
					require.Equal(t, "agentstop", args[0], c.line)
					var redirect string
					if n := len(args); n > 2 && args[n-2] == ">" {
						redirect, args = args[n-1], args[:n-2]
					}
					var expanded []string
					for _, a := range args[1:] {
						if strings.ContainsAny(a, "*?[") {
							m, err := filepath.Glob(a)
							require.NoError(t, err)
							require.NotEmpty(t, m, a)
							expanded = append(expanded, m...)
							continue
						}
						expanded = append(expanded, a)
					}
					var out, errb bytes.Buffer
					run(expanded, stdio{in: strings.NewReader(""), out: &out, err: &errb, getenv: func(string) string { return "" }})
					got := out.String() + errb.String()
					if redirect != "" {
						require.NoError(t, os.WriteFile(redirect, out.Bytes(), 0o644))
						got = errb.String()
					}
					assert.Equal(t, c.output, got, "the output of %q as %s shows it", c.line, doc)
				}
			}
			assert.GreaterOrEqual(t, commands, 2, "%s shows the import and backtest commands", doc)
		})
	}
}

type consoleCommand struct {
	line   string // the command, without "$ "
	output string // the lines shown under it
}

// consoleBlocks returns the commands of the ```console blocks of a
// Markdown text that run agentstop.
func consoleBlocks(md string) [][]consoleCommand {
	var blocks [][]consoleCommand
	for _, part := range strings.Split(md, "```console\n")[1:] {
		body, _, _ := strings.Cut(part, "```")
		var block []consoleCommand
		for line := range strings.Lines(body) {
			if cmd, ok := strings.CutPrefix(line, "$ "); ok {
				block = append(block, consoleCommand{line: strings.TrimSpace(cmd)})
				continue
			}
			if len(block) > 0 {
				block[len(block)-1].output += line
			}
		}
		if len(block) > 0 && strings.HasPrefix(block[0].line, "agentstop ") {
			blocks = append(blocks, block)
		}
	}
	return blocks
}
