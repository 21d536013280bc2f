package termination

import (
	"fmt"
	"strings"
)

// ErrorLimits configures the error threshold; set at least one, each > 0.
type ErrorLimits struct {
	// Consecutive watches two streaks and fires when either reaches it:
	// failed tool_results in a row, reset only by a successful tool_result
	// (model turns in between do not reset it), and error events in a row,
	// reset by a message or final event.
	Consecutive int
	// Total counts error events and failed tool results in the run.
	Total int
}

// Errors fires Failed{reason: error_threshold} when error events and failed
// tool results reach either limit.
func Errors(l ErrorLimits) Condition {
	return &errorLimit{consecutive: nonZero(l.Consecutive), total: nonZero(l.Total)}
}

type errorLimit struct{ consecutive, total setting[int] }

func (c *errorLimit) String() string {
	var parts []string
	if c.consecutive.set {
		parts = append(parts, fmt.Sprintf("consecutive: %d", c.consecutive.v))
	}
	if c.total.set {
		parts = append(parts, fmt.Sprintf("total: %d", c.total.v))
	}
	return "errors: {" + strings.Join(parts, ", ") + "}"
}

func (c *errorLimit) validate() error {
	if !c.consecutive.set && !c.total.set {
		return badSetting("errors", "", "needs consecutive or total")
	}
	if err := positive("errors", "consecutive", c.consecutive); err != nil {
		return err
	}
	return positive("errors", "total", c.total)
}

func (c *errorLimit) start() check { return &errorCheck{errorLimit: c} }

type errorCheck struct {
	*errorLimit
	failedResults int // failed tool_results in a row
	errorEvents   int // error events in a row
	seen          int // error events and failed tool_results in the run
}

func (c *errorCheck) observe(ev *Event, _ *Progress, s *sink) {
	if ev == nil {
		return
	}
	streak := 0
	switch ev.Kind {
	case KindToolResult:
		if ev.Err == "" {
			c.failedResults = 0
			return
		}
		c.failedResults++
		streak = c.failedResults
	case KindError:
		c.errorEvents++
		streak = c.errorEvents
	case KindMessage, KindFinal:
		c.errorEvents = 0
		return
	default:
		return
	}
	c.seen++
	if (c.consecutive.set && streak >= c.consecutive.v) || (c.total.set && c.seen >= c.total.v) {
		s.fire(Failed{Reason: FailErrorThreshold, Err: ev.ErrorText()})
	}
}
