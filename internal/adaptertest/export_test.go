package adaptertest

// CheckSpans checks one run's spans against its events, for the tests of
// the check itself (the suite runs it on every run).
var CheckSpans = checkRunSpans

// SpanWant is what CheckSpans expects of one run's spans.
type SpanWant = spanWant
