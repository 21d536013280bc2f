package redisfleet

import (
	"strconv"
	"strings"
)

// DefaultPrefix is the prefix every key and channel shares unless
// WithPrefix says otherwise.
const DefaultPrefix = "agentstop:"

// keys builds the names of every key and channel under one prefix. Names,
// stages and label values are escaped (escape) before they become part of
// a key, so a value can never form another key, a hash tag or a pattern.
//
// Every key carries a hash tag ({…}: Redis Cluster places a key by the
// part between its first "{" and the next "}"), one per family, so that
// each script's keys fall in one slot. A script touches only the keys it
// is given in KEYS[] (never a key it builds from an argument), and a value
// and its TTL are written by one command (SET … PX) or inside one script.
//
// Layout (P is the prefix, which has no braces):
//
//	P{runs}             sorted set: run id → lease expiry (server ms)
//	P{runs}:ID          string: the run's registry entry, TTL = lease
//	P{runs}:end:ID      string: an ended run's record (§8: what its remote
//	                    children end with, or are refused with), TTL = WithEndedTTL
//	P{stops}            sorted set: stop id → expiry (server ms)
//	P{stops}:ID         string: a stop's selector, reason, by, at; TTL
//	P{stops}:ack:ID     list: confirmations of stop ID; TTL
//	P{blocks}           sorted set: block id → expiry (server ms, +inf for none)
//	P{blocks}:ID        string: a block's selector, reason, by, at, expires; TTL = expiry
//	P{budgets}          sorted set: window key → the key's expiry (server ms)
//	P{budget:B}:W       hash: shared budget B's window starting at W (ms); TTL = window end + 2 leases
//	P{tree:H}           hash: the tree limits run H holds, shared with its descendants in other
//	                    processes (§8): limits, settled and committed usage, leases; TTL = 2
//	                    leases + WithEndedTTL, renewed by the holder's process
//	P ctl               pub/sub channel: stops, blocks, unblocks, budget news
//
// B is KEY:VALUE, both escaped (KEY is "stage" or "label%3ANAME"); IDs are
// escaped (an escaped id has no ':', so P{runs}:end:ID never names a run's
// entry). So the families' slots are: all runs, the runs index and the
// ended runs' records in one ({runs}: listing runs reads the index and then
// the entries in one slot; removing a run and recording its end is one
// script),
// all stops and their confirmations in one ({stops}), all blocks in one
// ({blocks}), the budget index in one ({budgets}), each shared budget's
// windows in a slot of their own ({budget:B}), so budgets spread over the
// cluster, and each shared tree in a slot of its own ({tree:H}, H the
// holder's escaped run id: a tree's one script call touches only its
// hash). The budget index is written after the budget's script, by its
// own command (it spans budgets, so it cannot share their slots); a
// window missing from it for a moment is only missing from `budgets`.
//
// A new family (e.g. the runs of one tree) takes a tag of its own,
// P{NAME:ID}…, with every key one script touches under the same tag, and
// its index, if it needs one, as P{NAMEs}. Channels carry no tag: PUBLISH
// on a cluster reaches every node's subscribers.
type keys struct {
	prefix string
}

func (k keys) runs() string              { return k.prefix + "{runs}" }
func (k keys) run(id string) string      { return k.prefix + "{runs}:" + escape(id) }
func (k keys) ended(id string) string    { return k.prefix + "{runs}:end:" + escape(id) }
func (k keys) ctl() string               { return k.prefix + "ctl" }
func (k keys) stops() string             { return k.prefix + "{stops}" }
func (k keys) stop(id string) string     { return k.prefix + "{stops}:" + escape(id) }
func (k keys) stopAck(id string) string  { return k.prefix + "{stops}:ack:" + escape(id) }
func (k keys) raises() string            { return k.prefix + "{raises}" }
func (k keys) raise(id string) string    { return k.prefix + "{raises}:" + escape(id) }
func (k keys) raiseAck(id string) string { return k.prefix + "{raises}:ack:" + escape(id) }
func (k keys) blocks() string            { return k.prefix + "{blocks}" }
func (k keys) block(id string) string    { return k.prefix + "{blocks}:" + escape(id) }
func (k keys) budgets() string           { return k.prefix + "{budgets}" }

// tree is the key of the shared tree of holder esc (an escaped run id).
func (k keys) tree(esc string) string { return k.prefix + "{tree:" + esc + "}" }

// record returns the key of record id (already escaped) of the index
// family index (runs, stops or blocks): the index's name, ":", the id.
func (k keys) record(index, esc string) string { return index + ":" + esc }

// budget is the key of shared budget esc's (budgetEsc) window starting at
// windowStart (server ms since the Unix epoch).
func (k keys) budget(esc string, windowStart int64) string {
	return k.prefix + "{budget:" + esc + "}:" + strconv.FormatInt(windowStart, 10)
}

// budgetOf parses a window key back into the budget's escaped id and the
// window start.
func (k keys) budgetOf(key string) (esc string, windowStart int64, ok bool) {
	rest, found := strings.CutPrefix(key, k.prefix+"{budget:")
	if !found {
		return "", 0, false
	}
	esc, ws, found := strings.Cut(rest, "}:")
	if !found {
		return "", 0, false
	}
	w, err := strconv.ParseInt(ws, 10, 64)
	return esc, w, err == nil
}

// escape makes s safe inside a key or channel name: bytes other than
// ASCII letters, digits, '_', '-' and '.' become %XX. The result never
// contains ':' (the separator), glob characters (* ? [ ] \) or braces (hash
// tags), so one value cannot alias another key or match as a pattern.
func escape(s string) string {
	safe := true
	for i := 0; i < len(s); i++ {
		if !safeByte(s[i]) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if safeByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// unescape reverses escape; malformed input is returned as it is.
func unescape(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s)+0 && i+2 <= len(s)-1 {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func safeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.'
}

// validPrefix reports whether p may be a key prefix: non-empty, printable
// ASCII without glob characters or spaces.
func validPrefix(p string) bool {
	if p == "" || len(p) > 128 {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("*?[]\\{}", c) >= 0 {
			return false
		}
	}
	return true
}
