// Package jsonscan is the JSON lexer shared by termination's hand-written
// event decoder (fastdecode.go) and its canonical hash of tool arguments
// (canonical.go): whitespace, string tokens and their escapes, numbers and
// literals, read exactly as encoding/json reads them. It allocates nothing
// (AppendUnquoted appends to the caller's buffer).
//
// Each parser keeps its own grammar on top (the decoder matches the event
// schema, the hash combines values); only the lexing lives here, so that a
// rule of JSON is written once.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Scanner is a cursor over one JSON text. Its methods report false (or -1)
// for input they do not accept, and then leave Pos unspecified.
type Scanner struct {
	Data []byte
	Pos  int
}

// SkipSpace moves past JSON whitespace (space, tab, CR, LF; not form feed,
// vertical tab or non-ASCII spaces).
func (s *Scanner) SkipSpace() {
	for s.Pos < len(s.Data) {
		c := s.Data[s.Pos]
		if c > ' ' {
			return // the common case, compact JSON: one comparison
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			s.Pos++
		default:
			return
		}
	}
}

// Peek returns the byte at the cursor, or 0 at the end of the input (0 is
// never valid there in JSON).
func (s *Scanner) Peek() byte {
	if s.Pos < len(s.Data) {
		return s.Data[s.Pos]
	}
	return 0
}

// String validates the string token at the cursor as encoding/json's
// scanner does (control characters and bad escapes are errors; invalid
// UTF-8 is not) and moves past it. It returns the index of the opening
// quote, or -1 if there is no valid string token; simple is false if the
// string has escapes, ascii is false if it has a byte >= 0x80. The
// contents are Data[start+1 : Pos-1].
func (s *Scanner) String() (start int, simple, ascii bool) {
	data := s.Data
	if s.Peek() != '"' {
		return -1, false, false
	}
	start = s.Pos
	simple, ascii = true, true
	high := uint64(msbs) // bytes >= 0x80 are looked at until the first one
	for i := start + 1; i < len(data); {
		// Eight bytes at a time while none of them needs a look: real
		// strings (code, prose) have long runs between escapes.
		if i+8 <= len(data) {
			m := specialBytes(binary.LittleEndian.Uint64(data[i:]), high)
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3 // the first byte flagged is one to look at
		}
		c := data[i]
		if !stringSpecial[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			s.Pos = i + 1
			return start, simple, ascii
		case c == '\\':
			simple = false
			if i+1 >= len(data) {
				return -1, false, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) || !isHex(data[i+2]) || !isHex(data[i+3]) || !isHex(data[i+4]) || !isHex(data[i+5]) {
					return -1, false, false
				}
				i += 6
			default:
				return -1, false, false
			}
		case c < ' ':
			return -1, false, false
		default:
			ascii, high = false, 0
			i++
		}
	}
	return -1, false, false
}

// DecodeString reads the string token at the cursor as String does and
// decodes it as encoding/json does, in one pass. It returns the decoded
// contents: the token's own bytes (aliasing Data) when they decode to
// themselves, or else dst with the decoded contents appended (copied is
// then true). ok is false, and Pos unspecified, if there is no valid string
// token at the cursor.
func (s *Scanner) DecodeString(dst []byte) (str []byte, copied, ok bool) {
	data := s.Data
	if s.Peek() != '"' {
		return nil, false, false
	}
	run := s.Pos + 1 // the start of the bytes read but not yet appended
	for i := run; i < len(data); {
		if i+8 <= len(data) {
			m := specialBytes(binary.LittleEndian.Uint64(data[i:]), msbs)
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		}
		c := data[i]
		switch {
		case !stringSpecial[c]:
			i++
		case c == '"':
			s.Pos = i + 1
			if !copied {
				return data[run:i], false, true
			}
			return append(dst, data[run:i]...), true, true
		case c == '\\':
			if i+1 >= len(data) {
				return nil, false, false
			}
			dst, copied = append(dst, data[run:i]...), true
			if e := simpleEscapes[data[i+1]]; e != 0 {
				// The common escapes (\n, \t, \", \\, ...), inline.
				dst = append(dst, e)
				i += 2
				run = i
				continue
			}
			if data[i+1] != 'u' || i+6 > len(data) {
				return nil, false, false
			}
			r := hex4(data[i+2], data[i+3], data[i+4], data[i+5])
			switch {
			case r < 0:
				return nil, false, false
			case utf16.IsSurrogate(r):
				// Unquote reads the low surrogate only if it is a
				// complete escape, which never reaches past the closing
				// quote.
				_, r, i = Unquote(data, i)
			default:
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
			run = i
		case c < ' ':
			return nil, false, false
		default: // >= 0x80
			// Two- and three-byte runes, most non-ASCII text, inline.
			switch {
			case c < 0xE0:
				if c >= 0xC2 && i+1 < len(data) && data[i+1]&0xC0 == 0x80 {
					i += 2
					continue
				}
			case c < 0xF0 && c != 0xE0 && c != 0xED:
				if i+2 < len(data) && data[i+1]&0xC0 == 0x80 && data[i+2]&0xC0 == 0x80 {
					i += 3
					continue
				}
			}
			if size := validRune(data[i:]); size > 0 {
				i += size // valid UTF-8 decodes to itself
				continue
			}
			dst, copied = append(dst, data[run:i]...), true
			dst = utf8.AppendRune(dst, utf8.RuneError)
			i++
			run = i
		}
	}
	return nil, false, false
}

// simpleEscapes maps the byte after a backslash to what the escape
// decodes to, for every escape but \u (0: not one of them).
var simpleEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// SimpleEscape returns what the one-character escape \c decodes to (\n, \t,
// \", ...), 0 when c begins no such escape (u, or a bad escape).
func SimpleEscape(c byte) byte { return simpleEscapes[c] }

// hex4 is the value of four hex digits, or -1 if one is not a hex digit.
func hex4(a, b, c, d byte) rune {
	v0, v1, v2, v3 := hexValue[a], hexValue[b], hexValue[c], hexValue[d]
	if v0|v1|v2|v3 < 0 {
		return -1
	}
	return rune(v0)<<12 | rune(v1)<<8 | rune(v2)<<4 | rune(v3)
}

// hexValue is the value of a hex digit, -1 for any other byte.
var hexValue = func() (t [256]int8) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = int8(c - '0')
		case 'a' <= c && c <= 'f':
			t[c] = int8(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			t[c] = int8(c - 'A' + 10)
		default:
			t[c] = -1
		}
	}
	return t
}()

