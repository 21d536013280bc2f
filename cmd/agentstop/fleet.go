package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/redisfleet"
	"github.com/agentstop/agentstop/internal/human"
	"github.com/agentstop/agentstop/internal/label"
	"github.com/agentstop/agentstop/internal/operator"
)

// fleetCommands are the fleet control commands (contract §7): name and the
// one-line summary "agentstop -h" shows. runFleet runs any of them.
var fleetCommands = []struct{ name, summary string }{
	{"runs", "list the live runs of a fleet (Redis)"},
	{"stop", "stop the live runs a selector matches, fleet-wide"},
	{"block", "make new runs a selector matches end at once as skipped"},
	{"unblock", "remove a block"},
	{"blocks", "list the active blocks"},
	{"budgets", "list the shared budgets of the current windows"},
}

// fleetTimeout bounds each call to the server, so that an unreachable one
// is reported well within 10 s.
const fleetTimeout = 3 * time.Second

const fleetUsageHead = `Usage: agentstop %s %s

%s

The fleet is the Redis server at -redis (or $AGENTSTOP_REDIS_URL): a
redis:// or rediss:// URL, with an optional ACL user and password (never
printed); a Redis Cluster is named by its nodes,
redis://[user:password@]host1:port1?addr=host2:port2&addr=host3:port3.
Selectors: -run ID, -stage NAME (1 to 128 of A-Z a-z 0-9 . _ -, starting
with a letter or digit), -label k=v (repeatable; all must match), or -all.
-json prints JSON for scripts instead of a table. A missing or malformed
selector, or a server that cannot be reached: one line on stderr, exit
status 2.

Flags:
`

var fleetSynopsis = map[string][2]string{
	"runs":    {"[-redis URL] [-json] [-tree] [-held] [-run ID] [-stage NAME] [-label k=v]...", "Lists the live runs (all of them without a selector): id, stage, labels, host,\npid, start, iterations, tool calls, tokens, cost, last update. -tree draws each\nrun under its parent (-json: parents first, each with \"parent\"). -held lists\nonly the runs held at a limit (hold:): the limit each waits on and for how long\n(-json: each with \"held\")."},
	"stop":    {"[-redis URL] -reason TEXT (-run ID | -stage NAME | -label k=v... | -all) [-wait 2s] [-by WHO] [-json]", "Stops every matching run live when its process receives the stop: it ends\nwith Cancelled{external, \"REASON (by WHO)\"}, and its descendants in every\nprocess with Cancelled{parent, \"STAGE ended: cancelled\"}. Waits up to -wait for\nthe owning processes to confirm and prints how many runs were stopped, had\nalready ended, or did not confirm, and how many descendants ended with them.\nExit status 0 once the stop is delivered."},
	"block":   {"[-redis URL] -reason TEXT (-stage NAME | -label k=v... | -all) [-expire D] [-by WHO] [-json]", "Makes every new matching run (from 1 s after this returns) end at once as\nSkipped{blocked, \"REASON (by WHO)\"}, until unblock or -expire. Live runs go on."},
	"unblock": {"[-redis URL] (-stage NAME | -label k=v... | -all) [-json]", "Removes the block with exactly this selector."},
	"blocks":  {"[-redis URL] [-json]", "Lists the active blocks: selector, reason, by whom, since, until."},
	"budgets": {"[-redis URL] [-json]", "Lists the shared budgets (fleet_budget) of the current windows: usage\nagainst the limits, exhaustion, pressure, live runs sharing each."},
}

// labelFlags collects repeated -label k=v flags.
type labelFlags struct{ m map[string]string }

func (l *labelFlags) String() string { return "" }

func (l *labelFlags) Set(kv string) error {
	name, value, err := label.Parse(kv)
	if err != nil {
		return err
	}
	if l.m == nil {
		l.m = map[string]string{}
	}
	if _, dup := l.m[name]; dup {
		return fmt.Errorf("label %q given twice", name)
	}
	l.m[name] = value
	return nil
}

// quietRedis keeps go-redis from logging: its default logger writes its
// own lines to stderr ("redis: … pool.go:762: redis: connection pool:
// failed to dial after 5 attempts …"), before the command's one line that
// already says the server cannot be used (§7: one clear line on stderr).
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// quietOnce sets go-redis's logger, a package variable, once: a cluster
// client's background reload of an earlier command (tests run many) may
// still be reading it.
var quietOnce sync.Once

// quietRedisLog silences go-redis's process-wide logger for every command
// (run calls it first): redisfleet leaves that logger to the program that
// links it (fleet/redisfleet's doc), and this program reports Redis's
// failures in its own words.
func quietRedisLog() { quietOnce.Do(func() { redis.SetLogger(quietRedis{}) }) }

