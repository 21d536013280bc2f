// Package redisfleet shares a fleet (package fleet, contract §7) across
// processes and hosts through Redis (>= 7): one server (standalone, or a
// primary with replicas behind Sentinel) or a Redis Cluster. Valkey speaks
// the same protocol and should work, but is not tested here.
//
//	f, err := redisfleet.New(ctx, "rediss://app:PASSWORD@redis.internal:6380/0")
//	// a cluster: redis://app:PASSWORD@node1:6379?addr=node2:6379&addr=node3:6379
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
// fleet.Run.Progress when they are published. (The one exception: a
// process that spends a whole lease past what the server granted it, in
// less than a reserve's round trip, waits for the next reserve; see the
// overshoot bound below.) Two goroutines per Fleet keep that state in
// step with the server:
//
//   - a subscriber on the channel PREFIX ctl receives stops, blocks,
//     unblocks, budget and tree news the moment they are published, ends the
//     matching local runs and confirms each stop on a list the stop
//     command reads;
//   - a sync loop (every 100ms, or at once when there is work) registers
//     new runs, publishes changed figures (at most every 500ms per run),
//     renews run leases (every third of a lease), removes ended runs,
//     settles budget and tree usage and reserves leases, and re-reads the stored
//     stops, blocks and raises every second and after every reconnect.
//
// A raise (Control.Raise, agentstop raise) is stored under {raises} (for a
// lease plus the raise's wait) and published on the channel; the process
// that has the run applies it through the run (fleet.Run.Raise) and
// confirms it under {raises}:ack. Like a stop, it is re-read: a process
// whose subscription was down when it was published applies it from the
// stored record after it reconnects (or at its next re-read), while the
// record lasts, so the operator's raise, if still waiting, reports it
// raised. A re-read raise that names a run of another process is left to
// that process, and one whose run was held only after the raise was issued
// is answered not held, as the message would have been: a raise never
// releases a later hold. Each process applies a raise once: it remembers the raise
// ids it has applied or answered until their records expire and checks
// them on the message and on the re-read. A held run's Held is in its
// registry entry from its next published figures.
//
// Every time that matters — run leases, stop and block expiries, budget
// windows aligned to the Unix epoch — comes from the server's clock (TIME
// and TTLs inside Lua scripts), never a host's. To check block expiries
// and budget windows locally (a run's start, a new window) a process
// estimates the server's clock: five round trips reading the server's
// TIME, one after the other, of which the one with the smallest round trip
// wins, taken at its middle. The server read its clock within that round
// trip, so the estimate is off by at most half of it, plus the millisecond
// the fleet counts in: [Fleet.ClockBound] reports that bound, measured, not
// assumed (on loopback well under a millisecond; a loaded machine widens
// it, and the next estimate narrows it again). The estimate is taken again
// every 10 s and after every reconnect, so a clock step
// of either side is corrected within that; between estimates only the
// drift of the two clocks adds (microseconds). On a cluster every node has
// a clock of its own: the estimate is of the node that holds the runs'
// keys, and a budget's window follows the clock of the node that holds the
// budget, so the nodes' clocks must agree (NTP) to within the precision
// wanted of window edges.
//
// # Keys
//
// Every key and the channel share a prefix (default "agentstop:",
// [WithPrefix]) and every key carries a hash tag, one per family:
// {runs} (the runs' index and entries), {stops} (the stops' index,
// records and confirmations), {blocks}, {budgets} (the index of budget
// windows) and {budget:KEY:VALUE} (one shared budget's windows). Every key
// a script touches is passed in KEYS[] and shares its tag with the
// others, so each script runs in one slot of a cluster; a value and its
// TTL are written by one command or inside one script, never by two calls
// a crash could split (a counter left without its TTL would never expire).
// The layout is in keys.go. Stage names and label values are escaped
// (bytes other than letters, digits, '_', '-' and '.' become %XX), so a
// value can neither form another key, nor a hash tag, nor act as a
// pattern; no command of this package takes a pattern.
//
// # Redis Cluster
//
// A URL with addr= parameters names a cluster by some of its nodes
// (redis://[user:password@]host1:port1?addr=host2:port2&addr=…, go-redis's
// form; no database number), and [WithCluster] makes a URL of one node a
// cluster's. The client learns the slots from the nodes and follows
// MOVED and ASK redirections. What changes on a cluster:
//
//   - Load spreads by family: all runs live in one slot (listing them is one
//     read there), stops in another, blocks in a third; each shared budget
//     has a slot of its own, so budgets spread over the masters.
//   - Stops, blocks, unblocks, raises and budget news are published on the control
//     channel with PUBLISH, which a cluster forwards to every node: a
//     process's subscription on any node receives them. A stop counts the
//     subscribers on every node (PUBSUB NUMSUB) to know how many processes
//     to wait for. The stored copies are re-read every second and after
//     every resubscription, as on one server.
//   - A failover promotes a replica of the failed master after the
//     cluster's node timeout and an election; meanwhile the calls for its
//     slots fail (the fleet counts them in agent.fleet.errors and goes on
//     fail-open or fail-closed as configured). After any failed call, and
//     every 5 s regardless, the client reads the slots again (a dead master
//     refuses connections and sends no MOVED, so without this it would keep
//     calling it for a minute), so a process follows the promoted replica
//     at its next sync; subscriptions reconnect and the stored stops,
//     blocks and raises are re-read. TestClusterFailover kills a master under a live
//     run and checks that the run goes on, is listed again, and that a
//     block and a stop issued after the failover apply. As on one server,
//     writes the old master acknowledged but had not replicated are lost
//     (see Faults).
//   - A resharding moves slots between masters key by key. A script sent
//     while a slot it touches is half moved is redirected (ASK) or fails
//     (TRYAGAIN, its keys split across the two nodes) and is retried by
//     the next sync; a budget's usage settled in that moment is put back
//     and settled later.
//     What a resharding can lose is what a failover can: nothing that was
//     replicated, but a migration interrupted by a node failure can leave a
//     slot's keys on the failed node, and with them the runs, stops or
//     budget windows of that family until the node returns (runs are
//     registered again at the next renewal; a budget window lost this way
//     starts again from zero).
//   - ACL rules are per node: run ACL SETUSER on every node, and allow
//     CLUSTER SLOTS (+cluster|slots, below), which the client reads the
//     slots with.
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
// # Trees of runs
//
// A run's parent (docs/spec.md §8: the run whose context it was started
// from, middleware.WithParent, or a parent middleware.Propagator extracted
// from an incoming request) is in its registry entry, whichever process
// runs the parent: `agentstop runs` shows it and `agentstop runs -tree`
// draws each run under its parent. Within a process the middleware keeps
// the tree; across processes the fleet does, with a record of every run's
// end:
//
//   - When a run ends, for whatever cause, its process stores a record of
//     the end (P{runs}:end:ID, with the detail its children get) and
//     announces it on the control channel, in the script that removes the
//     run from the registry (within a sync, 100ms, of its Finish; of the
//     stop itself when the fleet stopped it or its parent, so a cascade
//     does not wait for the loops in between to finish). Every process that
//     has a live child of that run ends it with Cancelled{reason: parent}
//     — the detail names the run whose end started the cascade, as within
//     a process: the planner, not the researcher between them ("planner
//     ended: cancelled" after a fleet stop) — and the middleware ends that
//     child's own descendants in its process with it; their ends are
//     stored and announced in turn, so a cascade crosses any number of
//     processes, one sync and one message per hop. A process acts only on
//     the stored record, never on the message alone; one that missed the
//     message finds the record at its next re-read (every second).
//   - A child that starts while its parent, in another process, has ended
//     is refused: Join reads the parent's record (one GET, the only round
//     trip on a run's start, and only for a child whose parent does not
//     run in its own process; skipped while the server is unreachable)
//     and the run ends at once with Skipped{reason: parent_ended} naming
//     its parent ("researcher ended: cancelled"). The records are kept for
//     [WithEndedTTL] (default 10 minutes): a child that starts later than
//     that after its parent's end is taken for the child of a run the
//     fleet does not know, and runs. A child that starts in the instant
//     its parent's end is being stored is admitted and then ended by the
//     announcement (it is registered locally before the lookup). Each
//     ended run leaves one record of about 150 bytes for the TTL (at 100
//     runs ending per second, about 9 MB with the default).
//   - A fleet stop of a run (stop -run ID, or any selector) ends its
//     descendants in every process: its own process's with it, the others
//     through the record, which names the stop, so that each process
//     confirms the descendants it ended on the stop's list. Stop waits
//     (within -wait) for the descendants the registry showed, until each
//     is confirmed or has left the registry, and reports how many were
//     confirmed (StopReport.Descendants; `stop` prints "and N descendants
//     under them").
//   - A parent whose process dies leaves no record: its remote children
//     go on under their own limits (and their request's context, which the
//     dead caller's connection usually cancels).
//
// A remote child's usage is charged through the fleet to the tree limits
// of the holders over its parent, as it is spent (next section), however
// it was started: the holders its request named (middleware.Propagator),
// or, for a child started with middleware.WithParent and only its
// parent's id (a job queue), the holders the parent's registry entry
// lists (fleet.RunInfo.Trees, read by TreesOf). A child started from a
// request takes the remaining limits its caller propagated as its own only
// when no process holds those trees (as without a fleet). In the parent's
// own process the middleware links a child to its parent directly,
// whichever way it started, when both stages use this Fleet.
//
// # Trees: limits shared across processes
//
// A [Fleet] shares trees: the tree limits (a policy's tree:) a
// run holds are shared with its descendants in other processes (§8), in
// leases keyed by the holder's run id, as fleet budgets are shared (next
// section), without windows. The holder's process shares the tree
// (HoldTree) when the holder starts (§8, clarified 2026-11-28: whenever it
// has tree: limits, not only once its id leaves the process), and
// registers the holder and every run under it with the holders' ids
// (fleet.RunInfo.Trees, in the registry entry); each process where a
// descendant starts joins it (JoinTree) for every holder its request named
// or, for a child started with only its parent's id, every holder TreesOf
// finds; every event of the subtree is spent, in its own process, through
// the holding or a join, without I/O.
//
// What sharing from the start costs a run that holds tree: limits: its
// tree's record (one hash of a few hundred bytes, for the run's life and
// 2 leases + [WithEndedTTL] after), one script call at its start (with the
// sync that follows it) and one per renewal while it lives (every
// second, or a third of the lease when shorter), as a shared budget's
// lease costs; per event of its subtree, one Spend from the holding's
// lease (no I/O, no allocation; BenchmarkTreeSpend measures it). A run
// with no tree: limits over it pays nothing for it; a run under a holder
// carries the holder's id in its registry entry.
//
// TreesOf answers for a run of this process from memory; for any other it
// reads the run's registry entry and its ended record in one round trip
// (MGET, one slot), again for up to one sync interval while neither exists
// (the run's process registers it with the sync after its start), then
// returns nil: the run ended (the child is then refused by Join), or the
// fleet does not know it. So a child started with WithParent naming a run
// of another process costs one more round trip at its start (and up to a
// sync interval when its parent is unknown), plus JoinTree's EXISTS for
// each holder found.
//
// Keys. One hash per tree, P{tree:H} (H: the holder's escaped id), in a
// slot of its own: the holder's stage and limits (written once, by the
// holder's process), per resource (iterations, tool calls, total, input
// and output tokens, cost) the usage every process settled and the
// committed usage (settled plus the leases held), the lease each process
// holds with its expiry, the exhaustion once found, and the holder's end.
// One script call (settle, return the leases of dead processes, reserve)
// touches only that hash. Its TTL, 2 leases + [WithEndedTTL], is renewed
// by every call of the holder's process (at least every second while it
// holds the tree); a joined process never creates it. JoinTree of a
// holder whose tree this process does not share yet looks the record up
// (EXISTS, the one round trip on such a run's start; again for up to one
// sync interval while it is missing, since the holder's process creates
// it with the sync that follows HoldTree and the request may be faster):
// without one, no process holds the tree (another fleet's run, or one
// that ended longer ago than the TTL) and JoinTree returns nil, so the
// run takes the limits its request propagated as its own. While the
// server is unreachable it joins (fail-open). A joined tree whose record
// goes missing later is granted nothing, never fails and never stops its
// runs; its usage is settled once the record is back.
//
// Leases. Each process takes a lease of 1% ([WithLeaseFraction]) of each
// tree limit (at least one unit for counts and tokens), spends it locally,
// asks for more when half of it is left, settles in the same call, and
// returns what is left when its last member of the tree leaves (or Close
// runs); a process that dies stops renewing its lease, which goes back one
// lease period later. A joined process learns the limits from its first
// reserve, which JoinTree starts at once: a joined run's events that come
// before that answer wait for it (at most the operation timeout; never
// while the server is unreachable).
//
// The holder hears of remote usage (it is charged it), from its
// process's sync loop, after each reserve that finds more settled by
// other processes: the lag is at most one sync of each side (a process
// settles when its lease runs low, and at least every second while it has
// members; the holder's process reserves on the same terms), so the
// holder's own evaluator fires its tree limit with its exact cause. What
// final events spent is settled apart too and charged as finals' (it
// counts, but never fires a limit).
//
// Exhaustion. A tree is found spent on usage, never on commitments: a
// process stops its members at once when what it knows was spent (the
// settled usage at its last reserve plus its own usage since) reaches a
// limit (a count limit n on the (n+1)-th, a token or cost limit at used >=
// limit, as termination's conditions), and the script does the same with
// the settled usage, records it and publishes it to every process. What
// final events spent counts but never fires a limit (§3): a Spend of a
// final's usage never stops, and a settle of only finals' usage does not
// fire; the next other event in the tree, in any process, does. The
// holder is stopped with the tree limit's cause (scope tree), joined runs
// with Cancelled{reason: parent, detail: "STAGE ended: TAG"}, the caller of
// the Spend that found it by its return value. So a count limit is exact
// when processes sync between events, and leases other processes hold
// unspent never stop a tree early. The bound while the server is
// reachable:
//
//	tree usage past a limit <= lease size × processes taking part (the holder's included)
//	                           + the usage of the events in flight (one per spending run)
//
// A process spends at most one lease past its grants within a round trip
// and, once the tree has no room left (every unit settled or leased), any
// event past its grants waits for the next round of its sync loop, which
// settles it and brings the exhaustion if the limit is reached; each
// process thus spends past the limit at most what it held when the limit
// was reached. TestTreeOvershootBound and TestTreeLeases check the bound,
// and BenchmarkTreeOvershoot measures it (three processes, twelve runs).
//
// Warnings. The holding's Warn (its tree pressure) is published with the
// next sync of its process, within a tick, and every process hands it to
// its joined runs of that tree. The holding's end is recorded with the
// next sync: nothing more is granted; the joined runs end through the
// ended records (above), not through the tree (but for runs held at the
// tree's limit: next section).
//
// Faults. Without the server the fleet is fail-open for trees as for
// budgets: members spend what is left of their leases, then go on without
// waiting, bounded only by the limits their requests propagated and their
// own (agent.fleet.errors counts the failed calls: operation="reserve",
// and "join" for JoinTree's look-up).
// On reconnect every process settles what it spent meanwhile; a record the
// server lost (a restart without persistence) is created again by the
// holder's process from the settled usage it last saw. What a failover or
// such a restart can lose: usage other processes settled since the
// holder's process last read it, the leases held (the tree may then pass
// its limit by that much), and a recorded exhaustion or end (found again
// on the next settle that reaches the limit; a joined run still ends
// through its parent's ended record). The holder's own evaluator keeps
// what Charge gave it, so the holder's tree limits still fire in its
// process.
//
// # Held trees
//
// A holder whose stage holds at its limits (a policy's hold: with tree:
// limits, docs/spec.md §3) shares its hold timeout with its tree's
// record, and the tree is never exhausted through the fleet: no process
// ends a run of it at the limit. Instead:
//
//   - The holder's evaluator, charged with what every process settled
//     (above), holds the holder and its descendants of its process, as
//     without a fleet, and its hold timeout (or a stop) ends the holder
//     with the limit's cause (scope tree).
//   - Every other process holds its runs of the tree (each joined run and
//     its descendants there: Observe blocks, the registry lists them with
//     the limit as Held) from the event on which what it knows was spent
//     reaches a limit — its own spend, or the settled usage a reserve
//     returns. The script records the first settle that reaches a limit
//     and announces it ("thold HOLDER"), so every process taking part
//     reserves at once and learns it; the holder's process is charged
//     and holds the holder then. A process whose runs spend nothing learns
//     it with that reserve (within a round trip of the announcement, or
//     at its next renewal, a second at most, if it missed it).
//   - A raise of the holder (Run.Raise in its process, or `agentstop
//     raise -run HOLDER`) raises its evaluator's tree limits, and its
//     process stores the raised limits with its next reserve, at once, and
//     announces them ("traise HOLDER"): each process reserves, learns
//     them, and releases its runs when what the tree spent is below them.
//     A raise of a held descendant in another process (its Run.Raise, or
//     `agentstop raise -run ID` naming it, which its process applies) is
//     sent on by that process to the holder's process as an operator's
//     raise of the holder (Control.Raise: stored under {raises}, and
//     waited for until the holder's process confirms it, at most 2 s; a
//     raise the CLI issued for the descendant is applied on its process's
//     control loop, which waits as long). That needs credentials that may
//     write raises: with the application ACL below the descendant's
//     process cannot, its Raise fails (not held: the CLI exits 1), and the
//     operator raises the holder instead (`agentstop raise -run HOLDER`).
//     A raise is also refused (not held) in the moment after a
//     descendant's process held it and before the holder's process has
//     held the holder (one announcement's round trip).
//   - When the holder ends (its hold timeout, a stop), its process records
//     its end in the tree's record with the detail its descendants end
//     with, at its stop rather than its Finish, and announces it ("tend
//     HOLDER"): every process reserves, learns it, and ends its held runs
//     of the tree with Cancelled{reason: parent, detail: "STAGE ended:
//     TAG"} naming the run whose end started the cascade; the ended records
//     (above) end the others at the holder's Finish. A held run is never
//     ended while its holder is live.
//   - Faults: a process whose runs are held longer than the hold timeout
//     plus two lease periods without word of the holder's end or a raise
//     (the holder's process died, or the server is unreachable), or whose
//     tree record is gone, lets them go on (fail-open, as for the fleet's
//     other faults) and does not hold them again until the tree's limits
//     change.
//
// The overshoot bound above holds for a held tree as for one that ends:
// each process holds its runs at the first event past what it knows was
// spent. The registry shows a run as held from its next published
// figures.
//
// TestTreeHoldAcrossFleets and TestTreeHoldWithParentAcrossProcesses (a
// child in another OS process, started with WithParent) check the hold,
// the raises from either side, and the end at the hold timeout; the fleet
// suite's TreeHold checks it within one process, TestTreeHoldMembers the
// members' side across three fleets, TestTreeHoldLetGo the fail-open.
//
// # Fleet budgets and the overshoot bound
//
// A budget's window is a hash in Redis holding, per resource, the settled
// usage and the committed usage (settled plus the leases processes hold).
// A process reserves a lease of 1% (see
// [WithLeaseFraction]) of each limit at a time with an atomic Lua script,
// spends it locally, asks for more when half of it is left, and settles its
// usage in the same script call. Locally a budget is accounted by the
// account fleet.Local uses too (see the fleet package's "Accounting"): the
// lease drawn down, the view of the window's usage (the committed usage at
// the last reserve plus what the process spent past its lease), the
// pressure crossing once per window and the exhaustion are decided there;
// this package adds the store's side (what to settle and ask for, the
// store's answer, its word on crossings from other processes). When the last local run of a budget ends,
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
// re-reads stops, blocks and raises, so a stop, block or raise issued while
// it was away still applies.
//
// redisfleet writes nothing to stderr: its failures are counted in
// agent.fleet.errors and returned (Control's calls, the CLI's one line).
// go-redis, though, logs some failures itself (a pool that cannot dial:
// "redis: connection pool: failed to dial after 5 attempts …") through its
// own logger, one for the whole process, which writes to stderr unless
// the program replaces it. redisfleet leaves that logger to the program:
// redis.SetLogger replaces it for every go-redis client of the process, the
// application's own included, and is a plain write to a package variable
// that races with clients already running. To silence or route it, call
// redis.SetLogger once at start, before any client (the agentstop command
// silences it, so that an unreachable server is its one line, §7):
//
//	type quiet struct{}
//
//	func (quiet) Printf(context.Context, string, ...any) {}
//
//	redis.SetLogger(quiet{}) // or a logger that forwards to slog, otel.Handle, …
//
// A Redis failover (Sentinel, or a cluster's) can lose the writes the old primary acknowledged but had
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
// password; no error, log line or CLI output shows either ([CheckURL],
// [Redact]). Each stop and block records who issued it (-by, default the
// OS user and host), which blocks and the run's cause detail show.
//
// ACLs that let applications register runs and spend shared budgets and
// tree limits but neither stop nor block (Redis >= 7 selectors; TestACLAppCannotStopOrBlock
// runs exactly these):
//
//	ACL SETUSER agentstop-app on >APP-PASSWORD resetkeys resetchannels \
//	    %RW~agentstop:{runs}* %RW~agentstop:{budget* %RW~agentstop:{tree:* \
//	    %R~agentstop:{stops}* %RW~agentstop:{stops}:ack:* %R~agentstop:{raises}* \
//	    %RW~agentstop:{raises}:ack:* %R~agentstop:{blocks}* &agentstop:ctl \
//	    -@all +@connection +@scripting +@read +@write +@pubsub +time +cluster|slots -@dangerous -@admin
//	ACL SETUSER agentstop-ops on >OPS-PASSWORD resetkeys resetchannels \
//	    ~agentstop:* &agentstop:ctl \
//	    -@all +@connection +@scripting +@read +@write +@pubsub +time +cluster|slots -@dangerous -@admin
//
// The application user may read stops, raises and blocks but not write
// them (it confirms stops and raises), so
// the scripts that store them fail with NOPERM. It writes the records of
// its runs' ends (under {runs}, with its registry entries), so an
// application with these credentials could forge the end of a run and end
// that run's children in other processes (Cancelled{reason: parent}), as
// it could remove other runs' registry entries; it cannot stop or block
// runs. It may publish on the
// control channel (it publishes budget and tree news there, and Redis grants
// publish and subscribe together), but a stop, block or unblock message
// counts only when the stored record agrees: every process checks the
// record before acting on a message, so a stop published by hand is
// ignored, and so is a tree's exhaustion its record does not show. Give operators (the agentstop CLI) the second user.
package redisfleet
