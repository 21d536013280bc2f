package redisfleet

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestStoredStopIsReRead: a stop whose message a process never received
// (stored, not published) still ends the runs that started before it,
// from the stored record, and not the runs that started after it.
func TestStoredStopIsReRead(t *testing.T) {
	srv := redistest.Start(t)
	f := newTestFleet(t, srv)
	s, _ := middleware.New("reread", middleware.WithParticipant(fleet.Membership(f)))
	_, before := s.Start(t.Context())
	defer before.Finish(nil)
	if err := f.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	ro, _ := parseURL(srv.URL())
	raw := redis.NewClient(ro)
	defer raw.Close()
	time.Sleep(50 * time.Millisecond) // clearly before: the offset estimate is good to a few ms
	now, err := raw.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	at := now.UnixMilli()
	time.Sleep(50 * time.Millisecond)
	_, after := s.Start(t.Context())
	defer after.Finish(nil)

	id := runid.New()
	body, _ := json.Marshal(recordBody{Selector: fleet.Selector{Stage: "reread"}, Reason: "missed", By: "ops"})
	exp := at + 60_000
	v := "stop " + id + " " + strconv.FormatInt(at, 10) + " " + strconv.FormatInt(exp, 10) + " " + string(body)
	if err := raw.Set(context.Background(), f.k.stop(id), v, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := raw.ZAdd(context.Background(), f.k.stops(), redis.Z{Score: float64(exp), Member: id}).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "the stored stop ends the earlier run", func() bool {
		_, done := before.Cause()
		return done
	})
	c, _ := before.Cause()
	if x, ok := c.(termination.Cancelled); !ok || x.Detail != "missed (by ops)" {
		t.Errorf("cause = %v", c)
	}
	time.Sleep(1200 * time.Millisecond) // another re-read
	if c, done := after.Cause(); done {
		t.Errorf("a run that started after the stop ended: %v", c)
	}
	acks, _ := raw.LRange(context.Background(), f.k.stopAck(id), 0, -1).Result()
	if len(acks) != 2 || acks[0] != "s "+before.ID() || acks[1] != "p "+f.proc {
		t.Errorf("confirmations = %q", acks)
	}
}

// TestUnreachableAtStart: New returns quickly when the server cannot be
// reached; fail-open runs start, fail-closed runs are skipped with a
// detail that names the address and never the password.
func TestUnreachableAtStart(t *testing.T) {
	url := "redis://app:s3cret-pw@127.0.0.1:1"
	start := time.Now()
	open, err := New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close(context.Background())
	closed, err := New(context.Background(), url, WithFailClosed())
	if err != nil {
		t.Fatal(err)
	}
	defer closed.Close(context.Background())
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("New took %s", d)
	}
	so, _ := middleware.New("down", middleware.WithParticipant(fleet.Membership(open)))
	_, r := so.Start(t.Context())
	if c, done := r.Cause(); done {
		t.Errorf("fail-open run ended at once: %v", c)
	}
	r.Finish(nil)
	sc, _ := middleware.New("down", middleware.WithParticipant(fleet.Membership(closed)))
	_, r = sc.Start(t.Context())
	res := r.Finish(nil)
	sk, ok := res.Cause.(termination.Skipped)
	if !ok || sk.Reason != termination.SkipFleetUnavailable || !strings.Contains(sk.Detail, "127.0.0.1:1") || strings.Contains(sk.Detail, "s3cret") {
		t.Errorf("fail-closed cause = %#v", res.Cause)
	}
	if _, err := New(context.Background(), "redis://app:s3cret-pw@h:port"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("New with a malformed URL: %v", err)
	}
}
