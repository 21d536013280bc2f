// Package backtest answers "what would this policy have done to last
// week's runs?": it evaluates termination policies over a corpus of
// recorded runs and reports, for each run and policy, the replay result,
// whether the policy would have stopped the run, where, and what the stop
// would have saved; then, per policy, how many runs it stops and, against
// labels, how many bad runs it stops early and how many good runs it kills.
// It is the work behind the agentstop backtest command (contract §4.1);
// cmd/agentstop only parses the flags and prints.
//
// # How the pieces fit
//
// [Evaluate] resolves the command's PATHs (files, directories searched for
// *.jsonl, globs) into the corpus's files, each decoded with
// [codec.Decoder]: a file whose events carry "run" holds many runs (interleaved lines allowed), any other
// file is one run named by its path relative to the PATH it was found
// under, without .jsonl. Evaluate hands the files to Config.Workers
// goroutines (it owns them; they end before it returns); each worker
// reads a file a line at a time and evaluates every policy over each line
// as it comes: memory holds the live runs' evaluators and
// running totals and the outcomes, never a file's events. With fewer
// files than workers, a worker also starts goroutines that evaluate
// shares of the policies over the events it decodes, so
// that one large file of many runs uses the workers too. The evaluation
// is termination's own, chosen as agentstop replay chooses it: a
// [termination.Evaluator] per policy for a one-run file (what
// [replay.Log] does), a [replay.Runner] for a file of
// many runs or a policy with tree: limits (each holder's limits over its
// subtree, in the order of the lines, §8), with each run's last line
// found by a first pass over the file ([codec.IndexRuns]). So a
// backtest result is the result replay prints for the same run and policy
// (stage "replay", same stopped_at, same evidence). What a file's decoding can
// share across policies is done once: a tool call's args are
// fingerprinted once per run (the canonical args key, the one
// stall detection compares), not once per policy. The tests hold
// Evaluate to a reader of whole files, replayed per policy.
//
// The package imports termination, and internal/human for its table's
// money (6 significant digits) and plurals, written as every command
// writes them; nothing but cmd/agentstop (and a user's own tooling)
// imports it.
//
// The [Report] holds one [Outcome] per (run, policy) and one [Summary] per
// policy, and writes itself as a table for people, JSON Lines or CSV.
// [ReadLabels] reads the good/bad labels that turn the counts into a
// confusion table.
//
// # Choices where the contract is silent
//
//   - A policy stops a run when one of its conditions fires (Fired is not
//     empty) or when the run is ended before its last event (a tree's
//     cancellation). A completion condition (text_mention, function_call,
//     ...) that fires is therefore a stop too, and counted by cause.
//   - Saved is what the run's events after the last evaluated one spent;
//     Spent (lost_on_good, for good runs) is what the evaluated ones did.
//     For a timeout, whose firing event is not evaluated, that event is
//     saved.
//   - A file that a glob matches is named by its base name, without .jsonl
//     (a glob has no directory to be relative to); a directory a glob
//     matches names its files relative to itself.
//   - Candidates whose names collide (two p.yaml from two directories,
//     two -policies directories named policies) are named by the shortest
//     suffix of their Sources that tells them apart (see Evaluate), so
//     that no two summaries carry the same "policy".
//   - A file with no events is bad input naming the file. A file whose
//     events name their run on some lines and not on others is bad input
//     naming the file and the first line that breaks the first event's
//     pattern: codec's Decoder owns that check, so the message is
//     the one agentstop replay prints for the same file.
//   - With Lenient, a truncated last line is skipped. In a file of one run
//     the result carries truncated only when its replay reached the end of
//     the run, as replay -lenient does; in a file of many runs (the line's
//     run cannot be read) the results of the runs no cause stopped carry
//     it, as replay -lenient marks a log of many runs.
//   - -all evaluates each top-level condition of a policy on its own
//     ([termination.Policy.Conditions]); its "at" is the stopped_at that
//     condition alone would have had, over the run alone. A policy's tree:
//     limits are not listed there. The table lists them below each
//     policy's stopped runs, the first to fire first; json and csv keep
//     the policy's order.
//   - Labels are case-sensitive: "good", "bad", true, false. A labelled run
//     that is not in the corpus is ignored; [Labels.Unmatched] lists them
//     (the command warns with a few of them and their count).
//   - Outcomes are in the order of the files (PATHs in the order given,
//     files of a directory in lexical order), runs of a file in the order
//     of their first lines, policies in the order given, whatever the
//     number of workers.
package backtest
