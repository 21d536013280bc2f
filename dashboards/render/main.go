// Command render draws a picture of a Grafana dashboard from real data, for
// the docs (docs/dashboard.png). It is not Grafana: it evaluates every panel
// query of the dashboard JSON against a Prometheus over the last -minutes,
// substituting Grafana's variables the way dashboards/e2e does, and writes one
// HTML page with an inline SVG that lays the panels out at their gridPos with
// a Grafana-like dark theme: time series (stacked where the panel stacks),
// stats, a donut, tables and a heatmap. dashboards/render/render.sh runs it
// against the quickstart and screenshots the page with headless Chromium.
//
//	cd dashboards/render && go run . -prometheus http://127.0.0.1:9090 -out dashboard.html
//
// It is its own Go module (dashboards/render/go.mod, standard library only),
// kept out of the product module github.com/agentstop/agentstop.
//
// The range ends now, or at -end: with a fixed end, the same data draws the
// same page, byte for byte. It prints the page size (WIDTHxHEIGHT) on stdout.
package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

type dashboard struct {
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Type, Title string
	GridPos     struct{ X, Y, W, H int } `json:"gridPos"`
	Targets     []struct {
		RefID, Expr, LegendFormat, Format string
		Instant                           bool
	} `json:"targets"`
	FieldConfig struct {
		Defaults  field `json:"defaults"`
		Overrides []struct {
			Matcher    struct{ ID, Options string } `json:"matcher"`
			Properties []struct {
				ID    string          `json:"id"`
				Value json.RawMessage `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	} `json:"fieldConfig"`
	Options struct {
		SortBy []struct {
			DisplayName string
			Desc        bool
		} `json:"sortBy"`
		Footer struct{ Show bool } `json:"footer"`
	} `json:"options"`
	Transformations []struct {
		ID      string          `json:"id"`
		Options json.RawMessage `json:"options"`
	} `json:"transformations"`
	Panels []panel `json:"panels"` // of a collapsed row
}

type field struct {
	Unit       string
	Decimals   *int
	Min, Max   *float64
	Thresholds *struct {
		Steps []struct {
			Color string
			Value *float64
		}
	}
	Color  struct{ Mode, FixedColor string }
	Custom struct {
		FillOpacity     float64
		Stacking        struct{ Mode string }
		ThresholdsStyle struct{ Mode string }
		CellOptions     struct{ Type string }
	}
}

// fieldFor applies the panel's byName overrides for name to its defaults.
func (p *panel) fieldFor(name string) field {
	f := p.FieldConfig.Defaults
	for _, o := range p.FieldConfig.Overrides {
		if o.Matcher.ID != "byName" || o.Matcher.Options != name {
			continue
		}
		for _, pr := range o.Properties {
			switch pr.ID {
			case "color":
				_ = json.Unmarshal(pr.Value, &f.Color)
			case "unit":
				_ = json.Unmarshal(pr.Value, &f.Unit)
			case "decimals":
				_ = json.Unmarshal(pr.Value, &f.Decimals)
			case "thresholds":
				_ = json.Unmarshal(pr.Value, &f.Thresholds)
			case "custom.cellOptions":
				_ = json.Unmarshal(pr.Value, &f.Custom.CellOptions)
			}
		}
	}
	return f
}

// thresholdColor is the color of the highest threshold step v reaches.
func (f field) thresholdColor(v float64) string {
	c := "text"
	if f.Thresholds != nil {
		for _, s := range f.Thresholds.Steps {
			if s.Value == nil || v >= *s.Value {
				c = s.Color
			}
		}
	}
	return hex(c)
}

// Grafana's named colors (dark theme) and its classic series palette.
var named = map[string]string{
	"green": "#73BF69", "semi-dark-green": "#56A64B", "dark-green": "#37872D", "blue": "#5794F2",
	"light-blue": "#8AB8FF", "super-light-blue": "#C0D8FF", "yellow": "#FADE2A", "orange": "#FF9830",
	"dark-orange": "#FA6400", "red": "#F2495C", "dark-red": "#C4162A", "purple": "#B877D9",
	"dark-purple": "#8F3BB8", "text": "#CCCCDC", "transparent": "none",
}
var palette = []string{"#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9",
	"#705DA0", "#508642", "#CCA300", "#447EBC", "#C15C17", "#890F02", "#0A437C", "#6D1F62", "#584477"}

func hex(c string) string {
	if h, ok := named[c]; ok {
		return h
	}
	return c
}

const (
	bg, panelBg, border, text, dim = "#111217", "#181B1F", "#2A2D33", "#CCCCDC", "#8E8E9A"
	grid                           = "#26292F"
	font                           = `font-family="Inter, 'DejaVu Sans', Helvetica, Arial, sans-serif"`
)

var (
	promURL  = flag.String("prometheus", "http://127.0.0.1:9090", "Prometheus base URL")
	dashPath = flag.String("dashboard", "../grafana/agent-termination.json", "Grafana dashboard JSON")
	minutes  = flag.Float64("minutes", 3, "time range: the last N minutes")
	scrape   = flag.Duration("scrape-interval", 15*time.Second, "the datasource's scrape interval (Grafana's $__rate_interval uses it)")
	minStep  = flag.Duration("min-interval", 0, "lower bound of $__interval and the query step (Grafana's min interval)")
	width    = flag.Int("width", 1600, "page width in pixels")
	out      = flag.String("out", "dashboard.html", "output file: .html (inline SVG) or .svg")
	source   = flag.String("source", "", "what Prometheus scraped, for the caption (default: the -prometheus URL)")
	dashName = flag.String("dashboard-label", "", "how the caption names the dashboard (default: the -dashboard path)")
	endF     = flag.String("end", "", "end of the time range, RFC 3339 (2026-11-29T06:40:00Z) or Unix seconds (default: now); a fixed end draws the same page twice")
	shrinkF  = flag.String("shrink", "", "instead of rendering, rewrite this PNG (a screenshot of the page) with a 256-color palette")
)

var client = &http.Client{Timeout: 20 * time.Second}

// query calls Prometheus' query API and returns its result's series.
func query(path string, params url.Values) ([]promSeries, error) {
	resp, err := client.Get(*promURL + path + "?" + params.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status, Error string
		Data          struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s %s: %s", path, params.Get("query"), r.Error)
	}
	var s []promSeries
	if r.Data.ResultType == "scalar" {
		var v [2]any
		err := json.Unmarshal(r.Data.Result, &v)
		return []promSeries{{Value: v}}, err
	}
	return s, json.Unmarshal(r.Data.Result, &s)
}

type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
	Values [][2]any          `json:"values"`
}

func pval(v [2]any) (t, f float64) {
	t, _ = v[0].(float64)
	s, _ := v[1].(string)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		f = math.NaN()
	}
	return t, f
}

// series is one line of a panel, on the common time grid.
type series struct {
	name   string
	labels map[string]string
	refID  string
	vals   []float64 // NaN: no point
	value  float64   // instant queries
}

// grafanaVar matches $name, ${name} and ${name:format}, as in dashboards/e2e.
var grafanaVar = regexp.MustCompile(`\$(?:\{([A-Za-z0-9_]+)(?::[A-Za-z0-9_]+)?\}|([A-Za-z0-9_]+))`)

func substitute(expr string, vars map[string]string) (string, error) {
	var unknown []string
	s := grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		sm := grafanaVar.FindStringSubmatch(m)
		if v, ok := vars[sm[1]+sm[2]]; ok {
			return v
		}
		unknown = append(unknown, sm[1]+sm[2])
		return m
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown variable(s) %v", unknown)
	}
	return s, nil
}

var legendVar = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_]+)\s*\}\}`)

func legend(format string, labels map[string]string) string {
	if format == "" || format == "__auto" {
		var kv []string
		for k, v := range labels {
			if k != "__name__" {
				kv = append(kv, k+"="+strconv.Quote(v))
			}
		}
		sort.Strings(kv)
		return "{" + strings.Join(kv, ", ") + "}"
	}
	return legendVar.ReplaceAllStringFunc(format, func(m string) string { return labels[legendVar.FindStringSubmatch(m)[1]] })
}

// env is the time range and grid every query shares.
type env struct {
	start, end time.Time
	step       time.Duration
	points     int
	vars       map[string]string
}

func (e *env) fetch(p *panel) ([]series, error) {
	var out []series
	for _, t := range p.Targets {
		expr, err := substitute(t.Expr, e.vars)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", p.Title, t.RefID, err)
		}
		params := url.Values{"query": {expr}}
		path := "/api/v1/query"
		if t.Instant {
			params.Set("time", unix(e.end))
		} else {
			path = "/api/v1/query_range"
			params.Set("start", unix(e.start))
			params.Set("end", unix(e.end))
			params.Set("step", strconv.FormatFloat(e.step.Seconds(), 'f', -1, 64))
		}
		res, err := query(path, params)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", p.Title, t.RefID, err)
		}
		for _, r := range res {
			s := series{name: legend(t.LegendFormat, r.Metric), labels: r.Metric, refID: t.RefID}
			_, s.value = pval(r.Value)
			if !t.Instant {
				s.vals = make([]float64, e.points)
				for i := range s.vals {
					s.vals[i] = math.NaN()
				}
				for _, v := range r.Values {
					ts, f := pval(v)
					if i := int(math.Round((ts - float64(e.start.Unix())) / e.step.Seconds())); i >= 0 && i < e.points {
						s.vals[i] = f
					}
				}
			}
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].refID < out[j].refID || out[i].refID == out[j].refID && out[i].name < out[j].name
	})
	return out, nil
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

func main() {
	flag.Parse()
	run := run
	if *shrinkF != "" {
		run = func() error { return shrink(*shrinkF) }
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func run() error {
	b, err := os.ReadFile(*dashPath)
	if err != nil {
		return err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return fmt.Errorf("%s: %w", *dashPath, err)
	}
	var panels []panel
	for _, p := range d.Panels {
		panels = append(panels, p)
		panels = append(panels, p.Panels...)
	}

	// Grafana: $__interval is the range over the data points (about one per
	// pixel of a half-width panel), at least the scrape interval;
	// $__rate_interval is max($__interval + scrape interval, 4 * scrape interval).
	rng := time.Duration(*minutes * float64(time.Minute)).Truncate(time.Second)
	step := max((rng / 700).Round(time.Second), *scrape, *minStep, time.Second)
	rate := max(step+*scrape, 4**scrape)
	end, err := endTime(*endF)
	if err != nil {
		return err
	}
	end = end.Truncate(step)
	e := &env{start: end.Add(-rng), end: end, step: step, points: int(rng/step) + 1, vars: map[string]string{
		"__interval": fmt.Sprintf("%dms", step.Milliseconds()), "__interval_ms": strconv.FormatInt(step.Milliseconds(), 10),
		"__rate_interval": fmt.Sprintf("%dms", rate.Milliseconds()),
		"__range":         fmt.Sprintf("%ds", int(rng.Seconds())), "__range_s": strconv.Itoa(int(rng.Seconds())),
		"__range_ms": strconv.FormatInt(rng.Milliseconds(), 10), "stage": ".*", "outcome": ".*", "datasource": "prometheus",
	}}

	const pad, gap, unitH, top = 16, 8, 30, 104
	colW := float64(*width-2*pad+gap) / 24
	bottom := 0
	for _, p := range panels {
		bottom = max(bottom, p.GridPos.Y+p.GridPos.H)
	}
	height := top + bottom*(unitH+gap) + 36
	c := &canvas{}
	c.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" %s font-size="12">`, *width, height, font)
	c.f(`<rect width="100%%" height="100%%" fill="%s"/>`, bg)
	c.header(pad, d.Title, rng)
	for i := range panels {
		p := &panels[i]
		g := p.GridPos
		r := box{pad + float64(g.X)*colW, float64(top + g.Y*(unitH+gap)), float64(g.W)*colW - gap, float64(g.H*(unitH+gap) - gap)}
		if p.Type == "row" {
			c.txt(r.x, r.y+20, 15, text, "start", 500, "⌄  "+p.Title)
			continue
		}
		data, err := e.fetch(p)
		if err != nil {
			return err
		}
		c.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="2" fill="%s" stroke="%s"/>`, r.x, r.y, r.w, r.h, panelBg, border)
		c.txt(r.x+10, r.y+20, 13, text, "start", 500, clip(p.Title, r.w-20, 13))
		body := box{r.x + 8, r.y + 32, r.w - 16, r.h - 40}
		if len(data) == 0 {
			c.txt(body.x+body.w/2, body.y+body.h/2, 14, dim, "middle", 400, "No data")
			continue
		}
		switch p.Type {
		case "stat":
			c.stat(p, body, data[0].value)
		case "piechart":
			c.pie(p, body, data)
		case "table":
			c.table(p, body, data)
		case "heatmap":
			c.heatmap(p, body, data, e)
		default:
			c.timeseries(p, body, data, e)
		}
	}
	c.txt(pad, float64(height-14), 11, dim, "start", 400, fmt.Sprintf(
		"Drawn by dashboards/render, not Grafana: every panel query of %s evaluated by a real Prometheus (%s), %s – %s UTC, step %s, $__rate_interval %s.",
		cmp.Or(*dashName, *dashPath), cmp.Or(*source, *promURL), e.start.UTC().Format("2006-01-02 15:04:05"), e.end.UTC().Format("15:04:05"), step, rate))
	c.f(`</svg>`)

	doc := c.String()
	if !strings.HasSuffix(*out, ".svg") {
		doc = fmt.Sprintf("<!doctype html><html><head><meta charset=\"utf-8\"><title>%s</title><style>html,body{margin:0;background:%s}</style></head><body>%s</body></html>\n",
			html.EscapeString(d.Title), bg, doc)
	}
	if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
		return err
	}
	fmt.Printf("%dx%d\n", *width, height)
	return nil
}

// endTime parses -end: RFC 3339, Unix seconds, or "" for now.
func endTime(s string) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(sec, 0), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("-end %q: want RFC 3339 (2026-11-29T06:40:00Z) or Unix seconds", s)
	}
	return t, nil
}

// header draws the title, the time picker and the variables of the page,
// pad pixels from its edges.
func (c *canvas) header(pad int, title string, rng time.Duration) {
	c.txt(float64(pad), 32, 20, text, "start", 500, "Dashboards  ›  "+title)
	c.f(`<rect x="%d" y="14" width="190" height="28" rx="3" fill="%s" stroke="%s"/>`, *width-pad-190, panelBg, border)
	c.txt(float64(*width-pad-95), 33, 13, text, "middle", 400, fmt.Sprintf("◷  Last %s", human(rng)))
	x := float64(pad)
	for _, v := range [][2]string{{"Data source", "Prometheus"}, {"Stage", "All"}, {"Outcome", "All"}} {
		w1, w2 := textW(v[0], 12)+20, textW(v[1], 12)+28
		c.f(`<rect x="%.0f" y="56" width="%.0f" height="28" fill="%s" stroke="%s"/>`, x, w1, panelBg, border)
		c.txt(x+10, 74, 12, text, "start", 500, v[0])
		c.f(`<rect x="%.0f" y="56" width="%.0f" height="28" fill="%s" stroke="%s"/>`, x+w1, w2, bg, border)
		c.txt(x+w1+10, 74, 12, text, "start", 400, v[1]+"  ▾")
		x += w1 + w2 + 12
	}
}

func human(d time.Duration) string {
	if d%time.Minute == 0 {
		if m := int(d / time.Minute); m != 1 {
			return fmt.Sprintf("%d minutes", m)
		}
		return "1 minute"
	}
	return d.String()
}

type box struct{ x, y, w, h float64 }

type canvas struct{ strings.Builder }

func (c *canvas) f(format string, args ...any) { fmt.Fprintf(c, format, args...) }

func (c *canvas) txt(x, y, size float64, fill, anchor string, weight int, s string) {
	c.f(`<text x="%.1f" y="%.1f" font-size="%.0f" fill="%s" text-anchor="%s" font-weight="%d">%s</text>`,
		x, y, size, fill, anchor, weight, html.EscapeString(s))
}

// textW estimates the width of s in pixels (DejaVu Sans-like metrics).
func textW(s string, size float64) float64 { return float64(len([]rune(s))) * size * 0.6 }

func clip(s string, w, size float64) string {
	r := []rune(s)
	for len(r) > 1 && textW(string(r), size) > w {
		r = append(r[:len(r)-2], '…')
	}
	return string(r)
}

// format renders v in a Grafana unit; dec < 0 picks decimals from v.
func format(v float64, unit string, dec int) string {
	if math.IsNaN(v) {
		return "-"
	}
	switch {
	case unit == "percentunit":
		return num(v*100, dec) + "%"
	case unit == "s" && v != 0 && math.Abs(v) < 1:
		return num(v*1000, dec) + " ms"
	case unit == "s" && math.Abs(v) >= 120:
		return num(v/60, dec) + " min"
	case unit == "s":
		return num(v, dec) + " s"
	case strings.HasPrefix(unit, "suffix:"):
		return num(v, dec) + strings.TrimPrefix(unit, "suffix:")
	case math.Abs(v) >= 1e6:
		return num(v/1e6, dec) + " Mil"
	case math.Abs(v) >= 1e4:
		return num(v/1e3, dec) + " K"
	}
	return num(v, dec)
}

func num(v float64, dec int) string {
	if dec >= 0 {
		return strconv.FormatFloat(v, 'f', dec, 64)
	}
	a := math.Abs(v)
	d := 3
	switch {
	case a >= 100:
		d = 0
	case a >= 10:
		d = 1
	case a >= 1:
		d = 2
	}
	s := strconv.FormatFloat(v, 'f', d, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func decimals(f field) int {
	if f.Decimals != nil {
		return *f.Decimals
	}
	return -1
}

func (c *canvas) stat(p *panel, b box, v float64) {
	f := p.FieldConfig.Defaults
	size := math.Min(b.h*0.5, 56)
	c.txt(b.x+b.w/2, b.y+b.h/2+size*0.35, size, f.thresholdColor(v), "middle", 500, format(v, f.Unit, decimals(f)))
}

func seriesColor(p *panel, name string, i int) string {
	if f := p.fieldFor(name); f.Color.Mode == "fixed" {
		return hex(f.Color.FixedColor)
	}
	return palette[i%len(palette)]
}

// niceStep is a 1-2-5 step giving about n ticks over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// legendTable draws a right-hand legend table (name, mean, max) and returns
// the space left for the plot.
func (c *canvas) legendTable(b box, frac float64, names, colors []string, cols []string, cells [][]string) box {
	lw := math.Min(b.w*frac, 360)
	x := b.x + b.w - lw
	colW := 50.0
	for _, row := range cells {
		for _, v := range row {
			colW = math.Max(colW, textW(v, 11)+10)
		}
	}
	nameW := lw - 16 - colW*float64(len(cols))
	for j, h := range cols {
		c.txt(x+16+nameW+colW*float64(j+1)-4, b.y+10, 11, "#6E9FFF", "end", 500, h)
	}
	rows := int((b.h - 16) / 17)
	for i, n := range names {
		y := b.y + 28 + float64(i)*17
		if i == rows-1 && len(names) > rows {
			c.txt(x, y, 11, dim, "start", 400, fmt.Sprintf("+ %d more", len(names)-i))
			break
		}
		c.f(`<rect x="%.1f" y="%.1f" width="12" height="4" rx="1" fill="%s"/>`, x, y-5, colors[i])
		c.txt(x+16, y, 11, text, "start", 400, clip(n, nameW-4, 11))
		for j, v := range cells[i] {
			c.txt(x+16+nameW+colW*float64(j+1)-4, y, 11, text, "end", 400, v)
		}
	}
	return box{b.x, b.y, b.w - lw - 12, b.h}
}

// timeseries draws a time series panel: a legend table (mean, max) on the
// right, then the axes, the series (stacked where the panel stacks) and
// dashed threshold lines.
func (c *canvas) timeseries(p *panel, b box, data []series, e *env) {
	f := p.FieldConfig.Defaults
	names, colors, cells, lo, hi := seriesStats(p, data, e.points)
	if f.Max != nil {
		hi = *f.Max
	}
	if f.Custom.ThresholdsStyle.Mode != "" && f.Thresholds != nil {
		for _, s := range f.Thresholds.Steps {
			if s.Value != nil {
				hi = math.Max(hi, *s.Value*1.05)
			}
		}
	}
	a := c.axes(f.Unit, c.legendTable(b, 0.45, names, colors, []string{"Mean", "Max"}, cells), lo, hi, e)
	base := make([]float64, e.points)
	for i, s := range data {
		c.seriesPath(a, s.vals, base, f.Custom.Stacking.Mode == "normal", colors[i], f.Custom.FillOpacity/100)
	}
	if f.Custom.ThresholdsStyle.Mode == "dashed" && f.Thresholds != nil {
		for _, st := range f.Thresholds.Steps {
			if st.Value != nil && hex(st.Color) != "none" {
				c.f(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="6 4"/>`, a.x, a.x+a.w, a.ypx(*st.Value), a.ypx(*st.Value), hex(st.Color))
			}
		}
	}
}

