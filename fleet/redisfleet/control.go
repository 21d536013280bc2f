package redisfleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/internal/account"
	"github.com/agentstop/agentstop/fleet/internal/fleetmetrics"
	"github.com/agentstop/agentstop/internal/operator"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/termination"
)

// Control steers a Redis fleet: it lists runs, blocks and budgets, and
// issues stops and blocks (the agentstop CLI's commands). It starts no
// goroutine of its own. A [Fleet] is also a Control.
type Control struct {
	client  redis.UniversalClient
	cluster *redis.ClusterClient // the same client when it is a cluster's, else nil
	scripts redis.Scripter       // runs the scripts: client, or a test's wrapper of it
	k       keys
	cfg     *config
	metrics *fleetmetrics.Metrics
	addr    string
}

var _ fleet.Control = (*Control)(nil)

// NewControl connects lazily to the server at url (redis:// or rediss://,
// with an optional ACL user and password, which no error ever shows), or
// to the Redis Cluster it names (see CheckURL and WithCluster).
func NewControl(url string, opts ...Option) (*Control, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return newControl(url, cfg)
}

func newControl(url string, cfg *config) (*Control, error) {
	c := &Control{k: keys{prefix: cfg.prefix}, cfg: cfg, metrics: fleetmetrics.New(cfg.meter)}
	dial := min(cfg.opTimeout, 5*time.Second)
	if cfg.cluster || isClusterURL(url) {
		co, err := parseClusterURL(url)
		if err != nil {
			return nil, fmt.Errorf("redisfleet: %w", err)
		}
		co.DialTimeout, co.ReadTimeout, co.WriteTimeout, co.MaxRetries, co.DisableIdentity = dial, cfg.opTimeout, cfg.opTimeout, 1, true
		// The slots are read again at least this often, and at once after a
		// failed call (refresh): go-redis reloads them on MOVED, but not when
		// a dead master refuses connections, which is how a failover looks
		// until its replica is promoted.
		co.ClusterStateReloadInterval = clusterReload
		c.cluster = redis.NewClusterClient(co)
		c.client, c.addr = c.cluster, strings.Join(co.Addrs, ",")
	} else {
		ro, err := parseURL(url)
		if err != nil {
			return nil, fmt.Errorf("redisfleet: %w", err)
		}
		ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout, ro.MaxRetries, ro.DisableIdentity = dial, cfg.opTimeout, cfg.opTimeout, 1, true
		c.client, c.addr = redis.NewClient(ro), ro.Addr
	}
	c.scripts = cfg.wrapScripts(c.client)
	return c, nil
}

// clusterReload is how often a cluster's slots are read again when no
// call failed.
const clusterReload = 5 * time.Second

// Close closes the connections.
func (c *Control) Close() error { return c.client.Close() }

// refresh has a cluster's client read the slots again (in the background;
// at most one read at a time) after a failed call: a node may have died
// and its replica taken over its slots.
func (c *Control) refresh() {
	if c.cluster != nil {
		c.cluster.ReloadState(context.Background())
	}
}

// unavailable wraps a server error as fleet.ErrUnavailable, naming the
// address (never the credentials) and counting it under operation.
func (c *Control) unavailable(op string, err error) error {
	c.refresh()
	c.metrics.Error(op)
	return fmt.Errorf("%w: redis at %s: %s", fleet.ErrUnavailable, c.addr, oneLine(err))
}

func oneLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func (c *Control) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.opTimeout)
}

// entry is a run's registry value.
type entry struct {
	fleet.RunInfo
	// Budget is the escaped id of the run's shared budget, if any.
	Budget string `json:"budget,omitempty"`
}

// Runs implements fleet.Control.
func (c *Control) Runs(ctx context.Context, sel fleet.Selector) ([]fleet.RunInfo, error) {
	if !sel.IsZero() {
		if err := sel.Validate(); err != nil { // as Local: a selector that could match nothing is an error
			return nil, err
		}
	}
	entries, _, err := c.entries(ctx)
	if err != nil {
		return nil, err
	}
	var out []fleet.RunInfo
	for _, e := range entries {
		if sel.Matches(e.RunInfo) {
			out = append(out, e.RunInfo)
		}
	}
	slices.SortFunc(out, fleet.RunInfo.Compare)
	return out, nil
}

