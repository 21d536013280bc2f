package canonical

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/maphash"
	"math"
	"math/bits"
	"strconv"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/agentstop/agentstop/internal/jsonscan"
)

// ArgsKey returns a 64-bit key of JSON tool arguments that is the same for
// canonically equal documents: two documents that are equal once decoded by
// encoding/json hash the same. Object key order, whitespace and string
// escapes do not matter, invalid UTF-8 reads as U+FFFD, numbers compare by
// value and a duplicated key keeps its last value. The common case allocates
// nothing, because it runs on every tool_call; documents with duplicate keys,
// more than maxMembers keys in one object or deeper than maxDepth take a slow
// path through encoding/json. Empty args hash like null. Bytes that are not
// valid JSON hash as their trimmed text, so two identical invalid payloads
// still compare equal. Stall detection compares tool calls with it. The
// key is seeded per process: compare keys within one process only, never
// store them (the args_hash of a log is ArgsHash).
func ArgsKey(b []byte) uint64 {
	if n := len(b); n == 0 || !plainEnds(b[0], b[n-1]) {
		b = bytes.TrimSpace(b)
	}
	if len(b) == 0 {
		return hashNull
	}
	p := canonParser{Scanner: jsonscan.Scanner{Data: b}}
	var (
		h  uint64
		ok bool
	)
	if b[0] == '{' {
		if h, ok = p.flatObject(); ok && p.Pos == len(b) {
			return h // the common case (flat.go), without end's call
		}
	} else {
		h, ok = p.value(0)
	}
	return p.end(h, ok)
}

// end is ArgsKey's result for the value hashed (h, ok) from the start of
// p's document: h if it is all the document, else slowHash's.
func (p *canonParser) end(h uint64, ok bool) uint64 {
	if ok {
		p.SkipSpace()
		ok = p.Pos == len(p.Data)
	}
	if !ok {
		return slowHash(p.Data, p.slow)
	}
	return h
}

// plainEnds reports whether a document that starts with first and ends
// with last has no white space to trim (ASCII above the space: every JSON
// document but one with white space around it).
func plainEnds(first, last byte) bool {
	return first > ' ' && first < utf8.RuneSelf && last > ' ' && last < utf8.RuneSelf
}

