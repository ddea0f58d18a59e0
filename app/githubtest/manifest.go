package githubtest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The App manifest flow (docs.github.com: "Registering a GitHub App from a
// manifest"): a form posts the manifest to the new-App page of a user or an
// organisation, GitHub redirects to the manifest's redirect_url with a
// one-time code (and the form's state), and POST
// /app-manifests/{code}/conversions trades the code for the App's
// credentials. The fake's new-App page creates the App at once, as if the
// person had clicked "Create GitHub App".

// ManifestUser is the signed-in user of the fake's web pages.
const ManifestUser = "octocat"

// ManifestApp is an App registered through the fake's new-App page.
type ManifestApp struct {
	Code string
	// Owner is the user or organisation the App belongs to.
	Owner string
	Org   bool
	// State is the state the form's URL carried.
	State    string
	Manifest map[string]any
	// Conversion is what POST /app-manifests/{code}/conversions answered
	// (nil until then; the code is spent after one conversion).
	Conversion map[string]any
}

// ManifestApps returns the Apps registered from manifests, oldest first.
func (s *Server) ManifestApps() []ManifestApp {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ManifestApp, len(s.manifestApps))
	for i, a := range s.manifestApps {
		out[i] = *a
	}
	return out
}

// serveManifestFlow serves the pages and the conversion of the manifest
// flow, which GitHub answers without an API token: the new-App pages are
// the person's browser session, the conversion is authorised by the code.
func (s *Server) serveManifestFlow(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && p == "/settings/apps/new":
		s.newManifestApp(w, r, ManifestUser, false)
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/organizations/") && strings.HasSuffix(p, "/settings/apps/new"):
		org := strings.TrimSuffix(strings.TrimPrefix(p, "/organizations/"), "/settings/apps/new")
		if org == "" || strings.Contains(org, "/") {
			return false
		}
		s.newManifestApp(w, r, org, true)
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/app-manifests/") && strings.HasSuffix(p, "/conversions"):
		s.convertManifest(w, strings.TrimSuffix(strings.TrimPrefix(p, "/app-manifests/"), "/conversions"))
	default:
		return false
	}
	return true
}

func (s *Server) newManifestApp(w http.ResponseWriter, r *http.Request, owner string, org bool) {
	var m map[string]any
	if err := json.Unmarshal([]byte(r.PostFormValue("manifest")), &m); err != nil {
		http.Error(w, "Invalid GitHub App configuration: the manifest is not JSON: "+err.Error(), http.StatusUnprocessableEntity)
		return
	}
	redirect, _ := m["redirect_url"].(string)
	target, err := url.Parse(redirect)
	if err != nil || target.Scheme == "" || target.Host == "" {
		http.Error(w, "Invalid GitHub App configuration: redirect_url must be an absolute URL", http.StatusUnprocessableEntity)
		return
	}
	if name, _ := m["name"].(string); name == "" {
		http.Error(w, "Invalid GitHub App configuration: name is required", http.StatusUnprocessableEntity)
		return
	}
	if hook, ok := m["hook_attributes"].(map[string]any); ok {
		if u, err := url.Parse(fmt.Sprint(hook["url"])); err != nil || u.Host == "" {
			http.Error(w, "Invalid GitHub App configuration: hook_attributes.url must be an absolute URL", http.StatusUnprocessableEntity)
			return
		}
	}
	app := &ManifestApp{Code: randomHex(10), Owner: owner, Org: org, State: r.URL.Query().Get("state"), Manifest: m}
	s.mu.Lock()
	s.manifestApps = append(s.manifestApps, app)
	s.notify()
	s.mu.Unlock()
	q := target.Query()
	q.Set("code", app.Code)
	if app.State != "" {
		q.Set("state", app.State)
	}
	target.RawQuery = q.Encode()
	http.Redirect(w, r, target.String(), http.StatusFound)
}

func (s *Server) convertManifest(w http.ResponseWriter, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var app *ManifestApp
	for _, a := range s.manifestApps {
		if a.Code == code && a.Conversion == nil {
			app = a
		}
	}
	if app == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	s.nextID++
	name := fmt.Sprint(app.Manifest["name"])
	slug := strings.ToLower(strings.Join(strings.Fields(name), "-"))
	ownerType := "User"
	if app.Org {
		ownerType = "Organization"
	}
	var webhookSecret any
	if _, ok := app.Manifest["hook_attributes"]; ok {
		webhookSecret = randomHex(20)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	app.Conversion = map[string]any{
		"id": s.nextID, "slug": slug, "node_id": fmt.Sprintf("A_kwFake%d", s.nextID), "name": name,
		"owner":       map[string]any{"login": app.Owner, "id": len(app.Owner), "type": ownerType},
		"description": app.Manifest["description"], "external_url": app.Manifest["url"],
		"html_url":   s.srv.URL + "/apps/" + slug,
		"created_at": now, "updated_at": now,
		"permissions": app.Manifest["default_permissions"], "events": app.Manifest["default_events"],
		"installations_count": 0,
		"client_id":           "Iv1." + randomHex(8), "client_secret": randomHex(20),
		"webhook_secret": webhookSecret, "pem": AppKey(),
	}
	s.notify()
	writeJSON(w, http.StatusCreated, app.Conversion)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