// validRune returns the length of the valid UTF-8 encoding of a rune that
// b starts with (b[0] >= 0x80), or 0 if it does not start with one. Two-
// and three-byte runes, most of the non-ASCII text there is, are checked
// inline.
func validRune(b []byte) int {
	c := b[0]
	switch {
	case 0xC2 <= c && c <= 0xDF:
		if len(b) >= 2 && b[1]&0xC0 == 0x80 {
			return 2
		}
		return 0
	case 0xE1 <= c && c <= 0xEC || c == 0xEE || c == 0xEF:
		if len(b) >= 3 && b[1]&0xC0 == 0x80 && b[2]&0xC0 == 0x80 {
			return 3
		}
		return 0
	}
	if r, size := utf8.DecodeRune(b); r != utf8.RuneError || size > 1 {
		return size
	}
	return 0
}

const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// SpecialBytes is specialBytes of w with every byte >= 0x80 flagged: its
// lowest flag (if any) is the first byte of w that is a quote, a
// backslash, a control character or not ASCII, and every byte below it is
// a plain ASCII character of a string.
func SpecialBytes(w uint64) uint64 { return specialBytes(w, msbs) }

// specialBytes flags (with the high bit of the byte) the bytes of w, eight
// bytes of a string read little-endian, that String must look at: a quote,
// a backslash, a control character and, when high is msbs, a byte >= 0x80.
// A flag may be wrong only above (after) a byte that is rightly flagged, so
// the lowest flag is always right, and no flag means none of the eight.
func specialBytes(w, high uint64) uint64 {
	q := w ^ (lsbs * '"')
	b := w ^ (lsbs * '\\')
	return ((q-lsbs)&^q|(b-lsbs)&^b|(w-lsbs*' ')&^w)&msbs | w&high
}