// finite reports whether v is a point to draw.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// seriesStats returns each series' legend name, color and cells (mean, max)
// and the value range the plot must show: from 0 or below, up to the highest
// point, or the highest sum of points where the panel stacks.
func seriesStats(p *panel, data []series, points int) (names, colors []string, cells [][]string, lo, hi float64) {
	f := p.FieldConfig.Defaults
	stacked := f.Custom.Stacking.Mode == "normal"
	names, colors = make([]string, len(data)), make([]string, len(data))
	cells = make([][]string, len(data))
	sum := make([]float64, points)
	for i, s := range data {
		names[i], colors[i] = s.name, seriesColor(p, s.name, i)
		total, n, mx := 0.0, 0, math.Inf(-1)
		for k, v := range s.vals {
			if !finite(v) {
				continue
			}
			total, n, mx = total+v, n+1, math.Max(v, mx)
			if stacked {
				sum[k] += v
				hi = math.Max(hi, sum[k])
			} else {
				hi, lo = math.Max(hi, v), math.Min(lo, v)
			}
		}
		if n == 0 {
			mx = math.NaN()
		}
		cells[i] = []string{format(total/float64(n), f.Unit, decimals(f)), format(mx, f.Unit, decimals(f))}
	}
	return names, colors, cells, lo, hi
}

