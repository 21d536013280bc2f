// Package fleet lets an operator see, stop and block the runs of a stage
// across every process that runs it, and lets those runs share budgets
// (the contract's fleet control, docs/spec.md §7).
//
// # The two sides
//
// A [Fleet] is what a stage uses: [Membership](f) is the participant
// (middleware's per-run seam) through which every run of a stage given
// middleware.WithFleet(f) takes part in the fleet.
// The run, which has its library-generated id (128 random bits), joins the
// fleet when it starts ([Fleet.Join]) with its stage, labels (given with
// middleware.WithLabels; names snake_case, values at most 256 bytes; they
// select runs and key budgets and never become metric attributes) and the
// stage's fleet_budget, and leaves it when it ends ([Member.Leave]). In
// between the run reports every event's usage ([Member.Spend]:
// in-process, allocation-free, not waiting on the network) and the fleet
// reaches the run through [Run], which *middleware.Run implements:
// StopWith ends it, Warn adds a warning, Progress reads its figures when
// the fleet lists or publishes them, Held and Raise see and release a run
// held at a limit (a policy's hold:).
//
// A [Control] is what operators use (the agentstop CLI's runs, stop, block,
// unblock, blocks and budgets commands): list the live runs ([Control.Runs]),
// stop the runs a [Selector] matches ([Control.Stop], confirmed and
// counted in a [StopReport]), block new runs ([Control.Block]), and list
// blocks and budgets, and release one held run with its limits raised
// ([Control.Raise]; the CLI's raise command), confirmed by the run's process as a stop
// is; the registry shows what each held run waits on ([RunInfo.Held]).
// Across processes a raise reaches the run itself; a raise of a run held
// at a tree limit raises its holder's tree limits, wherever the holder
// runs (a descendant in another process asks the holder's process).
//
// Two implementations share this package's interfaces and pass the same
// behavioural suite (package fleet/fleettest):
//
//   - [Local], the embedded default: one process, no server. Everything in
//     §7 works inside the process — registry, stop, block with expiry,
//     shared budgets per window — which is what a single service, a test or
//     the quickstart without Redis needs.
//   - package fleet/redisfleet: a fleet shared through Redis (>= 7), for
//     runs on many hosts. Packages termination, middleware and fleet import
//     nothing of Redis.
//
// # What a run sees
//
//   - An operator's stop ends it with Cancelled{reason: external, detail:
//     "REASON (by WHO)"}: its context is cancelled and its consumer still
//     gets every event forwarded before the stop.
//   - A block that matches it when it starts ends it at once with
//     Skipped{reason: blocked, detail: "REASON (by WHO)"}; live runs are not
//     affected by a block.
//   - A fleet_budget in the stage's policy makes it share a budget with
//     every run of the same key value (the stage, or a label's value) in
//     fixed windows aligned to the Unix epoch. Crossing the pressure
//     threshold gives every live sharing run a BudgetPressure{scope: fleet}
//     warning (in its result, to the stage's warning hook and recorder);
//     reaching a limit stops every live sharing run with
//     BudgetExhausted{scope: fleet}, and new runs end at once with
//     Skipped{reason: fleet_budget_exhausted} until the next window. A run
//     whose fleet_budget disagrees with the one the first run stored, or
//     that lacks the keyed label, ends at once with Failed{reason:
//     invalid_input} naming the difference.
//
// # Trees
//
// Both fleets (Local and fleet/redisfleet) share the tree limits of §8
// across processes; a fleet of your own does not (the contract between
// the middleware's tree nodes and a fleet is internal in v0.x), and a run
// under it takes the limits a request propagates as its own, as without a
// fleet. When a run that holds tree limits starts, its process holds the
// tree in the fleet (keyed by the holder's run id: clarified 2026-11-28, a
// holder's tree is shared whenever it has tree: limits, not only once its
// id is named in a request), and the registry lists the holders with every
// run of the tree ([RunInfo.Trees]). A run started in another process
// joins it however it was started: from a request that names the holders
// (middleware.Propagator), or with only its parent's id
// (middleware.WithParent: a job queue), whose holders the fleet finds in
// the parent's registry entry. Every event of the holder's subtree is then
// spent in its own process, as a shared budget's usage is (leases, no
// network per event), and the holder's process is charged what the other
// processes spent, so that the holder's own evaluator fires the limit with
// its exact cause and the cascade ends the tree everywhere. A process that
// finds the tree's limits spent ends its runs of the tree at once with
// Cancelled{reason: parent} naming the holder. [Local] charges a joined
// run's events to the holder at the event (exactly); fleet/redisfleet
// through leases, with the overshoot bound below. When the holder's stage
// holds (a policy's hold:), nothing is ended at the limit: the holder's
// evaluator holds the holder and its descendants of its process, each
// other process holds its runs of the tree once it learns the limit is
// reached, a raise of any run of the tree raises the holder's tree limits
// and releases them all, and the hold timeout ends the holder with the
// limit's cause and the tree by the cascade. ([Local] does not hold runs
// that joined its trees by other means than the middleware's direct
// links, which its process's runs always use.) In one process the
// middleware links a child to a parent of the same fleet directly,
// whichever way it started, so its events reach the parent's tree limits
// exactly, without the fleet.
//
// Sharing a tree from its holder's start costs each run that holds tree
// limits one holding when it starts (with [Local], one map entry; with
// redisfleet, the tree's record and a script call at the start and per
// renewal while it lives) and, with redisfleet, each event of its subtree
// one spend from the holding's lease (no I/O, no allocation; [Local]'s
// holding spends nothing). A run with no tree limits over it pays nothing
// for it, but for a child started with only the id of a parent in another
// process: its fleet looks the parent's holders up (one round trip with
// redisfleet).
//
// The methods HoldTree, JoinTree and TreesOf of Local and of redisfleet's
// Fleet are that internal contract's: the middleware calls them.
//
// # Accounting
//
// Both fleets account a shared budget the same way, with one account per
// budget and process (package fleet/internal/account): a spend is charged
// to the process's view of the window's usage, per resource (total,
// input and output tokens, cost) — what the store last said is committed
// (every process's settled usage plus the leases granted) plus what this
// process spent past its lease; [Local], with no store and no lease,
// counts all it spent — and the account decides on that view, without
// I/O, on the pressure crossing (once per window and resource) and the
// exhaustion (the first limit reached with no lease left for it), and
// starts the next window. A networked fleet settles with its store in the
// background and feeds the account the store's answers and its word on
// crossings other processes found.
//
// # Overshoot
//
// Per-event work stays in the process. A networked fleet reserves usage
// from the shared budget in leases and settles it in the background, so a
// shared limit can be passed before every process learns it has been
// reached. While the store is reachable, the usage recorded past a limit
// is at most
//
//	lease size × processes + the usage of the events in flight when the limit is reached
//
// (an event in flight is one whose Spend ran before the stop reached its
// run). [Local] has one process and accounts exactly: its overshoot is the
// usage of the event that reached the limit plus the events other runs
// spent concurrently before they were stopped, and each spend reads the
// clock once and is charged to the window that reading falls in (the
// first spend at or past a window's end starts the next window; nothing
// has to notice the end first, however loaded the machine). When the store is
// unreachable, a fail-open fleet lets runs spend what is left of their
// leases and then only the runs' own limits apply: the bound no longer
// holds. The same bound holds for a tree's limits shared through a
// networked fleet, with the processes taking part in the tree (the
// holder's included) as the processes.
//
// # Telemetry
//
// Fleet stops, blocks and budgets show in the stage metrics as
// cancelled/external, skipped/blocked, budget pressure and exhaustion.
// Both fleets add their own instruments (scope [ScopeName], from
// WithMeterProvider's MeterProvider, default the global one):
// agent.fleet.errors (operation: join, leave, renew, reserve, settle, stop,
// block, list, connect, internal), agent.fleet.budget.pressure and
// agent.fleet.budget.exhausted (resource; once per crossing per process,
// not per run), agent.fleet.runs.stopped and agent.fleet.runs.rejected
// (reason). Each is exported at 0 for every known attribute value (the
// operations above; blocked, fleet_budget_exhausted, fleet_unavailable and
// invalid_input; the four budget resources) from the moment a fleet
// starts, so a dashboard shows 0, not "No data", while nothing happens.
package fleet
