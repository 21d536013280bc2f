package redisfleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url     string
		addr    string
		user    string
		pass    string
		db      int
		tls     bool
		wantErr string
	}{
		{url: "redis://127.0.0.1:6379", addr: "127.0.0.1:6379"},
		{url: "redis://localhost", addr: "localhost:6379"},
		{url: "redis://app:s3cret@redis.example:6380/2", addr: "redis.example:6380", user: "app", pass: "s3cret", db: 2},
		{url: "redis://:onlypass@h:1", addr: "h:1", pass: "onlypass"},
		{url: "rediss://app:p%40ss@h:6380", addr: "h:6380", user: "app", pass: "p@ss", tls: true},
		{url: "", wantErr: "empty"},
		{url: "http://h:1", wantErr: `scheme "http"`},
		{url: "127.0.0.1:6379", wantErr: "malformed redis URL"},
		{url: "redis://app:s3cret@h:1/x", wantErr: "database"},
		{url: "redis://app:s3cret@h:port", wantErr: "malformed redis URL"},
		{url: "redis://app:s3cret@[::1", wantErr: "malformed redis URL"},
		{url: "redis:///0", wantErr: "no host"},
	} {
		o, err := parseURL(tc.url)
		if urlCaseDone(t, "parseURL", tc.url, err, tc.wantErr) {
			continue
		}
		if o.Addr != tc.addr || o.Username != tc.user || o.Password != tc.pass || o.DB != tc.db || (o.TLSConfig != nil) != tc.tls {
			t.Errorf("parseURL(%q) = addr %q user %q pass %q db %d tls %v", tc.url, o.Addr, o.Username, o.Password, o.DB, o.TLSConfig != nil)
		}
	}
}

// urlCaseDone checks a URL parser's error against wantErr ("": none) and
// that it never shows the password, and reports whether the case ends
// there (an error, wanted or not).
func urlCaseDone(t *testing.T, parser, url string, err error, wantErr string) bool {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("%s(%q) error shows the password: %v", parser, url, err)
	}
	switch {
	case wantErr != "":
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s(%q) err = %v, want %q", parser, url, err, wantErr)
		}
		return true
	case err != nil:
		t.Errorf("%s(%q): %v", parser, url, err)
		return true
	}
	return false
}

func TestParseClusterURL(t *testing.T) {
	for _, tc := range []struct {
		url        string
		addrs      string
		user, pass string
		tls        bool
		wantErr    string
	}{
		{url: "redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002", addrs: "127.0.0.1:7000 127.0.0.1:7001 127.0.0.1:7002"},
		{url: "redis://app:s3cret@n1:7000/?addr=n2:7000", addrs: "n1:7000 n2:7000", user: "app", pass: "s3cret"},
		{url: "redis://app:s3cret@n1:7000/0?addr=n2:7000", addrs: "n1:7000 n2:7000", user: "app", pass: "s3cret"},
		{url: "rediss://:s3cret@n1:7000?addr=n2:7000", addrs: "n1:7000 n2:7000", pass: "s3cret", tls: true},
		{url: "redis://n1:7000", addrs: "n1:7000"}, // a seed node (WithCluster)
		{url: "redis://app:s3cret@n1:7000/2?addr=n2:7000", wantErr: "has no database"},
		{url: "redis://app:s3cret@n1:7000?addr=n2", wantErr: "unable to parse addr param"},
		{url: "redis://app:s3cret@n1:7000?addr=n2:1&bogus=1", wantErr: "malformed redis URL"},
		{url: "http://n1:7000?addr=n2:1", wantErr: `scheme "http"`},
		{url: "redis://app:s3cret@?addr=n2:1", wantErr: "no host"},
	} {
		o, err := parseClusterURL(tc.url)
		if urlCaseDone(t, "parseClusterURL", tc.url, err, tc.wantErr) {
			continue
		}
		if got := strings.Join(o.Addrs, " "); got != tc.addrs || o.Username != tc.user || o.Password != tc.pass || (o.TLSConfig != nil) != tc.tls {
			t.Errorf("parseClusterURL(%q) = addrs %q user %q pass %q tls %v", tc.url, got, o.Username, o.Password, o.TLSConfig != nil)
		}
	}
	// One server's parser refuses a cluster URL rather than dropping its nodes.
	if _, err := parseURL("redis://n1:7000?addr=n2:7000"); err == nil || !strings.Contains(err.Error(), "Redis Cluster") {
		t.Errorf("parseURL(cluster URL) err = %v, want one naming the cluster form", err)
	}
	for url, want := range map[string]bool{"redis://a:1?addr=b:1": true, "redis://a:1": false, "redis://a:1/0?protocol=3": false, "%zz": false} {
		if got := isClusterURL(url); got != want {
			t.Errorf("isClusterURL(%q) = %v", url, got)
		}
	}
	if err := CheckURL("redis://a:1?addr=b:1"); err != nil {
		t.Errorf("CheckURL(cluster) = %v", err)
	}
	if err := CheckURL("redis://a:1?addr=b"); err == nil {
		t.Errorf("CheckURL(bad cluster) = nil")
	}
}

