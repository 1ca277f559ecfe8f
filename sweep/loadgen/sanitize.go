package loadgen

import (
	"net/url"
	"regexp"
	"strings"
)

// Sanitize returns a copy of v (a JSON value: maps, slices, strings,
// numbers) with secrets replaced by [Redacted]: values under sensitive keys,
// bearer strings, URL credentials and sensitive query parameters, and the
// value after a sensitive command-line flag (--api-key X, --token=X).
func Sanitize(v any) any { return sanitize(v, "") }

func sanitize(v any, key string) any {
	if key != "" && sensitiveKey.MatchString(key) {
		return Redacted
	}
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, item := range t {
			out[k] = sanitize(item, k)
		}
		return out
	case []any:
		out := make([]any, 0, len(t))
		redactNext := false
		for _, item := range t {
			if redactNext {
				out = append(out, Redacted)
				redactNext = false
				continue
			}
			if s, ok := item.(string); ok && strings.HasPrefix(s, "-") {
				flag, _, hasValue := strings.Cut(s, "=")
				if sensitiveKey.MatchString(strings.TrimLeft(flag, "-")) {
					if hasValue {
						out = append(out, flag+"="+Redacted)
					} else {
						out = append(out, flag)
						redactNext = true
					}
					continue
				}
			}
			out = append(out, sanitize(item, ""))
		}
		return out
	case []string:
		a := make([]any, len(t))
		for i, s := range t {
			a[i] = s
		}
		return sanitize(a, "")
	case string:
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(t)), "bearer ") {
			return Redacted
		}
		return sanitizeURL(t)
	default:
		return v
	}
}

func sanitizeURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return s
	}
	changed := false
	if u.User != nil {
		u.User = nil
		changed = true
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if sensitiveKey.MatchString(k) {
				q[k] = []string{Redacted}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return s
	}
	return u.String()
}

// Redacted replaces every secret in a manifest.
const Redacted = "[REDACTED]"

// sensitiveKey matches key names that hold secrets, as serving-inference's
// SENSITIVE_KEY does: api_key, authorization, cookie, credential, password,
// secret, token as whole words of the key.
var sensitiveKey = regexp.MustCompile(`(?i)(^|[_-])(api[_-]?key|authorization|cookie|credential|passwd|password|secret|token)([_-]|$)`)
