package codec

import (
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/agentstop/agentstop/internal/canonical"
	"github.com/agentstop/agentstop/internal/jsonscan"
	"github.com/agentstop/agentstop/termination"
)

// This file is a hand-written decoder for the one JSON shape the event log
// has. It exists because encoding/json spends most of a replay in
// reflection, a validity pre-scan and a fresh decode state per line.
//
// It is a fast path only: decodeEventFast reports false whenever it is not
// certain that json.Unmarshal (plus the checks in decodeEventJSON) would
// accept the input and produce the same Event, and the caller then decodes
// with encoding/json. So every error, and every unusual input (an escaped
// key, a null field, a
// number that is not a plain integer, nesting deeper than fastMaxDepth,
// ...), goes through encoding/json exactly as before. FuzzDecodeEventFast
// checks the two against each other.
//
// The lexing (whitespace, strings and escapes, numbers, literals, skipping
// a value) is package jsonscan's, shared with the canonical args hash.

// fastMaxDepth bounds the nesting of skipped values and args; deeper input
// (rare in an event log) goes to encoding/json, whose own limit is 10000.
const fastMaxDepth = 64

// eventFieldNames are the JSON names of the fields of Event; keys are
// case-sensitive, and decodeEventJSON drops every other key before
// encoding/json (which would match "Text" to text) sees it.
var eventFieldNames = [...]string{"kind", "source", "text", "tool", "args", "target", "usage", "cost", "error", "time", "call_id", "model",
	"run", "parent", "stage", "dropped", "args_hash", "text_hash"}

// fastParser is a cursor over one line of JSON. Its methods report false
// for anything they do not handle; none of them allocates except to keep a
// decoded string or args.
type fastParser struct {
	jsonscan.Scanner
	scratch *[]byte // where strings with escapes are decoded (scratchBuffers)
	// With hashArgs, the args are read by the canonical hash (which
	// validates them as it goes) rather than skipped, and argsHash is set
	// to what canonical.ArgsKey(ev.Args) returns when argsHashed: replay hashes the
	// raw bytes once, while it decodes them, not again when it evaluates.
	hashArgs   bool
	argsHashed bool
	argsHash   uint64
	// log collects the line's log fields (run, stage, ...), which go to
	// ev.Log once the line is decoded (shareLog); like is the previous
	// line's, whose strings a line that repeats them reuses.
	log  termination.LogFields
	like *termination.LogFields
}

// scratchBuffers hold the decoded strings of a line on their way to
// becoming Go strings: one buffer a line, not one allocation a string.
var scratchBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxScratch bounds the buffers kept in scratchBuffers.
const maxScratch = 64 << 10

// decodeEventFast decodes data into *ev, which must be the zero Event. It
// reports whether it succeeded; on false *ev is left in an unspecified
// state and the caller must decode data with decodeEventJSON.
func decodeEventFast(data []byte, ev *termination.Event) bool {
	ok, _, _ := decodeEventFastHashed(data, ev, false, nil)
	return ok
}

// decodeEventFastHashed is decodeEventFast that, with hashArgs, also
// returns the canonical hash of the event's args when it could compute it
// while decoding them (hashed; see fastParser.hashArgs). Its log fields
// are like's when they are equal (see shareLog); like may be nil.
func decodeEventFastHashed(data []byte, ev *termination.Event, hashArgs bool, like *termination.LogFields) (ok bool, argsKey uint64, hashed bool) {
	p := fastParser{Scanner: jsonscan.Scanner{Data: data}, scratch: scratchBuffers.Get().(*[]byte), hashArgs: hashArgs, like: like}
	if like == nil {
		p.like = &noLog
	}
	defer func() {
		if cap(*p.scratch) <= maxScratch {
			scratchBuffers.Put(p.scratch)
		}
	}()
	p.SkipSpace()
	if !p.object(ev) {
		return false, 0, false
	}
	p.SkipSpace()
	// A missing kind (an empty object, "kind" absent) is an error, reported
	// by encoding/json.
	if p.Pos != len(p.Data) || ev.Kind == 0 {
		return false, 0, false
	}
	ev.Log = shareLog(&p.log, like)
	return true, p.argsHash, p.argsHashed
}

// noLog is the zero LogFields, for a line with no line before it.
var noLog termination.LogFields

// shareLog returns the event's log fields l as its Log: nil for none,
// like when they are equal to it (the lines of one run share one), else
// a copy of l.
func shareLog(l, like *termination.LogFields) *termination.LogFields {
	switch {
	case *l == (termination.LogFields{}):
		return nil
	case like != nil && *l == *like:
		return like
	}
	c := *l
	return &c
}

// members walks the members of an object whose '{' is at the cursor,
// calling member for each key with the cursor on the first byte of its
// value; member must consume the value. It leaves the cursor after '}'.
// The key is only valid during the call. Escaped or non-ASCII keys are not
// handled.
func (p *fastParser) members(member func(key []byte) bool) bool {
	if p.Peek() != '{' {
		return false
	}
	p.Pos++
	p.SkipSpace()
	if p.Peek() == '}' {
		p.Pos++
		return true
	}
	for {
		start, simple, ascii := p.String()
		if !simple || !ascii {
			return false // start < 0 (not a string), or escapes or non-ASCII: let encoding/json match it
		}
		key := p.Data[start+1 : p.Pos-1]
		p.SkipSpace()
		if p.Peek() != ':' {
			return false
		}
		p.Pos++
		p.SkipSpace()
		if !member(key) {
			return false
		}
		p.SkipSpace()
		switch p.Peek() {
		case ',':
			p.Pos++
			p.SkipSpace()
		case '}':
			p.Pos++
			return true
		default:
			return false
		}
	}
}

