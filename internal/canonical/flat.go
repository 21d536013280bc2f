package canonical

import "github.com/agentstop/agentstop/internal/jsonscan"

// flatObject hashes the object at the start of p's document, exactly as
// the general parser does (value, object), reading the common document
// of tool arguments itself: a compact object (no white space) whose keys
// are plain strings (ASCII, no escape) of at most 32 bytes and whose values
// are such strings or short ones with the common escapes (shortEscaped's),
// small non-negative integers (as smallInt reads them), true, false or
// null. From the first member it does not take (any other value, white
// space, a long or escaped key, more than maxMembers members), the
// general parser reads the rest (members), given what the members before
// it add up to; p.resumed says so.
//
// It is the general parser's work for these members in one loop, with
// its cursor in a register: no recursion, no white space to skip, no
// dispatch on the value's type through value, and strings hashed by
// plainString as str hashes them. What it returns is the same number, so
// equal documents hash the same whichever path reads them (FuzzArgsHash
// and TestFlatObjectMatchesParser check it).
func (p *canonParser) flatObject() (h uint64, ok bool) {
	data := p.Data
	var sum, n uint64
	// seen is object's filter of the key hashes read so far (see members);
	// keys are the first of them, so that a key whose bit is set is
	// settled by comparing hashes rather than by reading the members
	// again (which keys share a bit depends on the process's seeds).
	var seen [2]uint64
	var keys [8]uint64
	if len(data) < 2 || data[len(data)-1] != '}' {
		return p.resume(1, sum, n, seen) // the parser's, from the start
	}
	if len(data) == 2 {
		p.Pos = 2
		return mix(hashObject), true
	}
	for i := 1; ; {
		at := i // where the member starts: where members goes on, if it must
		k, end, ok := shortString(data, i)
		if !ok {
			k, end, ok = plainString(data, i)
		}
		if !ok || end-i > 34 || end >= len(data) || data[end] != ':' || n == maxMembers {
			// Not plain, longer than 32 bytes, not followed by ':', or
			// one member too many.
			return p.resume(at, sum, n, seen)
		}
		bit := uint64(1) << (k & 63)
		if seen[k>>6&1]&bit != 0 && repeated(&keys, n, k, data, at) {
			return p.resume(at, sum, n, seen) // a repeated key (or a hash collision)
		}
		i = end + 1
		var v uint64
		switch c := data[i]; {
		case c == '"':
			if v, end, ok = plainString(data, i); !ok {
				// A short string with the common escapes (\n, \", ...),
				// decoded as str decodes it.
				v, end, ok = shortEscaped(data, i)
			}
			if !ok || end-i > 34 {
				return p.resume(at, sum, n, seen)
			}
			i = end
		case c-'1' <= 8 && (data[i+1] == ',' || data[i+1] == '}'):
			// One digit (not 0: a leading zero is flatInt's to refuse), as
			// object hashes it; data[i+1] is there: data ends with '}'.
			v, i = smallInts[c-'0'], i+1
		case c-'0' <= 9:
			if v, i, ok = flatInt(data, i); !ok {
				return p.resume(at, sum, n, seen)
			}
		case c == 't' && i+4 < len(data) && string(data[i:i+4]) == "true":
			v, i = hashTrue, i+4
		case c == 'f' && i+5 < len(data) && string(data[i:i+5]) == "false":
			v, i = hashFalse, i+5
		case c == 'n' && i+4 < len(data) && string(data[i:i+4]) == "null":
			v, i = hashNull, i+4
		default:
			return p.resume(at, sum, n, seen)
		}
		// i < len(data): every value ends before the final '}'.
		switch data[i] {
		case ',':
			seen[k>>6&1] |= bit
			if n < uint64(len(keys)) {
				keys[n] = k
			}
			sum += member(k, v)
			n++
			i++
		case '}':
			p.Pos = i + 1
			return mix(hashObject ^ (sum + member(k, v)) ^ mix(n+1)), true
		default:
			return p.resume(at, sum, n, seen)
		}
	}
}

// resume has the general parser read the object's members from data[at]
// on, after the n members (adding up to sum, their keys in seen) that
// flatObject read; at the first member, it reads the whole object (white
// space before it, an empty object).
func (p *canonParser) resume(at int, sum, n uint64, seen [2]uint64) (uint64, bool) {
	p.resumed = true
	if n == 0 {
		p.Pos = 0
		return p.value(0)
	}
	p.resuming, p.soFar = true, objectSoFar{first: 1, sum: sum, n: n, seen: seen}
	return p.members(0, at)
}

// flatInt hashes, as smallInt does, the plain non-negative integer of 1 to
// 15 digits at data[i] (not a leading 0 but 0 itself), followed by ',' or
// '}' (data ends with '}'), and returns the position after it; ok is false
// for any other number.
func flatInt(data []byte, i int) (h uint64, end int, ok bool) {
	v := uint64(data[i] - '0')
	j := i + 1
	if v != 0 {
		for j < len(data) && j-i < 16 && data[j]-'0' <= 9 {
			v = v*10 + uint64(data[j]-'0')
			j++
		}
	}
	if j-i > 15 || j >= len(data) || data[j] != ',' && data[j] != '}' {
		return 0, 0, false // longer, a fraction, an exponent, a leading zero or white space
	}
	if v < uint64(len(smallInts)) {
		return smallInts[v], j, true
	}
	return hashFloat(float64(v)), j, true
}

// repeated reports whether one of the n members before the key at
// data[at], whose key hashes are keys[:n] (the first len(keys) of them),
// has a key that hashes to k: dupKey's answer.
func repeated(keys *[8]uint64, n, k uint64, data []byte, at int) bool {
	if n > uint64(len(keys)) {
		return flatDupKey(data, at, k)
	}
	for _, h := range keys[:n] {
		if h == k {
			return true
		}
	}
	return false
}

// flatDupKey reports whether one of the members of the flat object data
// before the key at data[at] has a key that hashes to k (dupKey's answer).
//
//go:noinline
func flatDupKey(data []byte, at int, k uint64) bool {
	p := canonParser{Scanner: jsonscan.Scanner{Data: data}}
	return p.dupKey(1, at, k)
}
