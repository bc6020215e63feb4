package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"strings"
)

// message is what the agent needs of a webhook's message.
type message struct {
	ID         string `json:"id"`
	RoomID     string `json:"chat_room_id"`
	Content    string `json:"content"`
	SenderID   string `json:"sender_id"`
	SenderType string `json:"sender_type"`
}

// decodeEvent reads a webhook's body: {"type", "timestamp", "data":
// {"agent_id", "message"}}.
func decodeEvent(body []byte) (message, error) {
	var event struct {
		Type string `json:"type"`
		Data struct {
			Message message `json:"message"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &event); err != nil {
		return message{}, err
	}
	if event.Type != "message.created" {
		return message{}, fmt.Errorf("a %q event", event.Type)
	}
	return event.Data.Message, nil
}

// client calls chatd's Agent API with the agent's key.
type client struct {
	base, key string
	http      *http.Client
}

// call makes one request and decodes the answer's data into out (if any);
// an answer outside 2xx is an error carrying chatd's envelope.
func (c *client) call(method, path string, body, out any) error {
	var payload bytes.Buffer
	if body != nil {
		json.NewEncoder(&payload).Encode(body)
	}
	req, err := http.NewRequest(method, strings.TrimRight(c.base, "/")+path, &payload)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", c.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var doc struct {
		Data  json.RawMessage `json:"data"`
		Error *struct {
			Code, Message string
		} `json:"error"`
	}
	if res.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
			return fmt.Errorf("%s %s answered %s", method, path, res.Status)
		}
	}
	if doc.Error != nil {
		return fmt.Errorf("%s %s answered %d %s: %s", method, path, res.StatusCode, doc.Error.Code, doc.Error.Message)
	}
	if out != nil && doc.Data != nil {
		return json.Unmarshal(doc.Data, out)
	}
	return nil
}

// webhook is a registration: its secret is answered once, at creation.
type webhook struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

func (c *client) register(url string) (webhook, error) {
	var hook webhook
	err := c.call("POST", "/api/v1/agent/webhooks",
		map[string]any{"webhook": map[string]string{"url": url, "description": "examples/webhook"}}, &hook)
	return hook, err
}

func (c *client) unregister(id string) {
	if err := c.call("DELETE", "/api/v1/agent/webhooks/"+id, nil, nil); err != nil {
		log.Printf("could not remove webhook %s: %v", id, err)
	}
}

// workThrough drains the inbox each time the bell rings, until ctx ends.
func (c *client) workThrough(ctx context.Context, bell <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-bell:
		}
		for ctx.Err() == nil {
			m, err := c.claimNext()
			if err != nil {
				log.Printf("inbox: %v", err)
			}
			if m == nil {
				break
			}
			c.do(m)
		}
	}
}

// claimNext takes the oldest message of the inbox and marks it processing
// in the same write, or answers nil when there is none.
func (c *client) claimNext() (*message, error) {
	var m *message
	err := c.call("GET", "/api/v1/agent/inbox/next?claim=true", nil, &m)
	return m, err
}

// do answers a claimed message and marks it processed, or failed.
func (c *client) do(m *message) {
	path := "/api/v1/agent/chats/" + m.RoomID + "/messages/" + m.ID
	if err := c.answer(m); err != nil {
		c.call("POST", path+"/failed", map[string]string{"error": err.Error()}, nil)
		log.Printf("failed %s in %s: %v", m.ID, m.RoomID, err)
		return
	}
	if err := c.call("POST", path+"/processed", struct{}{}, nil); err != nil {
		log.Printf("could not mark %s processed: %v", m.ID, err)
		return
	}
	log.Printf("processed %s in %s", m.ID, m.RoomID)
}

// answer replies to a person, mentioning them. Only people get an answer:
// two sample agents answering each other's mentions would never stop.
func (c *client) answer(m *message) error {
	if m.SenderType != "User" {
		return nil
	}
	reply := map[string]any{"content": "Got it: " + m.Content, "mentions": []map[string]string{{"id": m.SenderID}}}
	return c.call("POST", "/api/v1/agent/chats/"+m.RoomID+"/messages", map[string]any{"message": reply}, nil)
}
