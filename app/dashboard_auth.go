package app

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	lru "github.com/hashicorp/golang-lru"
	"github.com/rs/zerolog"
	"golang.org/x/oauth2"
)

// Cookie names of the dashboard's sign-in.
const (
	sessionCookie = "sandbox_session"
	stateCookie   = "sandbox_oauth_state"
)

// sessionMaxAge bounds a session: GitHub's user-to-server tokens last
// eight hours, after which the person signs in again.
const sessionMaxAge = 8 * time.Hour

// accessTTL is how long a person's installations and repositories are
// cached: a revoked access shows within a minute, and a page load does not
// cost two GitHub calls.
const accessTTL = time.Minute

// session is what the signed and encrypted session cookie holds. The
// user's token stays in it, encrypted, so any replica can serve the person
// and a restart signs nobody out; the browser cannot read it (HttpOnly)
// nor forge it (AES-GCM).
type session struct {
	Login   string    `json:"login"`
	Token   string    `json:"token"`
	Expires time.Time `json:"exp"`
}

// oauthState ties the OAuth callback to the browser that started it.
type oauthState struct {
	State   string    `json:"state"`
	Next    string    `json:"next"`
	Expires time.Time `json:"exp"`
}

// signIn is GitHub sign-in with the App's OAuth credentials.
type signIn struct {
	oauth  oauth2.Config
	aead   cipher.AEAD
	apiURL string
	secure bool // cookies only over https
	access *lru.Cache
	log    zerolog.Logger
}

type accessEntry struct {
	repos   []int64
	expires time.Time
}

func newSignIn(cfg *Config, log zerolog.Logger) (*signIn, error) {
	web := strings.TrimSuffix(cfg.GitHub.WebURL, "/")
	o := oauth2.Config{
		ClientID: cfg.GitHub.OAuth.ClientID, ClientSecret: cfg.GitHub.OAuth.ClientSecret,
		Endpoint: oauth2.Endpoint{AuthURL: web + "/login/oauth/authorize", TokenURL: web + "/login/oauth/access_token", AuthStyle: oauth2.AuthStyleInParams},
	}
	if cfg.PublicURL != "" {
		o.RedirectURL = strings.TrimSuffix(cfg.PublicURL, "/") + "/dashboard/callback"
	}
	// The cookie key is derived from the client secret: rotating the
	// secret signs everyone out, and no other secret needs keeping.
	mac := hmac.New(sha256.New, []byte(cfg.GitHub.OAuth.ClientSecret))
	mac.Write([]byte("sandbox-bot dashboard session v1"))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("dashboard session key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("dashboard session key: %w", err)
	}
	cache, err := lru.New(4096)
	if err != nil {
		return nil, err
	}
	return &signIn{oauth: o, aead: aead, apiURL: cfg.GitHub.V3APIURL, secure: strings.HasPrefix(cfg.PublicURL, "https://"),
		access: cache, log: log}, nil
}

func (si *signIn) seal(v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, si.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(si.aead.Seal(nonce, nonce, plain, nil)), nil
}

func (si *signIn) open(s string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < si.aead.NonceSize() {
		return errors.New("malformed cookie")
	}
	plain, err := si.aead.Open(nil, raw[:si.aead.NonceSize()], raw[si.aead.NonceSize():], nil)
	if err != nil {
		return errors.New("cookie not sealed by this bot")
	}
	return json.Unmarshal(plain, v)
}

func (si *signIn) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: int(maxAge.Seconds()), HttpOnly: true,
		Secure: si.secure || r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https", SameSite: http.SameSiteLaxMode,
	})
}

// current returns the signed-in person, or false.
func (si *signIn) current(r *http.Request) (session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false
	}
	var s session
	if err := si.open(c.Value, &s); err != nil || s.Token == "" || time.Now().After(s.Expires) {
		return session{}, false
	}
	return s, true
}

// safeNext keeps the post-sign-in redirect on this site's dashboard.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/dashboard") || strings.HasPrefix(next, "/api/runs") || strings.HasPrefix(next, "/runs/") {
		if u, err := url.Parse(next); err == nil && u.Host == "" && u.Scheme == "" {
			return next
		}
	}
	return "/dashboard"
}

