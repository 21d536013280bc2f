package termination

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// argsHash returns a hash of JSON tool arguments that is the same for
// canonically equal documents: two documents that are equal once decoded by
// encoding/json hash the same. Object key order, whitespace and string
// escapes do not matter, invalid UTF-8 reads as U+FFFD, numbers compare by
// value and a duplicated key keeps its last value. The common case allocates
// nothing, because it runs on every tool_call; documents with duplicate keys,
// more than maxMembers keys in one object or deeper than maxDepth take a slow
// path through encoding/json. Empty args hash like null. Bytes that are not
// valid JSON hash as their trimmed text, so two identical invalid payloads
// still compare equal.
func argsHash(b []byte) uint64 {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return hashNull
	}
	p := canonParser{b: b}
	h, ok := p.value(0)
	if ok {
		p.ws()
		ok = p.i == len(p.b)
	}
	if !ok {
		if p.slow {
			var v any
			if err := json.Unmarshal(b, &v); err == nil {
				return hashValue(v)
			}
		}
		return mix(hashInvalid ^ fnv(fnvOffset, b))
	}
	return h
}

// hashValue hashes a value decoded by encoding/json exactly as canonParser
// hashes its text.
func hashValue(v any) uint64 {
	switch v := v.(type) {
	case nil:
		return hashNull
	case bool:
		if v {
			return hashTrue
		}
		return hashFalse
	case float64:
		return hashFloat(v)
	case string:
		return hashStringValue(v)
	case []any:
		h := uint64(hashArray)
		if len(v) == 0 {
			return mix(h)
		}
		for _, e := range v {
			h = mix(h*31 ^ hashValue(e))
		}
		return mix(h ^ 0x7f)
	case map[string]any:
		if len(v) == 0 {
			return mix(hashObject)
		}
		var sum uint64
		for k, e := range v {
			sum += member(hashStringValue(k), hashValue(e))
		}
		return mix(hashObject ^ sum ^ mix(uint64(len(v))))
	}
	return hashInvalid // not produced by json.Unmarshal into any
}

func hashStringValue(s string) uint64 {
	return mix(maphash.String(strSeed, s) ^ hashString)
}

func hashFloat(f float64) uint64 {
	if f == 0 {
		f = 0 // -0 == 0
	}
	return mix(hashNumber ^ math.Float64bits(f))
}

// member combines an object member's key and value hashes. Members combine
// by addition, so their order does not matter.
func member(k, v uint64) uint64 { return mix(k*31 ^ mix(v+0x51)) }

const (
	fnvOffset   = 14695981039346656037
	fnvPrime    = 1099511628211
	hashNull    = 0x9e3779b97f4a7c15
	hashTrue    = 0xbf58476d1ce4e5b9
	hashFalse   = 0x94d049bb133111eb
	hashObject  = 0x2545f4914f6cdd1d
	hashArray   = 0x27d4eb2f165667c5
	hashString  = 0x165667b19e3779f9
	hashNumber  = 0x85ebca77c2b2ae63
	hashInvalid = 0xc2b2ae3d27d4eb4f
	maxDepth    = 512
	// maxMembers is how many keys of one object the fast path checks for
	// duplicates; larger objects take the slow path.
	maxMembers = 32
)

func mix(x uint64) uint64 { // splitmix64 finalizer
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func fnv(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

type canonParser struct {
	b []byte
	i int
	// slow is set when the document may be valid JSON that the fast path
	// cannot hash canonically (duplicate keys, too many keys, too deep).
	slow bool
}

func (p *canonParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *canonParser) lit(s string, h uint64) (uint64, bool) {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return h, true
	}
	return 0, false
}

func (p *canonParser) value(depth int) (uint64, bool) {
	if depth > maxDepth {
		p.slow = true
		return 0, false
	}
	p.ws()
	if p.i >= len(p.b) {
		return 0, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == 't':
		return p.lit("true", hashTrue)
	case c == 'f':
		return p.lit("false", hashFalse)
	case c == 'n':
		return p.lit("null", hashNull)
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return 0, false
}

func (p *canonParser) object(depth int) (uint64, bool) {
	p.i++ // {
	var sum uint64
	n := uint64(0)
	var keys [maxMembers]uint64 // key hashes seen, to detect duplicates
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return mix(hashObject), true
	}
	for {
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return 0, false
		}
		k, ok := p.str()
		if !ok {
			return 0, false
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return 0, false
		}
		p.i++
		if n == maxMembers {
			p.slow = true
			return 0, false
		}
		for _, seen := range keys[:n] {
			if seen == k { // a duplicate key (or a hash collision): last one wins
				p.slow = true
				return 0, false
			}
		}
		keys[n] = k
		v, ok := p.value(depth + 1)
		if !ok {
			return 0, false
		}
		sum += member(k, v)
		n++
		p.ws()
		if p.i >= len(p.b) {
			return 0, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return mix(hashObject ^ sum ^ mix(n)), true
		default:
			return 0, false
		}
	}
}

