package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A notification as Alertmanager 0.25 posts it (trimmed of fields alertlog
// does not read, which it must ignore).
const stallNotification = `{
  "version": "4", "groupKey": "{}:{alertname=\"AgentStageStallRateHigh\"}", "truncatedAlerts": 0,
  "status": "firing", "receiver": "warning",
  "groupLabels": {"alertname": "AgentStageStallRateHigh"},
  "commonLabels": {"alertname": "AgentStageStallRateHigh", "severity": "warning"},
  "externalURL": "http://127.0.0.1:9093",
  "alerts": [{
    "status": "firing",
    "labels": {"alertname": "AgentStageStallRateHigh", "severity": "warning", "stage": "researcher", "termination_cause": "stall"},
    "annotations": {"summary": "Stage researcher: 33.33% of runs stop on a stall"},
    "startsAt": "2026-11-23T11:00:00Z", "endsAt": "0001-01-01T00:00:00Z", "fingerprint": "abc"
  }]
}`

func post(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
	return w
}

func TestReceiveLogsAndKeepsAlerts(t *testing.T) {
	var out bytes.Buffer
	l := newLog(2, &out)
	l.now = func() time.Time { return time.Date(2026, 11, 23, 11, 5, 0, 0, time.UTC) }
	h := l.handler()

	w := post(t, h, http.MethodPost, "/webhook", stallNotification)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "2026-11-23T11:05:00Z FIRING [warning] AgentStageStallRateHigh stage=researcher termination_cause=stall receiver=warning: Stage researcher: 33.33% of runs stop on a stall\n", out.String())

	budget := strings.NewReplacer("AgentStageStallRateHigh", "AgentStageBudgetExhausted", "researcher", "summarizer").Replace(stallNotification)
	require.Equal(t, http.StatusOK, post(t, h, http.MethodPost, "/webhook", budget).Code)
	resolved := strings.Replace(stallNotification, `"status": "firing",
    "labels"`, `"status": "resolved",
    "labels"`, 1)
	require.Equal(t, http.StatusOK, post(t, h, http.MethodPost, "/webhook", resolved).Code)

	// Only the latest two are kept, newest first.
	w = post(t, h, http.MethodGet, "/api/alerts", "")
	require.Equal(t, http.StatusOK, w.Code)
	var got []Received
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	require.Len(t, got, 2)
	assert.Equal(t, "resolved", got[0].Status)
	assert.Equal(t, "AgentStageBudgetExhausted", got[1].Labels["alertname"])
	assert.Equal(t, "summarizer", got[1].Labels["stage"])
	assert.Equal(t, "warning", got[1].Receiver)

	w = post(t, h, http.MethodGet, "/", "")
	assert.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"))
	assert.Regexp(t, `(?s)^alertlog: 2 alerts received.*RESOLVED \[warning\] AgentStageStallRateHigh.*FIRING \[warning\] AgentStageBudgetExhausted stage=summarizer`, w.Body.String())
}

func TestReceiveRejectsBadNotifications(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		msg                      string
	}{
		{"not JSON", "POST", "/webhook", "hello", 400, "not an Alertmanager webhook notification"},
		{"wrong type", "POST", "/webhook", `{"version": 4}`, 400, "not an Alertmanager webhook notification"},
		{"two values", "POST", "/webhook", stallNotification + "{}", 400, "more than one JSON value"},
		{"old version", "POST", "/webhook", strings.Replace(stallNotification, `"version": "4"`, `"version": "3"`, 1), 400, `version: want "4"`},
		{"no receiver", "POST", "/webhook", strings.Replace(stallNotification, `"receiver": "warning"`, `"receiver": ""`, 1), 400, "receiver: missing"},
		{"no alerts", "POST", "/webhook", `{"version":"4","receiver":"x","alerts":[]}`, 400, "alerts: missing or empty"},
		{"no alertname", "POST", "/webhook", `{"version":"4","receiver":"x","alerts":[{"status":"firing","labels":{}}]}`, 400, "alerts[0].labels.alertname: missing"},
		{"bad status", "POST", "/webhook", `{"version":"4","receiver":"x","alerts":[{"status":"on","labels":{"alertname":"A"}}]}`, 400, `alerts[0].status: want firing or resolved, got "on"`},
		{"too big", "POST", "/webhook", `{"version":"4","receiver":"` + strings.Repeat("x", maxBody) + `"}`, 413, "larger than 1 MiB"},
		{"GET webhook", "GET", "/webhook", "", 405, "POST an Alertmanager webhook"},
		{"POST list", "POST", "/api/alerts", "", 405, "GET /api/alerts"},
		{"unknown page", "GET", "/nope", "", 404, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			l := newLog(10, &out)
			w := post(t, l.handler(), tc.method, tc.path, tc.body)
			assert.Equal(t, tc.code, w.Code)
			assert.Contains(t, w.Body.String(), tc.msg)
			assert.Empty(t, out.String(), "nothing logged")
			assert.Empty(t, l.latest())
		})
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, "127.0.0.1:0", 5, out) }()
	addrRE := regexp.MustCompile(`webhooks on http://(\S+)/webhook`)
	var addr string
	require.Eventually(t, func() bool {
		if m := addrRE.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	}, 5*time.Second, 10*time.Millisecond)

	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Post("http://"+addr+"/webhook", "application/json", strings.NewReader(stallNotification))
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, out.String(), "FIRING [warning] AgentStageStallRateHigh")

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}

func TestRunReportsBadOptions(t *testing.T) {
	assert.ErrorContains(t, run(context.Background(), "127.0.0.1:0", 0, io.Discard), "-keep must be >= 1, got 0")
	assert.ErrorContains(t, run(context.Background(), "256.0.0.1:bad", 1, io.Discard), "listen on 256.0.0.1:bad")
}
