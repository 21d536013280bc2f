package main

import (
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests cover what render does without a browser: Grafana's variable
// and legend substitution, unit formatting, axis steps, field overrides and
// thresholds, the PNG palette rewrite, and a whole page rendered from the
// real dashboard against a fake Prometheus.

func TestSubstitute(t *testing.T) {
	vars := map[string]string{"stage": "(a|b)", "__rate_interval": "4000ms"}
	for _, tc := range []struct {
		name, expr, want, err string
	}{
		{"plain", `rate(x{stage=~"$stage"}[$__rate_interval])`, `rate(x{stage=~"(a|b)"}[4000ms])`, ""},
		{"braces", `x{stage=~"${stage}"}`, `x{stage=~"(a|b)"}`, ""},
		{"format suffix", `x{stage=~"${stage:regex}"}`, `x{stage=~"(a|b)"}`, ""},
		{"no variables", `sum(x)`, `sum(x)`, ""},
		{"unknown", `x{o=~"$outcome"}[$nope]`, "", "unknown variable(s) [outcome nope]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := substitute(tc.expr, vars)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("substitute(%q) = %q, %v; want %q", tc.expr, got, err, tc.want)
			}
		})
	}
}

func TestLegend(t *testing.T) {
	labels := map[string]string{"__name__": "m", "stage": "coder", "termination_cause": "stall"}
	for _, tc := range []struct{ format, want string }{
		{"{{stage}} / {{ termination_cause }}", "coder / stall"},
		{"{{missing}}x", "x"},
		{"", `{stage="coder", termination_cause="stall"}`},
		{"__auto", `{stage="coder", termination_cause="stall"}`},
	} {
		if got := legend(tc.format, labels); got != tc.want {
			t.Errorf("legend(%q) = %q, want %q", tc.format, got, tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		unit string
		dec  int
		want string
	}{
		{math.NaN(), "", -1, "-"},
		{0.256, "percentunit", 1, "25.6%"},
		{0.25, "s", -1, "250 ms"},
		{0, "s", -1, "0 s"},
		{12.5, "s", -1, "12.5 s"},
		{300, "s", 0, "5 min"},
		{3, "suffix: runs", -1, "3 runs"},
		{2.5e6, "", -1, "2.5 Mil"},
		{12345, "", -1, "12.3 K"},
		{123.4, "", -1, "123"},
		{1.5, "", -1, "1.5"},
		{0.1234, "", -1, "0.123"},
		{2, "", 2, "2.00"},
	} {
		if got := format(tc.v, tc.unit, tc.dec); got != tc.want {
			t.Errorf("format(%v, %q, %d) = %q, want %q", tc.v, tc.unit, tc.dec, got, tc.want)
		}
	}
}

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct {
		span float64
		n    int
		want float64
	}{
		{0, 4, 1}, {-3, 4, 1}, {10, 5, 2}, {100, 4, 50}, {7, 4, 2}, {0.3, 3, 0.1}, {1000, 3, 500},
	} {
		if got := niceStep(tc.span, tc.n); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("niceStep(%v, %d) = %v, want %v", tc.span, tc.n, got, tc.want)
		}
	}
}

func TestFieldOverridesAndThresholds(t *testing.T) {
	var p panel
	err := json.Unmarshal([]byte(`{"type":"timeseries","fieldConfig":{
		"defaults":{"unit":"s","thresholds":{"steps":[{"color":"green","value":null},{"color":"red","value":10}]}},
		"overrides":[{"matcher":{"id":"byName","options":"stall"},"properties":[
			{"id":"color","value":{"mode":"fixed","fixedColor":"orange"}},{"id":"unit","value":"percentunit"},{"id":"decimals","value":1}]}]}}`), &p)
	if err != nil {
		t.Fatal(err)
	}
	f := p.fieldFor("stall")
	if f.Unit != "percentunit" || f.Decimals == nil || *f.Decimals != 1 || f.Color.FixedColor != "orange" {
		t.Errorf("override not applied: %+v", f)
	}
	if g := p.fieldFor("completed"); g.Unit != "s" || g.Decimals != nil {
		t.Errorf("override applied to another name: %+v", g)
	}
	if got := seriesColor(&p, "stall", 3); got != named["orange"] {
		t.Errorf("fixed color = %s, want %s", got, named["orange"])
	}
	if got := seriesColor(&p, "other", 17); got != palette[1] {
		t.Errorf("palette color = %s, want %s", got, palette[1])
	}
	d := p.FieldConfig.Defaults
	if got := d.thresholdColor(3); got != named["green"] {
		t.Errorf("thresholdColor(3) = %s", got)
	}
	if got := d.thresholdColor(10); got != named["red"] {
		t.Errorf("thresholdColor(10) = %s", got)
	}
	if got := hex("#123456"); got != "#123456" {
		t.Errorf("hex passes raw colors through, got %s", got)
	}
}

