package redisfleet

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentstop/agentstop/internal/redistest"
)

// keyGuard is Lua put before every script the tests run: it shadows redis
// with a table whose call and pcall check, before calling the real one,
// that every key argument of the command is one of KEYS. A script that
// touches a key it was not given (and so may fall in another slot of a
// cluster, or escape an ACL's key patterns) fails with "agentstop key
// guard". Commands are listed by where their keys are; a command the list
// does not know fails too, so a new command in a script must be added here
// with its key positions.
const keyGuard = `
local __real = redis
local __given = {}
for _, k in ipairs(KEYS) do __given[k] = true end
local __first = {GET=1, SET=1, PEXPIRE=1, PEXPIREAT=1, ZADD=1, ZREM=1, ZRANGEBYSCORE=1,
  ZREMRANGEBYSCORE=1, HSET=1, HSETNX=1, HGET=1, HGETALL=1, HDEL=1, HEXISTS=1,
  HINCRBYFLOAT=1, RPUSH=1}
local __every = {DEL=1, EXISTS=1, MGET=1}
local __none = {TIME=1, PUBLISH=1}
local function __check(cmd, ...)
  local c = string.upper(cmd)
  local args = {...}
  if __none[c] then return end
  local n = 0
  if __first[c] then n = 1 elseif __every[c] then n = #args else
    error('agentstop key guard: command ' .. c .. ' has no known key positions')
  end
  for i = 1, n do
    if not __given[args[i]] then
      error('agentstop key guard: ' .. c .. ' touches ' .. tostring(args[i]) .. ', not in KEYS')
    end
  end
end
local redis = setmetatable({
  call = function(cmd, ...) __check(cmd, ...); return __real.call(cmd, ...) end,
  pcall = function(cmd, ...) __check(cmd, ...); return __real.pcall(cmd, ...) end,
}, {__index = __real})
`

// guarded runs every script with keyGuard in front (by EVAL: EVALSHA
// answers NOSCRIPT, so Script.Run falls back to the source) and records
// the guard's failures.
type guarded struct {
	redis.Scripter
	mu         sync.Mutex
	violations []string
}

func (g *guarded) noScript(ctx context.Context) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(redis.ErrNoScript)
	return cmd
}

func (g *guarded) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return g.noScript(ctx)
}

func (g *guarded) EvalShaRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return g.noScript(ctx)
}

func (g *guarded) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	return g.record(g.Scripter.Eval(ctx, keyGuard+src, keys, args...))
}

func (g *guarded) EvalRO(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	return g.record(g.Scripter.EvalRO(ctx, keyGuard+src, keys, args...))
}

func (g *guarded) record(cmd *redis.Cmd) *redis.Cmd {
	if err := cmd.Err(); err != nil && strings.Contains(err.Error(), "agentstop key guard") {
		g.mu.Lock()
		g.violations = append(g.violations, err.Error())
		g.mu.Unlock()
	}
	return cmd
}

func (g *guarded) failures() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.violations...)
}

// withKeyGuard makes a Fleet or Control run its scripts under keyGuard and
// fails t, when it ends, for every key a script touched without being
// given it.
func withKeyGuard(t testing.TB) Option {
	return optionFunc(func(c *config) {
		c.scripter = func(s redis.Scripter) redis.Scripter {
			g := &guarded{Scripter: s}
			t.Cleanup(func() {
				for _, v := range g.failures() {
					t.Errorf("a script touched a key it was not given: %s", v)
				}
			})
			return g
		}
	})
}

// TestKeyGuardCatches: the guard the tests run every script under fails a
// script that touches a key outside KEYS (in its slot or not), and lets
// the same script through when the key is given.
func TestKeyGuardCatches(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		c := rawClient(t, r)
		g := &guarded{Scripter: c}
		bad := redis.NewScript(`redis.call('SET', KEYS[1], '1'); return redis.call('GET', KEYS[1] .. ':other')`)
		tagged := "agentstop:{guard}"
		if err := bad.Run(t.Context(), g, []string{tagged}).Err(); err == nil || !strings.Contains(err.Error(), "touches "+tagged+":other") {
			t.Errorf("an undeclared key in the same slot: err = %v, want the guard's error", err)
		}
		if err := bad.Run(t.Context(), g, []string{tagged, tagged + ":other"}).Err(); err != nil && !strings.Contains(err.Error(), "nil") {
			t.Errorf("the key given: err = %v", err)
		}
		unknown := redis.NewScript(`return redis.call('INCR', KEYS[1])`)
		if err := unknown.Run(t.Context(), g, []string{tagged}).Err(); err == nil || !strings.Contains(err.Error(), "no known key positions") {
			t.Errorf("a command the guard does not know: err = %v", err)
		}
		if n := len(g.failures()); n != 2 {
			t.Errorf("recorded %d violations, want 2: %q", n, g.failures())
		}
	})
}