func (p *canonParser) array(depth int) (uint64, bool) {
	p.i++ // [
	h := uint64(hashArray)
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return mix(h), true
	}
	for {
		v, ok := p.value(depth + 1)
		if !ok {
			return 0, false
		}
		h = mix(h*31 ^ v)
		p.ws()
		if p.i >= len(p.b) {
			return 0, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return mix(h ^ 0x7f), true
		default:
			return 0, false
		}
	}
}

// str hashes the decoded string, so "\u0041" and "A" are equal.
func (p *canonParser) str() (uint64, bool) {
	p.i++ // opening quote
	start := p.i
	// Fast path: plain ASCII up to the closing quote hashes in bulk.
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			h := maphash.Bytes(strSeed, p.b[start:p.i])
			p.i++
			return mix(h ^ hashString), true
		}
		if c < 0x20 || c == '\\' || c >= utf8.RuneSelf {
			break
		}
		p.i++
	}
	// Slow path: escapes and non-ASCII are decoded into the same streaming
	// hash, which equals maphash.Bytes of the decoded string.
	var h maphash.Hash
	h.SetSeed(strSeed)
	h.Write(p.b[start:p.i])
	var enc [utf8.UTFMax]byte
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return mix(h.Sum64() ^ hashString), true
		case c < 0x20:
			return 0, false
		case c >= utf8.RuneSelf:
			// Invalid UTF-8 decodes as U+FFFD, as in encoding/json.
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size == 1 {
				h.Write(runeErrorBytes)
			} else {
				h.Write(p.b[p.i : p.i+size])
			}
			p.i += size
			continue
		case c != '\\':
			h.WriteByte(c)
			p.i++
			continue
		}
		// escape
		if p.i+1 >= len(p.b) {
			return 0, false
		}
		e := p.b[p.i+1]
		p.i += 2
		var r rune
		switch e {
		case '"', '\\', '/':
			r = rune(e)
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			r1, ok := p.hex4()
			if !ok {
				return 0, false
			}
			r = r1
			if utf16.IsSurrogate(r1) {
				if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					save := p.i
					p.i += 2
					r2, ok := p.hex4()
					if !ok {
						return 0, false
					}
					if d := utf16.DecodeRune(r1, r2); d != utf8.RuneError {
						r = d
					} else {
						p.i = save
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
		default:
			return 0, false
		}
		n := utf8.EncodeRune(enc[:], r)
		h.Write(enc[:n])
	}
	return 0, false
}

func (p *canonParser) hex4() (rune, bool) {
	if p.i+4 > len(p.b) {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

func (p *canonParser) number() (uint64, bool) {
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			p.i++
			continue
		}
		break
	}
	num := p.b[start:p.i]
	if f, ok := smallInt(num); ok {
		return hashFloat(f), true
	}
	// The string aliases the args bytes only for the duration of the call.
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(num), len(num)), 64)
	if err != nil || num[len(num)-1] == '.' || (len(num) > 1 && num[0] == '0' && num[1] >= '0' && num[1] <= '9') {
		return 0, false
	}
	return hashFloat(f), true
}

// smallInt parses a plain integer of at most 15 digits, exactly, without
// strconv: the common case of tool arguments.
func smallInt(num []byte) (float64, bool) {
	neg := len(num) > 0 && num[0] == '-'
	digits := num
	if neg {
		digits = num[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return float64(n), true
}

// strSeed seeds string hashes; fingerprints only need to agree within one
// process.
var strSeed = maphash.MakeSeed()

var runeErrorBytes = []byte(string(utf8.RuneError))

// Canonical returns a 64-bit fingerprint of JSON args that is equal for
// canonically equal documents (key order, whitespace and string escapes do
// not matter; numbers compare by value). Stall detection compares tool calls
// with it.
func Canonical(args []byte) uint64 { return argsHash(args) }