func TestClipAndHuman(t *testing.T) {
	if got := clip("short", 1000, 12); got != "short" {
		t.Errorf("clip kept %q", got)
	}
	got := clip("a rather long panel title", 60, 12)
	if !strings.HasSuffix(got, "…") || textW(got, 12) > 60 {
		t.Errorf("clip = %q (width %.0f)", got, textW(got, 12))
	}
	for d, want := range map[time.Duration]string{time.Minute: "1 minute", 3 * time.Minute: "3 minutes", 90 * time.Second: "1m30s"} {
		if got := human(d); got != want {
			t.Errorf("human(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestShrink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shot.png")
	img := image.NewRGBA(image.Rect(0, 0, 40, 20))
	for y := range 20 {
		for x := range 40 {
			img.Set(x, y, color.RGBA{uint8(x * 6), uint8(y * 12), 90, 255})
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := shrink(path); err != nil {
		t.Fatal(err)
	}
	f, err = os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := out.(*image.Paletted)
	if !ok {
		t.Fatalf("shrink wrote %T, want a paletted PNG", out)
	}
	if len(p.Palette) > 256 || p.Bounds() != img.Bounds() {
		t.Errorf("palette %d colors, bounds %v", len(p.Palette), p.Bounds())
	}
	// 800 distinct colors in, the 256 kept are exact and the rest near.
	r, g, _, _ := p.At(0, 0).RGBA()
	if r>>8 > 12 || g>>8 > 24 {
		t.Errorf("pixel (0,0) mapped far away: %v", p.At(0, 0))
	}

	if err := shrink(filepath.Join(t.TempDir(), "missing.png")); err == nil {
		t.Error("shrink of a missing file: no error")
	}
	bad := filepath.Join(t.TempDir(), "bad.png")
	os.WriteFile(bad, []byte("not a png"), 0o644)
	if err := shrink(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("shrink of a non-PNG: %v, want an error naming the file", err)
	}
}

// fakePrometheus answers every instant query with a vector and every range
// query with a matrix of a few series, and records the queries it got.
type fakePrometheus struct {
	mu      sync.Mutex
	queries []string
}

func (f *fakePrometheus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f.mu.Lock()
	f.queries = append(f.queries, q.Get("query"))
	f.mu.Unlock()
	labels := []map[string]string{
		{"stage": "coder", "termination_cause": "stall", "outcome": "failed", "resource": "iterations", "le": "1", "token_type": "input"},
		{"stage": "critic", "termination_cause": "timeout", "outcome": "failed", "resource": "tool_calls", "le": "+Inf", "token_type": "output"},
	}
	var result []any
	resultType := "vector"
	switch r.URL.Path {
	case "/api/v1/query":
		for i, l := range labels {
			result = append(result, map[string]any{"metric": l, "value": []any{1.7e9, fmt.Sprint(i + 1)}})
		}
	case "/api/v1/query_range":
		resultType = "matrix"
		start, end := q.Get("start"), q.Get("end")
		var s, e float64
		fmt.Sscan(start, &s)
		fmt.Sscan(end, &e)
		for i, l := range labels {
			var vals []any
			for ts := s; ts <= e; ts += 60 {
				vals = append(vals, []any{ts, fmt.Sprint(float64(i+1) * (ts - s) / 60)})
			}
			result = append(result, map[string]any{"metric": l, "values": vals})
		}
	default:
		http.NotFound(w, r)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": resultType, "result": result}})
}

// setFlags points the command's flags at the test's values for one test.
func setFlags(t *testing.T, prom, page string) {
	oldProm, oldDash, oldOut := *promURL, *dashPath, *out
	*promURL, *dashPath, *out = prom, filepath.Join("..", "grafana", "agent-termination.json"), page
	t.Cleanup(func() { *promURL, *dashPath, *out = oldProm, oldDash, oldOut })
}

func TestRunDrawsTheDashboard(t *testing.T) {
	fake := &fakePrometheus{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	page := filepath.Join(t.TempDir(), "dashboard.svg")
	setFlags(t, srv.URL, page)

	if err := run(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	if !strings.HasPrefix(svg, "<svg ") || !strings.HasSuffix(svg, "</svg>") {
		t.Fatalf("not an SVG document: %.80q…", svg)
	}

	var d dashboard
	raw, _ := os.ReadFile(*dashPath)
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	targets := 0
	for _, p := range d.Panels {
		for _, q := range append([]panel{p}, p.Panels...) {
			targets += len(q.Targets)
			if q.Title != "" && !strings.Contains(svg, htmlText(clip(q.Title, 10000, 13))) && q.Type != "row" {
				// Titles are clipped to the panel width; the first word is always there.
				first := strings.Fields(q.Title)[0]
				if !strings.Contains(svg, htmlText(first)) {
					t.Errorf("panel %q not drawn", q.Title)
				}
			}
		}
	}
	fake.mu.Lock()
	queries := fake.queries
	fake.mu.Unlock()
	if len(queries) != targets {
		t.Errorf("%d queries for %d panel targets", len(queries), targets)
	}
	for _, q := range queries {
		if regexp.MustCompile(`\$[A-Za-z_{]`).MatchString(q) {
			t.Errorf("variable left in query %q", q)
		}
	}
	if strings.Contains(svg, "No data") {
		t.Error(`a panel says "No data" although every query returned series`)
	}
	if !strings.Contains(svg, "coder") || !strings.Contains(svg, "critic") {
		t.Error("series names from the fake Prometheus are not in the legend")
	}
}

func TestRunReportsErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"status": "error", "errorType": "bad_data", "error": "parse error at char 3"})
	}))
	defer srv.Close()
	setFlags(t, srv.URL, filepath.Join(t.TempDir(), "x.html"))
	if err := run(); err == nil || !strings.Contains(err.Error(), "parse error at char 3") {
		t.Errorf("run with a failing Prometheus: %v", err)
	}

	*dashPath = filepath.Join(t.TempDir(), "missing.json")
	if err := run(); err == nil {
		t.Error("run with a missing dashboard: no error")
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte("{"), 0o644)
	*dashPath = bad
	if err := run(); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("run with a malformed dashboard: %v, want an error naming the file", err)
	}
}

