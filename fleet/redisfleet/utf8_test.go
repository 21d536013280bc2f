package redisfleet

import (
	"testing"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// A label value that is not valid UTF-8 cannot be stored, listed or
// selected as itself (JSON turns it into U+FFFD, so a stop or block on it
// would match in the registry and not in the process, or the reverse): the
// run is refused at once as invalid input, and a selector with it is
// refused, naming the label.
func TestLabelValueNotUTF8(t *testing.T) {
	srv := redistest.Start(t)
	f := newTestFleet(t, srv)
	s, _ := middleware.New("utf8", middleware.WithParticipant(fleet.Membership(f)))
	_, r := s.Start(t.Context(), middleware.WithLabels(map[string]string{"tenant": "a\xff"}))
	r.Finish(nil)
	res := r.Wait()
	if fl, ok := res.Cause.(termination.Failed); !ok || fl.Reason != termination.FailInvalidInput {
		t.Errorf("run with a label value that is not UTF-8: cause %v, want failed: invalid_input", res.Cause)
	}
	if _, err := f.Stop(t.Context(), fleet.StopRequest{Selector: fleet.Selector{Labels: map[string]string{"tenant": "a\xff"}}, Reason: "x"}); err == nil {
		t.Error("Stop with a label value that is not UTF-8: nil error")
	}
}