// stringSpecial marks the bytes String must look at: the closing quote, a
// backslash, control characters and non-ASCII bytes.
var stringSpecial = func() (t [256]bool) {
	for c := range t {
		t[c] = c == '"' || c == '\\' || c < ' ' || c >= utf8.RuneSelf
	}
	return t
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// Unquote decodes the string contents raw (quotes removed, validated by
// String) one piece at a time, starting at index i < len(raw), exactly as
// encoding/json does: escapes decoded, a surrogate pair joined, a lone
// surrogate and each byte of invalid UTF-8 replaced with U+FFFD. It
// returns either a run of bytes that decode to themselves (lit, non-empty)
// or one decoded rune (lit empty), and the index of the next piece.
// Decoding all of raw is
//
//	for i := 0; i < len(raw); {
//		lit, r, next := Unquote(raw, i)
//		... use lit, or r when lit is empty ...
//		i = next
//	}
func Unquote(raw []byte, i int) (lit []byte, r rune, next int) {
	if raw[i] == '\\' {
		switch raw[i+1] {
		case 'b':
			return nil, '\b', i + 2
		case 'f':
			return nil, '\f', i + 2
		case 'n':
			return nil, '\n', i + 2
		case 'r':
			return nil, '\r', i + 2
		case 't':
			return nil, '\t', i + 2
		case 'u':
			r := getu4(raw[i:])
			next := i + 6
			if utf16.IsSurrogate(r) {
				if r2 := getu4(raw[next:]); r2 >= 0 {
					if dec := utf16.DecodeRune(r, r2); dec != unicode.ReplacementChar {
						return nil, dec, next + 6
					}
				}
				return nil, unicode.ReplacementChar, next
			}
			return nil, r, next
		default: // '"', '\\', '/'
			return nil, rune(raw[i+1]), i + 2
		}
	}
	j := i
	for j < len(raw) {
		c := raw[j]
		if c == '\\' {
			break
		}
		if c < utf8.RuneSelf {
			j++
			continue
		}
		r, size := utf8.DecodeRune(raw[j:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		j += size
	}
	if j > i {
		return raw[i:j], 0, j
	}
	return nil, utf8.RuneError, i + 1 // one byte of invalid UTF-8
}

// AppendUnquoted appends the decoded string contents raw (see Unquote).
// The runs between escapes that are valid UTF-8, all of them in most
// strings, are copied whole.
func AppendUnquoted(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		run := raw[i:]
		if j := bytes.IndexByte(run, '\\'); j >= 0 {
			run = run[:j]
		}
		if len(run) > 0 && utf8.Valid(run) {
			dst = append(dst, run...)
			i += len(run)
			continue
		}
		lit, r, next := Unquote(raw, i)
		if len(lit) > 0 {
			dst = append(dst, lit...)
		} else {
			dst = utf8.AppendRune(dst, r)
		}
		i = next
	}
	return dst
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// Number moves past the number token at the cursor, validating JSON's
// grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. The token is
// Data[start:Pos] for the start the caller noted. Whether a digit follows
// a leading 0 ("01") is the caller's business: the token ends at the 0.
func (s *Scanner) Number() bool {
	data := s.Data
	i := s.Pos
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && '1' <= data[i] && data[i] <= '9':
		i = skipDigits(data, i)
	default:
		return false
	}
	if i < len(data) && data[i] == '.' {
		j := skipDigits(data, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := skipDigits(data, i)
		if j == i {
			return false
		}
		i = j
	}
	s.Pos = i
	return true
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && '0' <= data[i] && data[i] <= '9' {
		i++
	}
	return i
}

// Int returns the value of num, a number token (see Number), if it is an
// integer of at most maxDigits digits (at most 18, so that it cannot
// overflow): no fraction, no exponent.
func Int(num []byte, maxDigits int) (int64, bool) {
	neg := len(num) > 0 && num[0] == '-'
	digits := num
	if neg {
		digits = num[1:]
	}
	if len(digits) == 0 || len(digits) > maxDigits || len(digits) > 18 {
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
	return n, true
}

// Literal moves past lit (true, false or null) if it is at the cursor.
func (s *Scanner) Literal(lit string) bool {
	if len(s.Data)-s.Pos < len(lit) || string(s.Data[s.Pos:s.Pos+len(lit)]) != lit {
		return false
	}
	s.Pos += len(lit)
	return true
}

// enter moves past a container's opening byte and the space after it, and
// reports whether the container is empty: its closing byte close follows
// (and has been moved past).
func (s *Scanner) enter(close byte) bool {
	s.Pos++
	s.SkipSpace()
	if s.Peek() == close {
		s.Pos++
		return true
	}
	return false
}

// next moves past the space after a container's element and what follows
// it: a comma and the space after it (more is true: another element
// follows), or the closing byte close (more is false, ok is true). Anything
// else is not JSON (both are false).
func (s *Scanner) next(close byte) (more, ok bool) {
	s.SkipSpace()
	switch s.Peek() {
	case ',':
		s.Pos++
		s.SkipSpace()
		return true, true
	case close:
		s.Pos++
		return false, true
	}
	return false, false
}

// Skip moves past the JSON value at the cursor, validating it. depth is
// the nesting depth of the value's container; a value nested deeper than
// maxDepth is reported as not accepted.
func (s *Scanner) Skip(depth, maxDepth int) bool {
	if depth > maxDepth {
		return false
	}
	switch s.Peek() {
	case '{':
		if s.enter('}') {
			return true
		}
		for {
			if start, _, _ := s.String(); start < 0 {
				return false
			}
			s.SkipSpace()
			if s.Peek() != ':' {
				return false
			}
			s.Pos++
			s.SkipSpace()
			if !s.Skip(depth+1, maxDepth) {
				return false
			}
			if more, ok := s.next('}'); !more {
				return ok
			}
		}
	case '[':
		if s.enter(']') {
			return true
		}
		for {
			if !s.Skip(depth+1, maxDepth) {
				return false
			}
			if more, ok := s.next(']'); !more {
				return ok
			}
		}
	case '"':
		start, _, _ := s.String()
		return start >= 0
	case 't':
		return s.Literal("true")
	case 'f':
		return s.Literal("false")
	case 'n':
		return s.Literal("null")
	default:
		return s.Number()
	}
}