// plotArea is the box inside a panel's axes and the scale that maps values
// and points of the common time grid into it.
type plotArea struct {
	box
	lo, hi float64
	points int
}

func (a plotArea) ypx(v float64) float64 { return a.y + a.h - (v-a.lo)/(a.hi-a.lo)*a.h }
func (a plotArea) xpx(k int) float64     { return a.x + float64(k)/float64(a.points-1)*a.w }

// axes rounds hi up to a tick, draws the value grid and labels (in unit) and
// the time grid and labels inside b, and returns the plot area they frame.
func (c *canvas) axes(unit string, b box, lo, hi float64, e *env) plotArea {
	tick := niceStep(hi-lo, int(math.Max(2, b.h/50)))
	hi = math.Max(tick, math.Ceil(hi/tick)*tick)
	dec := 0
	if unit == "percentunit" {
		dec = max(0, int(-math.Floor(math.Log10(tick*100))))
	} else if tick < 1 {
		dec = int(-math.Floor(math.Log10(tick)) + 0.5)
	}
	axisW := 0.0
	for v := lo; v <= hi+tick/2; v += tick {
		axisW = math.Max(axisW, textW(format(v, unit, dec), 10))
	}
	a := plotArea{box{b.x + axisW + 6, b.y + 4, b.w - axisW - 6, b.h - 22}, lo, hi, e.points}
	for v := lo; v <= hi+tick/2; v += tick {
		c.f(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`, a.x, a.x+a.w, a.ypx(v), a.ypx(v), grid)
		c.txt(a.x-6, a.ypx(v)+3.5, 10, dim, "end", 400, format(v, unit, dec))
	}
	span := e.end.Sub(e.start)
	every := time.Minute
	for _, d := range []time.Duration{10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour} {
		if every = d; float64(span/d) <= a.w/90 {
			break
		}
	}
	layout := "15:04"
	if every < time.Minute {
		layout = "15:04:05"
	}
	for t := e.start.Truncate(every).Add(every); t.Before(e.end); t = t.Add(every) {
		x := a.x + float64(t.Sub(e.start))/float64(span)*a.w
		c.f(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`, x, x, a.y, a.y+a.h, grid)
		c.txt(x, a.y+a.h+15, 10, dim, "middle", 400, t.UTC().Format(layout))
	}
	return a
}

