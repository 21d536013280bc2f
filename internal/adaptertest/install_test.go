package adaptertest_test

import (
	"archive/zip"
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// module is one Go module of this repository.
type module struct {
	path    string // module path
	dir     string // directory in the tree
	rootReq string // the version of the root module it requires ("" for the root)
}

const rootModule = "github.com/agentstop/agentstop"

// repoModules returns the root module and every adapter module of the
// tree that holds the working directory.
func repoModules(t *testing.T) (root string, mods []module) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root = filepath.Dir(filepath.Dir(wd)) // internal/adaptertest/ is two directories below the root module
	if p, _ := modulePath(t, filepath.Join(root, "go.mod")); p != rootModule {
		t.Fatalf("%s is not the root module (module %q)", root, p)
	}
	mods = append(mods, module{path: rootModule, dir: root})
	gomods, err := filepath.Glob(filepath.Join(root, "adapters", "*", "go.mod"))
	if err != nil || len(gomods) == 0 {
		t.Fatalf("no adapter modules under %s/adapters (%v)", root, err)
	}
	sort.Strings(gomods)
	for _, gm := range gomods {
		p, req := modulePath(t, gm)
		mods = append(mods, module{path: p, dir: filepath.Dir(gm), rootReq: req})
	}
	return root, mods
}

// modulePath reads a go.mod's module path and the version of the root
// module it requires.
func modulePath(t *testing.T, gomod string) (path, rootReq string) {
	t.Helper()
	f, err := os.Open(gomod)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		switch {
		case len(fields) == 2 && fields[0] == "module":
			path = fields[1]
		case len(fields) >= 2 && fields[0] == rootModule:
			rootReq = fields[1]
		case len(fields) >= 1 && fields[0] == "replace" && strings.Contains(sc.Text(), rootModule):
			t.Errorf("%s replaces the root module: Go ignores replace lines in dependencies, so a user's build would not see it (use the adapter's go.work)", gomod)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return path, rootReq
}

// TestAdaptersImportNoCoreInternal checks that no adapter's published
// code (its non-test files) imports an internal package of the root module,
// this kit included. Go allows it, since the internal rule is by import path
// and the adapters' paths are under the root's, but a user's build may pair
// an adapter with a newer core (the highest required version wins), whose
// internal packages may have changed. The adapters' tests may import them:
// they build against the core of the same tree.
func TestAdaptersImportNoCoreInternal(t *testing.T) {
	_, mods := repoModules(t)
	for _, m := range mods[1:] {
		for _, file := range publishedGoFiles(t, m.dir) {
			for _, imp := range coreInternalImports(t, file) {
				rel, _ := filepath.Rel(filepath.Dir(filepath.Dir(m.dir)), file)
				t.Errorf("%s imports %s: an adapter's non-test code may not use the core's internal packages (move the use into a _test.go file, or make what it needs public in the core)", filepath.ToSlash(rel), imp)
			}
		}
	}
}

// publishedGoFiles returns the non-test Go files of the module in dir, as
// publish zips them: nested modules, hidden directories, testdata and
// vendor are left out.
func publishedGoFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == dir {
				return nil
			}
			if n := d.Name(); strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || n == "testdata" || n == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing the Go files of %s: %v", dir, err)
	}
	return files
}

// coreInternalImports returns the imports of a Go file that are internal
// packages of the root module.
func coreInternalImports(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("reading the imports of %s: %v", file, err)
	}
	var found []string
	for _, spec := range f.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			t.Fatalf("%s: import %s: %v", file, spec.Path.Value, err)
		}
		if path == rootModule+"/internal" || strings.HasPrefix(path, rootModule+"/internal/") {
			found = append(found, path)
		}
	}
	return found
}