// object decodes the event object at the cursor into *ev.
func (p *fastParser) object(ev *termination.Event) bool {
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
		case "run":
			return p.setStringLike(&p.log.Run, p.like.Run)
		case "parent":
			return p.setStringLike(&p.log.Parent, p.like.Parent)
		case "stage":
			return p.setStringLike(&p.log.Stage, p.like.Stage)
		case "dropped":
			return false // rare: encoding/json decodes and checks it
		case "args_hash":
			return p.setStringLike(&p.log.ArgsHash, p.like.ArgsHash)
		case "text_hash":
			return p.setStringLike(&p.log.TextHash, p.like.TextHash)
		case "args":
			// json.RawMessage: an exact copy of the value's bytes, "null" included.
			start := p.Pos
			if !p.args() {
				return false
			}
			ev.Args = append(json.RawMessage(nil), p.Data[start:p.Pos]...)
		case "usage":
			return p.usage(&ev.Usage)
		case "cost":
			start := p.Pos
			if !p.Number() {
				return false
			}
			f, err := strconv.ParseFloat(string(p.Data[start:p.Pos]), 64)
			if err != nil {
				return false // out of range
			}
			ev.Cost = f
		case "time":
			// time.Time implements json.Unmarshaler: it gets the raw string
			// token, quotes included, and does not unescape it.
			start, _, _ := p.String()
			if start < 0 {
				return false
			}
			if err := ev.Time.UnmarshalJSON(p.Data[start:p.Pos]); err != nil {
				return false
			}
		default:
			// Keys are case-sensitive (§1): "Text" is an unknown field,
			// ignored, not text.
			return p.Skip(0, fastMaxDepth)
		}
		return true
	})
}

// args moves past the args value at the cursor, validating it; with
// hashArgs it hashes it canonically on the way when it can (a document the
// hash's fast path hands to encoding/json is skipped, and hashed later
// from ev.Args as any other).
func (p *fastParser) args() bool {
	p.argsHashed = false // a repeated "args" key: the last one counts
	if p.hashArgs {
		if h, end, ok := canonical.Value(p.Scanner, p.scratch); ok {
			p.Pos, p.argsHash, p.argsHashed = end, h, true
			return true
		}
	}
	return p.Skip(0, fastMaxDepth)
}

// usage decodes a usage object into *u. Like encoding/json it decodes into
// the existing value, so that a repeated "usage" key merges. Any key but
// the two exact field names goes to encoding/json.
func (p *fastParser) usage(u *termination.Usage) bool {
	return p.members(func(key []byte) bool {
		switch string(key) {
		case "input_tokens":
			return p.int64(&u.InputTokens)
		case "output_tokens":
			return p.int64(&u.OutputTokens)
		default:
			// usage is closed: decodeEventJSON reports the unknown key
			// (keys are case-sensitive, "Input_Tokens" included).
			return false
		}
	})
}

// fastKind is Kind.UnmarshalText for the valid kinds.
func fastKind(b []byte) (termination.Kind, bool) {
	switch string(b) {
	case "input":
		return termination.KindInput, true
	case "message":
		return termination.KindMessage, true
	case "tool_call":
		return termination.KindToolCall, true
	case "tool_result":
		return termination.KindToolResult, true
	case "handoff":
		return termination.KindHandoff, true
	case "stop":
		return termination.KindStop, true
	case "error":
		return termination.KindError, true
	case "final":
		return termination.KindFinal, true
	}
	return 0, false
}

// setString decodes the string value at the cursor into *s, in one pass
// and with one allocation (a string with escapes is decoded into the
// scratch buffer first).
func (p *fastParser) setString(s *string) bool {
	b, copied, ok := p.DecodeString((*p.scratch)[:0])
	if !ok {
		return false
	}
	*s = string(b)
	if copied {
		*p.scratch = b
	}
	return true
}

// setStringLike is setString that reuses like when the string equals it
// (a run's id on each of its lines is one string, not one a line).
func (p *fastParser) setStringLike(s *string, like string) bool {
	b, copied, ok := p.DecodeString((*p.scratch)[:0])
	if !ok {
		return false
	}
	if string(b) == like {
		*s = like
	} else {
		*s = string(b)
	}
	if copied {
		*p.scratch = b
	}
	return true
}

// str decodes the string value at the cursor as encoding/json does. The
// result aliases the input when the string needs no unquoting.
func (p *fastParser) str() ([]byte, bool) {
	start, simple, ascii := p.String()
	if start < 0 {
		return nil, false
	}
	raw := p.Data[start+1 : p.Pos-1]
	if simple && (ascii || utf8.Valid(raw)) {
		return raw, true
	}
	return jsonscan.AppendUnquoted(make([]byte, 0, len(raw)+2*utf8.UTFMax), raw), true
}

// int64 decodes the value at the cursor into *n if it is a JSON integer of
// at most 18 digits (so it cannot overflow). Fractions, exponents, longer
// integers and other types are left to encoding/json.
func (p *fastParser) int64(n *int64) bool {
	start := p.Pos
	if !p.Number() {
		return false
	}
	v, ok := jsonscan.Int(p.Data[start:p.Pos], 18)
	if !ok {
		return false
	}
	*n = v
	return true
}