// runFleet runs fleet command name with its arguments and returns the exit
// status.
func runFleet(name string, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	quietRedisLog()
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		fmt.Fprintf(stderr, "agentstop %s: %s\n", name, msg)
		return exitBad
	}
	a, fs := newFleetArgs(name)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			syn := fleetSynopsis[name]
			fmt.Fprintf(stdout, fleetUsageHead, name, syn[0], syn[1])
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return exitOK
		}
		return fail("%s (see agentstop %s -h)", err, name)
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q (see agentstop %s -h)", fs.Arg(0), name)
	}
	if err := a.check(getenv); err != nil {
		return fail("%s", err)
	}
	c, err := redisfleet.NewControl(*a.url, redisfleet.WithPrefix(*a.prefix), redisfleet.WithTimeout(fleetTimeout))
	if err != nil {
		return fail("%s", strings.TrimPrefix(err.Error(), "redisfleet: "))
	}
	defer c.Close()
	budget := 8 * time.Second
	if a.wait != nil {
		budget += *a.wait
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	out, table, err := a.call(ctx, c)
	if err != nil {
		return fail("%s", trimInvalid(err))
	}
	if *a.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return fail("%s", err)
		}
		return exitOK
	}
	table(stdout)
	return exitOK
}

// fleetArgs are a fleet command's flags: the ones every command takes,
// and those of its own (nil when the command has none).
type fleetArgs struct {
	name         string
	url, prefix  *string
	asJSON       *bool
	sel          fleet.Selector
	labels       labelFlags
	selectors    bool // the command takes a selector
	reason, by   *string
	wait, expire *time.Duration
	tree, held   *bool
}

// newFleetArgs declares the flags of the fleet command name.
func newFleetArgs(name string) (*fleetArgs, *flag.FlagSet) {
	a := &fleetArgs{name: name, selectors: name != "blocks" && name != "budgets"}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	// No default value: -h would print it, password and all.
	a.url = fs.String("redis", "", "Redis URL, redis://[user:password@]host:port[/db] or rediss://…, or a cluster's redis://host1:port1?addr=host2:port2&addr=… (default $AGENTSTOP_REDIS_URL)")
	a.prefix = fs.String("prefix", redisfleet.DefaultPrefix, "key and channel prefix the fleet uses")
	a.asJSON = fs.Bool("json", false, "print JSON instead of a table")
	if a.selectors {
		if name == "runs" || name == "stop" {
			fs.StringVar(&a.sel.RunID, "run", "", "select the run with this id")
		}
		fs.StringVar(&a.sel.Stage, "stage", "", "select the runs of this stage `NAME`")
		fs.Var(&a.labels, "label", "select runs with label k=v (repeatable; all must match)")
		fs.BoolVar(&a.sel.All, "all", false, "select every run")
	}
	if name == "runs" {
		a.tree = fs.Bool("tree", false, "draw the runs as trees: each under its parent (§8)")
		a.held = fs.Bool("held", false, "list only the runs held at a limit (hold:), with the limit each waits on and for how long")
	}
	if name == "stop" || name == "block" {
		a.reason = fs.String("reason", "", "why (required); the runs' cause detail shows it")
		a.by = fs.String("by", operator.Name(), "who issues it, shown in the cause detail and in blocks")
	}
	if name == "stop" {
		a.wait = human.Duration(fs, "wait", operator.Wait, "how long to wait for the owning processes to confirm")
	}
	if name == "block" {
		a.expire = human.Duration(fs, "expire", 0, "remove the block after this long (default: until unblock)")
	}
	return a, fs
}

// check completes and checks the parsed flags: the URL (from the
// environment when -redis is not given), the selector, the durations and
// the reason.
func (a *fleetArgs) check(getenv func(string) string) error {
	a.sel.Labels = a.labels.m
	if a.sel.Stage != "" { // -stage '' is no selector
		if err := checkStage(a.sel.Stage); err != nil {
			return err
		}
	}
	if *a.url == "" {
		*a.url = getenv("AGENTSTOP_REDIS_URL")
	}
	if strings.TrimSpace(*a.url) == "" {
		return errors.New("-redis URL (or AGENTSTOP_REDIS_URL) is required")
	}
	if a.selectors && a.name != "runs" && a.sel.IsZero() {
		what := "-stage NAME, -label k=v"
		if a.name == "stop" {
			what = "-run ID, " + what
		}
		return fmt.Errorf("a selector is required: %s, or -all (see agentstop %s -h)", what, a.name)
	}
	if a.selectors && a.sel.All && (a.sel.RunID != "" || a.sel.Stage != "" || len(a.sel.Labels) > 0) {
		// fleet.Selector's own error names its field All, not the flag.
		others := "-stage or -label"
		if a.name == "runs" || a.name == "stop" {
			others = "-run, " + others
		}
		return errors.New("-all cannot be combined with " + others)
	}
	if a.selectors {
		if err := a.sel.Validate(); err != nil && !(a.name == "runs" && a.sel.IsZero()) {
			return errors.New(trimInvalid(err))
		}
	}
	if a.wait != nil && *a.wait < 0 {
		return fmt.Errorf("-wait must be >= 0, got %s", *a.wait)
	}
	if a.expire != nil && *a.expire < 0 {
		return fmt.Errorf("-expire must not be negative (omit it to block until unblock), got %s", *a.expire)
	}
	if a.reason != nil && strings.TrimSpace(*a.reason) == "" {
		return errors.New("-reason TEXT is required")
	}
	return nil
}

