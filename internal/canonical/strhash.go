package canonical

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"unsafe"
)

// StringKey and BytesKey hash a string for in-process keys (ArgsKey's
// strings, stall detection's tool names, sources and texts): strings of up
// to 16 bytes, the keys and most values of tool arguments, inline with
// one 128-bit multiply of the bytes with the process's random seeds (as
// wyhash hashes short input: the first and last words of the string cover
// every byte, so two different strings of one length differ in what is
// multiplied); longer ones with maphash. A string and its bytes hash the
// same. Keys are seeded per process: never store them.
func StringKey(s string) uint64 {
	return BytesKey(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// BytesKey is StringKey of string(b), without the conversion.
func BytesKey(b []byte) uint64 {
	n := len(b)
	var lo, hi uint64
	switch {
	case n > 16:
		return maphash.Bytes(strSeed, b)
	case n >= 8:
		lo, hi = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		lo = uint64(binary.LittleEndian.Uint32(b))<<32 | uint64(binary.LittleEndian.Uint32(b[n-4:]))
	case n > 0:
		lo = uint64(b[0])<<16 | uint64(b[n>>1])<<8 | uint64(b[n-1])
	}
	return mum(lo^keySeeds[0], hi^keySeeds[1]^uint64(n)*keySeeds[2])
}

// mum is the 128-bit product of a and b folded to 64 bits.
func mum(a, b uint64) uint64 {
	h, l := bits.Mul64(a, b)
	return h ^ l
}

// keySeeds are BytesKey's random seeds (odd, so that multiplying by the
// third keeps every bit of the length).
var keySeeds = [3]uint64{randSeed() | 1, randSeed() | 1, randSeed() | 1}

func randSeed() uint64 { return maphash.Comparable(maphash.MakeSeed(), 0) }
