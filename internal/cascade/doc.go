// Package cascade holds the causes of the cascade of docs/spec.md §8 (a
// run whose ancestor ended ends too) that the live run (package
// middleware and internal/tree), replay and the fleets (fleet/redisfleet)
// all give, so that their detail text is the same everywhere. It imports
// termination and nothing else of the module.
package cascade
