package redisfleet

import (
	"strings"
	"testing"
)

// A URL whose "@" after user:password is missing puts the credentials in
// the host part ("redis://app:s3cret127.0.0.1:6379" parses as host
// "app:s3cret127.0.0.1"): parseURL must reject it without echoing it, and
// Redact must not print it, or the password reaches a dial error or the
// quickstart's banner.
func TestURLMissingAt(t *testing.T) {
	for _, raw := range []string{
		"redis://app:s3cret127.0.0.1:6379",
		"rediss://app:s3cret127.0.0.1:6380/1",
		"redis://app:s3cret:6379",
	} {
		_, err := parseURL(raw)
		if err == nil {
			t.Errorf("parseURL(%q) = nil error, want one naming a malformed host", raw)
		} else {
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("parseURL(%q) error shows the password: %v", raw, err)
			}
			if !strings.Contains(err.Error(), "malformed redis URL") {
				t.Errorf("parseURL(%q) err = %v, want malformed redis URL", raw, err)
			}
		}
		if got := Redact(raw); strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) = %q shows the password", raw, got)
		}
	}
	// A bracketed IPv6 host stays valid.
	if o, err := parseURL("redis://app:s3cret@[::1]:6379"); err != nil || o.Addr != "[::1]:6379" {
		t.Errorf("parseURL(IPv6) = %v, %v; want addr [::1]:6379", o, err)
	}
}

// Errors net/url reports with a "net/url: " prefix keep what is wrong:
// "malformed redis URL: net/url" says nothing.
func TestURLErrorNamesProblem(t *testing.T) {
	for _, raw := range []string{"redis://app:s3c ret@h:1", "redis://app:s3c\nret@h:1"} {
		_, err := parseURL(raw)
		if err == nil {
			t.Fatalf("parseURL(%q) = nil error", raw)
		}
		msg := err.Error()
		if strings.Contains(msg, "s3c") || strings.HasSuffix(msg, "net/url") {
			t.Errorf("parseURL(%q) err = %q: want the problem named, no credentials", raw, msg)
		}
	}
}
