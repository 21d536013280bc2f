// Package redisfleet shares a fleet (package fleet, contract §7) across
// processes and hosts through Redis (>= 7, standalone or a primary with
// replicas behind Sentinel; not Redis Cluster: scripts build keys from a
// prefix).
//
//	f, err := redisfleet.New(ctx, "rediss://app:PASSWORD@redis.internal:6380/0")
//	if err != nil { … }              // only a malformed URL or option
//	defer f.Close(context.Background())
//	stage, err := middleware.New("research", middleware.WithFleet(f), middleware.WithPolicy(p))
//	ctx, run := stage.Start(ctx, middleware.WithLabels(map[string]string{"tenant": "acme"}))
//
// The agentstop CLI's runs, stop, block, unblock, blocks and budgets
// commands use [Control] (a [Fleet] is one too).
//
// # How it works
//
// Nothing on a run's path waits on the network. Join answers from local
// state (blocks, exhausted budgets, whether the server is reachable); Spend
// updates memory, and the runs' figures are read through
// fleet.Hooks.Progress when they are published. (The one exception: a
// process that spends a whole lease past what the server granted it, in
// less than a reserve's round trip, waits for the next reserve; see the
// overshoot bound below.) Two goroutines per Fleet keep that state in
// step with the server:
//
//   - a subscriber on the channel PREFIX ctl receives stops, blocks,
//     unblocks and budget news the moment they are published, ends the
//     matching local runs and confirms each stop on a list the stop
//     command reads;
//   - a sync loop (every 100ms, or at once when there is work) registers
//     new runs, publishes changed figures (at most every 500ms per run),
//     renews run leases (every third of a lease), removes ended runs,
//     settles budget usage and reserves leases, and re-reads the stored
//     stops and blocks every second and after every reconnect.
//
// Every time that matters — run leases, stop and block expiries, budget
// windows aligned to the Unix epoch — comes from the server's clock (TIME
// and TTLs inside Lua scripts), never a host's; a process estimates its
// offset from the server's clock on every call and uses it to check block
// expiries and budget windows locally.
//
// # Keys
//
// Every key and the channel share a prefix (default "agentstop:",
// [WithPrefix]): runs, run:ID, ctl, stops, stop:ID, stopack:ID, blocks,
// block:ID, budgets, budget:KEY:VALUE:WINDOW. Stage names and label values
// are escaped (bytes other than letters, digits, '_', '-' and '.' become
// %XX), so a value can neither form another key nor act as a pattern; no
// command of this package takes a pattern.
//
// # Registry
//
// A run is listed within about 100ms of its start (well within the
// contract's 1 s) and removed within 100ms of its end. Its entry has a
// lease (default 15 s, [WithLease]) that its process renews; when the
// process dies, the entry expires with the lease.
//
// # Stops and blocks
//
// A stop is stored (for the longer of a lease period and a minute, plus
// the command's wait) and published in one script. A process that receives
// it checks the stored record, ends every matching
// live run with Cancelled{external, "REASON (by WHO)"} and confirms each
// on the stop's list. A process that missed the message (it was
// reconnecting) finds the stored stop when it re-reads and applies it to
// the runs that started before the stop was issued. A block is stored until
// unblocked or until its expiry (a server-side TTL) and published; every
// process keeps the set of blocks and checks new runs against it, so a new
// run is blocked from the moment its process receives the block (within
// milliseconds; at worst at its next re-read, a second later).
//
// # Fleet budgets and the overshoot bound
//
// A budget's window is a hash in Redis holding, per resource, the settled
// usage and the committed usage (settled plus the leases processes hold).
// A process reserves a lease of [DefaultLeaseFraction] (1%, see
// [WithLeaseFraction]) of each limit at a time with an atomic Lua script,
// spends it locally, asks for more when half of it is left, and settles its
// usage in the same script call. When the last local run of a budget ends,
// the unused part of its lease is returned at the next sync. Each process
// renews its lease record at least every second; a process that dies stops
// renewing, and one lease period later the next call of any process
// returns its lease to the budget (its usage not yet settled, at most about
// a second's worth, is lost). A lease is
// granted only from what is neither settled nor leased, so while the server
// is reachable the usage past a limit is at most
//
//	lease size × processes + the usage of the events in flight when the limit is reached
//
// (an event is in flight if its run spent it before learning the limit was
// reached; one per run at most). A process's usage past what the server
// granted it is capped at one lease: an event that reaches the cap (the
// process spent a whole lease within one reserve's round trip, which an
// agent loop whose events are model calls never does) waits for the sync
// loop's next round, which settles the usage and brings a new lease or the
// exhaustion; the wait lasts at most the operation timeout and never
// happens while the server is unreachable. BenchmarkOvershoot measures
// the overshoot against this bound and TestOvershootBound checks it. The budget is declared exhausted when its settled
// usage reaches a limit, or when a process with no lease left finds every
// unit settled or leased: at that moment the leases other processes still
// hold (at most lease size × (processes − 1)) go unspent, the mirror image
// of the overshoot. Pressure and exhaustion are published to every process
// and stored with the window, so new runs are skipped until the window ends.
// Each process counts a window's pressure crossing and its exhaustion once
// (agent.fleet.budget.pressure, agent.fleet.budget.exhausted) and warns each
// run live at the crossing once, however many of its runs of the budget come
// and go in the window: when a process drops a budget with no local run
// left, it remembers the window's counted crossings until the window ends.
//
// The first run of a window stores its fleet_budget with it. A run whose
// policy disagrees with another run of the same process ends at once with
// Failed{invalid_input}; one that disagrees with the stored budget (set by
// another process) ends with it as soon as its process hears back from the
// server (its first reserve, within a sync), and later runs of that process
// end at once.
//
// # Faults
//
// When the server is unreachable a Fleet is fail-open by default: live runs
// go on, new runs start, and a process spends what is left of its leases
// and then goes on under the runs' own limits only — the overshoot bound no
// longer holds, and a shared budget can be passed by as much as the fleet
// spends while the server is away. [WithFailClosed] instead ends new runs
// at once with Skipped{reason: fleet_unavailable} (live runs still go on).
// Every failed call counts in agent.fleet.errors{operation}. On reconnect a
// process registers its live runs again, settles the usage it spent, and
// re-reads stops and blocks, so a stop or block issued while it was away
// still applies.
//
// A Redis failover can lose the writes the old primary acknowledged but had
// not replicated yet (replication is asynchronous): recent registrations
// and figures (restored at the next sync), a stop or block issued just
// before the failover (the stop's pub/sub delivery may still have reached
// the processes; reissue it if `agentstop blocks` does not show the block),
// and settled usage and leases of a budget window (the window then
// under-counts by what was lost, which can let the fleet spend past the
// limit by that much). A server restarted without persistence loses
// everything stored: runs are registered again within a sync, stops and
// blocks are gone, budget windows start from zero.
//
// # Security
//
// URLs are redis:// or rediss:// (TLS) with an optional ACL user and
// password; no error, log line or CLI output shows either ([ParseURL],
// [Redact]). Each stop and block records who issued it (-by, default the
// OS user and host), which blocks and the run's cause detail show.
//
// ACLs that let applications register runs and spend shared budgets but
// neither stop nor block (Redis >= 7 selectors; TestACLAppCannotStopOrBlock
// runs exactly these):
//
//	ACL SETUSER agentstop-app on >APP-PASSWORD resetkeys resetchannels \
//	    %RW~agentstop:{runs}* %RW~agentstop:{budget* %R~agentstop:{stops}* \
//	    %RW~agentstop:{stops}:ack:* %R~agentstop:{blocks}* &agentstop:ctl \
//	    -@all +@connection +@scripting +@read +@write +@pubsub +time -@dangerous -@admin
//	ACL SETUSER agentstop-ops on >OPS-PASSWORD resetkeys resetchannels \
//	    ~agentstop:* &agentstop:ctl \
//	    -@all +@connection +@scripting +@read +@write +@pubsub +time -@dangerous -@admin
//
// The application user may read stops and blocks but not write them, so
// the scripts that store them fail with NOPERM. It may publish on the
// control channel (it publishes budget news there, and Redis grants
// publish and subscribe together), but a stop, block or unblock message
// counts only when the stored record agrees: every process checks the
// record before acting on a message, so a stop published by hand is
// ignored. Give operators (the agentstop CLI) the second user.
package redisfleet
