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
// a key, so a value can never form another key or act as a pattern.
//
// Layout (P is the prefix):
//
//	P runs                     sorted set: run id → lease expiry (server ms)
//	P run:ID                   hash: the run's registry entry, TTL = lease
//	P ctl                      pub/sub channel: stops, blocks, unblocks, budget news
//	P stops                    sorted set: stop id → expiry (server ms)
//	P stop:ID                  hash: a stop's selector, reason, by, at; TTL
//	P stopack:ID               list: run ids whose owners confirmed stop ID; TTL
//	P blocks                   sorted set: block id → expiry (server ms, +inf for none)
//	P block:ID                 hash: a block's selector, reason, by, at, expires
//	P budgets                  sorted set: budget key → its window's end (server ms)
//	P budget:S:NAME:VALUE:W    hash: one shared budget's window starting at W (ms)
//
// S is "stage" or "label"; NAME and VALUE are escaped.
type keys struct {
	prefix string
}

func (k keys) runs() string             { return k.prefix + "runs" }
func (k keys) run(id string) string     { return k.prefix + "run:" + escape(id) }
func (k keys) ctl() string              { return k.prefix + "ctl" }
func (k keys) stops() string            { return k.prefix + "stops" }
func (k keys) stop(id string) string    { return k.prefix + "stop:" + escape(id) }
func (k keys) stopAck(id string) string { return k.prefix + "stopack:" + escape(id) }
func (k keys) blocks() string           { return k.prefix + "blocks" }
func (k keys) block(id string) string   { return k.prefix + "block:" + escape(id) }
func (k keys) budgets() string          { return k.prefix + "budgets" }
func (k keys) runPrefix() string        { return k.prefix + "run:" }
func (k keys) blockPrefix() string      { return k.prefix + "block:" }
func (k keys) stopPrefix() string       { return k.prefix + "stop:" }
func (k keys) budgetPrefix() string     { return k.prefix + "budget:" }
func (k keys) budgetID(b budgetRef) string {
	return escape(b.scope) + ":" + escape(b.name) + ":" + escape(b.value)
}

// budget is the key of budget b's window starting at windowStart (server
// ms since the Unix epoch).
func (k keys) budget(b budgetRef, windowStart int64) string {
	return k.prefix + "budget:" + k.budgetID(b) + ":" + strconv.FormatInt(windowStart, 10)
}

// budgetRef names a shared budget: scope "stage" (name is the stage) or
// "label" (name is the label's name), and the key's value.
type budgetRef struct {
	scope, name, value string
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
