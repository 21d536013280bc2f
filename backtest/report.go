package backtest

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/internal/human"
	"github.com/agentstop/agentstop/termination"
)

// Summary is what one policy did to the whole corpus.
type Summary struct {
	Policy  string
	Runs    int
	Stopped int
	// ByCause counts the stopped runs by termination_cause.
	ByCause map[string]int
	// Saved is what the stops saved, over every stopped run.
	Saved termination.Totals
	// Labels is set when the backtest had labels.
	Labels *LabelSummary
	// Live compares the policy with how the runs ended live, over the runs
	// with an end record (§4.1 "Recorded runs"); zero without any.
	Live LiveSummary
}

// LiveSummary is how a policy's ends compare with the recorded ones.
type LiveSummary struct {
	// Recorded is how many runs have an end record.
	Recorded int
	// Differ is how many of them the policy ends differently from live:
	// with another cause, or at an earlier event.
	Differ int
	// Changes counts them by "LIVE → POLICY" termination_cause (the same
	// cause twice for a run ended earlier with the live cause).
	Changes map[string]int
}

// endsDifferently reports whether o's policy ends the run otherwise than
// it ended live, and how ("LIVE → TAG").
func endsDifferently(o *Outcome) (string, bool) {
	live := o.Result.Live
	if live == "" || o.Result.FromRecord {
		return "", false
	}
	tag := o.Result.Tag()
	if tag == live && o.Saved.Events == 0 {
		return "", false
	}
	return live + " → " + tag, true
}

// LabelSummary is a policy's confusion counts against the labels.
type LabelSummary struct {
	Good, Bad, Unlabelled int
	BadStopped            int // bad runs the policy stopped
	GoodStopped           int // good runs the policy stopped: false stops
	SavedOnBad            termination.Totals
	// LostOnGood is what the stopped good runs had spent before their
	// stop: work the stop throws away.
	LostOnGood termination.Totals
}

// FalseStops returns how many good runs the policy stopped (0 without
// labels).
func (s *Summary) FalseStops() int {
	if s.Labels == nil {
		return 0
	}
	return s.Labels.GoodStopped
}

func summarize(outcomes []Outcome, policies []Policy, labelled bool) []Summary {
	sums := make([]Summary, len(policies))
	index := make(map[string]int, len(policies))
	for i, p := range policies {
		sums[i] = Summary{Policy: p.Name, ByCause: map[string]int{}, Live: LiveSummary{Changes: map[string]int{}}}
		if labelled {
			sums[i].Labels = &LabelSummary{}
		}
		if _, dup := index[p.Name]; !dup {
			index[p.Name] = i
		}
	}
	n := len(policies)
	for k := range outcomes {
		o := &outcomes[k]
		s := &sums[k%n] // outcomes go run by run, policies in order
		if o.LeftOut {
			continue
		}
		s.Runs++
		if o.Result.Live != "" {
			s.Live.Recorded++
			if change, ok := endsDifferently(o); ok {
				s.Live.Differ++
				s.Live.Changes[change]++
			}
		}
		if o.Stopped {
			s.Stopped++
			s.ByCause[o.Result.Tag()]++
			s.Saved.Add(o.Saved)
		}
		if l := s.Labels; l != nil {
			switch o.Label {
			case Good:
				l.Good++
				if o.Stopped {
					l.GoodStopped++
					l.LostOnGood.Add(o.Spent)
				}
			case Bad:
				l.Bad++
				if o.Stopped {
					l.BadStopped++
					l.SavedOnBad.Add(o.Saved)
				}
			default:
				l.Unlabelled++
			}
		}
	}
	return sums
}

type tokensJSON struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
}

type amountsJSON struct {
	Events     int        `json:"events"`
	Iterations int        `json:"iterations"`
	ToolCalls  int        `json:"tool_calls"`
	Tokens     tokensJSON `json:"tokens"`
	Cost       float64    `json:"cost"`
}

// amounts is what a run spent in a report's JSON: {"events",
// "iterations", "tool_calls", "tokens": {"input", "output"}, "cost"}.
type amounts termination.Totals

