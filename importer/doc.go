// Package importer turns other agents' logs into agentstop's §1 events, so
// that replay and backtest can evaluate runs that agentstop did not
// record. It is the work behind the agentstop import command (contract
// §4.2); cmd/agentstop only parses the flags and writes.
//
// # How the pieces fit
//
// One file per format maps that format's entries to [termination.Event]
// values: openai.go and openai_stream.go (OpenAI Chat Completions
// messages, "openai-chat"; JSON Lines streamed a line at a time),
// miniswe.go (mini-swe-agent's .traj.json, 1.x and 2.x,
// "mini-swe-agent"), sweagent.go (SWE-agent's .traj, "swe-agent") and
// otlp.go (OTLP/JSON traces that follow the GenAI semantic conventions,
// "otlp"). [Import] picks the format by name, reads the file from an
// io.Reader and hands each [Run] (an id, a parent id — otlp's sub-agents —
// and the events) to an [Output] as the format completes it; the Output
// also counts, by kind, the entries a format legitimately leaves out
// (a demonstration in a SWE-agent history), for the command's summary.
// Coding agents' own session logs have a file each too: claudecode.go
// (Claude Code session JSONL, sub-agents as child runs, "claude-code"),
// codex.go (Codex CLI rollouts, "codex") and geminicli.go (Gemini CLI
// sessions, "gemini-cli"); agentlines.go reads their JSON Lines line by
// line, however long a line is. The zero Output keeps the [Runs];
// [Runs.Uniquify] gives them distinct ids, [Runs.WriteStream] writes them
// as one JSON Lines stream whose events carry run and parent (what
// backtest and a multi-run replay read), and [Runs.WriteDir] one file per
// run. The package imports termination only, for the event type.
//
// Every mapping is written out in docs/import.md, with each choice a
// format forces. An entry that cannot be mapped is an *[EntryError] naming
// the file and the entry (messages[4], line 3, span 00f067aa0ba902b7);
// nothing is skipped silently: what is left out is counted in the Output.
// A JSON document (a pretty-printed object, an array) given to a format
// that reads only JSON Lines (claude-code, codex) is an error on its first
// line that says so and names the formats that read documents, instead of
// encoding/json's "unexpected end of JSON input". Token counts follow §1: input tokens
// include cached ones and output tokens reasoning ones (OpenAI's counts
// already do; Anthropic's cache_read_input_tokens and
// cache_creation_input_tokens are added in).
package importer
