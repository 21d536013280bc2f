// Package runid is the form of a run's id (contract §8): 128 random bits
// written as 32 lowercase hex digits. middleware gives every run one; the
// fleets check the ids of requests with it.
package runid

import (
	"crypto/rand"
	"encoding/hex"
)

// New returns a new run id.
func New() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	var h [32]byte         // encoded on the stack: the string is the one allocation
	hex.Encode(h[:], b[:])
	return string(h[:])
}

// Valid reports whether id has the form of a run's id: 32 lowercase hex
// digits.
func Valid(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