// seriesPath draws one series as a line, filled at opacity down to the
// bottom of the plot or, stacked, down to base (the sum of the series below),
// which it then raises by vals. One path segment per run of points.
func (c *canvas) seriesPath(a plotArea, vals, base []float64, stacked bool, color string, opacity float64) {
	var line, area strings.Builder
	for k := 0; k < len(vals); {
		if !finite(vals[k]) {
			k++
			continue
		}
		j := k
		for ; j < len(vals) && finite(vals[j]); j++ {
		}
		var pts, back []string
		for m := k; m < j; m++ {
			v, lower := vals[m], a.lo
			if stacked {
				lower = base[m]
				v += base[m]
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", a.xpx(m), a.ypx(v)))
			back = append([]string{fmt.Sprintf("%.1f,%.1f", a.xpx(m), a.ypx(math.Max(lower, a.lo)))}, back...)
		}
		fmt.Fprintf(&line, "M%s ", strings.Join(pts, " L"))
		fmt.Fprintf(&area, "M%s L%s Z ", strings.Join(pts, " L"), strings.Join(back, " L"))
		k = j
	}
	if opacity > 0 && area.Len() > 0 {
		c.f(`<path d="%s" fill="%s" fill-opacity="%.2f" stroke="none"/>`, area.String(), color, opacity)
	}
	if line.Len() > 0 {
		c.f(`<path d="%s" fill="none" stroke="%s" stroke-width="1.5" stroke-linejoin="round"/>`, line.String(), color)
	}
	if stacked {
		for k, v := range vals {
			if finite(v) {
				base[k] += v
			}
		}
	}
}

func (c *canvas) pie(p *panel, b box, data []series) {
	sort.SliceStable(data, func(i, j int) bool { return data[i].value > data[j].value })
	total := 0.0
	for _, s := range data {
		total += math.Max(0, s.value)
	}
	names, colors, cells := make([]string, len(data)), make([]string, len(data)), make([][]string, len(data))
	for i, s := range data {
		names[i], colors[i] = s.name, seriesColor(p, s.name, i)
		cells[i] = []string{format(s.value, p.FieldConfig.Defaults.Unit, 0), fmt.Sprintf("%.0f%%", 100*s.value/total)}
	}
	plot := c.legendTable(b, 0.55, names, colors, []string{"Value", "Percent"}, cells)
	r := math.Min(plot.w, plot.h)/2 - 4
	cx, cy := plot.x+plot.w/2, plot.y+plot.h/2
	a := -math.Pi / 2
	for i, s := range data {
		if s.value <= 0 || total <= 0 {
			continue
		}
		da := 2 * math.Pi * s.value / total
		large := 0
		if da > math.Pi {
			large = 1
		}
		if da >= 2*math.Pi-1e-9 {
			da -= 1e-4
		}
		ri := r * 0.55
		p := func(rr, aa float64) string { return fmt.Sprintf("%.1f,%.1f", cx+rr*math.Cos(aa), cy+rr*math.Sin(aa)) }
		c.f(`<path d="M%s A%.1f,%.1f 0 %d 1 %s L%s A%.1f,%.1f 0 %d 0 %s Z" fill="%s" stroke="%s" stroke-width="1"/>`,
			p(r, a), r, r, large, p(r, a+da), p(ri, a+da), ri, ri, large, p(ri, a), colors[i], panelBg)
		if da > 0.3 {
			m := a + da/2
			c.txt(cx+(r+ri)/2*math.Cos(m), cy+(r+ri)/2*math.Sin(m)+4, 11, "#111217", "middle", 600, fmt.Sprintf("%.0f%%", 100*s.value/total))
		}
		a += da
	}
}

// table builds rows like Grafana's transformations (merge + organize, or
// groupingToMatrix + organize) and draws them.
func (c *canvas) table(p *panel, b box, data []series) {
	var o, matrix organize
	isMatrix := false
	for _, t := range p.Transformations {
		switch t.ID {
		case "organize":
			_ = json.Unmarshal(t.Options, &o)
		case "groupingToMatrix":
			_ = json.Unmarshal(t.Options, &matrix)
			isMatrix = true
		}
	}
	t := &tableRows{exclude: o.ExcludeByName, rows: map[string]map[string]any{}}
	if isMatrix {
		t.matrix(data, matrix.RowField, matrix.ColumnField)
	} else {
		t.merge(data)
	}
	sort.SliceStable(t.cols, func(i, j int) bool {
		a, aok := o.IndexByName[t.cols[i]]
		b, bok := o.IndexByName[t.cols[j]]
		return aok && bok && a < b || aok && !bok
	})
	name := func(col string) string {
		if n, ok := o.RenameByName[col]; ok {
			return n
		}
		return col
	}
	for _, s := range p.Options.SortBy {
		t.sortBy(name, s.DisplayName, s.Desc)
	}
	c.drawTable(p, b, t, name)
}

// organize holds the options of Grafana's organize and groupingToMatrix
// transformations that the table uses.
type organize struct {
	ExcludeByName map[string]bool
	IndexByName   map[string]int
	RenameByName  map[string]string
	RowField      string
	ColumnField   string
}

// tableRows are a table's columns, in order, and its rows by key, in order.
type tableRows struct {
	exclude map[string]bool
	cols    []string
	rows    map[string]map[string]any // a cell is a float64 or a string
	keys    []string
}

func (t *tableRows) add(key string) map[string]any {
	if t.rows[key] == nil {
		t.rows[key] = map[string]any{}
		t.keys = append(t.keys, key)
	}
	return t.rows[key]
}

func (t *tableRows) addCol(n string) {
	if !t.exclude[n] && !contains(t.cols, n) {
		t.cols = append(t.cols, n)
	}
}

// matrix is groupingToMatrix: one row per value of the label rowField, one
// column per value of columnField (sorted, 0 where a row has none).
func (t *tableRows) matrix(data []series, rowField, columnField string) {
	first := rowField + "\\" + columnField
	t.addCol(first)
	var causes []string
	for _, s := range data {
		row := t.add(s.labels[rowField])
		row[first] = s.labels[rowField]
		row[s.labels[columnField]] = s.value
		if !contains(causes, s.labels[columnField]) {
			causes = append(causes, s.labels[columnField])
		}
	}
	sort.Strings(causes)
	for _, k := range causes {
		t.addCol(k)
	}
	for _, r := range t.rows {
		for _, k := range causes {
			if r[k] == nil {
				r[k] = 0.0
			}
		}
	}
	sort.Strings(t.keys)
}

// merge joins the series into rows on the labels every series has: a column
// per label (in name order) and a "Value #refID" column per query.
func (t *tableRows) merge(data []series) {
	common := map[string]int{}
	for _, s := range data {
		for k := range s.labels {
			common[k]++
		}
	}
	for _, s := range data {
		names := make([]string, 0, len(s.labels))
		for k := range s.labels {
			names = append(names, k)
		}
		sort.Strings(names)
		var key []string
		for _, k := range names {
			if common[k] == len(data) {
				key = append(key, k+"="+s.labels[k])
			}
		}
		row := t.add(strings.Join(key, ","))
		for _, k := range names {
			if k != "__name__" {
				row[k] = s.labels[k]
				t.addCol(k)
			}
		}
		row["Value #"+s.refID] = s.value
		t.addCol("Value #" + s.refID)
	}
}

// sortBy sorts the rows by the numbers of the column shown as display.
func (t *tableRows) sortBy(name func(string) string, display string, desc bool) {
	sort.SliceStable(t.keys, func(i, j int) bool {
		for _, col := range t.cols {
			if name(col) == display {
				a, _ := t.rows[t.keys[i]][col].(float64)
				b, _ := t.rows[t.keys[j]][col].(float64)
				return a > b == desc && a != b
			}
		}
		return false
	})
}

// sums are the column totals over every row; a column of strings sums to 0.
func (t *tableRows) sums() []float64 {
	sums := make([]float64, len(t.cols))
	for _, k := range t.keys {
		for j, col := range t.cols {
			v, _ := t.rows[k][col].(float64)
			sums[j] += v
		}
	}
	return sums
}

// drawTable draws the header, as many rows as fit in b (then "+ N more
// rows") and, where the panel shows one, a footer of column totals over all
// rows, drawn or not, as Grafana's footer sums the whole table.
func (c *canvas) drawTable(p *panel, b box, t *tableRows, name func(string) string) {
	widths := make([]float64, len(t.cols))
	total := 0.0
	for j, col := range t.cols {
		widths[j] = math.Max(textW(name(col), 11), 60) + 20
		total += widths[j]
	}
	const rowH = 26.0
	x := b.x
	for j, col := range t.cols {
		widths[j] *= b.w / total
		c.txt(x+8, b.y+16, 11, "#6E9FFF", "start", 500, clip(name(col), widths[j]-12, 11))
		x += widths[j]
	}
	c.f(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`, b.x, b.x+b.w, b.y+rowH, b.y+rowH, border)
	sums := t.sums()
	draw := func(y float64, cell func(j int, col string) (string, string)) {
		x := b.x
		for j, col := range t.cols {
			s, fill := cell(j, col)
			c.txt(x+8, y+17, 12, fill, "start", 400, clip(s, widths[j]-12, 12))
			x += widths[j]
		}
	}
	bottom := b.y + b.h // of the rows: above the footer, where there is one
	if p.Options.Footer.Show {
		bottom -= rowH
	}
	for i, k := range t.keys {
		y := b.y + rowH*float64(i+1)
		if y+rowH*2 > bottom && i < len(t.keys)-1 {
			c.txt(b.x+8, y+17, 11, dim, "start", 400, fmt.Sprintf("+ %d more rows", len(t.keys)-i))
			break
		}
		draw(y, func(j int, col string) (string, string) {
			switch v := t.rows[k][col].(type) {
			case float64:
				f := p.fieldFor(name(col))
				fill := text
				if f.Custom.CellOptions.Type == "color-text" {
					fill = f.thresholdColor(v)
				}
				return format(v, f.Unit, decimals(f)), fill
			case string:
				return v, text
			}
			return "", text
		})
		c.f(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`, b.x, b.x+b.w, y+rowH, y+rowH, grid)
	}
	if p.Options.Footer.Show {
		y := b.y + b.h - rowH
		c.f(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`, b.x, b.x+b.w, y, y, border)
		draw(y, func(j int, col string) (string, string) {
			if j == 0 {
				return "Total", dim
			}
			f := p.fieldFor(name(col))
			return format(sums[j], f.Unit, decimals(f)), dim
		})
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// heatmap draws cumulative le buckets as a Grafana heatmap (calculate: false):
// one row per bucket, the count of each bucket, Oranges, exponential scale.
func (c *canvas) heatmap(p *panel, b box, data []series, e *env) {
	le := func(s series) float64 { v, _ := strconv.ParseFloat(s.labels["le"], 64); return v }
	sort.Slice(data, func(i, j int) bool { return le(data[i]) < le(data[j]) })
	cells := make([][]float64, len(data))
	mx := 0.0
	for i, s := range data {
		cells[i] = make([]float64, e.points)
		for k, v := range s.vals {
			if i > 0 && !math.IsNaN(data[i-1].vals[k]) {
				v -= data[i-1].vals[k]
			}
			if cells[i][k] = v; v > mx {
				mx = v
			}
		}
	}
	axisW := 44.0
	plot := box{b.x + axisW, b.y, b.w - axisW, b.h - 36}
	rh, cw := plot.h/float64(len(data)), plot.w/float64(e.points)
	for i, s := range data {
		y := plot.y + plot.h - float64(i+1)*rh
		lbl := s.labels["le"]
		if v := le(s); !math.IsInf(v, 0) {
			lbl = format(v, "percentunit", -1)
		}
		c.txt(plot.x-6, y+rh/2+3.5, 10, dim, "end", 400, lbl)
		for k, v := range cells[i] {
			if math.IsNaN(v) || v <= 1e-9 || mx <= 0 {
				continue
			}
			c.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, plot.x+float64(k)*cw, y+0.5, math.Max(cw-1, 0.5), rh-1, oranges(math.Sqrt(v/mx)))
		}
	}
	c.txt(plot.x, b.y+b.h-16, 10, dim, "start", 400, e.start.UTC().Format("15:04:05"))
	c.txt(plot.x+plot.w, b.y+b.h-16, 10, dim, "end", 400, e.end.UTC().Format("15:04:05"))
	for i := 0; i <= 40; i++ {
		c.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="6" fill="%s"/>`, plot.x+plot.w/2-100+float64(i)*5, b.y+b.h-10, 5.0, oranges(float64(i)/40))
	}
	c.txt(plot.x+plot.w/2-110, b.y+b.h-3, 10, dim, "end", 400, "0")
	c.txt(plot.x+plot.w/2+110, b.y+b.h-3, 10, dim, "start", 400, format(mx, "short", -1)+" runs/s")
}

