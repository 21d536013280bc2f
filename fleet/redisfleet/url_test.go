package redisfleet

import (
	"context"
	"strings"
	"testing"

	"github.com/agentstop/agentstop/fleet/redisfleet/redistest"
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
		o, err := ParseURL(tc.url)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseURL(%q) err = %v, want %q", tc.url, err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("ParseURL(%q) error shows the password: %v", tc.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.url, err)
			continue
		}
		if o.Addr != tc.addr || o.Username != tc.user || o.Password != tc.pass || o.DB != tc.db || (o.TLSConfig != nil) != tc.tls {
			t.Errorf("ParseURL(%q) = addr %q user %q pass %q db %d tls %v", tc.url, o.Addr, o.Username, o.Password, o.DB, o.TLSConfig != nil)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://app:s3cret@h:1/0": "redis://xxxxx:xxxxx@h:1/0",
		"redis://app@h:1":          "redis://xxxxx@h:1",
		"redis://h:1":              "redis://h:1",
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
	f.Fuzz(func(t *testing.T, raw string) {
		_, err := ParseURL(raw)
		if err == nil {
			return
		}
		if strings.Contains(raw, "secretpw") && strings.Contains(err.Error(), "secretpw") {
			t.Fatalf("ParseURL(%q) error shows the password: %v", raw, err)
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