// call runs the command against c: what -json prints, and the table
// that prints it for people.
func (a *fleetArgs) call(ctx context.Context, c *redisfleet.Control) (out any, table func(io.Writer), err error) {
	sel := a.sel
	switch a.name {
	case "runs":
		return a.runs(ctx, c)
	case "stop":
		rep, err := c.Stop(ctx, fleet.StopRequest{Selector: sel, Reason: *a.reason, By: *a.by, Wait: max(*a.wait, time.Millisecond)})
		return rep, func(w io.Writer) { stopTable(w, rep, *a.wait) }, err
	case "block":
		b, err := c.Block(ctx, fleet.BlockRequest{Selector: sel, Reason: *a.reason, By: *a.by, Expire: *a.expire})
		return b, func(w io.Writer) { blockLine(w, b) }, err
	case "unblock":
		n, err := c.Unblock(ctx, sel)
		return map[string]int{"removed": n}, func(w io.Writer) { unblockLine(w, sel, n) }, err
	case "blocks":
		bs, err := c.Blocks(ctx)
		return nonNil(bs), func(w io.Writer) { blocksTable(w, bs) }, err
	case "budgets":
		bs, err := c.Budgets(ctx)
		return nonNil(bs), func(w io.Writer) { budgetsTable(w, bs) }, err
	}
	return nil, nil, errors.New("unknown fleet command")
}

// runs lists the selected runs: held ones only with -held, as trees with
// -tree.
func (a *fleetArgs) runs(ctx context.Context, c *redisfleet.Control) (any, func(io.Writer), error) {
	rs, err := c.Runs(ctx, a.sel)
	if err != nil {
		return nil, nil, err
	}
	if *a.held {
		rs = onlyHeld(rs) // raise.go
		return nonNil(rs), func(w io.Writer) { heldTable(w, rs) }, nil
	}
	if *a.tree {
		rs = treeOrder(rs)
	}
	return nonNil(rs), func(w io.Writer) { runsTableOf(w, rs, *a.tree) }, nil
}

// stopTable prints what a stop did.
func stopTable(w io.Writer, rep fleet.StopReport, wait time.Duration) {
	fmt.Fprintf(w, "stopped %s (%d matched, %d already ended, %d unconfirmed after %s)\n",
		human.Count(rep.Stopped, "run"), rep.Matched, rep.AlreadyEnded, rep.Unconfirmed, wait)
	if rep.Descendants > 0 {
		fmt.Fprintf(w, "and %s under them (cancelled: parent)\n", human.Count(rep.Descendants, "descendant"))
	}
}

// blockLine prints the block that was set.
func blockLine(w io.Writer, b fleet.Block) {
	until := "until unblocked"
	if !b.Expires.IsZero() {
		until = "until " + b.Expires.Format(time.RFC3339)
	}
	fmt.Fprintf(w, "blocked %s %s: %s\n", b.Selector, until, b.Cause().Detail)
}

// unblockLine prints what an unblock removed.
func unblockLine(w io.Writer, sel fleet.Selector, n int) {
	if n == 0 {
		fmt.Fprintf(w, "no block on %s\n", sel)
		return
	}
	fmt.Fprintf(w, "unblocked %s\n", sel)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// trimInvalid drops the "fleet: invalid request: " prefix: the command's
// name already says where the line comes from.
func trimInvalid(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, fleet.ErrInvalid.Error()+": ")
	s = strings.TrimPrefix(s, fleet.ErrUnavailable.Error()+": ")
	if errors.Is(err, fleet.ErrUnavailable) {
		s = "cannot use " + s
	}
	return s
}

func labelsString(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}

func runsTable(w io.Writer, rs []fleet.RunInfo) { runsTableOf(w, rs, false) }