// oranges interpolates a dark-theme Oranges scheme, t in [0,1].
func oranges(t float64) string {
	stops := [][3]float64{{0x4A, 0x1D, 0x05}, {0xD9, 0x48, 0x01}, {0xFD, 0x8D, 0x3C}, {0xFE, 0xE6, 0xCE}}
	t = math.Max(0, math.Min(1, t)) * float64(len(stops)-1)
	i := min(int(t), len(stops)-2)
	f := t - float64(i)
	var rgb [3]int
	for k := range rgb {
		rgb[k] = int(stops[i][k] + (stops[i+1][k]-stops[i][k])*f)
	}
	return fmt.Sprintf("#%02X%02X%02X", rgb[0], rgb[1], rgb[2])
}

// shrink rewrites a PNG with a palette of its 256 most frequent colors (the
// rest map to the nearest one): a flat dark dashboard stays sharp at a
// fraction of the size.
func shrink(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	rgba := func(x, y int) color.RGBA {
		r, g, b, _ := img.At(x, y).RGBA()
		return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}
	}
	bounds := img.Bounds()
	counts := map[color.RGBA]int{}
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			counts[rgba(x, y)]++
		}
	}
	var pal color.Palette
	for c := range counts {
		pal = append(pal, c)
	}
	sort.Slice(pal, func(i, j int) bool {
		a, b := pal[i].(color.RGBA), pal[j].(color.RGBA)
		return counts[a] > counts[b] || counts[a] == counts[b] && fmt.Sprint(a) < fmt.Sprint(b)
	})
	pal = pal[:min(len(pal), 256)]
	dst := image.NewPaletted(bounds, pal)
	index := map[color.RGBA]uint8{}
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			c := rgba(x, y)
			i, ok := index[c]
			if !ok {
				i = uint8(pal.Index(c))
				index[c] = i
			}
			dst.SetColorIndex(x, y, i)
		}
	}
	w, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(w, dst); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
