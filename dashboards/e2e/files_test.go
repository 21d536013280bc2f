package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// repoRoot is the module root, two levels above this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repo root %s has no go.mod: %v", root, err)
	}
	return root
}

// datasourceRef is a Grafana datasource reference on a panel, target or variable.
type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type jsonTarget struct {
	RefID      string         `json:"refId"`
	Expr       string         `json:"expr"`
	Instant    bool           `json:"instant"`
	Range      *bool          `json:"range"`
	Format     string         `json:"format"`
	Exemplar   bool           `json:"exemplar"`
	Datasource *datasourceRef `json:"datasource"`
}

type jsonPanel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Datasource  *datasourceRef `json:"datasource"`
	Targets     []jsonTarget   `json:"targets"`
	Panels      []jsonPanel    `json:"panels"` // collapsed rows nest their panels
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
}

type jsonVariable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
	Datasource *datasourceRef  `json:"datasource"`
}

// queryText returns a variable's query whether Grafana stored it as a string
// or as an object with a "query" field.
func (v jsonVariable) queryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(v.Query, &o) == nil && o.Query != "" {
		return o.Query
	}
	return v.Definition
}

type jsonDashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []jsonVariable `json:"list"`
	} `json:"templating"`
	Panels []jsonPanel `json:"panels"`
}

// dashboard is one dashboard file, decoded twice: typed, and as a generic map
// for the keys whose presence matters (id must be present and null).
type dashboard struct {
	path string
	jsonDashboard
	raw map[string]any
}

// panelQuery is one target of one panel: what Grafana would send to Prometheus.
type panelQuery struct {
	dashboard string
	panel     jsonPanel
	target    jsonTarget
}

func (q panelQuery) String() string {
	return fmt.Sprintf("%s / %q / %s", q.dashboard, q.panel.Title, q.target.RefID)
}

func loadDashboards(t testing.TB) []dashboard {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot(t), "dashboards", "grafana", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no dashboards in dashboards/grafana")
	}
	var out []dashboard
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		d := dashboard{path: filepath.Base(p)}
		if err := json.Unmarshal(b, &d.jsonDashboard); err != nil {
			t.Fatalf("%s: %v", d.path, err)
		}
		if err := json.Unmarshal(b, &d.raw); err != nil {
			t.Fatalf("%s: %v", d.path, err)
		}
		out = append(out, d)
	}
	return out
}

// allPanels flattens rows, collapsed or not.
func allPanels(ps []jsonPanel) []jsonPanel {
	var out []jsonPanel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

func (d dashboard) queries() []panelQuery {
	var out []panelQuery
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			if tg.Expr != "" {
				out = append(out, panelQuery{dashboard: d.path, panel: p, target: tg})
			}
		}
	}
	return out
}

// rule is one recording or alerting rule.
type rule struct {
	File        string            `yaml:"-"`
	Group       string            `yaml:"-"`
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func (r rule) name() string {
	if r.Alert != "" {
		return r.Alert
	}
	return r.Record
}

var ruleFiles = []string{"rules.yaml", "alerts.yaml"}

func loadRules(t testing.TB) []rule {
	t.Helper()
	var out []rule
	for _, f := range ruleFiles {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "dashboards", "prometheus", f))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Groups []struct {
				Name  string `yaml:"name"`
				Rules []rule `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range doc.Groups {
			for _, r := range g.Rules {
				r.File, r.Group = f, g.Name
				out = append(out, r)
			}
		}
	}
	return out
}

// grafanaVar matches $name, ${name} and ${name:format}.
var grafanaVar = regexp.MustCompile(`\$(?:\{([A-Za-z0-9_]+)(?::[A-Za-z0-9_]+)?\}|([A-Za-z0-9_]+))`)

// substitute replaces Grafana variables in expr the way Grafana's Prometheus
// datasource does before it sends a query. An unknown variable is an error:
// it would reach Prometheus verbatim and fail there, or worse, match nothing.
func substitute(expr string, vars map[string]string) (string, error) {
	var unknown []string
	out := grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		sm := grafanaVar.FindStringSubmatch(m)
		name := sm[1] + sm[2]
		v, ok := vars[name]
		if !ok {
			unknown = append(unknown, name)
			return m
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown variable(s) %v", unknown)
	}
	return out, nil
}

// lintVars are stand-in values for static checks; the end-to-end test uses
// values derived from the live run.
var lintVars = map[string]string{
	"__rate_interval": "1m", "__interval": "15s", "__interval_ms": "15000",
	"__range": "1h", "__range_s": "3600", "__range_ms": "3600000",
	"stage": ".*", "outcome": ".*",
}

var (
	identRe = regexp.MustCompile(`^[A-Za-z_:][A-Za-z0-9_:]*`)
	// keywords that introduce a parenthesised list of label names.
	labelListKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	// other words that are neither metrics nor labels.
	promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true, "Inf": true, "NaN": true}
)

// exprNames returns the metric names and label names a PromQL expression
// refers to. It is a small scanner, not a parser: enough for the expressions
// of this repository, which the end-to-end test also sends to a real Prometheus.
func exprNames(expr string) (metrics, labels []string) {
	s := stripStrings(expr)
	var (
		brace, bracket int
		listDepth      = -1 // paren depth of an open label list, or -1
		paren          int
		wantList       bool
	)
	nextNonSpace := func(i int) byte {
		for ; i < len(s); i++ {
			if s[i] != ' ' && s[i] != '\n' && s[i] != '\t' && s[i] != '\r' {
				return s[i]
			}
		}
		return 0
	}
	nextWord := func(i int) string {
		for ; i < len(s) && strings.ContainsRune(" \n\t\r", rune(s[i])); i++ {
		}
		return identRe.FindString(s[i:])
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '{':
			brace++
		case c == '}':
			brace--
		case c == '[':
			bracket++
		case c == ']':
			bracket--
		case c == '(':
			paren++
			if wantList {
				listDepth, wantList = paren, false
			}
		case c == ')':
			if paren == listDepth {
				listDepth = -1
			}
			paren--
		case c >= '0' && c <= '9' || c == '.':
			j := i
			for j < len(s) && (identRe.MatchString(s[j:j+1]) || s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
				j++
			}
			i = j
			continue
		}
		id := identRe.FindString(s[i:])
		if id == "" {
			i++
			continue
		}
		end := i + len(id)
		switch {
		case bracket > 0:
		case brace > 0 || listDepth >= 0:
			labels = append(labels, id)
		case labelListKeywords[id]:
			wantList = nextNonSpace(end) == '('
		case promqlKeywords[id]:
		case nextNonSpace(end) == '(', nextWord(end) == "by", nextWord(end) == "without":
			// a function or an aggregation
		default:
			metrics = append(metrics, id)
		}
		i = end
	}
	return uniq(metrics), uniq(labels)
}

// stripStrings empties every string literal so label values and regexes are
// not mistaken for names.
func stripStrings(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '"' && c != '\'' && c != '`' {
			b.WriteByte(c)
			continue
		}
		b.WriteString(`""`)
		for i++; i < len(s) && s[i] != c; i++ {
			if s[i] == '\\' && c != '`' {
				i++
			}
		}
	}
	return b.String()
}

func uniq(xs []string) []string {
	sort.Strings(xs)
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// labelValuesQuery parses Grafana's label_values(metric{...}, label) or
// label_values(label) variable query.
var labelValuesRe = regexp.MustCompile(`^\s*label_values\(\s*(?:(.+?)\s*,\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

func parseLabelValues(q string) (match, label string, ok bool) {
	m := labelValuesRe.FindStringSubmatch(q)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}
