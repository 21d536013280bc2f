package canonical

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"unsafe"

	"github.com/agentstop/agentstop/internal/jsonscan"
)

// StringKey and BytesKey hash a string for in-process keys (ArgsKey's
// strings, stall detection's tool names, sources and texts): strings of up
// to 16 bytes, the keys and most values of tool arguments, inline with
// one 128-bit multiply of the bytes with the process's random seeds (as
// wyhash hashes short input: the first and last words of the string cover
// every byte, so two different strings of one length differ in what is
// multiplied), up to 32 bytes (short messages, longer values) with two;
// longer ones with maphash. A string and its bytes hash the
// same. Keys are seeded per process: never store them.
func StringKey(s string) uint64 {
	return BytesKey(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// BytesKey is StringKey of string(b), without the conversion.
func BytesKey(b []byte) uint64 {
	n := len(b)
	var lo, hi uint64
	switch {
	case n > 32:
		return maphash.Bytes(strSeed, b)
	case n > 16:
		return midKey(b)
	case n >= 8:
		lo, hi = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		// The bytes little-endian, zero above: the two loads overlap on
		// equal bytes.
		lo = uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<(8*(n-4))
	case n > 0:
		lo = uint64(b[0]) | uint64(b[n>>1])<<(8*(n>>1)) | uint64(b[n-1])<<(8*(n-1))
	}
	return shortKey(lo, hi, n)
}

// shortKey is BytesKey of a string of n <= 16 bytes: lo holds its first
// eight bytes little-endian (zero above the string, when shorter), hi its
// last eight when it is longer than 8 bytes (0 otherwise).
func shortKey(lo, hi uint64, n int) uint64 {
	return mum(lo^keySeeds[0], hi^keySeeds[1]^uint64(n)*keySeeds[2])
}

// midKey is BytesKey of 17 to 32 bytes: two multiplies, the first and
// last 16 bytes covering every byte.
func midKey(b []byte) uint64 {
	n := len(b)
	return mum(binary.LittleEndian.Uint64(b)^keySeeds[3], binary.LittleEndian.Uint64(b[8:])^keySeeds[4]) ^
		shortKey(binary.LittleEndian.Uint64(b[n-16:]), binary.LittleEndian.Uint64(b[n-8:]), n)
}

// shortString hashes, as str would, a string token at data[at] ('"')
// whose contents are fewer than 8 plain ASCII characters (no escape, no
// control character) with 8 bytes of data after its quote: the common key
// of tool arguments, from one load. It returns the position after the
// token, or ok false for any other string. (plainString hashes these
// strings the same way; an object's loop tries this first.)
func shortString(data []byte, at int) (h uint64, end int, ok bool) {
	i := at + 1
	if i+8 > len(data) || data[at] != '"' {
		return 0, 0, false
	}
	w := binary.LittleEndian.Uint64(data[i:])
	n := bits.TrailingZeros64(jsonscan.SpecialBytes(w)) >> 3 // 8: no byte flagged
	if n == 8 || data[i+n] != '"' {
		return 0, 0, false
	}
	return shortKey(w&(1<<(8*n)-1), 0, n) ^ hashString, i + n + 1, true
}

// plainString hashes, as str would, a string token at data[at] (if
// there is one: a '"') of
// any length whose contents are plain ASCII characters (no escape, no
// control character), eight bytes at a time, in a slice of at least 8
// bytes: the common value of tool arguments. The last word is loaded from
// the end of data and shifted, its zero padding flagged as control
// characters. It returns the position after the token, or ok false for any
// other string. For a string longer than 32 bytes h is 0 and the caller
// hashes it (BytesKey, through maphash): plainString calls no more than
// midKey, a leaf, so that it adds little to the recursion's deepest chain
// of calls (a live run's goroutine decodes and hashes args on a small
// stack).
func plainString(data []byte, at int) (h uint64, end int, ok bool) {
	if at >= len(data) || data[at] != '"' {
		return 0, 0, false
	}
	i := at + 1
	for {
		var w uint64
		switch {
		case i+8 <= len(data):
			w = binary.LittleEndian.Uint64(data[i:])
		case len(data) >= 8 && i < len(data):
			w = binary.LittleEndian.Uint64(data[len(data)-8:]) >> (8 * (i + 8 - len(data)))
		default:
			return 0, 0, false
		}
		m := jsonscan.SpecialBytes(w)
		if m == 0 {
			i += 8
			continue
		}
		end = i + bits.TrailingZeros64(m)>>3
		if end >= len(data) || data[end] != '"' {
			return 0, 0, false
		}
		raw := data[at+1 : end]
		switch n := len(raw); {
		case n < 8:
			// Ended in the first word: its bytes, as BytesKey reads them.
			h = shortKey(w&(1<<(8*n)-1), 0, n)
		case n <= 16:
			// The first and last words, as BytesKey reads them.
			h = shortKey(binary.LittleEndian.Uint64(raw), binary.LittleEndian.Uint64(raw[n-8:]), n)
		case n <= 32:
			h = midKey(raw)
		default:
			return 0, end + 1, true // the caller hashes it (see above)
		}
		return h ^ hashString, end + 1, true
	}
}

// mum is the 128-bit product of a and b folded to 64 bits.
func mum(a, b uint64) uint64 {
	h, l := bits.Mul64(a, b)
	return h ^ l
}

// keySeeds are BytesKey's random seeds (odd, so that multiplying by the
// third keeps every bit of the length).
var keySeeds = [5]uint64{randSeed() | 1, randSeed() | 1, randSeed() | 1, randSeed() | 1, randSeed() | 1}

func randSeed() uint64 { return maphash.Comparable(maphash.MakeSeed(), 0) }
