package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// DecodeEvents decodes data, a provider API's JSON response, into a T
// (the SDK's type for it) and returns the events decode (an adapter's
// Events function) emits for it, in order.
func DecodeEvents[T any](data string, decode func(*T, func(termination.Event))) ([]termination.Event, error) {
	var v T
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		return nil, fmt.Errorf("adaptertest: decoding a %T: %w", v, err)
	}
	var got []termination.Event
	decode(&v, func(ev termination.Event) { got = append(got, ev) })
	return got, nil
}

// DiffEvents compares the events an adapter's decoder emitted with the
// ones a test wants: the same number, and each alike in kind, source,
// text, tool, arguments, call id, model, usage, cost and error. It returns
// an error naming the events that differ (arguments shown as text).
func DiffEvents(got, want []termination.Event) error {
	if len(got) != len(want) {
		return fmt.Errorf("got %d events %+v, want %d", len(got), got, len(want))
	}
	var errs []error
	for i := range got {
		g, w := got[i], want[i]
		if g.Kind != w.Kind || g.Source != w.Source || g.Text != w.Text || g.Tool != w.Tool ||
			string(g.Args) != string(w.Args) || g.CallID != w.CallID || g.Model != w.Model ||
			g.Usage != w.Usage || g.Cost != w.Cost || g.Err != w.Err {
			errs = append(errs, fmt.Errorf("event %d = %+v (args %s), want %+v (args %s)", i, g, g.Args, w, w.Args))
		}
	}
	return errors.Join(errs...)
}

// CheckToolResultEvent checks an adapter's tool_result event builder, given
// as result: its output and error for a call to a tool named "search".
// A result without error is a tool_result of search with the output as its
// text and no error; a failed one carries the error's text and reports
// itself Failed. It returns an error naming what is wrong.
func CheckToolResultEvent(result func(output string, err error) termination.Event) error {
	ok := result("3 hits", nil)
	if ok.Kind != termination.KindToolResult || ok.Tool != "search" || ok.Text != "3 hits" || ok.Err != "" {
		return fmt.Errorf("result of search (3 hits, no error) = %+v, want a tool_result of search with text 3 hits", ok)
	}
	failed := result("", errors.New("timeout"))
	if failed.Kind != termination.KindToolResult || failed.Err != "timeout" || !failed.Failed() {
		return fmt.Errorf("result of search (error timeout) = %+v, want a failed tool_result with Err timeout", failed)
	}
	return nil
}

// CheckObserveError checks an adapter's ObserveError: an error it reports
// counts for the errors condition, so under "errors: {total: 1}" the first
// one stops the run. It returns an error when it does not.
func CheckObserveError(observe func(run *middleware.Run, err error) (termination.Cause, bool)) error {
	p, err := termination.ParsePolicy([]byte("errors: {total: 1}"))
	if err != nil {
		return err
	}
	stage, err := middleware.New("adaptertest_observe_error", middleware.WithPolicy(p))
	if err != nil {
		return err
	}
	_, run := stage.Start(context.Background())
	defer run.Finish(nil)
	cause, stop := observe(run, errors.New("429"))
	var failed termination.Failed
	if !stop || !errors.As(cause, &failed) || failed.Reason != termination.FailErrorThreshold {
		return fmt.Errorf("ObserveError under errors total 1 = %#v, %v; want Failed{error_threshold}, true", cause, stop)
	}
	return nil
}