func (c *Control) entries(ctx context.Context) ([]entry, int64, error) {
	vals, now, err := c.records(ctx, c.k.runs())
	if err != nil {
		return nil, 0, c.unavailable(fleetmetrics.OpList, err)
	}
	out := make([]entry, 0, len(vals))
	for _, s := range vals {
		var e entry
		if err := json.Unmarshal([]byte(s), &e); err != nil {
			c.metrics.Error(fleetmetrics.OpList)
			continue
		}
		out = append(out, e)
	}
	return out, now, nil
}

// records returns the live records of an index (runs, stops or blocks)
// and the server's time: the index's live ids by indexScript, then their
// records by one MGET in the index's slot (a record that expired in
// between is left out).
func (c *Control) records(ctx context.Context, index string) ([]string, int64, error) {
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	res, err := indexScript.RunRO(ctx, c.scripts, []string{index}).Slice()
	if err != nil {
		return nil, 0, err
	}
	now, _ := res[0].(int64)
	if len(res) == 1 {
		return nil, now, nil
	}
	keys := make([]string, 0, len(res)-1)
	for _, v := range res[1:] {
		id, _ := v.(string)
		keys = append(keys, c.k.record(index, id))
	}
	vals, err := c.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, 0, err
	}
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out, now, nil
}

// record is a stored stop or block: "KIND ID AT EXPIRES JSON".
type record struct {
	Kind     string
	ID       string
	At       int64          // server ms
	Expires  int64          // server ms; 0: none
	Selector fleet.Selector `json:"selector"`
	Reason   string         `json:"reason"`
	By       string         `json:"by"`
	Limits   string         `json:"limits,omitempty"` // a raise's amounts, as termination.Limits.String writes them
}

type recordBody struct {
	Selector fleet.Selector `json:"selector"`
	Reason   string         `json:"reason"`
	By       string         `json:"by"`
	Limits   string         `json:"limits,omitempty"`
}

func parseRecord(s string) (record, error) {
	f := strings.SplitN(s, " ", 5)
	if len(f) != 5 {
		return record{}, errors.New("malformed record")
	}
	at, err1 := strconv.ParseInt(f[2], 10, 64)
	exp, err2 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil {
		return record{}, errors.New("malformed record times")
	}
	var b recordBody
	if err := json.Unmarshal([]byte(f[4]), &b); err != nil {
		return record{}, err
	}
	return record{Kind: f[0], ID: f[1], At: at, Expires: exp, Selector: b.Selector, Reason: b.Reason, By: b.By, Limits: b.Limits}, nil
}

func (r record) block() fleet.Block {
	b := fleet.Block{Selector: r.Selector, Reason: r.Reason, By: r.By, Created: time.UnixMilli(r.At).UTC()}
	if r.Expires > 0 {
		b.Expires = time.UnixMilli(r.Expires).UTC()
	}
	return b
}

// publish stores and publishes a stop or block and returns the server's
// time and how many subscribers received it.
func (c *Control) publish(ctx context.Context, kind, index, key, id string, ttl time.Duration, body recordBody) (now, receivers int64, err error) {
	js, err := json.Marshal(body)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	res, err := publishScript.Run(ctx, c.scripts, []string{index, key},
		kind, id, ttl.Milliseconds(), string(js), c.k.ctl()).Int64Slice()
	if err != nil {
		return 0, 0, err
	}
	return res[0], c.subscribers(ctx, res[1]), nil
}

// subscribers returns how many clients are subscribed to the control
// channel. PUBLISH answers with the subscribers of the node it ran on
// (local); on a cluster, where every node forwards the message to its own
// subscribers, it is the sum of PUBSUB NUMSUB over the nodes (local when
// a node cannot be asked).
func (c *Control) subscribers(ctx context.Context, local int64) int64 {
	if c.cluster == nil {
		return local
	}
	var mu sync.Mutex
	var n int64
	err := c.cluster.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
		m, err := node.PubSubNumSub(ctx, c.k.ctl()).Result()
		mu.Lock()
		n += m[c.k.ctl()]
		mu.Unlock()
		return err
	})
	if err != nil {
		return local
	}
	return n
}

