package nomadtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/hashicorp/nomad/api"
)

// maxVarSize is what one Variable's items may hold in all.
const maxVarSize = 64 << 10

// validVarPath is nomad/structs' rule for variable paths.
var validVarPath = regexp.MustCompile(`^[a-zA-Z0-9-_~/]{1,128}$`)

// Var returns a copy of a variable, or nil.
func (s *Server) Var(namespace, path string) *api.Variable {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.vars[key{namespace, path}]; v != nil {
		return v.Copy()
	}
	return nil
}

// Vars lists variable paths with a prefix.
func (s *Server) Vars(namespace, prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.vars {
		if k.ns == namespace && strings.HasPrefix(k.id, prefix) {
			out = append(out, k.id)
		}
	}
	sort.Strings(out)
	return out
}

func (s *Server) varRoutes(w http.ResponseWriter, r *http.Request, path string) {
	ns := namespaceOf(r)
	path = strings.Trim(path, "/")
	if !validVarPath.MatchString(path) {
		http.Error(w, fmt.Sprintf("invalid path %q", path), http.StatusBadRequest)
		return
	}
	k := key{ns, path}
	need := map[string]string{http.MethodGet: "read", http.MethodPut: "write", http.MethodPost: "write", http.MethodDelete: "destroy"}[r.Method]
	if need != "" && !callerOf(r).variable(ns, path, need) {
		permissionDenied(w)
		return
	}
	if need == "write" && !s.namespaceExists(ns) {
		http.Error(w, fmt.Sprintf("variable %q is in nonexistent namespace %q", path, ns), http.StatusInternalServerError)
		return
	}
	cas, hasCAS := r.URL.Query()["cas"]
	var casIndex uint64
	if hasCAS {
		n, err := strconv.ParseUint(cas[0], 10, 64)
		if err != nil {
			http.Error(w, "failed to parse cas: "+err.Error(), http.StatusBadRequest)
			return
		}
		casIndex = n
	}
	switch r.Method {
	case http.MethodGet:
		s.mu.Lock()
		v, idx := s.vars[k], s.index
		var c *api.Variable
		if v != nil {
			c = v.Copy()
		}
		s.mu.Unlock()
		if c == nil {
			setMetaHeaders(w, idx)
			http.Error(w, "variable not found", http.StatusNotFound)
			return
		}
		s.writeJSON(w, http.StatusOK, idx, c)
	case http.MethodPut, http.MethodPost:
		var in api.Variable
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, "failed to decode variable: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(in.Items) == 0 {
			http.Error(w, "variable missing required Items object", http.StatusBadRequest)
			return
		}
		// Like Nomad, a Variable holds 64 KiB at most.
		size := 0
		for k, v := range in.Items {
			size += len(k) + len(v)
		}
		if size > maxVarSize {
			http.Error(w, "variables are limited to 64KiB in total size", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		cur := s.vars[k]
		if hasCAS && conflict(cur, casIndex) {
			body := conflictBody(cur, ns, path)
			idx := s.index
			s.mu.Unlock()
			s.writeJSON(w, http.StatusConflict, idx, body)
			return
		}
		idx := s.nextIndex()
		now := time.Now().UnixNano()
		v := &api.Variable{Namespace: ns, Path: path, Items: in.Items, ModifyIndex: idx, ModifyTime: now, CreateIndex: idx, CreateTime: now}
		if cur != nil {
			v.CreateIndex, v.CreateTime = cur.CreateIndex, cur.CreateTime
		}
		s.vars[k] = v
		out := v.Copy()
		close(s.varWake)
		s.varWake = make(chan struct{})
		s.mu.Unlock()
		s.writeJSON(w, http.StatusOK, idx, out)
	case http.MethodDelete:
		s.mu.Lock()
		cur := s.vars[k]
		if hasCAS && conflict(cur, casIndex) {
			body := conflictBody(cur, ns, path)
			idx := s.index
			s.mu.Unlock()
			s.writeJSON(w, http.StatusConflict, idx, body)
			return
		}
		idx := s.nextIndex()
		delete(s.vars, k)
		s.mu.Unlock()
		setMetaHeaders(w, idx)
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "Invalid method", http.StatusMethodNotAllowed)
	}
}

