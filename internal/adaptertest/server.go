package adaptertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// responder writes one answer of a scripted model API (see API.Respond).
type responder = func(w http.ResponseWriter, req map[string]any, n int, turn Turn)

// Server is a scripted model API on 127.0.0.1 for adapter tests that drive
// a provider's real SDK (point its base URL at Server.URL), started from an
// [API] ([API.Serve], [API.Start]): it answers the n-th POST to the API's
// path with the script's n-th turn (following Script.Repeat), through the
// API's Respond or Stream, and counts the requests.
// A request to another path is a 404, a body that is not JSON a 400, a
// request past the end of a script that does not repeat a 500, each with
// an error body of the shape the provider APIs share.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:port.
	URL string

	srv     *httptest.Server
	path    string
	script  Script
	respond responder

	mu       sync.Mutex
	requests []map[string]any
}

// startServer starts a Server answering POSTs to path; the caller closes
// it.
func startServer(path string, script Script, respond responder) (*Server, error) {
	if respond == nil || len(script.Turns) == 0 {
		return nil, fmt.Errorf("adaptertest: a scripted server needs the API's Respond and a script with turns")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{path: path, script: script, respond: respond}
	s.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(s.serve)}}
	s.srv.Start()
	s.URL = s.srv.URL
	return s, nil
}

// newServer starts a Server that is closed when t ends.
func newServer(t testing.TB, path string, script Script, respond responder) *Server {
	t.Helper()
	s, err := startServer(path, script, respond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// API is a provider's model API as a scripted [Server] gives it: the path
// its SDK posts to and the functions that answer in the API's encoding.
// An adapter's tests declare it once, start servers from it and run the
// scenario checks of their tool loops against it ([API.CheckNaturalCompletion],
// [API.CheckTruncatedAnswer], [API.CheckStopCancelsLoop]).
type API struct {
	Path string
	// Respond writes one answer of the API: turn, the script's answer to
	// request n (0-based), in the API's own encoding; req is the request's
	// JSON body. It answers the requests that do not ask for a stream
	// ("stream": true in the body), and those that do when Stream is nil.
	Respond func(w http.ResponseWriter, req map[string]any, n int, turn Turn)
	// Stream answers, like Respond, the requests that ask for a stream,
	// as a stream.
	Stream func(w http.ResponseWriter, req map[string]any, n int, turn Turn)
}

// responder returns the function that serves the API's requests.
func (a API) responder() responder {
	if a.Stream == nil || a.Respond == nil {
		return a.Respond
	}
	return func(w http.ResponseWriter, req map[string]any, n int, turn Turn) {
		if asksForStream(req) {
			a.Stream(w, req, n, turn)
			return
		}
		a.Respond(w, req, n, turn)
	}
}

// Serve starts a Server for the API that answers with turns, the last one
// forever when repeat is set, and is closed when t ends.
func (a API) Serve(t testing.TB, repeat bool, turns ...Turn) *Server {
	t.Helper()
	return newServer(t, a.Path, Script{Turns: turns, Repeat: repeat}, a.responder())
}

// Start starts a Server for the API that answers with script; the caller
// closes it. Tests use [API.Serve]; Start is for the adapters' Example helpers.
func (a API) Start(script Script) (*Server, error) {
	return startServer(a.Path, script, a.responder())
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// HTTPClient returns an HTTP client for the server.
func (s *Server) HTTPClient() *http.Client { return s.srv.Client() }

// Requests returns how many answers the server was asked for.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Request returns the JSON body of the i-th request (0-based).
func (s *Server) Request(i int) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.requests) {
		return nil
	}
	return s.requests[i]
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != s.path {
		writeError(w, http.StatusNotFound, "not_found_error", "not found")
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "bad json")
		return
	}
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	turn, ok := s.script.TurnAt(n)
	if !ok {
		writeError(w, http.StatusInternalServerError, "api_error", "script exhausted")
		return
	}
	s.respond(w, req, n, turn)
}

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q}}`, typ, msg)
}

// asksForStream reports whether a request's JSON body asks for a stream.
func asksForStream(req map[string]any) bool {
	s, _ := req["stream"].(bool)
	return s
}