// MarshalJSON writes the report's form.
func (a amounts) MarshalJSON() ([]byte, error) {
	return json.Marshal(amountsJSON{a.Events, a.Iterations, a.ToolCalls,
		tokensJSON{a.Tokens.InputTokens, a.Tokens.OutputTokens}, a.Cost})
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (a *amounts) UnmarshalJSON(b []byte) error {
	var j amountsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*a = amounts{j.Events, j.Iterations, j.ToolCalls, termination.Usage{InputTokens: j.Tokens.Input, OutputTokens: j.Tokens.Output}, j.Cost}
	return nil
}

type labelSummaryJSON struct {
	Good        int     `json:"good"`
	Bad         int     `json:"bad"`
	Unlabelled  int     `json:"unlabelled"`
	BadStopped  int     `json:"bad_stopped"`
	GoodStopped int     `json:"good_stopped"`
	SavedOnBad  amounts `json:"saved_on_bad"`
	LostOnGood  amounts `json:"lost_on_good"`
}

type summaryJSON struct {
	Policy  string            `json:"policy"`
	Runs    int               `json:"runs"`
	Stopped int               `json:"stopped"`
	ByCause map[string]int    `json:"by_cause"`
	Saved   amounts           `json:"saved"`
	Labels  *labelSummaryJSON `json:"labels,omitempty"`
}

// MarshalJSON writes the summary object of the contract (§4.1), without
// the {"summary": …} around it.
func (s Summary) MarshalJSON() ([]byte, error) {
	j := summaryJSON{Policy: s.Policy, Runs: s.Runs, Stopped: s.Stopped, ByCause: s.ByCause, Saved: amounts(s.Saved)}
	if j.ByCause == nil {
		j.ByCause = map[string]int{}
	}
	if l := s.Labels; l != nil {
		j.Labels = &labelSummaryJSON{l.Good, l.Bad, l.Unlabelled, l.BadStopped, l.GoodStopped, amounts(l.SavedOnBad), amounts(l.LostOnGood)}
	}
	return json.Marshal(j)
}

type firingJSON struct {
	Condition string          `json:"condition"`
	Cause     json.RawMessage `json:"cause"`
	At        int             `json:"at"`
}

// MarshalJSON writes {"condition", "cause", "at"}.
func (f Firing) MarshalJSON() ([]byte, error) {
	c, err := codec.MarshalCause(f.Cause)
	if err != nil {
		return nil, err
	}
	return json.Marshal(firingJSON{f.Condition, c, f.At})
}

// MarshalJSON writes the replay result's object (termination.Result's JSON)
// followed by run, parent (when there is one), file, policy, label (when
// labelled), saved, and all (with Config.All). A key the result already
// writes is not written twice.
func (o Outcome) MarshalJSON() ([]byte, error) {
	res, err := json.Marshal(o.Result)
	if err != nil {
		return nil, err
	}
	var have map[string]json.RawMessage
	if err := json.Unmarshal(res, &have); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(bytes.TrimSuffix(bytes.TrimSpace(res), []byte("}")))
	field := func(key string, v any) error {
		if _, ok := have[key]; ok {
			return nil
		}
		val, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", key, val)
		return nil
	}
	fields := []struct {
		key  string
		val  any
		keep bool
	}{
		{"run", o.Run, true},
		{"parent", o.Parent, o.Parent != ""},
		{"file", o.File, true},
		{"policy", o.Policy, true},
		{"label", o.Label.String(), o.Label != Unlabelled},
		{"truncated", true, o.Result.Truncated},
		{"saved", amounts(o.Saved), true},
		{"all", o.All, o.All != nil},
	}
	for _, f := range fields {
		if !f.keep {
			continue
		}
		if err := field(f.key, f.val); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// WriteJSON writes one JSON object per line per (run, policy), then one
// {"summary": …} object per policy.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range r.Outcomes {
		if r.Outcomes[i].LeftOut {
			continue
		}
		if err := enc.Encode(r.Outcomes[i]); err != nil {
			return err
		}
	}
	for _, s := range r.Summaries {
		if err := enc.Encode(map[string]Summary{"summary": s}); err != nil {
			return err
		}
	}
	return nil
}

// csvHeader is the header row of WriteCSV.
var csvHeader = []string{
	"run", "parent", "file", "policy", "label", "termination_cause", "outcome", "cause",
	"stopped_at", "events", "iterations", "tool_calls", "tokens_input", "tokens_output", "cost",
	"duration", "truncated", "evidence", "fired", "warnings", "stopped",
	"saved_events", "saved_iterations", "saved_tool_calls", "saved_tokens_input", "saved_tokens_output", "saved_cost",
	"all",
}

// WriteCSV writes one row per (run, policy): the fields of the JSON
// objects flattened (cause, fired, warnings and all as JSON text, evidence
// as indices separated by spaces, duration as a Go duration, empty when
// the run has no times). Summaries are not written: a spreadsheet sums the
// columns.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for i := range r.Outcomes {
		o := &r.Outcomes[i]
		if o.LeftOut {
			continue
		}
		res := &o.Result
		cause, err := marshalCauseText(res.Cause)
		if err != nil {
			return err
		}
		fired, err := marshalCauseList(res.Fired)
		if err != nil {
			return err
		}
		warnings, err := marshalCauseList(res.Warnings)
		if err != nil {
			return err
		}
		all := ""
		if o.All != nil {
			b, err := json.Marshal(o.All)
			if err != nil {
				return err
			}
			all = string(b)
		}
		evidence := make([]string, len(res.Evidence))
		for k, e := range res.Evidence {
			evidence[k] = strconv.Itoa(e)
		}
		duration := ""
		if res.Duration != 0 {
			duration = res.Duration.String()
		}
		row := []string{
			o.Run, o.Parent, o.File, o.Policy, o.Label.String(), res.Tag(), res.Outcome.String(), cause,
			strconv.Itoa(res.StoppedAt), strconv.Itoa(res.Events), strconv.Itoa(res.Iterations), strconv.Itoa(res.ToolCalls),
			i64(res.Tokens.InputTokens), i64(res.Tokens.OutputTokens), f64(res.Cost),
			duration, strconv.FormatBool(res.Truncated), strings.Join(evidence, " "), fired, warnings, strconv.FormatBool(o.Stopped),
			strconv.Itoa(o.Saved.Events), strconv.Itoa(o.Saved.Iterations), strconv.Itoa(o.Saved.ToolCalls),
			i64(o.Saved.Tokens.InputTokens), i64(o.Saved.Tokens.OutputTokens), f64(o.Saved.Cost),
			all,
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func i64(v int64) string   { return strconv.FormatInt(v, 10) }
func f64(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func marshalCauseText(c termination.Cause) (string, error) {
	if c == nil {
		return "", nil
	}
	b, err := codec.MarshalCause(c)
	return string(b), err
}

func marshalCauseList(cs []termination.Cause) (string, error) {
	raw := make([]json.RawMessage, len(cs))
	for i, c := range cs {
		b, err := codec.MarshalCause(c)
		if err != nil {
			return "", err
		}
		raw[i] = b
	}
	b, err := json.Marshal(raw)
	return string(b), err
}

// WriteTable writes the report for people: first one line per policy
// side by side (runs stopped, with labels the bad runs it stopped and the
// good runs it killed, and what it saved), then for each policy its stops
// by cause and the runs it stopped, good runs first, each with where it
// stopped and what it saved; with Config.All, then every condition that
// would fire over each whole run, first to fire first.
func (r *Report) WriteTable(w io.Writer) error {
	if err := r.writeSummaryTable(w); err != nil {
		return err
	}
	for j := range r.Summaries {
		if err := r.writePolicy(w, j); err != nil {
			return err
		}
	}
	return nil
}

// labelled reports whether the backtest had labels.
func (r *Report) labelled() bool { return len(r.Summaries) > 0 && r.Summaries[0].Labels != nil }

// outcomesOf returns policy j's outcomes, in the report's order.
func (r *Report) outcomesOf(j int) []*Outcome {
	var out []*Outcome
	for k := j; k < len(r.Outcomes); k += len(r.Summaries) {
		if !r.Outcomes[k].LeftOut {
			out = append(out, &r.Outcomes[k])
		}
	}
	return out
}

// writeSummaryTable writes one line per policy, side by side.
func (r *Report) writeSummaryTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if r.labelled() {
		fmt.Fprintln(tw, "POLICY\tRUNS\tSTOPPED\tBAD STOPPED\tGOOD STOPPED (FALSE STOPS)\tSAVED ON BAD RUNS\tLOST ON GOOD RUNS\tSAVED IN ALL")
	} else {
		fmt.Fprintln(tw, "POLICY\tRUNS\tSTOPPED\tSAVED\t")
	}
	for j, s := range r.Summaries {
		l := s.Labels
		if l == nil {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", s.Policy, s.Runs, s.Stopped, short(s.Saved))
			continue
		}
		// What the bad runs spent in all, and the good ones: the savings
		// and losses read as shares of them.
		var bad, good termination.Totals
		for _, o := range r.outcomesOf(j) {
			switch o.Label {
			case Bad:
				bad.Add(o.Spent)
				bad.Add(o.Saved)
			case Good:
				good.Add(o.Spent)
				good.Add(o.Saved)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d of %d\t%d of %d\t%s\t%s\t%s\n", s.Policy, s.Runs, s.Stopped,
			l.BadStopped, l.Bad, l.GoodStopped, l.Good, shortOf(l.SavedOnBad, bad), shortOf(l.LostOnGood, good), short(s.Saved))
	}
	return tw.Flush()
}

// writePolicy writes policy j's section: its stops by cause, what they
// saved, the runs it stopped and, with Config.All, the conditions.
func (r *Report) writePolicy(w io.Writer, j int) error {
	s := r.Summaries[j]
	fmt.Fprintf(w, "\n%s: stopped %d of %s", s.Policy, s.Stopped, human.Count(s.Runs, "run"))
	if len(s.ByCause) > 0 {
		causes := slices.Sorted(maps.Keys(s.ByCause))
		slices.SortStableFunc(causes, func(a, b string) int { return s.ByCause[b] - s.ByCause[a] })
		parts := make([]string, len(causes))
		for k, c := range causes {
			parts[k] = fmt.Sprintf("%s %d", c, s.ByCause[c])
		}
		fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  saved: %s\n", long(s.Saved))
	if lv := s.Live; lv.Recorded > 0 {
		fmt.Fprintf(w, "  vs live: ends %d of %s with an end record differently", lv.Differ, human.Count(lv.Recorded, "run"))
		if len(lv.Changes) > 0 {
			changes := slices.Sorted(maps.Keys(lv.Changes))
			slices.SortStableFunc(changes, func(a, b string) int { return lv.Changes[b] - lv.Changes[a] })
			parts := make([]string, len(changes))
			for k, c := range changes {
				parts[k] = fmt.Sprintf("%s %d", c, lv.Changes[c])
			}
			fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
		}
		fmt.Fprintln(w)
	}
	if l := s.Labels; l != nil {
		fmt.Fprintf(w, "  labels: %d good, %d bad, %d unlabelled; stopped %d bad and %d good (false stops)\n",
			l.Good, l.Bad, l.Unlabelled, l.BadStopped, l.GoodStopped)
		fmt.Fprintf(w, "  saved on bad runs: %s\n", long(l.SavedOnBad))
		fmt.Fprintf(w, "  lost on good runs: %s\n", long(l.LostOnGood))
	}
	// Good runs first: those are the stops to look at.
	runs := r.outcomesOf(j)
	slices.SortStableFunc(runs, func(a, b *Outcome) int { return labelRank(a.Label) - labelRank(b.Label) })
	if err := r.writeStopped(w, runs); err != nil {
		return err
	}
	return r.writeFirings(w, runs)
}

// writeStopped writes the stopped runs of runs, one row each.
func (r *Report) writeStopped(w io.Writer, runs []*Outcome) error {
	labelled := r.labelled()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := false
	for _, o := range runs {
		if !o.Stopped {
			continue
		}
		if !header {
			header = true
			fmt.Fprintln(w)
			if labelled {
				fmt.Fprint(tw, "  RUN\tLABEL\tCAUSE\tSTOPPED AT\tSAVED\n")
			} else {
				fmt.Fprint(tw, "  RUN\tCAUSE\tSTOPPED AT\tSAVED\n")
			}
		}
		at := fmt.Sprintf("%d of %d", o.Result.Events, o.Result.Events+o.Saved.Events)
		if o.Result.StoppedAt > 0 {
			at = fmt.Sprintf("event %d of %d", o.Result.StoppedAt, o.Result.Events+o.Saved.Events)
		}
		if labelled {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", o.Run, labelCell(o.Label), o.Result.Tag(), at, short(o.Saved))
		} else {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", o.Run, o.Result.Tag(), at, short(o.Saved))
		}
	}
	return tw.Flush()
}

// writeFirings writes, with Config.All, every condition that would fire
// over each whole run of runs, the first to fire first, one row each (the
// run named on its first row), then how many runs no condition fires on.
func (r *Report) writeFirings(w io.Writer, runs []*Outcome) error {
	if len(runs) == 0 || runs[0].All == nil {
		return nil // without Config.All
	}
	quiet := 0
	for _, o := range runs {
		if len(o.All) == 0 {
			quiet++
		}
	}
	if quiet == len(runs) {
		fmt.Fprintf(w, "\n  -all: no condition would fire on any of the %s\n", human.Count(len(runs), "run"))
		return nil
	}
	fmt.Fprintln(w, "\n  every condition that would fire over the whole run (-all), the first to fire first:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "  RUN\tFIRES AT\tCONDITION\tCAUSE\n")
	for _, o := range runs {
		all := slices.Clone(o.All)
		slices.SortStableFunc(all, func(a, b Firing) int { return a.At - b.At })
		for k, f := range all {
			run := o.Run
			if k > 0 {
				run = ""
			}
			fmt.Fprintf(tw, "  %s\tevent %d\t%s\t%s\n", run, f.At, f.Condition, termination.Tag(f.Cause, nil))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if quiet > 0 {
		fmt.Fprintf(w, "  no condition would fire on the %s\n", human.Count(quiet, "other run"))
	}
	return nil
}

func labelCell(l Label) string {
	if l == Unlabelled {
		return "-"
	}
	return l.String()
}

func labelRank(l Label) int {
	switch l {
	case Good:
		return 0
	case Bad:
		return 1
	}
	return 2
}

// short writes amounts in a table cell: "40 events, 821.1k tokens, cost
// 1.37" (money to 6 significant digits, human.Money).
func short(a termination.Totals) string {
	return fmt.Sprintf("%s, %s, cost %s", human.Count(a.Events, "event"), tokens(a.Tokens.Total()), human.Money(a.Cost))
}

// shortOf writes amounts as parts of a total: "31 of 54 events, 59.7k of
// 89.0k tokens".
func shortOf(a, total termination.Totals) string {
	return fmt.Sprintf("%d of %s, %s of %s", a.Events, human.Count(total.Events, "event"),
		count(a.Tokens.Total()), tokens(total.Tokens.Total()))
}

// long writes amounts in full.
func long(a termination.Totals) string {
	return fmt.Sprintf("%s, %s, %s, %d input + %d output %s, cost %s",
		human.Count(a.Events, "event"), human.Count(a.Iterations, "iteration"), human.Count(a.ToolCalls, "tool call"),
		a.Tokens.InputTokens, a.Tokens.OutputTokens, human.Noun(a.Tokens.Total(), "token"), human.Money(a.Cost))
}

// tokens writes a token count and the noun: "1 token", "12.3k tokens".
func tokens(n int64) string { return count(n) + " " + human.Noun(n, "token") }

// count writes a token count for people: 950, 12.3k, 4.1M.
func count(n int64) string {
	switch {
	case n >= 1_000_000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
	case n >= 10_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatInt(n, 10)
}
