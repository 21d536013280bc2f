// Package importer turns other agents' logs into agentstop's §1 events, so
// that replay and backtest can evaluate runs that agentstop did not
// record. It is the work behind the agentstop import command (contract
// §4.2); cmd/agentstop only parses the flags and writes.
//
// # How the pieces fit
//
// One file per format maps that format's entries to [termination.Event]
// values: openai.go (OpenAI Chat Completions messages, "openai-chat"),
// miniswe.go (mini-swe-agent's .traj.json, "mini-swe-agent") and otlp.go
// (OTLP/JSON traces that follow the GenAI semantic conventions, "otlp").
// Coding agents' own session logs have a file each too: claudecode.go
// (Claude Code session JSONL, sub-agents as child runs, "claude-code"),
// codex.go (Codex CLI rollouts, "codex") and geminicli.go (Gemini CLI
// sessions, "gemini-cli"); agentlines.go reads their JSON Lines line by
// line, however long a line is.
// [Import] picks the format by name and returns [Run] values: an id, a
// parent id (otlp's sub-agents) and the events. [WriteStream] writes runs
// as one JSON Lines stream whose events carry run and parent (what
// backtest and a multi-run replay read); [WriteDir] writes one file per
// run. The package imports termination only, for the event type.
//
// Every mapping is written out in docs/import.md, with each choice a
// format forces. An entry that cannot be mapped is an *[EntryError] naming
// the file and the entry (messages[4], line 3, span 00f067aa0ba902b7);
// nothing is skipped silently. Token counts follow §1: input tokens
// include cached ones and output tokens reasoning ones (OpenAI's counts
// already do; Anthropic's cache_read_input_tokens and
// cache_creation_input_tokens are added in).
package importer
