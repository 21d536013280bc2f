package canonical

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// The content hashes of a log recorded without content (contract §1,
// args_hash and text_hash). Unlike [ArgsKey] they are stable across
// processes and versions, so they can be stored: each is the first 16 bytes
// of a SHA-256, in lowercase hex (32 characters).
//
//   - [ArgsHash]: of the canonical JSON of a tool call's args: the value as
//     encoding/json decodes it, written back by encoding/json (object keys
//     sorted, no insignificant whitespace, numbers as float64). Two args that
//     stall detection counts as equal hash the same. Empty args hash like
//     null; bytes that are not JSON hash as their trimmed text.
//   - [TextHash]: of a message's (or stop's, or error's) trimmed text, the
//     way repeated-message detection compares texts.
//   - [ResultHash]: of a tool result's trimmed text and trimmed error, the
//     signature that stall.same_result compares.
const contentHashBytes = 16

// ArgsHash returns the args_hash of §1 for a tool call's JSON args.
func ArgsHash(args []byte) string {
	b := bytes.TrimSpace(args)
	if len(b) == 0 {
		b = []byte("null")
	}
	var v any
	if err := json.Unmarshal(b, &v); err == nil {
		if canon, err := json.Marshal(v); err == nil {
			return contentHash([]byte("args\x00"), canon)
		}
	}
	return contentHash([]byte("text\x00"), b)
}

// TextHash returns the text_hash of §1 for a message, stop or error text.
func TextHash(text string) string {
	return contentHash([]byte("text\x00"), []byte(strings.TrimSpace(text)))
}

// ResultHash returns the text_hash of §1 for a tool result: its trimmed text
// and its trimmed error together, so a success and a failure with the same
// text differ.
func ResultHash(text, err string) string {
	b := make([]byte, 0, len(text)+len(err)+1)
	b = append(b, strings.TrimSpace(text)...)
	b = append(b, 0)
	b = append(b, strings.TrimSpace(err)...)
	return contentHash([]byte("result\x00"), b)
}

func contentHash(domain, b []byte) string {
	h := sha256.New()
	h.Write(domain)
	h.Write(b)
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:contentHashBytes])
}