// runsTableOf writes the runs table; tree: the runs are in treeOrder, and
// each is drawn under its parent.
func runsTableOf(w io.Writer, rs []fleet.RunInfo, tree bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tPARENT\tSTAGE\tLABELS\tHOST\tPID\tSTARTED\tITER\tTOOLS\tTOKENS IN/OUT\tCOST\tUPDATED")
	depth := map[string]int{}
	for _, r := range rs {
		id, parent := r.ID, r.Parent
		if parent == "" {
			parent = "-"
		}
		if d, ok := depth[r.Parent]; ok && tree && r.Parent != "" {
			depth[r.ID] = d + 1
			id = strings.Repeat("  ", d) + "└ " + r.ID
		} else {
			depth[r.ID] = 0
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d/%d\t%s\t%s\n", id, cell(parent), cell(r.Stage), cell(labelsString(r.Labels)), cell(r.Host), r.PID,
			r.Started.Local().Format("15:04:05"), r.Iterations, r.ToolCalls, r.InputTokens, r.OutputTokens,
			human.Money(r.Cost), ago(r.Updated))
	}
	tw.Flush()
	fmt.Fprintf(w, "%s\n", human.Count(len(rs), "live run"))
}

func blocksTable(w io.Writer, bs []fleet.Block) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SELECTOR\tREASON\tBY\tSINCE\tUNTIL")
	for _, b := range bs {
		until := "unblock"
		if !b.Expires.IsZero() {
			until = b.Expires.Local().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", b.Selector, cell(b.Reason), cell(b.By), b.Created.Local().Format(time.RFC3339), until)
	}
	tw.Flush()
	fmt.Fprintf(w, "%s\n", human.Count(len(bs), "active block"))
}

func budgetsTable(w io.Writer, bs []fleet.Budget) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tWINDOW\tUSED\tSTATE\tRUNS")
	for _, b := range bs {
		var used []string
		for _, l := range b.Policy.Limits() {
			var u float64
			switch l.Resource {
			case "total_tokens":
				u = float64(b.Used.Total())
			case "input_tokens":
				u = float64(b.Used.InputTokens)
			case "output_tokens":
				u = float64(b.Used.OutputTokens)
			case "cost":
				u = b.Cost
			}
			number := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) } // tokens
			if l.Resource == "cost" {
				number = human.Money
			}
			used = append(used, fmt.Sprintf("%s %s/%s", l.Resource, number(u), number(l.Limit)))
		}
		state := "ok"
		switch {
		case b.Exhausted != "":
			state = "exhausted (" + string(b.Exhausted) + ")"
		case b.Pressure:
			state = "pressure"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s–%s\t%s\t%s\t%d\n", cell(b.Key), cell(b.Value), b.WindowStart.Local().Format("15:04:05"),
			b.WindowEnd.Local().Format("15:04:05"), strings.Join(used, ", "), state, b.Runs)
	}
	tw.Flush()
	fmt.Fprintf(w, "%s\n", human.Count(len(bs), "shared budget"))
}

// fleetRows are the fleet commands' rows of the dispatch table
// (commands.go), in fleetCommands' order, with raise (raise.go) after stop.
func fleetRows() []command {
	var rows []command
	for _, c := range fleetCommands {
		name := c.name
		rows = append(rows, command{name, c.summary, func(args []string, sio stdio) int {
			return runFleet(name, args, sio.out, sio.err, sio.getenv)
		}})
		if name == "stop" {
			rows = append(rows, raiseRow)
		}
	}
	return rows
}

// treeOrder orders runs as trees (§8, runs -tree): each run right after
// its parent and its parent's earlier children's subtrees, depth first;
// runs whose parent is not listed (a root, or a parent that ended or runs
// unlisted) start a tree. Within a level the order given is kept.
func treeOrder(rs []fleet.RunInfo) []fleet.RunInfo {
	listed := make(map[string]bool, len(rs))
	for _, r := range rs {
		listed[r.ID] = true
	}
	children := map[string][]fleet.RunInfo{}
	var roots []fleet.RunInfo
	for _, r := range rs {
		if r.Parent != "" && r.Parent != r.ID && listed[r.Parent] {
			children[r.Parent] = append(children[r.Parent], r)
		} else {
			roots = append(roots, r)
		}
	}
	out := make([]fleet.RunInfo, 0, len(rs))
	seen := make(map[string]bool, len(rs))
	var walk func(r fleet.RunInfo)
	walk = func(r fleet.RunInfo) {
		if seen[r.ID] {
			return // a cycle of parents: each run once
		}
		seen[r.ID] = true
		out = append(out, r)
		for _, c := range children[r.ID] {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	for _, r := range rs { // runs on a cycle of parents, none of them a root
		walk(r)
	}
	return out
}
