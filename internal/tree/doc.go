// Package tree is the room of tree limits (docs/spec.md §8, a policy's
// tree: key): limits over a run and all its descendants, however deep and
// in whatever process, their holds (§3 hold: with tree: limits), and
// their sharing through a fleet.
//
// A run whose events some tree limits count has a [Node]: the stage's own
// part of the run (package middleware's seam), made by the stage's
// [Stage] when the run starts, only for a run that holds tree limits or
// whose ancestors do. The node keeps the run's holders — the runs whose
// tree limits count its events, nearest first — and, for a holder, an
// evaluator of its tree limits fed by every event of its subtree. An
// event goes through a node in three steps: Enter, with the run's lock
// held, locks the root-most holder, so that the events of a tree are
// evaluated and recorded in one order (the order an event log replays
// them in); Exit, after the run's own evaluation and its parts, feeds the
// holders' limits and unlocks; Settle, without locks, hands their
// warnings to the subtree, holds it, spends through a fleet, or ends the
// holder (its descendants end by the run's cascade, which is the run's
// own: its lineage stays with package middleware). A node reaches its run
// only through [Run]; a run's lock always comes before a node's.
//
// Across processes, a fleet implements [Sharer] (fleet.Local,
// fleet/redisfleet): a holder shares its limits from its start, and a
// descendant started elsewhere — from a request that names the holders,
// or with only its parent's id — joins them, so that its events are
// charged to the holder's limits through [Member]s keyed by the holder's
// id. The causes a shared tree ends with are [LimitCause] and
// [StopCause]; [Usage] is what events spend of a tree's limits. A fleet
// that does not implement Sharer still works: tree limits then hold
// within each process, and a remote child takes the limits its request
// propagated as its own.
//
// A held tree (a policy's hold: with tree: limits) is the holder's: its
// evaluator holds at the limit, and the holder and every live descendant
// of its process wait (hold.go). A shared tree tells the fleet that it
// holds ([Spec].Hold, the hold timeout): the fleet then never ends it at
// the limit, but holds each process's joined runs and their descendants
// there ([SharedRun].HoldTree) while the usage it knows of reaches a
// limit. Raise on any run of the tree raises the holder's tree limits: in
// the holder's process through its evaluator, which tells the fleet the
// new limits ([Raiser] on the holding), so that every process releases
// its runs ([SharedRun].ReleaseTree); from a joined run, by asking the
// holder's process through the fleet ([Raiser] on the join). The hold
// timeout, or a stop of the holder, ends the holder with the limit's
// cause, and its descendants everywhere with Cancelled{reason: parent}
// naming it. What a networked fleet guarantees about a held tree across
// processes is its own (fleet/redisfleet: "Held trees").
//
// It imports only package termination (and internal/deadline and
// internal/cascade): package
// middleware wires it, and package fleet implements its Sharer.
package tree
