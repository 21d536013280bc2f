package importer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzImport feeds every format arbitrary bytes: an import either maps
// them or fails with a one-line error; it never panics, and what it maps
// is made of valid events.
func FuzzImport(f *testing.F) {
	for _, name := range []string{"chat.json", "batch.jsonl", "django__django-11099.traj.json", "collector.jsonl"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`[{"role":"tool","tool_call_id":"x"}]`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":"` + "```bash\\ncd a && timeout 5 python3 -m x\\n```" + `"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, format := range Formats() {
			for _, opts := range []Options{{}, {MessagesField: "traj", IDField: "id", ErrorPrefix: "E"}} {
				runs, err := importData(format, "f.json", data, opts)
				if err != nil {
					if strings.Contains(err.Error(), "\n") {
						t.Fatalf("%s: a multi-line error: %q", format, err)
					}
					continue
				}
				for _, r := range runs {
					for i, ev := range r.Events {
						if err := ev.Validate(); err != nil {
							t.Fatalf("%s: run %s event %d: %v", format, r.ID, i, err)
						}
					}
				}
			}
		}
	})
}

// FuzzToolName: naming a command's tool never panics.
func FuzzToolName(f *testing.F) {
	for _, s := range []string{"cd /x && timeout -s KILL 5 FOO='a b' python3 -m pytest", `"a\`, "cd", "timeout", "x;&&;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) { _ = ToolName(cmd) })
}
