// Package human owns how agentstop's commands write for people — tables,
// summaries, help — as opposed to the JSON and CSV they write for scripts,
// which keep full values.
//
//   - [Money] rounds an amount of money to 6 significant digits (the
//     contract's rule for text for people), without an exponent.
//   - [Count] and [Noun] agree a noun with its number: "1 event", "2 events";
//     [Agree] a verb or pronoun ("1 run has", "2 runs have").
//   - [Wrap] and [Width] fold a long description to the reader's screen.
//   - [DurationVar] defines a duration flag whose bad value is refused with
//     the form it wants ("a duration such as 30m"), not the flag package's
//     "parse error".
//
// cmd/agentstop, backtest's report and the quickstart use it, so that one
// place decides each of these. It imports only the standard library.
package human
