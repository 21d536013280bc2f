package redisfleet

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ParseURL turns a redis:// or rediss:// URL (with an optional ACL user and
// password, and a database number as its path) into client options. Errors
// never contain the password or the user: they name the part that is wrong.
func ParseURL(raw string) (*redis.Options, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, errors.New("redis URL is empty (want redis://[user:password@]host:port[/db] or rediss://…)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the whole URL, password included: never show it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("malformed redis URL: %s", general(err.Error(), raw))
	}
	switch u.Scheme {
	case "redis", "rediss":
	case "":
		return nil, errors.New("malformed redis URL: no scheme (want redis:// or rediss://)")
	default:
		return nil, fmt.Errorf("malformed redis URL: scheme %q (want redis:// or rediss://)", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("malformed redis URL: no host (want redis://host:port)")
	}
	if colonInHost(u) {
		return nil, errors.New(`malformed redis URL: ":" in the host (a missing "@" after user:password?)`)
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("malformed redis URL: %s", general(strings.TrimPrefix(err.Error(), "redis: "), raw))
	}
	return opts, nil
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
