package hub

import (
	"errors"
	"net/url"
)

// ScrubURLError drops the query of a URL in a client error: a signed
// URL's signature never reaches the log.
func ScrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			u.RawQuery = ""
			return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
		}
	}
	return err
}