// TestInstallFromProxy installs every adapter the way a user does, from
// outside the repository: the repository's modules are published at the
// version the adapters require into a file-based module proxy (the layout
// `go mod download` serves), and a fresh consumer module runs `go get`,
// `go mod tidy` and `go build` against it, with third-party modules from
// the local module cache or the real proxy.
func TestInstallFromProxy(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		t.Fatalf("go command not found at %s: %v", goBin, err)
	}
	root, mods := repoModules(t)

	// One version scheme: every adapter requires the same released
	// version of the root module, and is released at that version too.
	version := mods[1].rootReq
	for _, m := range mods[1:] {
		if m.rootReq == "" || m.rootReq == "v0.0.0" {
			t.Fatalf("%s requires %s %q: not a released version", m.path, rootModule, m.rootReq)
		}
		if m.rootReq != version {
			t.Fatalf("%s requires %s %s, %s requires %s: one version for all adapters", m.path, rootModule, m.rootReq, mods[1].path, version)
		}
	}

	proxy := t.TempDir()
	for _, m := range mods {
		publish(t, proxy, m, version)
	}

	realCache := strings.TrimSpace(run(t, root, nil, goBin, "env", "GOMODCACHE"))
	modCache := t.TempDir()
	env := []string{
		"GOPROXY=" + fileURL(proxy) + "," + fileURL(filepath.Join(realCache, "cache", "download")) + ",https://proxy.golang.org",
		"GOMODCACHE=" + modCache, // the published versions must not enter the real cache
		"GOFLAGS=-mod=mod -modcacherw",
		"GONOSUMDB=" + rootModule, // published here, not in the checksum database
		"GOWORK=off",
		"GOTOOLCHAIN=local",
	}
	imports := map[string]string{ // adapter module → a use of its package
		rootModule + "/adapters/adk":         `_ "` + rootModule + `/adapters/adk"`,
		rootModule + "/adapters/anthropic":   `anthropicstop "` + rootModule + `/adapters/anthropic"`,
		rootModule + "/adapters/eino":        `"` + rootModule + `/adapters/eino"`,
		rootModule + "/adapters/genkit":      `genkitstop "` + rootModule + `/adapters/genkit"`,
		rootModule + "/adapters/langchaingo": `"` + rootModule + `/adapters/langchaingo"`,
		rootModule + "/adapters/openai":      `openaistop "` + rootModule + `/adapters/openai"`,
	}
	uses := map[string]string{
		rootModule + "/adapters/adk":         ``,
		rootModule + "/adapters/anthropic":   `_ = anthropicstop.Observe`,
		rootModule + "/adapters/eino":        `_ = eino.Forward; _ = eino.Context`,
		rootModule + "/adapters/genkit":      `_ = genkitstop.Generate`,
		rootModule + "/adapters/langchaingo": `_ = langchaingo.NewHandler`,
		rootModule + "/adapters/openai":      `_ = openaistop.Observe`,
	}
	for _, m := range mods[1:] {
		t.Run(filepath.Base(m.dir), func(t *testing.T) {
			t.Parallel() // mostly waiting on the go command's downloads and links
			imp, ok := imports[m.path]
			if !ok {
				t.Fatalf("no consumer program for %s: add one to this test", m.path)
			}
			dir := t.TempDir()
			write(t, filepath.Join(dir, "go.mod"), "module example.com/consumer\n\ngo 1.26.0\n")
			// The checksums the repository already verified, so that the
			// third-party modules need no checksum-database lookup.
			var sums strings.Builder
			for _, d := range []string{root, m.dir} {
				b, err := os.ReadFile(filepath.Join(d, "go.sum"))
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				sums.Write(b)
			}
			write(t, filepath.Join(dir, "go.sum"), sums.String())
			write(t, filepath.Join(dir, "main.go"), fmt.Sprintf(`package main

import (
	"context"
	"fmt"

	%s
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func main() {
	%s
	stage, err := middleware.New("consumer", middleware.WithCondition(termination.ToolCallLimits{Limit: 3}))
	if err != nil {
		panic(err)
	}
	_, run := stage.Start(context.Background())
	fmt.Println(run.Finish(nil).TerminationCause)
}
`, imp, uses[m.path]))
			run(t, dir, env, goBin, "get", m.path+"@"+version)
			run(t, dir, env, goBin, "mod", "tidy")
			// -trimpath: compiled packages do not depend on where this
			// test's module cache is, so later runs reuse the build cache.
			run(t, dir, env, goBin, "build", "-trimpath", "-o", filepath.Join(dir, "consumer"), ".")
			if out := run(t, dir, env, filepath.Join(dir, "consumer")); strings.TrimSpace(out) != "natural_completion" {
				t.Errorf("consumer printed %q, want natural_completion", out)
			}
			gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{m.path + " " + version, rootModule + " " + version} {
				if !strings.Contains(string(gomod), want) {
					t.Errorf("consumer go.mod does not require %s:\n%s", want, gomod)
				}
			}
		})
	}
}

func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

func write(t *testing.T, name, text string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s: %s", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// publish writes module m at version into a file-based module proxy, in
// the layout of GOPROXY's protocol: <path>/@v/list, .info, .mod and .zip.
// The zip holds the module's files as `go mod download` would: nested
// modules (directories with a go.mod of their own), hidden directories and
// workspace files are left out.
func publish(t *testing.T, proxy string, m module, version string) {
	t.Helper()
	dir := filepath.Join(proxy, filepath.FromSlash(m.path), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "list"), version+"\n")
	write(t, filepath.Join(dir, version+".info"), fmt.Sprintf(`{"Version":%q,"Time":"2026-11-23T00:00:00Z"}`, version))
	gomod, err := os.ReadFile(filepath.Join(m.dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, version+".mod"), string(gomod))

	f, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	prefix := m.path + "@" + version + "/"
	err = filepath.WalkDir(m.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(m.dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") || d.Name() == "go.work" || d.Name() == "go.work.sum" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w, err := zw.Create(prefix + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	})
	if err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("publishing %s: %v", m.path, err)
	}
}
