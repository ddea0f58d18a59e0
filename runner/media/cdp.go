package media

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/gorilla/websocket"
)

// cdp is a minimal Chrome DevTools Protocol client over one page's
// websocket: calls matched to their answers by id, and events delivered to
// whoever subscribed to their method.
type cdp struct {
	conn *websocket.Conn

	writeMu sync.Mutex
	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan cdpMessage
	subs    map[string][]chan json.RawMessage
	closed  chan struct{}
	err     error
}

type cdpMessage struct {
	ID     int64           `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

func dialCDP(ctx context.Context, wsURL string) (*cdp, error) {
	d := websocket.Dialer{}
	conn, _, err := d.DialContext(ctx, wsURL, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to the browser at %s: %w", wsURL, err)
	}
	c := &cdp{conn: conn, pending: map[int64]chan cdpMessage{}, subs: map[string][]chan json.RawMessage{}, closed: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

func (c *cdp) readLoop() {
	defer close(c.closed)
	for {
		var m cdpMessage
		if err := c.conn.ReadJSON(&m); err != nil {
			c.mu.Lock()
			c.err = err
			for _, ch := range c.pending {
				close(ch)
			}
			c.pending = map[int64]chan cdpMessage{}
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		if m.ID != 0 {
			if ch, ok := c.pending[m.ID]; ok {
				delete(c.pending, m.ID)
				ch <- m
			}
		} else if m.Method != "" {
			for _, ch := range c.subs[m.Method] {
				select {
				case ch <- m.Params:
				default: // a slow subscriber loses events rather than stall the browser
				}
			}
		}
		c.mu.Unlock()
	}
}

// subscribe returns a channel of method's event params; buffer bounds how
// many may queue.
func (c *cdp) subscribe(method string, buffer int) <-chan json.RawMessage {
	ch := make(chan json.RawMessage, buffer)
	c.mu.Lock()
	c.subs[method] = append(c.subs[method], ch)
	c.mu.Unlock()
	return ch
}

// call sends method and decodes its result into result (if not nil).
func (c *cdp) call(ctx context.Context, method string, params any, result any) error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return fmt.Errorf("cdp %s: connection closed: %w", method, c.err)
	}
	c.nextID++
	id := c.nextID
	ch := make(chan cdpMessage, 1)
	c.pending[id] = ch
	c.mu.Unlock()

	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	c.writeMu.Lock()
	err := c.conn.WriteJSON(msg)
	c.writeMu.Unlock()
	if err != nil {
		return fmt.Errorf("cdp %s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("cdp %s: the browser closed the connection", method)
		}
		if m.Error != nil {
			return fmt.Errorf("cdp %s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if result != nil {
			return json.Unmarshal(m.Result, result)
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("cdp %s: %w", method, ctx.Err())
	}
}

func (c *cdp) close() error {
	err := c.conn.Close()
	<-c.closed
	if errors.Is(err, websocket.ErrCloseSent) {
		return nil
	}
	return err
}
