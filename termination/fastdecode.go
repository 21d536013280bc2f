package termination

import (
	"encoding/json"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a hand-written decoder for the one JSON shape the event log
// has. It exists because encoding/json spends most of a replay in
// reflection, a validity pre-scan and a fresh decode state per line.
//
// It is a fast path only: decodeEventFast reports false whenever it is not
// certain that json.Unmarshal (plus the checks in decodeEventJSON) would
// accept the input and produce the same Event, and the caller then decodes
// with encoding/json. So every error, and every unusual input (a key that
// matches a field only case-insensitively, an escaped key, a null field, a
// number that is not a plain integer, nesting deeper than fastMaxDepth,
// ...), goes through encoding/json exactly as before. FuzzDecodeEventFast
// checks the two against each other.

// fastMaxDepth bounds the nesting of skipped values and args; deeper input
// goes to encoding/json (whose own limit is 10000).
const fastMaxDepth = 256

// eventFieldNames are the JSON names of the fields of Event, used to send
// keys that match one of them only case-insensitively to encoding/json.
var (
	eventFieldNames = [...]string{"kind", "source", "text", "tool", "args", "target", "usage", "cost", "error", "time", "call_id", "model"}
)

// fastParser is a cursor over one line of JSON. Its methods report false
// for anything they do not handle; none of them allocates except to keep a
// decoded string or args.
type fastParser struct {
	data []byte
	i    int
}

// decodeEventFast decodes data into *ev, which must be the zero Event. It
// reports whether it succeeded; on false *ev is left in an unspecified
// state and the caller must decode data with decodeEventJSON.
func decodeEventFast(data []byte, ev *Event) bool {
	p := fastParser{data: data}
	p.ws()
	if !p.object(ev) {
		return false
	}
	p.ws()
	// A missing kind (an empty object, "kind" absent) is an error, reported
	// by encoding/json.
	return p.i == len(p.data) && ev.Kind != 0
}

// ws skips JSON whitespace.
func (p *fastParser) ws() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// next returns the byte at the cursor, or 0 at the end of the input (0 is
// never valid there in JSON).
func (p *fastParser) next() byte {
	if p.i < len(p.data) {
		return p.data[p.i]
	}
	return 0
}

// members walks the members of an object whose '{' is at the cursor,
// calling member for each key with the cursor on the first byte of its
// value; member must consume the value. It leaves the cursor after '}'.
// The key is only valid during the call. Escaped or non-ASCII keys are not
// handled.
func (p *fastParser) members(member func(key []byte) bool) bool {
	if p.next() != '{' {
		return false
	}
	p.i++
	p.ws()
	if p.next() == '}' {
		p.i++
		return true
	}
	for {
		start, simple, ascii := p.scanString()
		if !simple || !ascii {
			return false // start < 0 (not a string), or escapes or non-ASCII: let encoding/json match it
		}
		key := p.data[start+1 : p.i-1]
		p.ws()
		if p.next() != ':' {
			return false
		}
		p.i++
		p.ws()
		if !member(key) {
			return false
		}
		p.ws()
		switch p.next() {
		case ',':
			p.i++
			p.ws()
		case '}':
			p.i++
			return true
		default:
			return false
		}
	}
}

// object decodes the event object at the cursor into *ev.
func (p *fastParser) object(ev *Event) bool {
	return p.members(func(key []byte) bool {
		switch string(key) {
		case "kind":
			b, ok := p.str()
			if !ok {
				return false
			}
			k, ok := fastKind(b)
			if !ok {
				return false // missing or unknown: encoding/json reports it
			}
			ev.Kind = k
		case "source":
			return p.setString(&ev.Source)
		case "text":
			return p.setString(&ev.Text)
		case "tool":
			return p.setString(&ev.Tool)
		case "target":
			return p.setString(&ev.Target)
		case "error":
			return p.setString(&ev.Err)
		case "call_id":
			return p.setString(&ev.CallID)
		case "model":
			return p.setString(&ev.Model)
		case "args":
			// json.RawMessage: an exact copy of the value's bytes, "null" included.
			start := p.i
			if !p.skip(0) {
				return false
			}
			ev.Args = append(json.RawMessage(nil), p.data[start:p.i]...)
		case "usage":
			return p.usage(&ev.Usage)
		case "cost":
			start := p.i
			if !p.number() {
				return false
			}
			f, err := strconv.ParseFloat(string(p.data[start:p.i]), 64)
			if err != nil {
				return false // out of range
			}
			ev.Cost = f
		case "time":
			// time.Time implements json.Unmarshaler: it gets the raw string
			// token, quotes included, and does not unescape it.
			start, _, _ := p.scanString()
			if start < 0 {
				return false
			}
			if err := ev.Time.UnmarshalJSON(p.data[start:p.i]); err != nil {
				return false
			}
		default:
			if foldsToAny(key, eventFieldNames[:]) {
				return false
			}
			return p.skip(0)
		}
		return true
	})
}

// usage decodes a usage object into *u. Like encoding/json it decodes into
// the existing value, so that a repeated "usage" key merges. Any key but
// the two exact field names goes to encoding/json.
func (p *fastParser) usage(u *Usage) bool {
	return p.members(func(key []byte) bool {
		switch string(key) {
		case "input_tokens":
			return p.int64(&u.InputTokens)
		case "output_tokens":
			return p.int64(&u.OutputTokens)
		default:
			// usage is closed: encoding/json matches a folded key, and
			// decodeEventJSON reports an unknown one.
			return false
		}
	})
}

// fastKind is Kind.UnmarshalText for the valid kinds.
func fastKind(b []byte) (Kind, bool) {
	switch string(b) {
	case "input":
		return KindInput, true
	case "message":
		return KindMessage, true
	case "tool_call":
		return KindToolCall, true
	case "tool_result":
		return KindToolResult, true
	case "handoff":
		return KindHandoff, true
	case "stop":
		return KindStop, true
	case "error":
		return KindError, true
	case "final":
		return KindFinal, true
	}
	return 0, false
}

// foldsToAny reports whether the ASCII key equals one of names (all lower
// case ASCII letters and '_') ignoring ASCII case: encoding/json's
// case-insensitive match for such keys.
func foldsToAny(key []byte, names []string) bool {
	for _, name := range names {
		if len(name) != len(key) {
			continue
		}
		match := true
		for j := 0; j < len(key); j++ {
			c := key[j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != name[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// setString decodes the string value at the cursor into *s.
func (p *fastParser) setString(s *string) bool {
	b, ok := p.str()
	if !ok {
		return false
	}
	*s = string(b)
	return true
}

// str decodes the string value at the cursor as encoding/json does. The
// result aliases the input when the string needs no unquoting.
func (p *fastParser) str() ([]byte, bool) {
	start, simple, ascii := p.scanString()
	if start < 0 {
		return nil, false
	}
	raw := p.data[start+1 : p.i-1]
	if simple && (ascii || utf8.Valid(raw)) {
		return raw, true
	}
	return appendUnquoted(make([]byte, 0, len(raw)+2*utf8.UTFMax), raw), true
}

// scanString validates the string token at the cursor as encoding/json's
// scanner does (control characters and bad escapes are errors; invalid
// UTF-8 is not) and moves the cursor past it. It returns the index of the
// opening quote, or -1 if there is no valid string token; simple is false
// if the string has escapes, ascii is false if it has a byte >= 0x80.
func (p *fastParser) scanString() (start int, simple, ascii bool) {
	data := p.data
	if p.next() != '"' {
		return -1, false, false
	}
	start = p.i
	simple, ascii = true, true
	for i := start + 1; i < len(data); {
		c := data[i]
		if !stringSpecial[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			p.i = i + 1
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
			if c >= utf8.RuneSelf {
				ascii = false
			}
			i++
		}
	}
	return -1, false, false
}

// stringSpecial marks the bytes scanString must look at: the closing
// quote, a backslash, control characters and non-ASCII bytes.
var stringSpecial = func() (t [256]bool) {
	for c := range t {
		t[c] = c == '"' || c == '\\' || c < ' ' || c >= utf8.RuneSelf
	}
	return t
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// appendUnquoted appends the contents of a string token (quotes removed),
// already validated by scanString, decoded exactly as encoding/json's
// unquoteBytes does: escapes decoded, a surrogate pair joined, a lone
// surrogate and each byte of invalid UTF-8 replaced with U+FFFD.
func appendUnquoted(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch s[r+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := getu4(s[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if rr1 := getu4(s[r:]); rr1 >= 0 {
						if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
							r += 6
							dst = utf8.AppendRune(dst, dec)
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, s[r+1])
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
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

// int64 decodes the value at the cursor into *n if it is a JSON integer of
// at most 18 digits (so it cannot overflow). Fractions, exponents, longer
// integers and other types are left to encoding/json.
func (p *fastParser) int64(n *int64) bool {
	data := p.data
	i := p.i
	neg := false
	if i < len(data) && data[i] == '-' {
		neg = true
		i++
	}
	digits := i
	var v int64
	if i < len(data) && data[i] == '0' {
		i++
	} else {
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			v = v*10 + int64(data[i]-'0')
			i++
		}
	}
	if i == digits || i-digits > 18 {
		return false
	}
	if i < len(data) {
		switch data[i] {
		case '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return false
		}
	}
	if neg {
		v = -v
	}
	*n = v
	p.i = i
	return true
}

// number moves the cursor past the JSON number at the cursor, validating
// its grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *fastParser) number() bool {
	data := p.data
	i := p.i
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
	p.i = i
	return true
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && '0' <= data[i] && data[i] <= '9' {
		i++
	}
	return i
}

// skip moves the cursor past the JSON value at the cursor, validating it.
// depth is the nesting depth of the value's container.
func (p *fastParser) skip(depth int) bool {
	if depth > fastMaxDepth {
		return false
	}
	switch c := p.next(); c {
	case '{':
		p.i++
		p.ws()
		if p.next() == '}' {
			p.i++
			return true
		}
		for {
			if start, _, _ := p.scanString(); start < 0 {
				return false
			}
			p.ws()
			if p.next() != ':' {
				return false
			}
			p.i++
			p.ws()
			if !p.skip(depth + 1) {
				return false
			}
			p.ws()
			switch p.next() {
			case ',':
				p.i++
				p.ws()
			case '}':
				p.i++
				return true
			default:
				return false
			}
		}
	case '[':
		p.i++
		p.ws()
		if p.next() == ']' {
			p.i++
			return true
		}
		for {
			if !p.skip(depth + 1) {
				return false
			}
			p.ws()
			switch p.next() {
			case ',':
				p.i++
				p.ws()
			case ']':
				p.i++
				return true
			default:
				return false
			}
		}
	case '"':
		start, _, _ := p.scanString()
		return start >= 0
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case 'n':
		return p.literal("null")
	default:
		return p.number()
	}
}

func (p *fastParser) literal(lit string) bool {
	if len(p.data)-p.i < len(lit) || string(p.data[p.i:p.i+len(lit)]) != lit {
		return false
	}
	p.i += len(lit)
	return true
}