// Stop implements fleet.Control: it stores the stop (for the longer of the
// lease and a minute, plus the wait, so processes that reconnect still see
// it), publishes it, and waits up to req.Wait for the owning processes'
// confirmations. A stopped run's descendants (§8), in its process and in
// every other (each ends when the stored record of its parent's end
// reaches its process), are confirmed too, and counted in
// StopReport.Descendants; Stop also waits for the descendants the registry
// showed, until each is confirmed or gone.
func (c *Control) Stop(ctx context.Context, req fleet.StopRequest) (fleet.StopReport, error) {
	if err := req.Validate(); err != nil {
		return fleet.StopReport{}, err
	}
	if req.By == "" {
		req.By = operator.Name()
	}
	if req.Wait == 0 {
		req.Wait = operator.Wait
	}
	all, err := c.Runs(ctx, fleet.Selector{})
	if err != nil {
		return fleet.StopReport{}, err
	}
	t := newStopTally(all, req.Selector)
	id := runid.New()
	// Stored for at least a lease period of any process (whose lease this
	// Control may not know: a minute covers it unless leases are longer),
	// so that a process reconnecting within it still applies the stop.
	ttl := max(c.cfg.lease, time.Minute) + req.Wait
	_, receivers, err := c.publish(ctx, "stop", c.k.stops(), c.k.stop(id), id, ttl,
		recordBody{Selector: req.Selector, Reason: req.Reason, By: req.By})
	if err != nil {
		return fleet.StopReport{}, c.unavailable(fleetmetrics.OpStop, err)
	}
	// Delivered. Count confirmations until every process that received the
	// stop has applied it and every matched run is accounted for, or the
	// wait is over; errors from here on leave runs unconfirmed. (A run that
	// started after the listing is counted from its process's
	// confirmation.)
	deadline := time.Now().Add(req.Wait)
	for {
		if acks, ok := c.acksSince(ctx, id, t.seen); ok {
			t.count(acks)
		}
		open := c.dropGone(ctx, t)
		if open == 0 && len(t.awaited) == 0 && int64(t.applied) >= receivers || !time.Now().Before(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(min(25*time.Millisecond, time.Until(deadline)))
	}
	// The descendants confirmed after the loop's last read (a descendant
	// may leave the registry just before its process confirms it).
	if acks, ok := c.acksSince(ctx, id, t.seen); ok {
		for _, a := range acks {
			if kind, rid, _ := strings.Cut(a, " "); kind == "d" {
				if _, matched := t.state[rid]; !matched {
					t.desc[rid] = true
				}
			}
		}
	}
	return t.report(), nil
}

// The states of a matched run in a stopTally.
const (
	stopOpen    = iota // not confirmed yet
	stopStopped        // its process stopped it
	stopEnded          // it had ended
)

// stopTally counts a stop's confirmations: the matched runs' states (by
// id), the registered descendants of the matched runs (§8), which their
// processes end with them and confirm as "d ID", waited for like the
// matched runs until confirmed or gone from the registry (awaited), the
// descendants confirmed (desc), the confirmations read (seen) and the
// processes that applied the stop (applied).
type stopTally struct {
	state         map[string]int
	awaited, desc map[string]bool
	seen, applied int
}

// newStopTally returns the tally of a stop of the runs of all that sel
// matches.
func newStopTally(all []fleet.RunInfo, sel fleet.Selector) *stopTally {
	t := &stopTally{state: map[string]int{}, desc: map[string]bool{}}
	for _, r := range all {
		if sel.Matches(r) {
			t.state[r.ID] = stopOpen
		}
	}
	t.awaited = registryDescendants(all, t.state)
	return t
}

// acksSince returns the confirmations of stop id from the seen-th on; ok
// is false when they cannot be read (the next read tries again).
func (c *Control) acksSince(ctx context.Context, id string, seen int) ([]string, bool) {
	lctx, cancel := c.timeout(ctx)
	defer cancel()
	acks, err := c.client.LRange(lctx, c.k.stopAck(id), int64(seen), -1).Result()
	return acks, err == nil
}

// count adds confirmations to t: "p PROCESS" (a process applied the
// stop), "s ID" (stopped), "e ID" (had ended), "d ID" (a descendant ended
// with a stopped run).
func (t *stopTally) count(acks []string) {
	t.seen += len(acks)
	for _, a := range acks {
		kind, rid, _ := strings.Cut(a, " ")
		switch {
		case kind == "p":
			t.applied++
		case kind == "d":
			if _, matched := t.state[rid]; !matched {
				t.desc[rid] = true
				delete(t.awaited, rid)
			}
		case kind == "s":
			t.state[rid] = stopStopped
		case t.state[rid] != stopStopped:
			t.state[rid] = stopEnded
		}
	}
}

// dropGone settles the runs t still waits for that left the registry: a
// matched run without a confirmation had ended; a descendant ended, by
// the cascade or on its own. It returns how many matched runs were open
// before.
func (c *Control) dropGone(ctx context.Context, t *stopTally) int {
	var pending []string
	for rid, st := range t.state {
		if st == stopOpen {
			pending = append(pending, rid)
		}
	}
	open := len(pending)
	for rid := range t.awaited {
		pending = append(pending, rid)
	}
	for _, rid := range c.gone(ctx, pending) {
		if _, matched := t.state[rid]; matched {
			t.state[rid] = stopEnded // left the registry without a confirmation: it had ended
		} else {
			delete(t.awaited, rid) // ended, by the cascade or on its own
		}
	}
	return open
}

// report returns the tally as Stop reports it.
func (t *stopTally) report() fleet.StopReport {
	rep := fleet.StopReport{Matched: len(t.state), Descendants: len(t.desc)}
	for _, st := range t.state {
		switch st {
		case stopOpen:
			rep.Unconfirmed++
		case stopStopped:
			rep.Stopped++
		case stopEnded:
			rep.AlreadyEnded++
		}
	}
	return rep
}

// registryDescendants returns the runs of all under the runs of matched
// (any depth, by their registered parents) that are not matched
// themselves.
func registryDescendants(all []fleet.RunInfo, matched map[string]int) map[string]bool {
	children := map[string][]string{}
	for _, r := range all {
		if r.Parent != "" {
			children[r.Parent] = append(children[r.Parent], r.ID)
		}
	}
	out := map[string]bool{}
	stack := make([]string, 0, len(matched))
	for id := range matched {
		stack = append(stack, id)
	}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, k := range children[id] {
			if _, m := matched[k]; m || out[k] {
				continue
			}
			out[k] = true
			stack = append(stack, k)
		}
	}
	return out
}

