package canonical

import "github.com/agentstop/agentstop/internal/jsonscan"

// flatObject hashes, exactly as the general parser does (object), the
// common document of tool arguments: a compact object (no white space)
// whose keys are plain strings (ASCII, no escape) of at most 32 bytes and
// whose values are such strings or short ones with the common escapes
// (shortEscaped's), small non-negative integers (as smallInt reads them),
// true, false or null, of at most maxMembers members with no
// key repeated. ok is false for any other document, which the general
// parser then reads from its start.
//
// It is the general parser's work for these documents in one loop, with
// its cursor in a register: no recursion, no white space to skip, no
// dispatch on the value's type through value, and strings hashed by
// plainString as str hashes them. What it returns is the same number, so
// equal documents hash the same whichever path reads them (FuzzArgsHash
// and TestFlatObjectMatchesParser check it).
func flatObject(data []byte) (h uint64, ok bool) {
	if len(data) < 2 || data[0] != '{' || data[len(data)-1] != '}' {
		return 0, false
	}
	if len(data) == 2 {
		return mix(hashObject), true
	}
	var sum, n uint64
	// seen is object's filter of the key hashes read so far: a key whose
	// bit is set may be a repeat, which dupKey settles.
	var seen [2]uint64
	i := 1
	for {
		k, end, ok := shortString(data, i)
		if !ok {
			k, end, ok = plainString(data, i)
		}
		if !ok || end-i > 34 || end >= len(data) || data[end] != ':' {
			return 0, false // not plain, longer than 32 bytes, or not followed by ':'
		}
		if n == maxMembers {
			return 0, false
		}
		if bit := uint64(1) << (k & 63); seen[k>>6&1]&bit != 0 {
			if flatDupKey(data, i, k) {
				return 0, false // a repeated key (or a hash collision): the parser's
			}
		} else {
			seen[k>>6&1] |= bit
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
				return 0, false
			}
			i = end
		case c-'1' <= 8 && (data[i+1] == ',' || data[i+1] == '}'):
			// One digit (not 0: a leading zero is flatInt's to refuse), as
			// object hashes it; data[i+1] is there: data ends with '}'.
			v, i = smallInts[c-'0'], i+1
		case c-'0' <= 9:
			if v, i, ok = flatInt(data, i); !ok {
				return 0, false
			}
		case c == 't' && i+4 < len(data) && string(data[i:i+4]) == "true":
			v, i = hashTrue, i+4
		case c == 'f' && i+5 < len(data) && string(data[i:i+5]) == "false":
			v, i = hashFalse, i+5
		case c == 'n' && i+4 < len(data) && string(data[i:i+4]) == "null":
			v, i = hashNull, i+4
		default:
			return 0, false
		}
		sum += member(k, v)
		n++
		// i < len(data): every value ends before the final '}'.
		switch data[i] {
		case ',':
			i++
		case '}':
			if i != len(data)-1 {
				return 0, false
			}
			return mix(hashObject ^ sum ^ mix(n)), true
		default:
			return 0, false
		}
	}
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

// flatDupKey reports whether one of the members of the flat object data
// before the key at data[at] has a key that hashes to k (dupKey's answer).
//
//go:noinline
func flatDupKey(data []byte, at int, k uint64) bool {
	p := canonParser{Scanner: jsonscan.Scanner{Data: data}}
	return p.dupKey(1, at, k)
}
