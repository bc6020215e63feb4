package server

import (
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/chatd/chatd/store"
)

// Room files: upload (raw body, described by x-file-name, x-file-sha256 and
// content-type) and download (whole, or one byte range). Both APIs serve
// both: the spec only documents the agent routes, but a person in a room
// shares files there as much as an agent does.

// DefaultMaxFileBytes is the default bound on an uploaded file.
const DefaultMaxFileBytes = 25 << 20

func (s *Server) fileRoutes() {
	s.handle("POST", "/api/v1/agent/chats/:chat_id/files", agentsOnly, s.uploadFile)
	s.handle("GET", "/api/v1/agent/chats/:chat_id/files/:id", agentsOnly, s.downloadFile)
	s.handle("POST", "/api/v1/me/chats/:chat_id/files", humansOnly, s.uploadFile)
	s.handle("GET", "/api/v1/me/chats/:chat_id/files/:id", humansOnly, s.downloadFile)
}

// uploadFile is POST /{agent,me}/chats/{id}/files: 201 {data: Attachment}.
// The body is the file itself, under its own size bound (not the JSON
// bound), and is streamed to the database chunk by chunk.
func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength > s.maxFile {
		return s.fileTooLarge()
	}
	// The body is under the minimum transfer rate like every request body
	// (transfer.go), so a trickled upload is cut off, and the store removes
	// what it had written of it.
	body := &uploadBody{r: http.MaxBytesReader(w, r.Body, s.maxFile)}
	f, err := s.db.UploadFile(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), store.FileInput{
		Name: r.Header.Get("X-File-Name"), ContentType: r.Header.Get("Content-Type"), SHA256: r.Header.Get("X-File-Sha256"),
	}, body)
	if body.err != nil {
		return s.bodyReadError(body.err, s.fileTooLarge())
	}
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, f.Attachment())
}

func (s *Server) fileTooLarge() error {
	return errorf(codePayloadTooLarge, "the file is larger than %d bytes", s.maxFile)
}

// uploadBody reads an upload, remembering the read error: it is the
// client's fault, not the database's, whatever the store makes of it.
type uploadBody struct {
	r   io.Reader
	err error
}

func (b *uploadBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// downloadFile is GET /{agent,me}/chats/{id}/files/{id}: the file as a
// download, whole (200) or one range of it (206), streamed from its chunks.
func (s *Server) downloadFile(w http.ResponseWriter, r *http.Request) error {
	f, err := s.db.RoomFile(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"))
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Accept-Ranges", "bytes")
	first, last, status := byteRange(r.Header.Get("Range"), f.Size)
	if status == http.StatusRequestedRangeNotSatisfiable {
		h.Set("Content-Range", "bytes */"+strconv.FormatInt(f.Size, 10))
		return errorf(codeRangeNotSatisfiable, "the range starts beyond the file's %d bytes", f.Size)
	}
	h.Set("Content-Type", f.ContentType)
	h.Set("Content-Disposition", contentDisposition(f.Name))
	h.Set("Content-Length", strconv.FormatInt(last-first+1, 10))
	h.Set("X-Content-Type-Options", "nosniff")
	if status == http.StatusPartialContent {
		h.Set("Content-Range", "bytes "+strconv.FormatInt(first, 10)+"-"+strconv.FormatInt(last, 10)+"/"+strconv.FormatInt(f.Size, 10))
	}
	w.WriteHeader(status)
	if err := s.db.CopyFileRange(r.Context(), f, first, last, w); err != nil {
		// The status is sent: the only honest signal left is to cut the
		// connection, so the client sees a short body rather than a whole one.
		if r.Context().Err() == nil {
			s.log.Warn("file download broken off", "request_id", requestID(r), "file", f.ID, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	return nil
}

// byteRange reads a Range header against a file of size bytes (RFC 9110
// §14): it returns the span to send, inclusive, with 206, or the whole file
// with 200 when there is no header or one chatd ignores (not bytes, not
// parsable, or several spans, which chatd does not serve as multipart), or
// 416 when the span starts at or past the end (every span of an empty file).
func byteRange(header string, size int64) (first, last int64, status int) {
	unit, spec, ok := strings.Cut(header, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(unit), "bytes") || strings.Contains(spec, ",") {
		return 0, size - 1, http.StatusOK
	}
	from, to, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return 0, size - 1, http.StatusOK
	}
	if from == "" { // the last n bytes
		n, ok := rangeNumber(to)
		switch {
		case !ok:
			return 0, size - 1, http.StatusOK
		case n == 0 || size == 0:
			return 0, 0, http.StatusRequestedRangeNotSatisfiable
		}
		return size - min(n, size), size - 1, http.StatusPartialContent
	}
	first, ok = rangeNumber(from)
	last = math.MaxInt64
	if ok && to != "" {
		last, ok = rangeNumber(to)
	}
	switch {
	case !ok || last < first:
		return 0, size - 1, http.StatusOK
	case first >= size:
		return 0, 0, http.StatusRequestedRangeNotSatisfiable
	}
	return first, min(last, size-1), http.StatusPartialContent
}

// rangeNumber parses a position of a Range header: digits only. A number
// too large for int64 reads as the largest, which is past any file.
func rangeNumber(s string) (int64, bool) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return math.MaxInt64, true
	}
	return n, true
}

// contentDisposition makes the response a download named name (RFC 6266):
// a quoted ASCII fallback for old clients, in which anything outside
// printable ASCII and the characters that would break the quoting become
// "_", and the exact name percent-encoded as UTF-8 (RFC 8187) for the rest.
func contentDisposition(name string) string {
	var fallback, exact strings.Builder
	for _, r := range name {
		if r < 0x20 || r >= 0x7f || r == '"' || r == '\\' || r == '%' {
			fallback.WriteByte('_')
		} else {
			fallback.WriteRune(r)
		}
	}
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			exact.WriteByte(c)
		} else {
			exact.WriteString("%" + hex[c>>4:c>>4+1] + hex[c&15:c&15+1])
		}
	}
	return `attachment; filename="` + fallback.String() + `"; filename*=UTF-8''` + exact.String()
}
