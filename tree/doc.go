// Package tree is the contract through which a run's tree limits (docs/spec.md
// §8, a policy's tree: key) are shared across processes: what a fleet
// implements so that a holder's limits count the events of its
// descendants in other processes ([Sharer], [Member], [Hooks], [Spec],
// [Usage]), and the causes a shared tree ends with ([LimitCause],
// [StopCause]).
//
// It imports only package termination. Package middleware, which keeps a
// run's place in its tree and evaluates the holders' limits, uses a
// Sharer when one of a stage's participants is one (package fleet's
// Membership of a fleet that shares trees); fleet.Local and
// fleet/redisfleet implement it. A fleet that does not implement Sharer
// still works: tree limits then hold within each process, and a remote
// child takes the limits its request propagated as its own.
package tree