// slowHash hashes what the fast path could not: through encoding/json if
// the document may be valid JSON (slow), else as its text. It has a frame
// of its own, so that ArgsKey's stays small.
//
//go:noinline
func slowHash(b []byte, slow bool) uint64 {
	if slow {
		var v any
		if err := json.Unmarshal(b, &v); err == nil {
			return hashValue(v)
		}
	}
	return mix(hashInvalid ^ fnv(fnvOffset, b))
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

// hashStringValue hashes a string: StringKey's output is already well
// mixed, so the type tag is xored in without another round.
func hashStringValue(s string) uint64 {
	return StringKey(s) ^ hashString
}

func hashFloat(f float64) uint64 {
	if f == 0 {
		f = 0 // -0 == 0
	}
	return mix(hashNumber ^ math.Float64bits(f))
}

// member combines an object member's key and value hashes (both already
// mixed) with one 128-bit multiply by the process's seeds (a splitmix round
// took two, in sequence, on the way to the object's hash). Members combine
// by addition, so their order does not matter.
func member(k, v uint64) uint64 { return mum(k^keySeeds[3], v^keySeeds[4]) }

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
	// maxDepth is how deep the fast path recurses; deeper documents take
	// the slow path. It keeps the stack of the goroutine that evaluates a
	// run small (each level holds maxMembers key hashes) and lets the fuzz
	// target reach the slow path with short inputs.
	maxDepth = 64
	// maxMembers is how many keys of one object the fast path checks for
	// duplicates; larger objects take the slow path. (It bounds the
	// rescans of dupKey.)
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

// canonParser hashes a JSON document as it reads it, with jsonscan's
// lexer (shared with the fast event decoder).
type canonParser struct {
	jsonscan.Scanner
	// slow is set when the document may be valid JSON that the fast path
	// cannot hash canonically (duplicate keys, too many keys, too deep).
	slow bool
	// buf, when set, is where strings with escapes are decoded, in one
	// pass (replay's decoder lends its scratch buffer); without it they
	// are decoded by hashEscaped.
	buf *[]byte
	// resumed is set when flatObject handed the rest of its object to the
	// general parser; resuming and soFar hand it over (members).
	resumed, resuming bool
	soFar             objectSoFar
}

// objectSoFar is what the members of an object read so far add up to: the
// first one starts at first; n of them, their hashes summing to sum, their
// keys in the filter seen.
type objectSoFar struct {
	first  int
	sum, n uint64
	seen   [2]uint64
}

func (p *canonParser) value(depth int) (uint64, bool) {
	if depth > maxDepth {
		p.slow = true
		return 0, false
	}
	p.SkipSpace()
	switch c := p.Peek(); {
	case c == '{':
		return p.members(depth, p.Pos+1) // the object's members, past {
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == 't':
		return hashTrue, p.Literal("true")
	case c == 'f':
		return hashFalse, p.Literal("false")
	case c == 'n':
		return hashNull, p.Literal("null")
	}
	return p.number()
}

// members reads an object's members from data[i] on and hashes the object.
// What the members before i add up to (flatObject's, when it hands the
// rest of its object over) is in p.soFar when p.resuming; else i is where
// the first one starts. A key whose bit is set in seen, the 128-bit filter
// of the key hashes read so far, may be a duplicate, which dupKey settles
// by reading the earlier keys again. (The frame stays small at every
// depth: an array of the keys would be 256 bytes a level on the stack of
// the goroutine that evaluates a run, and so would arguments for the
// state handed over.)
func (p *canonParser) members(depth, i int) (uint64, bool) {
	members, sum, n, seen := i, uint64(0), uint64(0), [2]uint64{}
	if p.resuming {
		p.resuming = false
		members, sum, n, seen = p.soFar.first, p.soFar.sum, p.soFar.n, p.soFar.seen
	}
	// The cursor is kept in i, a register, and written back to p.Pos only
	// around the calls that read it: white space is looked for with one
	// comparison where compact JSON has none (the common case), not with
	// SkipSpace's loop through p.Pos at every token.
	data := p.Data
	for {
		i = skipSpace(data, i)
		if n == 0 && i < len(data) && data[i] == '}' {
			p.Pos = i + 1 // an empty object (after a member, '}' here is invalid)
			return mix(hashObject), true
		}
		at := i
		k, end, ok := shortString(data, i)
		if ok {
			i = end
		} else {
			p.Pos = i
			if k, ok = p.str(); !ok {
				return 0, false
			}
			i = p.Pos
		}
		if i = skipSpace(data, i); i >= len(data) || data[i] != ':' {
			return 0, false
		}
		i++
		if n == maxMembers {
			p.slow = true
			return 0, false
		}
		if bit := uint64(1) << (k & 63); seen[k>>6&1]&bit != 0 {
			if p.dupKey(members, at, k) { // a duplicate key (or a hash collision): last one wins
				p.slow = true
				return 0, false
			}
		} else {
			seen[k>>6&1] |= bit
		}
		// The common flat values, a plain string or a small integer, are
		// hashed here without value's dispatch (the same hashes).
		i = skipSpace(data, i)
		var c byte
		if i < len(data) {
			c = data[i]
		}
		var v uint64
		switch {
		case depth >= maxDepth:
			p.Pos = i
			v, ok = p.value(depth + 1)
			i = p.Pos
		case c == '"':
			v, i, ok = p.memberString(i)
		case c-'1' <= 8 && i+1 < len(data) && (data[i+1] == ',' || data[i+1] == '}'):
			// A one-digit number (not 0, which smallInt checks for a
			// leading zero), as smallInt hashes it.
			v, ok = smallInts[c-'0'], true
			i++
		case c-'0' <= 9:
			p.Pos = i
			if v, ok = p.smallInt(); !ok {
				v, ok = p.number()
			}
			i = p.Pos
		default:
			p.Pos = i
			v, ok = p.value(depth + 1)
			i = p.Pos
		}
		if !ok {
			return 0, false
		}
		sum += member(k, v)
		n++
		if i = skipSpace(data, i); i >= len(data) {
			return 0, false
		}
		switch data[i] {
		case ',':
			i++
		case '}':
			p.Pos = i + 1
			return mix(hashObject ^ sum ^ mix(n)), true
		default:
			return 0, false
		}
	}
}

// memberString hashes the string value that starts at data[i] (its '"'),
// as str does, and returns where it ends. Values are longer than keys:
// plainString, which str tries first, hashes short ones from their first
// word as well (str's first step, without its call).
func (p *canonParser) memberString(i int) (v uint64, end int, ok bool) {
	if v, end, ok = plainString(p.Data, i); ok {
		if end-i-2 > 32 {
			v = BytesKey(p.Data[i+1:end-1]) ^ hashString
		}
		return v, end, true
	}
	p.Pos = i
	v, ok = p.escapedStr()
	return v, p.Pos, ok
}

// skipSpace returns the position of the first byte at or after i in data
// that is no JSON white space (len(data) if none): in compact JSON, i
// itself, after one comparison.
func skipSpace(data []byte, i int) int {
	if i < len(data) && data[i] > ' ' {
		return i
	}
	return skipSpaceLoop(data, i)
}

// skipSpaceLoop is skipSpace past white space (its own frame, so that
// skipSpace stays small enough to inline).
//
//go:noinline
func skipSpaceLoop(data []byte, i int) int {
	s := jsonscan.Scanner{Data: data, Pos: i}
	s.SkipSpace()
	return s.Pos
}

// dupKey reports whether one of the members of an object that lie in
// Data[from:to] (already read: valid) has a key that hashes to k.
//
//go:noinline
func (p *canonParser) dupKey(from, to int, k uint64) bool {
	q := canonParser{Scanner: jsonscan.Scanner{Data: p.Data[:to], Pos: from}}
	for {
		q.SkipSpace()
		if q.Pos >= to {
			return false
		}
		h, ok := q.str()
		if !ok {
			return false
		}
		if h == k {
			return true
		}
		q.SkipSpace()
		q.Pos++ // :
		q.SkipSpace()
		if !q.Skip(0, maxDepth) {
			return false
		}
		q.SkipSpace()
		q.Pos++ // ,
	}
}

func (p *canonParser) array(depth int) (uint64, bool) {
	p.Pos++ // [
	h := uint64(hashArray)
	p.SkipSpace()
	if p.Peek() == ']' {
		p.Pos++
		return mix(h), true
	}
	for {
		v, ok := p.value(depth + 1)
		if !ok {
			return 0, false
		}
		h = mix(h*31 ^ v)
		p.SkipSpace()
		switch p.Peek() {
		case ',':
			p.Pos++
		case ']':
			p.Pos++
			return mix(h ^ 0x7f), true
		default:
			return 0, false
		}
	}
}

// str hashes the decoded string at the cursor, so "\u0041" and "A" are
// equal: the hash of the bytes encoding/json would decode.
func (p *canonParser) str() (uint64, bool) {
	if h, end, ok := plainString(p.Data, p.Pos); ok {
		if raw := p.Data[p.Pos+1 : end-1]; len(raw) > 32 {
			h = BytesKey(raw) ^ hashString
		}
		p.Pos = end
		return h, true
	}
	return p.escapedStr()
}

// escapedStr is str for a string that plainString does not take: not
// plain ASCII, or in a document shorter than 8 bytes. The decoded bytes
// are hashed.
func (p *canonParser) escapedStr() (uint64, bool) {
	if p.buf != nil {
		b, copied, ok := p.DecodeString((*p.buf)[:0])
		if !ok {
			return 0, false
		}
		if copied {
			*p.buf = b
		}
		return BytesKey(b) ^ hashString, true
	}
	if h, end, ok := shortEscaped(p.Data, p.Pos); ok {
		p.Pos = end
		return h, true
	}
	start, simple, ascii := p.String()
	if start < 0 {
		return 0, false
	}
	raw := p.Data[start+1 : p.Pos-1]
	if simple && (ascii || utf8.Valid(raw)) {
		// The common case: the string decodes to its own bytes.
		return BytesKey(raw) ^ hashString, true
	}
	if ascii && len(raw) <= shortUnquote {
		return hashShortEscaped(p.Data[start:p.Pos]), true
	}
	return hashEscaped(p.Data[start:p.Pos]), true
}

// hashEscaped hashes the string token tok (quotes included, validated by
// String) that has escapes or invalid UTF-8: it decodes it into a pooled
// buffer and hashes that, as BytesKey of the decoded string. The
// buffer comes from a pool: this runs deep in the recursion, on the stack
// of the goroutine that evaluates a run, which stays small (a 48-byte
// array on the stack for short strings took a live Forward run's
// goroutine past its 2 KiB stack).
func hashEscaped(tok []byte) uint64 {
	d := jsonscan.Scanner{Data: tok}
	buf := unquoteBuffers.Get().(*[]byte)
	b, _, _ := d.DecodeString((*buf)[:0])
	sum := BytesKey(b)
	if cap(b) <= maxPooledUnquote {
		*buf = b
		unquoteBuffers.Put(buf)
	}
	return sum ^ hashString
}

// hashShortEscaped is hashEscaped of an ASCII token of at most
// shortUnquote bytes between its quotes (its escapes decode to no more
// bytes than they take): decoded into a small array on the stack, which
// costs a fraction of the pool.
func hashShortEscaped(tok []byte) uint64 {
	var short [shortUnquote]byte
	d := jsonscan.Scanner{Data: tok}
	b, _, _ := d.DecodeString(short[:0])
	return BytesKey(b) ^ hashString
}

// shortEscaped hashes, as str would, the string token at data[at] when
// it decodes to at most shortUnquote bytes of ASCII with the common escapes
// (\n, \t, \", ...) only, decoding it in one pass onto the stack; ok is false
// for any other token (str's general path validates and hashes it), with
// nothing read past the first byte it cannot take.
func shortEscaped(data []byte, at int) (h uint64, end int, ok bool) {
	if at >= len(data) || data[at] != '"' {
		return 0, 0, false // not a string: str's general path says so
	}
	// short has room for a whole word past its shortUnquote bytes: a run
	// of plain characters is copied eight bytes at a time, and the bytes
	// past its end are overwritten or left out.
	var short [shortUnquote + 8]byte
	n := 0
	for i := at + 1; i < len(data); n++ {
		if i+8 <= len(data) && n <= shortUnquote {
			w := binary.LittleEndian.Uint64(data[i:])
			binary.LittleEndian.PutUint64(short[n:], w)
			k := bits.TrailingZeros64(jsonscan.SpecialBytes(w)) >> 3 // plain bytes before the first quote, backslash, control or non-ASCII byte
			if n += k; n > shortUnquote {
				return 0, 0, false // longer
			}
			if i += k; k == 8 {
				n-- // the loop's n++
				continue
			}
		}
		c := data[i]
		switch {
		case c == '"':
			return BytesKey(short[:n]) ^ hashString, i + 1, true
		case n == shortUnquote:
			return 0, 0, false // longer
		case c == '\\':
			if i+1 >= len(data) || jsonscan.SimpleEscape(data[i+1]) == 0 {
				return 0, 0, false // \u and bad escapes: the general path
			}
			short[n] = jsonscan.SimpleEscape(data[i+1])
			i += 2
		case c < ' ' || c >= utf8.RuneSelf:
			return 0, 0, false
		default:
			short[n] = c
			i++
		}
	}
	return 0, 0, false
}

// shortUnquote is how long a string hashShortEscaped decodes can be.
const shortUnquote = 16

// maxPooledUnquote bounds the buffers hashEscaped keeps for reuse: an
// unusually long string does not stay in memory.
const maxPooledUnquote = 64 << 10

var unquoteBuffers = sync.Pool{New: func() any { return new([]byte) }}

// number hashes the number at the cursor by value, so 1, 1.0 and 1e0 are
// equal.
func (p *canonParser) number() (uint64, bool) {
	if h, ok := p.smallInt(); ok {
		return h, true
	}
	start := p.Pos
	if !p.Number() {
		return 0, false
	}
	num := p.Data[start:p.Pos]
	// A plain integer of at most 15 digits is exact in a float64: the
	// common case of tool arguments, without strconv.
	if n, ok := jsonscan.Int(num, 15); ok {
		return hashFloat(float64(n)), true
	}
	// The string aliases the args bytes only for the duration of the call.
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(num), len(num)), 64)
	if err != nil { // out of range: encoding/json rejects it too
		return 0, false
	}
	return hashFloat(f), true
}