// conflict applies Nomad's check-and-set rule: 0 means "must not exist",
// anything else must equal the current modify index.
func conflict(cur *api.Variable, cas uint64) bool {
	if cur == nil {
		return cas != 0
	}
	return cur.ModifyIndex != cas
}

func conflictBody(cur *api.Variable, ns, path string) *api.Variable {
	if cur == nil {
		return &api.Variable{Namespace: ns, Path: path}
	}
	return cur.Copy()
}

func (s *Server) listVars(w http.ResponseWriter, r *http.Request) {
	ns := namespaceOf(r)
	prefix := r.URL.Query().Get("prefix")
	s.mu.Lock()
	var out []*api.VariableMetadata
	c := callerOf(r)
	for k, v := range s.vars {
		// Nomad lists only the variables the token may list.
		if k.ns == ns && strings.HasPrefix(k.id, prefix) && c.variable(k.ns, k.id, "list") {
			out = append(out, v.Metadata())
		}
	}
	idx := s.index
	s.mu.Unlock()
	sort.Slice(out, func(a, b int) bool { return out[a].Path < out[b].Path })
	if out == nil {
		out = []*api.VariableMetadata{}
	}
	s.writeJSON(w, http.StatusOK, idx, out)
}

// renderTemplates renders a task's embedded templates into its directory
// the way the client's template runner does for the functions the nomad
// backend uses (base64Decode, nomadVar with the job's namespace). Like
// consul-template, it waits until every nomadVar it reads exists.
func (s *Server) renderTemplates(ctx context.Context, t *api.Task, taskDir string, env map[string]string) error {
	ns := env["NOMAD_NAMESPACE"]
	for _, tmpl := range t.Templates {
		left, right := "{{", "}}"
		if tmpl.LeftDelim != nil && *tmpl.LeftDelim != "" {
			left = *tmpl.LeftDelim
		}
		if tmpl.RightDelim != nil && *tmpl.RightDelim != "" {
			right = *tmpl.RightDelim
		}
		for {
			missing := ""
			funcs := template.FuncMap{
				"base64Decode": func(s string) (string, error) {
					b, err := base64.StdEncoding.DecodeString(s)
					return string(b), err
				},
				"nomadVar": func(path string) map[string]string {
					if v := s.Var(ns, path); v != nil {
						return v.Items
					}
					missing = path
					return nil
				},
				"env": func(k string) string { return env[k] },
			}
			tp, err := template.New(*tmpl.DestPath).Delims(left, right).Funcs(funcs).Parse(*tmpl.EmbeddedTmpl)
			if err != nil {
				return fmt.Errorf("Template failed: parse %s: %w", *tmpl.DestPath, err)
			}
			s.mu.Lock()
			wake := s.varWake
			s.mu.Unlock()
			var buf bytes.Buffer
			if err := tp.Execute(&buf, nil); err != nil {
				return fmt.Errorf("Template failed: %s: %w", *tmpl.DestPath, err)
			}
			if missing != "" {
				select {
				case <-ctx.Done():
					return fmt.Errorf("Template failed: %s: gave up waiting for nomadVar %q: %w", *tmpl.DestPath, missing, ctx.Err())
				case <-wake:
					continue
				}
			}
			dest, err := allocDirPath(taskDir, *tmpl.DestPath)
			if err != nil {
				return err
			}
			perm := os.FileMode(0o644)
			if tmpl.Perms != nil {
				if p, err := strconv.ParseUint(*tmpl.Perms, 8, 32); err == nil {
					perm = os.FileMode(p)
				}
			}
			if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(dest, buf.Bytes(), perm); err != nil {
				return err
			}
			os.Chmod(dest, perm)
			if tmpl.Uid != nil && tmpl.Gid != nil && os.Geteuid() == 0 {
				os.Chown(dest, *tmpl.Uid, *tmpl.Gid)
			}
			break
		}
	}
	return nil
}