// login sends the browser to GitHub with a fresh state.
func (si *signIn) login(w http.ResponseWriter, r *http.Request) {
	buf := make([]byte, 16)
	if _, err := rand.Read(buf); err != nil {
		http.Error(w, "sign-in: no randomness", http.StatusInternalServerError)
		return
	}
	st := oauthState{State: hex.EncodeToString(buf), Next: safeNext(r.URL.Query().Get("next")), Expires: time.Now().Add(10 * time.Minute)}
	sealed, err := si.seal(st)
	if err != nil {
		http.Error(w, "sign-in: "+err.Error(), http.StatusInternalServerError)
		return
	}
	si.setCookie(w, r, stateCookie, sealed, 10*time.Minute)
	http.Redirect(w, r, si.oauth.AuthCodeURL(st.State), http.StatusFound)
}

// callback checks state, exchanges the code for the person's token and
// starts the session.
func (si *signIn) callback(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(stateCookie)
	var st oauthState
	if err != nil || si.open(c.Value, &st) != nil || time.Now().After(st.Expires) ||
		!hmac.Equal([]byte(st.State), []byte(r.URL.Query().Get("state"))) || st.State == "" {
		http.Error(w, "sign-in: the OAuth state does not match this browser's; start again at /dashboard/login", http.StatusBadRequest)
		return
	}
	si.setCookie(w, r, stateCookie, "", -time.Second)
	if e := r.URL.Query().Get("error"); e != "" {
		http.Error(w, "sign-in refused by GitHub: "+e, http.StatusForbidden)
		return
	}
	tok, err := si.oauth.Exchange(r.Context(), r.URL.Query().Get("code"))
	if err != nil {
		si.log.Warn().Err(err).Msg("dashboard sign-in: exchange the OAuth code")
		http.Error(w, "sign-in: GitHub did not accept the code; start again at /dashboard/login", http.StatusBadGateway)
		return
	}
	user, _, err := si.client(tok.AccessToken).Users.Get(r.Context(), "")
	if err != nil {
		http.Error(w, "sign-in: read your GitHub account: "+err.Error(), http.StatusBadGateway)
		return
	}
	expires := time.Now().Add(sessionMaxAge)
	if !tok.Expiry.IsZero() && tok.Expiry.Before(expires) {
		expires = tok.Expiry
	}
	sealed, err := si.seal(session{Login: user.GetLogin(), Token: tok.AccessToken, Expires: expires})
	if err != nil {
		http.Error(w, "sign-in: "+err.Error(), http.StatusInternalServerError)
		return
	}
	si.setCookie(w, r, sessionCookie, sealed, time.Until(expires))
	si.log.Info().Str("user", user.GetLogin()).Msg("dashboard sign-in")
	http.Redirect(w, r, st.Next, http.StatusFound)
}

func (si *signIn) logout(w http.ResponseWriter, r *http.Request) {
	si.setCookie(w, r, sessionCookie, "", -time.Second)
	http.Redirect(w, r, "/dashboard/login", http.StatusFound)
}

// client is go-github speaking as the signed-in person.
func (si *signIn) client(token string) *github.Client {
	c := github.NewClient(nil).WithAuthToken(token)
	if u, err := url.Parse(strings.TrimSuffix(si.apiURL, "/") + "/"); err == nil && si.apiURL != "" {
		c.BaseURL = u
	}
	return c
}

// repos lists the ids of the repositories the person can read in the
// App's installations (GET /user/installations, then each installation's
// repositories), cached for accessTTL.
func (si *signIn) repos(ctx context.Context, s session) ([]int64, error) {
	key := sha256.Sum256([]byte(s.Token))
	if v, ok := si.access.Get(key); ok {
		if e := v.(accessEntry); time.Now().Before(e.expires) {
			return e.repos, nil
		}
	}
	c := si.client(s.Token)
	repos := []int64{}
	opts := &github.ListOptions{PerPage: 100}
	for {
		insts, resp, err := c.Apps.ListUserInstallations(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list %s's installations: %w", s.Login, err)
		}
		for _, inst := range insts {
			ro := &github.ListOptions{PerPage: 100}
			for {
				list, rresp, err := c.Apps.ListUserRepos(ctx, inst.GetID(), ro)
				if err != nil {
					return nil, fmt.Errorf("list %s's repositories in installation %d: %w", s.Login, inst.GetID(), err)
				}
				for _, r := range list.Repositories {
					repos = append(repos, r.GetID())
				}
				if rresp.NextPage == 0 {
					break
				}
				ro.Page = rresp.NextPage
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	si.access.Add(key, accessEntry{repos: repos, expires: time.Now().Add(accessTTL)})
	return repos, nil
}
