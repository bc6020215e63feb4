package server

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// bufferedResponse is a response written into memory, for an answer sent
// on a connection no handler serves any more: a refusal of net/http's
// parser (refusal.go), a long-poll taken over from net/http (longpoll.go).
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// wire is the response as sent on the connection, with the Date and
// Content-Length net/http would have set (none for a 204, which has no
// body by definition).
func (b *bufferedResponse) wire(proto string) []byte {
	var out bytes.Buffer
	fmt.Fprintf(&out, "%s %d %s\r\n", proto, b.status, http.StatusText(b.status))
	if b.status != http.StatusNoContent {
		b.header.Set("Content-Length", strconv.Itoa(b.body.Len()))
	}
	if b.header.Get("Date") == "" {
		b.header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	_ = b.header.Write(&out)
	out.WriteString("\r\n")
	out.Write(b.body.Bytes())
	return out.Bytes()
}

// copyTo writes the response to w.
func (b *bufferedResponse) copyTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range b.header {
		h[k] = v
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body.Bytes())
}