// gone returns the runs of ids that are no longer in the registry.
func (c *Control) gone(ctx context.Context, ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	pipe := c.client.Pipeline()
	cmds := make([]*redis.IntCmd, len(ids))
	for i, rid := range ids {
		cmds[i] = pipe.Exists(ctx, c.k.run(rid))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil
	}
	var out []string
	for i, rid := range ids {
		if cmds[i].Val() == 0 {
			out = append(out, rid)
		}
	}
	return out
}

// blockID identifies a block by its selector: blocking the same selector
// again replaces the block.
func blockID(sel fleet.Selector) string {
	h := sha256.Sum256([]byte(sel.String()))
	return hex.EncodeToString(h[:16])
}

// Block implements fleet.Control.
func (c *Control) Block(ctx context.Context, req fleet.BlockRequest) (fleet.Block, error) {
	if err := req.Validate(); err != nil {
		return fleet.Block{}, err
	}
	if req.By == "" {
		req.By = operator.Name()
	}
	id := blockID(req.Selector)
	now, _, err := c.publish(ctx, "block", c.k.blocks(), c.k.block(id), id, req.Expire,
		recordBody{Selector: req.Selector, Reason: req.Reason, By: req.By})
	if err != nil {
		return fleet.Block{}, c.unavailable(fleetmetrics.OpBlock, err)
	}
	b := fleet.Block{Selector: req.Selector, Reason: req.Reason, By: req.By, Created: time.UnixMilli(now).UTC()}
	if req.Expire > 0 {
		b.Expires = time.UnixMilli(now + req.Expire.Milliseconds()).UTC()
	}
	return b, nil
}

