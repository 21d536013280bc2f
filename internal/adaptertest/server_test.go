package adaptertest_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentstop/agentstop/internal/adaptertest"
)

// TestAPI: an API's server answers the n-th POST to its path with the
// script's n-th turn, through Stream when the request asks for a stream
// and Respond otherwise, and answers what it cannot serve with an error.
func TestAPI(t *testing.T) {
	answer := func(how string) func(http.ResponseWriter, map[string]any, int, adaptertest.Turn) {
		return func(w http.ResponseWriter, _ map[string]any, n int, turn adaptertest.Turn) {
			fmt.Fprintf(w, "%s %d %s", how, n, turn.Text)
		}
	}
	api := adaptertest.API{Path: "/v1/chat", Respond: answer("json"), Stream: answer("stream")}
	s := api.Serve(t, false, adaptertest.NewTurn("one", 1, 1), adaptertest.NewTurn("two", 1, 1))
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := s.HTTPClient().Post(s.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/v1/chat", `{"stream":false}`, 200, "json 0 one"},
		{"/v1/chat", `{"stream":true}`, 200, "stream 1 two"},
		{"/v1/chat", `{}`, 500, "script exhausted"},
		{"/v1/other", `{}`, 404, "not_found_error"},
		{"/v1/chat", `not json`, 400, "bad json"},
	} {
		if code, body := post(tc.path, tc.body); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s %s = %d %q, want %d with %q", tc.path, tc.body, code, body, tc.code, tc.want)
		}
	}
	if got := s.Requests(); got != 3 {
		t.Errorf("requests = %d, want 3 (the JSON ones to the API's path)", got)
	}
	if got := s.Request(1); got["stream"] != true {
		t.Errorf("request 1 = %v, want the streamed one", got)
	}

	// Without Stream, Respond answers every request; Start is for Examples.
	one, err := adaptertest.API{Path: "/", Respond: answer("any")}.Start(adaptertest.Script{Repeat: true, Turns: []adaptertest.Turn{{Text: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	resp, err := one.HTTPClient().Post(one.URL+"/", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "any 0 x" {
		t.Errorf("answer = %q, want any 0 x", b)
	}
}