// TestWithCluster: a URL naming one node of a cluster works with
// WithCluster (the client learns the other nodes from it), and the
// Control's errors name the nodes, never the credentials.
func TestWithCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	f := newTestFleet(t, cl.Nodes[1], WithCluster())
	if f.cluster == nil {
		t.Fatal("WithCluster: not a cluster client")
	}
	if _, err := f.Block(t.Context(), fleetBlock("withcluster")); err != nil {
		t.Fatal(err)
	}
	bs, err := f.Blocks(t.Context())
	if err != nil || len(bs) != 1 {
		t.Fatalf("Blocks = %+v, %v", bs, err)
	}
	c, err := NewControl("redis://app:s3cret@127.0.0.1:1?addr=127.0.0.1:2", WithTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Runs(t.Context(), fleet.Selector{})
	if err == nil || !strings.Contains(err.Error(), "redis at 127.0.0.1:1,127.0.0.1:2") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("unreachable cluster: err = %v", err)
	}
}

func fleetBlock(stage string) fleet.BlockRequest {
	return fleet.BlockRequest{Selector: fleet.Selector{Stage: stage}, Reason: "test", By: "test"}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://app:s3cret@h:1/0":                   "redis://xxxxx:xxxxx@h:1/0",
		"redis://app@h:1":                            "redis://xxxxx@h:1",
		"redis://h:1":                                "redis://h:1",
		"redis://app:s3cret@h:1?addr=h2:1&addr=h3:1": "redis://xxxxx:xxxxx@h:1?addr=h2:1&addr=h3:1",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"redis://u:secretpw@h:1/0", "rediss://:secretpw@[::1]:6379", "redis://u:secretpw@h:x", "redis://u:secretpw@%zz"} {
		f.Add(s)
	}
	f.Add("redis://u:secretpw@h:1?addr=bad")
	f.Add("redis://u:secretpw@h:1/2?addr=h2:1")
	f.Fuzz(func(t *testing.T, raw string) {
		_, err := parseURL(raw)
		_, cerr := parseClusterURL(raw)
		// The property: "secretpw" that stands only in the URL's userinfo
		// (after "://", before the last "@") never shows in an error.
		// (Elsewhere, as a scheme or a host, an error may name it.)
		i, at := strings.Index(raw, "://"), strings.LastIndex(raw, "@")
		if i < 0 || at < i+3 {
			return
		}
		userinfo := raw[i+3 : at]
		if !strings.Contains(userinfo, "secretpw") || strings.Count(raw, "secretpw") != strings.Count(userinfo, "secretpw") {
			return
		}
		for _, err := range []error{err, cerr} {
			if err != nil && strings.Contains(err.Error(), "secretpw") {
				t.Fatalf("parsing %q: the error shows the password: %v", raw, err)
			}
		}
	})
}

// TestACLCredentials: a server with an ACL user accepts the URL's
// credentials; wrong ones fail with an error that shows neither.
func TestACLCredentials(t *testing.T) {
	srv := redistest.Start(t)
	for _, cmd := range [][]string{
		{"ACL", "SETUSER", "app", "on", ">app-s3cret", "~*", "&*", "+@all"},
		{"ACL", "SETUSER", "default", "off"},
	} {
		if r, err := srv.Do(cmd...); err != nil || r != "+OK" {
			t.Fatalf("%v: %q, %v", cmd, r, err)
		}
	}
	c, err := NewControl("redis://app:app-s3cret@" + srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Blocks(context.Background()); err != nil {
		t.Fatalf("with the right credentials: %v", err)
	}
	bad, err := NewControl("redis://app:wrong-s3cret@" + srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	_, err = bad.Blocks(context.Background())
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "app:") {
		t.Fatalf("with a wrong password: err = %v, want an error without credentials", err)
	}
}
