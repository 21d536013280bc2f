package codec

import "github.com/agentstop/agentstop/internal/canonical"

// The content hashes of a log recorded without content (contract §1,
// args_hash and text_hash), stable across processes and versions, so that
// they can be stored: each is the first 16 bytes of a SHA-256, in
// lowercase hex (32 characters).

// ArgsHash returns the args_hash of §1 for a tool call's JSON args: the
// hash of their canonical JSON (the value as encoding/json decodes it,
// written back with object keys sorted, no insignificant whitespace,
// numbers as float64). Two args that stall detection counts as equal hash
// the same. Empty args hash like null; bytes that are not JSON hash as
// their trimmed text.
func ArgsHash(args []byte) string { return canonical.ArgsHash(args) }

// TextHash returns the text_hash of §1 for a message, stop or error text:
// the hash of the trimmed text, the way repeated-message detection
// compares texts.
func TextHash(text string) string { return canonical.TextHash(text) }

// ResultHash returns the text_hash of §1 for a tool result: its trimmed
// text and its trimmed error together, so a success and a failure with the
// same text differ (the signature that stall.same_result compares).
func ResultHash(text, err string) string { return canonical.ResultHash(text, err) }