func htmlText(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	return r.Replace(s)
}

func TestEndTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"1764398400", time.Unix(1764398400, 0)},
		{"2026-11-29T06:40:00Z", time.Date(2026, 11, 29, 6, 40, 0, 0, time.UTC)},
		{"2026-11-29T07:40:00+01:00", time.Date(2026, 11, 29, 6, 40, 0, 0, time.UTC)},
	} {
		got, err := endTime(tc.in)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("endTime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if got, err := endTime(""); err != nil || time.Since(got) > time.Minute {
		t.Errorf(`endTime("") = %v, %v; want now`, got, err)
	}
	for _, bad := range []string{"yesterday", "2026-11-29 06:40", "1.5e9"} {
		if _, err := endTime(bad); err == nil || !strings.Contains(err.Error(), "-end") {
			t.Errorf("endTime(%q): %v, want an error naming -end", bad, err)
		}
	}
}

// TestRunWithFixedEndIsReproducible: with -end, two runs against the same
// data write the same page, and the caption names the dashboard by
// -dashboard-label instead of its path.
func TestRunWithFixedEndIsReproducible(t *testing.T) {
	srv := httptest.NewServer(&fakePrometheus{})
	defer srv.Close()
	dir := t.TempDir()
	oldEnd, oldName := *endF, *dashName
	t.Cleanup(func() { *endF, *dashName = oldEnd, oldName })
	*endF, *dashName = "2026-11-29T06:40:00Z", "dashboards/grafana/agent-termination.json"
	var pages []string
	for i := range 2 {
		page := filepath.Join(dir, fmt.Sprintf("page%d.svg", i))
		setFlags(t, srv.URL, page)
		if err := run(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, string(b))
	}
	if pages[0] != pages[1] {
		t.Error("two runs with the same -end wrote different pages")
	}
	if !strings.Contains(pages[0], "2026-11-29 06:37:00 – 06:40:00 UTC") {
		t.Error("the caption does not show the range ending at -end")
	}
	if !strings.Contains(pages[0], "every panel query of dashboards/grafana/agent-termination.json evaluated") {
		t.Error("the caption does not name the dashboard by -dashboard-label")
	}
}

// TestTableFooterSumsEveryRow: a table with more rows than fit shows
// "+ N more rows" above its footer, not over it, and the footer's totals
// count the rows left out too (Grafana sums the whole table).
func TestTableFooterSumsEveryRow(t *testing.T) {
	var p panel
	err := json.Unmarshal([]byte(`{"type": "table", "title": "Stop causes by stage",
		"options": {"footer": {"show": true}},
		"transformations": [{"id": "groupingToMatrix", "options": {"rowField": "stage", "columnField": "termination_cause"}}]}`), &p)
	if err != nil {
		t.Fatal(err)
	}
	var data []series
	for i := range 10 {
		data = append(data, series{labels: map[string]string{"stage": fmt.Sprintf("stage%02d", i), "termination_cause": "stall"}, value: float64(i + 1)})
	}
	c := &canvas{}
	b := box{0, 0, 400, 26 * 6} // the header, 4 rows and the footer
	c.table(&p, b, data)
	svg := c.String()

	more := regexp.MustCompile(`<text x="[0-9.]+" y="([0-9.]+)"[^>]*>\+ (\d+) more rows</text>`).FindStringSubmatch(svg)
	if more == nil {
		t.Fatalf("no \"+ N more rows\" for 10 rows in room for 4:\n%s", svg)
	}
	if y, _ := strconv.ParseFloat(more[1], 64); y > b.h-26 {
		t.Errorf("\"+ %s more rows\" at y=%.0f, inside the footer (from y=%.0f)", more[2], y, b.h-26)
	}
	footer := regexp.MustCompile(`>Total</text><text[^>]*>([^<]*)</text>`).FindStringSubmatch(svg)
	if footer == nil || footer[1] != "55" {
		t.Errorf("footer total = %v, want 55 (1+…+10, every row)", footer)
	}
}