// smallInt hashes, in one pass, a plain non-negative integer of 1 to 15
// digits at the cursor (no sign, fraction or exponent; not a leading 0
// but 0 itself), the common number of tool arguments, as number would
// hash it. It reports false, with the cursor unmoved, for any other
// number.
func (p *canonParser) smallInt() (uint64, bool) {
	data, i := p.Data, p.Pos
	if i >= len(data) || data[i] < '0' || data[i] > '9' {
		return 0, false
	}
	n := uint64(data[i] - '0')
	j := i + 1
	if n != 0 {
		for j < len(data) && j-i < 16 && data[j] >= '0' && data[j] <= '9' {
			n = n*10 + uint64(data[j]-'0')
			j++
		}
	}
	if j-i > 15 || j < len(data) && (data[j] == '.' || data[j] == 'e' || data[j] == 'E' || data[j] >= '0' && data[j] <= '9') {
		return 0, false // longer, a fraction or an exponent, or a leading zero: number's general path
	}
	p.Pos = j
	if n < uint64(len(smallInts)) {
		return smallInts[n], true
	}
	return hashFloat(float64(n)), true
}

// smallInts are the hashes of the integers 0 to 99 (hashFloat's), the
// common numbers of tool arguments: a look-up rather than a mix.
var smallInts = func() (t [100]uint64) {
	for i := range t {
		t[i] = hashFloat(float64(i))
	}
	return t
}()

// strSeed seeds string hashes; fingerprints only need to agree within one
// process.
var strSeed = maphash.MakeSeed()

// Value hashes the JSON value at s's cursor as ArgsKey hashes a
// document, reading it with s's lexer (the fast event decoder lends its
// cursor and its scratch buffer buf, where strings with escapes are
// decoded; nil for a pooled one). It returns the hash and the position
// after the value; ok is false when the fast path cannot hash it (the
// caller then hashes the decoded args with ArgsKey).
func Value(s jsonscan.Scanner, buf *[]byte) (h uint64, end int, ok bool) {
	c := canonParser{Scanner: s, buf: buf}
	if h, ok = c.value(0); !ok {
		return 0, 0, false
	}
	return h, c.Pos, true
}
