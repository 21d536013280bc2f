package canonical

import (
	"strconv"
	"strings"
	"testing"

	"github.com/agentstop/agentstop/internal/jsonscan"
)

// parsedKey is ArgsKey of trimmed, non-empty b through the general parser
// alone.
func parsedKey(b []byte) uint64 {
	p := canonParser{Scanner: jsonscan.Scanner{Data: b}}
	h, ok := p.value(0)
	return p.end(h, ok)
}

// flatKey is ArgsKey of b through flatObject, and whether flatObject took
// all of it without the general parser.
func flatKey(b []byte) (uint64, bool) {
	p := canonParser{Scanner: jsonscan.Scanner{Data: b}}
	h, ok := p.flatObject()
	return p.end(h, ok), !p.resumed
}

// TestFlatObjectMatchesParser: the documents flatObject takes hash as the
// general parser hashes them, and it leaves every other one to the parser.
func TestFlatObjectMatchesParser(t *testing.T) {
	long := strings.Repeat("x", 32)
	tests := []struct {
		doc  string
		flat bool // flatObject takes it
	}{
		{`{}`, true},
		{`{"ab":12}`, true},
		{`{"query":"capital of France","limit":5,"page":3}`, true},
		{`{"expression":"(3 + 4) * 7"}`, true},
		{`{"path":"/tmp/report.md","content":"# Findings\n...","part":2}`, true},
		{`{"q":"` + long + `"}`, true},
		{`{"` + long + `":0}`, true},
		{`{"n":0,"m":10,"big":123456789012345,"t":true,"f":false,"z":null}`, true},
		{`{"a":"","":"b"}`, true},
		// Left to the parser from a member on, with what came before.
		{`{"query":"fact number 3","limit":5,"lang":["en","fr"]}`, false},
		{`{"path":"a.go","content":"` + strings.Repeat("code\n\t", 40) + `","mode":420}`, false},
		{`{"ab":1,"cd":{"e":[1,2]},"fg":"h"}`, false},
		{`{"ab":1, "cd":2}`, false},
		{`{"ab":1,"cd":2,"ab":3}`, false},                                                          // repeated after two: encoding/json's
		{`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k0":10}`, false}, // repeated after ten
		{`{"ab":1,"cd":-2.5e3,"ef":"é"}`, false},
		// Left to the parser.
		{`{"a":1}`, false},                                   // shorter than the word plainString reads
		{`{"q":"` + long + `y"}`, false},                     // a value longer than 32 bytes
		{`{"` + long + `y":0}`, false},                       // a key longer than 32 bytes
		{`{"a": 1}`, false},                                  // white space
		{`{"a":1 }`, false},                                  // white space
		{`{"a":-1}`, false},                                  // a negative number
		{`{"a":1.5}`, false},                                 // a fraction
		{`{"a":1e3}`, false},                                 // an exponent
		{`{"a":01}`, false},                                  // a leading zero
		{`{"a":1234567890123456}`, false},                    // 16 digits
		{`{"a":{"b":1}}`, false},                             // nested
		{`{"a":[1]}`, false},                                 // an array
		{`{"a":1,"a":2}`, false},                             // a repeated key
		{`{"\u0061":1}`, false},                              // an escaped key
		{`{"a":"\u00e9"}`, false},                            // a \u escape
		{`{"a":"é"}`, false},                                 // not ASCII
		{`{"a":"` + strings.Repeat("\\n", 17) + `"}`, false}, // longer than shortEscaped takes
		{`{"a":truex}`, false},
		{`{"a":nul}`, false},
		{`{"a":1,}`, false},
		{`{"a":1}}`, true}, // read to its first "}": what follows makes it invalid (end)
		{`{"a"}`, false},
	}
	for _, tt := range tests {
		h, took := flatKey([]byte(tt.doc))
		if took != tt.flat {
			t.Errorf("flatObject(%s) read it all: %v, want %v", tt.doc, took, tt.flat)
		}
		if want := parsedKey([]byte(tt.doc)); h != want {
			t.Errorf("flatObject(%s) = %x, the parser says %x", tt.doc, h, want)
		}
	}
	// Two keys that share a bit of the filter of keys seen (keys are
	// seeded per process: found here): not a repeat, so flatObject goes on.
	bits := map[uint64]string{}
	for i := 0; ; i++ {
		key := "key" + strconv.Itoa(i)
		h := hashStringValue(key)
		bit := h>>6&1<<6 | h&63
		if other, ok := bits[bit]; ok {
			// Next to each other, and 9 members apart (past the key
			// hashes flatObject keeps).
			fill := ""
			for j := range 8 {
				fill += `"fill` + strconv.Itoa(j) + `":` + strconv.Itoa(j) + `,`
			}
			for _, doc := range []string{`{"` + other + `":"x","` + key + `":"y"}`, `{"` + other + `":"x",` + fill + `"` + key + `":"y"}`} {
				h, took := flatKey([]byte(doc))
				if want := parsedKey([]byte(doc)); !took || h != want {
					t.Errorf("flatObject(%s) = %x, read it all: %v; the parser says %x", doc, h, took, want)
				}
			}
			break
		}
		bits[bit] = key
	}
	// 33 members: past maxMembers, the parser's (slow path).
	var b strings.Builder
	b.WriteString("{")
	for i := range maxMembers + 1 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + string(rune('A'+i)) + `":1`)
	}
	b.WriteString("}")
	doc := []byte(b.String())
	if h, took := flatKey(doc); took || h != parsedKey(doc) {
		t.Errorf("flatObject read an object of %d members itself (%v), or hashed it as the parser does not", maxMembers+1, took)
	}
}
