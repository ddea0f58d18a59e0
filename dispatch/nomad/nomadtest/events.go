package nomadtest

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// wireEvent is api.Event plus the namespace the agent sends along.
type wireEvent struct {
	Topic      api.Topic
	Type       string
	Key        string
	Namespace  string
	FilterKeys []string
	Index      uint64
	Payload    map[string]any
}

type wireEvents struct {
	Index  uint64
	Events []wireEvent
}

// publishLocked appends one event batch at index and wakes subscribers.
func (s *Server) publishLocked(index uint64, ev api.Event, namespace string) {
	ev.Index = index
	s.events = append(s.events, api.Events{Index: index, Events: []api.Event{ev}})
	// Keep the namespace alongside, in the Payload-free api type's place.
	s.eventNS = append(s.eventNS, namespace)
	if over := len(s.events) - s.opts.EventBuffer; over > 0 {
		s.events = append([]api.Events(nil), s.events[over:]...)
		s.eventNS = append([]string(nil), s.eventNS[over:]...)
	}
	close(s.evWake)
	s.evWake = make(chan struct{})
}

type topicFilter map[api.Topic][]string

func parseTopics(values []string) topicFilter {
	f := topicFilter{}
	if len(values) == 0 {
		f[api.TopicAll] = []string{"*"}
	}
	for _, v := range values {
		topic, k, ok := strings.Cut(v, ":")
		if !ok {
			k = "*"
		}
		f[api.Topic(topic)] = append(f[api.Topic(topic)], k)
	}
	return f
}

// match follows nomad/stream's filter: the topic (or *) must be asked for
// and one of its keys must be * or equal the event's key or a filter key.
func (f topicFilter) match(ev api.Event) bool {
	keys := append(append([]string(nil), f[api.TopicAll]...), f[ev.Topic]...)
	for _, k := range keys {
		if k == "*" || k == ev.Key {
			return true
		}
		for _, fk := range ev.FilterKeys {
			if fk == k {
				return true
			}
		}
	}
	return false
}

// eventStream serves /v1/event/stream: the buffered batches from index on,
// then live ones, one JSON object per line, with "{}" heartbeats.
func (s *Server) eventStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	index, _ := strconv.ParseUint(q.Get("index"), 10, 64)
	ns := namespaceOf(r)
	filter := parseTopics(q["topic"])
	// The Job and Allocation topics need read-job in the namespace.
	if c := callerOf(r); ns == "*" && !c.management() || ns != "*" && !c.ns(ns, "read-job") {
		permissionDenied(w)
		return
	}

	drop := make(chan struct{})
	s.mu.Lock()
	if s.paused {
		s.mu.Unlock()
		http.Error(w, "No cluster leader", http.StatusInternalServerError)
		return
	}
	s.streams[drop] = struct{}{}
	conn := len(s.sent)
	s.sent = append(s.sent, nil)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if _, ok := s.streams[drop]; ok {
			delete(s.streams, drop)
		}
		s.mu.Unlock()
	}()

	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	out := newFrameWriter(w, fl)
	heartbeat := time.NewTicker(s.opts.Heartbeat)
	defer heartbeat.Stop()
	// next is the lowest index not yet considered; as in nomad's
	// StartAtClosest, asking for an index that is no longer buffered
	// starts at the oldest batch that is.
	next := index
	cut := func() {
		// Cut the connection mid-stream, the way a dying agent does.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
			}
		}
	}
	for {
		select {
		case <-drop:
			cut()
			return
		default:
		}
		s.mu.Lock()
		var batch []wireEvents
		for i, evs := range s.events {
			if evs.Index < next {
				continue
			}
			var matched []wireEvent
			for _, ev := range evs.Events {
				if ns != "*" && s.eventNS[i] != "" && s.eventNS[i] != ns {
					continue
				}
				if filter.match(ev) {
					matched = append(matched, wireEvent{
						Topic: ev.Topic, Type: ev.Type, Key: ev.Key, Namespace: s.eventNS[i],
						FilterKeys: ev.FilterKeys, Index: ev.Index, Payload: ev.Payload,
					})
				}
			}
			if len(matched) > 0 {
				batch = append(batch, wireEvents{Index: evs.Index, Events: matched})
			}
		}
		if n := len(s.events); n > 0 && s.events[n-1].Index >= next {
			next = s.events[n-1].Index + 1
		}
		wake := s.evWake
		s.mu.Unlock()
		for _, b := range batch {
			line, _ := json.Marshal(b)
			if err := out.raw(line); err != nil {
				return
			}
			s.mu.Lock()
			s.sent[conn] = append(s.sent[conn], b.Index)
			s.mu.Unlock()
		}
		select {
		case <-r.Context().Done():
			return
		case <-drop:
			cut()
			return
		case <-wake:
		case <-heartbeat.C:
			if err := out.raw([]byte("{}")); err != nil {
				return
			}
		}
	}
}

// frameWriter writes newline-delimited JSON and flushes after each line.
type frameWriter struct {
	w  io.Writer
	fl http.Flusher
}

func newFrameWriter(w io.Writer, fl http.Flusher) *frameWriter { return &frameWriter{w: w, fl: fl} }

func (f *frameWriter) raw(line []byte) error {
	if _, err := f.w.Write(append(line, '\n')); err != nil {
		return err
	}
	if f.fl != nil {
		f.fl.Flush()
	}
	return nil
}

func (f *frameWriter) frame(fr api.StreamFrame) error {
	b, err := json.Marshal(fr)
	if err != nil {
		return err
	}
	return f.raw(b)
}

func parseInt(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// PauseEventStreams drops every open event stream and refuses new ones
// (as an agent without a leader does) until ResumeEventStreams.
func (s *Server) PauseEventStreams() int {
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()
	return s.DropEventStreams()
}

// ResumeEventStreams accepts event streams again.
func (s *Server) ResumeEventStreams() {
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
}

// StreamBatches returns, per event stream connection in the order they
// were opened, the indexes of the batches delivered on it.
func (s *Server) StreamBatches() [][]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]uint64, len(s.sent))
	for i, b := range s.sent {
		out[i] = append([]uint64(nil), b...)
	}
	return out
}
