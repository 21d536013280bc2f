// Package adk holds agentstop's recipe for Google's Agent Development Kit
// for Go (google.golang.org/adk), tested against a local stand-in.
//
// The module proxy used to build agentstop does not serve
// google.golang.org/adk, so this module cannot import it. ADK's runner
// already returns an iter.Seq2[*session.Event, error], which
// middleware.ForwardSeqEach wraps as it is; all an ADK user needs is a
// decode function from session.Event to termination events. The README
// gives that function; recipe_test.go holds the same function, compiled and
// tested against stand-ins of ADK's session, model and genai types
// (internal/...) with the same names and shapes, and checks that the README
// has not drifted from it.
package adk
