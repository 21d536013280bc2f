package redisfleet

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"go.opentelemetry.io/otel/metric"
)

// defaultLease is how long a run stays in the registry without its process
// renewing it, and the longest a process holds an unused budget lease.
const defaultLease = 15 * time.Second

// defaultEndedTTL is how long the fleet remembers that a run ended, by
// default (WithEndedTTL).
const defaultEndedTTL = 10 * time.Minute

// defaultLeaseFraction is the share of a fleet budget's limit that one
// process reserves at a time.
const defaultLeaseFraction = 0.01

// Option configures a Fleet or a Control.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	prefix        string
	lease         time.Duration
	leaseFraction float64
	failClosed    bool
	tick          time.Duration
	opTimeout     time.Duration
	meter         metric.MeterProvider
	host          string
	cluster       bool
	clockEvery    time.Duration // how often the server's clock is estimated again
	endedTTL      time.Duration
	scripter      func(redis.Scripter) redis.Scripter // tests: wraps the script runner
}

func (c *config) wrapScripts(s redis.Scripter) redis.Scripter {
	if c.scripter != nil {
		return c.scripter(s)
	}
	return s
}

func newConfig(opts []Option) (*config, error) {
	c := &config{
		prefix:        DefaultPrefix,
		lease:         defaultLease,
		leaseFraction: defaultLeaseFraction,
		tick:          100 * time.Millisecond,
		opTimeout:     2 * time.Second,
		clockEvery:    clockInterval,
		endedTTL:      defaultEndedTTL,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	switch {
	case !validPrefix(c.prefix):
		return nil, fmt.Errorf("redisfleet: prefix %q: must be 1 to 128 printable ASCII characters without spaces, braces or glob characters (* ? [ ] \\)", c.prefix)
	case c.lease < 100*time.Millisecond:
		return nil, fmt.Errorf("redisfleet: lease %s: must be at least 100ms", c.lease)
	case !(c.leaseFraction > 0 && c.leaseFraction <= 0.5):
		return nil, fmt.Errorf("redisfleet: lease fraction %g: must be in (0, 0.5]", c.leaseFraction)
	case c.tick <= 0 || c.tick > c.lease/3:
		return nil, fmt.Errorf("redisfleet: sync interval %s: must be > 0 and at most a third of the lease (%s)", c.tick, c.lease)
	case c.opTimeout <= 0:
		return nil, fmt.Errorf("redisfleet: operation timeout %s: must be > 0", c.opTimeout)
	case c.endedTTL < time.Second:
		return nil, fmt.Errorf("redisfleet: ended-run TTL %s: must be at least 1s", c.endedTTL)
	}
	return c, nil
}

// WithPrefix sets the prefix of every key and channel. Default
// DefaultPrefix ("agentstop:"). Fleets that share a prefix share runs,
// stops, blocks and budgets.
func WithPrefix(p string) Option { return optionFunc(func(c *config) { c.prefix = p }) }

// WithLease sets the run lease: a run whose process stops renewing it
// (the process died) leaves the registry this long after the last renewal,
// and an unused budget lease is held at most this long. Stops are stored
// for at least this long. At least 100ms; default 15s.
func WithLease(d time.Duration) Option { return optionFunc(func(c *config) { c.lease = d }) }

// WithLeaseFraction sets the share of each fleet budget limit a process
// reserves at a time (the lease size in the overshoot bound). In (0, 0.5];
// default 1%.
func WithLeaseFraction(f float64) Option {
	return optionFunc(func(c *config) { c.leaseFraction = f })
}

// WithFailClosed makes runs that start while the server is unreachable end
// at once as Skipped{reason: fleet_unavailable}. Default: fail-open (runs
// go on under their own policy).
func WithFailClosed() Option { return optionFunc(func(c *config) { c.failClosed = true }) }

// WithSyncInterval sets how often the background loop registers new runs,
// removes ended ones and settles budgets. Default 100ms; at most a third of
// the lease.
func WithSyncInterval(d time.Duration) Option { return optionFunc(func(c *config) { c.tick = d }) }

// WithTimeout bounds every call to the server. Default 2s.
func WithTimeout(d time.Duration) Option { return optionFunc(func(c *config) { c.opTimeout = d }) }

// WithMeterProvider sets where agent.fleet.* metrics go. Default: the
// global MeterProvider. nil is ignored.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if mp != nil {
			c.meter = mp
		}
	})
}

// WithCluster makes the URL name a Redis Cluster even without addr=
// parameters: its host is a seed node from which the client learns the
// cluster's slots (redis://user:password@node:port). A URL with addr=
// parameters names a cluster without it. Default: one server (standalone,
// or the primary of a Sentinel-managed set).
func WithCluster() Option { return optionFunc(func(c *config) { c.cluster = true }) }

// WithHost sets the host name the registry shows for this process's runs.
// Default: os.Hostname.
func WithHost(h string) Option { return optionFunc(func(c *config) { c.host = h }) }

// WithEndedTTL sets how long the server keeps the record of a run that
// ended (§8): a child in any process whose parent ended within this long
// is refused when it starts (Skipped{reason: parent_ended}), and a live
// child whose process missed the end is ended at its next re-read (within
// a second). A child that starts later than this after its parent ended is
// taken for the child of a run the fleet does not know, and runs. Every
// run that ends leaves one record of about 150 bytes for this long. At
// least 1s; default 10m.
func WithEndedTTL(d time.Duration) Option { return optionFunc(func(c *config) { c.endedTTL = d }) }