// Unblock implements fleet.Control.
func (c *Control) Unblock(ctx context.Context, sel fleet.Selector) (int, error) {
	if err := sel.Validate(); err != nil {
		return 0, err
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	id := blockID(sel)
	res, err := unblockScript.Run(ctx, c.scripts, []string{c.k.blocks(), c.k.block(id)},
		c.k.ctl(), id).Int64Slice()
	if err != nil {
		return 0, c.unavailable(fleetmetrics.OpBlock, err)
	}
	return int(res[1]), nil
}

// Blocks implements fleet.Control.
func (c *Control) Blocks(ctx context.Context) ([]fleet.Block, error) {
	recs, _, err := c.read(ctx, c.k.blocks())
	if err != nil {
		return nil, c.unavailable(fleetmetrics.OpBlock, err)
	}
	out := make([]fleet.Block, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.block())
	}
	slices.SortFunc(out, func(a, b fleet.Block) int { return strings.Compare(a.Selector.String(), b.Selector.String()) })
	return out, nil
}

// read returns the stored, unexpired stops or blocks and the server time.
func (c *Control) read(ctx context.Context, index string) ([]record, int64, error) {
	vals, now, err := c.records(ctx, index)
	if err != nil {
		return nil, 0, err
	}
	out := make([]record, 0, len(vals))
	for _, s := range vals {
		r, err := parseRecord(s)
		if err != nil {
			c.metrics.Error(fleetmetrics.OpInternal)
			continue
		}
		out = append(out, r)
	}
	return out, now, nil
}

// budgetEsc is a shared budget's id in keys and messages.
func budgetEsc(id fleet.BudgetID) string { return escape(id.Key) + ":" + escape(id.Value) }

// Budgets implements fleet.Control: the shared budgets of the current
// windows, with the live runs the registry shows sharing each.
func (c *Control) Budgets(ctx context.Context) ([]fleet.Budget, error) {
	entries, now, err := c.entries(ctx)
	if err != nil {
		return nil, err
	}
	runs := map[string]int{}
	for _, e := range entries {
		if e.Budget != "" {
			runs[e.Budget]++
		}
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	names, err := c.client.ZRangeByScore(ctx, c.k.budgets(), &redis.ZRangeBy{Min: strconv.FormatInt(now, 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, c.unavailable(fleetmetrics.OpList, err)
	}
	pipe := c.client.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.HGetAll(ctx, n)
	}
	if len(names) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, c.unavailable(fleetmetrics.OpList, err)
		}
	}
	var out []fleet.Budget
	for i, n := range names {
		h := cmds[i].Val()
		esc, _, ok := c.k.budgetOf(n)
		if !ok {
			continue
		}
		b, ok := parseBudget(esc, h, now)
		if !ok {
			continue
		}
		b.Runs = runs[budgetEsc(fleet.BudgetID{Key: b.Key, Value: b.Value})]
		out = append(out, b)
	}
	slices.SortFunc(out, fleet.Budget.Compare)
	return out, nil
}

// parseBudget reads one window's hash; esc is the budget's "KEY:VALUE",
// escaped. It reports false for a window that is not current or a
// malformed hash.
func parseBudget(esc string, h map[string]string, now int64) (fleet.Budget, bool) {
	parts := strings.Split(esc, ":")
	if len(parts) != 2 || len(h) == 0 {
		return fleet.Budget{}, false
	}
	ws, _ := strconv.ParseInt(h["ws"], 10, 64)
	we, _ := strconv.ParseInt(h["we"], 10, 64)
	if now < ws || now >= we {
		return fleet.Budget{}, false
	}
	var spec termination.FleetBudget
	if err := json.Unmarshal([]byte(h["spec"]), &spec); err != nil {
		return fleet.Budget{}, false
	}
	f := func(k string) float64 { v, _ := strconv.ParseFloat(h[k], 64); return v }
	b := fleet.Budget{
		Key:         unescape(parts[0]),
		Value:       unescape(parts[1]),
		Policy:      spec,
		WindowStart: time.UnixMilli(ws).UTC(),
		WindowEnd:   time.UnixMilli(we).UTC(),
		Used:        termination.Usage{InputTokens: int64(math.Round(f("s2"))), OutputTokens: int64(math.Round(f("s3")))},
		Cost:        f("s4"),
	}
	if ex, _ := strconv.Atoi(h["ex"]); ex >= 1 && ex <= 4 {
		b.Exhausted = account.Resources[ex-1]
	}
	for i := 1; i <= 4; i++ {
		if h["pr"+strconv.Itoa(i)] != "" {
			b.Pressure = true
		}
	}
	return b, true
}
