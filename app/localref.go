package app

import (
	"net/url"
	"strings"
)

// sameOriginRef reports whether ref, read as a browser reads a Location
// or a link, stays on the origin that sent it: a path or a relative
// reference, no scheme, no host. Browsers drop tabs and newlines anywhere
// in a URL, trim spaces and controls at its ends, and read "\" as "/" in
// http(s) URLs, so "\\evil.example" and "/\t/evil.example" are
// "//evil.example", another host; a reference holding any of those is
// refused whole rather than normalised, since no page of ours needs them.
func sameOriginRef(ref string) bool {
	for i := 0; i < len(ref); i++ {
		if c := ref[i]; c <= ' ' || c == 0x7f || c == '\\' {
			return false
		}
	}
	u, err := url.Parse(ref)
	return err == nil && u.Scheme == "" && u.Host == "" && u.Opaque == "" && !strings.HasPrefix(ref, "//")
}
