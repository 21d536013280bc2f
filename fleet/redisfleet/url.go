package redisfleet

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// parseURL turns a redis:// or rediss:// URL (with an optional ACL user and
// password, and a database number as its path) into client options. Errors
// never contain the password or the user: they name the part that is wrong.
// A cluster URL (one with addr= parameters) is refused here: see
// parseClusterURL.
func parseURL(raw string) (*redis.Options, error) {
	_, raw, err := checkURL(raw)
	if err != nil {
		return nil, err
	}
	if isClusterURL(raw) {
		return nil, errors.New("malformed redis URL: addr= names the nodes of a Redis Cluster (use it with redisfleet.New, NewControl or the CLI, or drop the addr= parameters)")
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("malformed redis URL: %s", general(strings.TrimPrefix(err.Error(), "redis: "), raw))
	}
	return opts, nil
}

// parseClusterURL turns a Redis Cluster URL in go-redis's form,
// redis://[user:password@]host1:port1?addr=host2:port2&addr=host3:port3
// (or rediss://), into cluster client options: the host of the URL and
// every addr= parameter are seed nodes, from which the client learns the
// cluster's slots. A cluster has no database number: a path other than
// "/" or "/0" is an error. Errors never contain the credentials.
func parseClusterURL(raw string) (*redis.ClusterOptions, error) {
	u, raw, err := checkURL(raw)
	if err != nil {
		return nil, err
	}
	if p := strings.TrimPrefix(u.Path, "/"); p != "" && p != "0" {
		return nil, fmt.Errorf("malformed redis URL: a Redis Cluster has no database %q (drop the path)", p)
	}
	if u.Path != "" {
		u.Path = ""
		raw = u.String()
	}
	opts, err := redis.ParseClusterURL(raw)
	if err != nil {
		return nil, fmt.Errorf("malformed redis URL: %s", general(strings.TrimPrefix(err.Error(), "redis: "), raw))
	}
	return opts, nil
}

// isClusterURL reports whether raw names a Redis Cluster: it carries at
// least one addr= parameter (go-redis's cluster URL form). A URL naming a
// single node of a cluster needs WithCluster instead.
func isClusterURL(raw string) bool {
	u, err := url.Parse(strings.TrimSpace(raw))
	return err == nil && u.Query().Has("addr")
}

// CheckURL reports what is wrong with raw as a -redis URL, one server's or
// a cluster's, or nil. It does not connect.
func CheckURL(raw string) error {
	var err error
	if isClusterURL(raw) {
		_, err = parseClusterURL(raw)
	} else {
		_, err = parseURL(raw)
	}
	return err
}

// checkURL does the checks both URL forms share and returns the parsed URL
// and raw trimmed.
func checkURL(raw string) (*url.URL, string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, "", errors.New("redis URL is empty (want redis://[user:password@]host:port[/db] or rediss://…)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the whole URL, password included: never show it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, "", fmt.Errorf("malformed redis URL: %s", general(err.Error(), raw))
	}
	switch u.Scheme {
	case "redis", "rediss":
	case "":
		return nil, "", errors.New("malformed redis URL: no scheme (want redis:// or rediss://)")
	default:
		return nil, "", fmt.Errorf("malformed redis URL: scheme %q (want redis:// or rediss://)", u.Scheme)
	}
	if u.Host == "" {
		return nil, "", errors.New("malformed redis URL: no host (want redis://host:port)")
	}
	if colonInHost(u) {
		return nil, "", errors.New(`malformed redis URL: ":" in the host (a missing "@" after user:password?)`)
	}
	return u, raw, nil
}

// Redact returns raw with its password (and the user) replaced by "xxxxx",
// for messages; a string that does not parse is replaced as a whole.
func Redact(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "(malformed redis URL)"
	}
	if colonInHost(u) {
		return "(malformed redis URL)"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword("xxxxx", "xxxxx")
		} else {
			u.User = url.User("xxxxx")
		}
	}
	return u.String()
}

// general keeps what an error says is wrong and drops what it quotes of
// the URL (net/url quotes parts of it, and with a missing "@" a password
// can look like a port), then scrubs the credentials as a second guard.
func general(msg, raw string) string {
	msg = strings.TrimPrefix(msg, "net/url: ")
	if i := strings.IndexAny(msg, "\"'"); i >= 0 {
		msg = strings.TrimSpace(msg[:i])
		msg = strings.TrimSuffix(msg, ":")
	} else if i := strings.Index(msg, ": "); i >= 0 {
		msg = msg[:i]
	}
	if msg == "" {
		msg = "cannot parse it"
	}
	return scrub(msg, raw)
}

// scrub removes every credential of raw from msg.
func scrub(msg, raw string) string {
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return msg
	}
	rest := raw
	if i := strings.Index(rest, "://"); i >= 0 && i < at {
		rest = rest[i+3:]
		at -= i + 3
	}
	userinfo := rest[:at]
	if userinfo == "" {
		return msg
	}
	parts := []string{userinfo}
	if user, pass, ok := strings.Cut(userinfo, ":"); ok {
		parts = append(parts, pass, user)
	}
	for _, p := range parts {
		if len(p) >= 1 {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
			if dec, err := url.PathUnescape(p); err == nil && dec != p {
				msg = strings.ReplaceAll(msg, dec, "xxxxx")
			}
		}
	}
	return msg
}

// colonInHost reports a ":" in a host name that is not a bracketed IPv6
// address: what a URL missing the "@" after user:password parses as, its
// credentials taken for the host.
func colonInHost(u *url.URL) bool {
	return !strings.HasPrefix(u.Host, "[") && strings.Contains(u.Hostname(), ":")
}
