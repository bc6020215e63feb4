package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// Room files: upload on both APIs, download with byte ranges, attachments on
// messages (spec "File download", "Send message"; wire contract §3 Files,
// §4 Attachment).

// filesWorld is the team (see helpers_test.go) with a second room of
// helper's alone (other).
type filesWorld struct {
	team
	other string
}

func newFilesWorld(t *testing.T, configure func(*Config), opts ...func(*store.Options)) *filesWorld {
	t.Helper()
	k := &filesWorld{team: newTeam(t, newTestServerWith(t, configure, opts...))}
	k.other = k.newRoom(t)
	return k
}

// files is the files path of room in the API of key.
func (k *filesWorld) files(key, room string) string { return k.roomPath(key, room, "files") }

func hexDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// fileHeaders sets an upload's credentials and headers; an empty value
// leaves its header out.
func fileHeaders(key, name, sha, contentType string) cred {
	return func(h http.Header) {
		h.Set("X-API-Key", key)
		h.Del("Content-Type")
		for k, v := range map[string]string{"X-File-Name": name, "X-File-Sha256": sha, "Content-Type": contentType} {
			if v != "" {
				h.Set(k, v)
			}
		}
	}
}

// upload stores body in room as key and returns the Attachment answered.
func (k *filesWorld) upload(t testing.TB, key, room, name string, body []byte) map[string]any {
	t.Helper()
	r := k.ts.do(t, "POST", k.files(key, room), fileHeaders(key, name, hexDigest(body), "text/plain"), body)
	expect(t, r, 201, "")
	return r.data(t)
}

func (k *filesWorld) download(t testing.TB, key, room, id string, rangeHeader string) *response {
	t.Helper()
	return k.ts.do(t, "GET", k.files(key, room)+"/"+id, func(h http.Header) {
		h.Set("X-API-Key", key)
		if rangeHeader != "" {
			h.Set("Range", rangeHeader)
		}
	}, nil)
}

func TestFileUploadAndDownload(t *testing.T) {
	k := newFilesWorld(t, nil)
	for _, tc := range []struct {
		name, uploader, reader string
		contentType, wantType  string
	}{
		{"an agent uploads, another agent downloads", k.helperKey, k.scoutKey, "text/csv; charset=utf-8", "text/csv; charset=utf-8"},
		{"a person uploads, an agent downloads", k.aliceKey, k.helperKey, "image/png", "image/png"},
		{"an agent uploads, a person downloads", k.scoutKey, k.aliceKey, "", "application/octet-stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte("id,name\n1,Ünïcode\n")
			r := k.ts.do(t, "POST", k.files(tc.uploader, k.room), fileHeaders(tc.uploader, "report 2026 ✓.csv", hexDigest(body), tc.contentType), body)
			expect(t, r, 201, "")
			att := r.data(t)
			id, _ := att["id"].(string)
			want := map[string]any{"id": id, "name": "report 2026 ✓.csv", "content_type": tc.wantType, "bytes": float64(len(body)),
				"size": float64(len(body)), "sha256": hexDigest(body), "has_thumb": false, "expires_at": nil}
			if !store.ValidID(id) || !reflect.DeepEqual(att, want) {
				t.Fatalf("attachment = %v\nwant %v", att, want)
			}
			d := k.download(t, tc.reader, k.room, id, "")
			expect(t, d, 200, "")
			if !bytes.Equal(d.body, body) {
				t.Fatalf("downloaded %q", d.body)
			}
			for h, v := range map[string]string{
				"Content-Type": tc.wantType, "Content-Length": strconv.Itoa(len(body)), "Accept-Ranges": "bytes", "X-Content-Type-Options": "nosniff",
				"Content-Disposition": `attachment; filename="report 2026 _.csv"; filename*=UTF-8''report%202026%20%E2%9C%93.csv`,
				"Content-Range":       "",
			} {
				if got := d.header.Get(h); got != v {
					t.Errorf("%s = %q, want %q", h, got, v)
				}
			}
		})
	}
}

func TestFileNamesAreSafeInContentDisposition(t *testing.T) {
	for name, want := range map[string]string{
		"plain.txt":     `attachment; filename="plain.txt"; filename*=UTF-8''plain.txt`,
		`say "hi".txt`:  `attachment; filename="say _hi_.txt"; filename*=UTF-8''say%20%22hi%22.txt`,
		"100%;x=y.txt":  `attachment; filename="100_;x=y.txt"; filename*=UTF-8''100%25%3Bx%3Dy.txt`,
		"résumé.pdf":    `attachment; filename="r_sum_.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf`,
		"日本.txt":        `attachment; filename="__.txt"; filename*=UTF-8''%E6%97%A5%E6%9C%AC.txt`,
		"a'b`c|d~e.tar": `attachment; filename="a'b` + "`" + `c|d~e.tar"; filename*=UTF-8''a%27b` + "`" + `c|d~e.tar`,
	} {
		if got := contentDisposition(name); got != want {
			t.Errorf("%q: %s\nwant %s", name, got, want)
		}
	}
}

func TestFileUploadRefusals(t *testing.T) {
	k := newFilesWorld(t, nil)
	body := []byte("hello")
	good := hexDigest(body)
	ok := func(name string) cred { return fileHeaders(k.helperKey, name, good, "text/plain") }
	upload := func(name, path string, c cred, status int, code string, pointers ...string) scenario {
		return refusalCase(name, c, "POST", path, body, status, code, pointers...)
	}
	k.ts.run(t, []scenario{
		upload("no name", k.files(k.helperKey, k.room), ok(""), 422, "validation_error", "/headers/x-file-name"),
		upload("a slash in the name", k.files(k.helperKey, k.room), ok("../etc/passwd"), 422, "validation_error", "/headers/x-file-name"),
		upload("a backslash in the name", k.files(k.helperKey, k.room), ok(`dir\file.txt`), 422, "validation_error", "/headers/x-file-name"),
		upload("a tab in the name", k.files(k.helperKey, k.room), ok("a\tb.txt"), 422, "validation_error", "/headers/x-file-name"),
		upload("a name that is a directory", k.files(k.helperKey, k.room), ok(".."), 422, "validation_error", "/headers/x-file-name"),
		upload("a name of 256 bytes", k.files(k.helperKey, k.room), ok(strings.Repeat("a", 252)+".txt"), 422, "validation_error", "/headers/x-file-name"),
		upload("a name that is not UTF-8", k.files(k.helperKey, k.room), ok("caf\xe9.txt"), 422, "validation_error", "/headers/x-file-name"),
		upload("no digest", k.files(k.helperKey, k.room), fileHeaders(k.helperKey, "a.txt", "", "text/plain"), 422, "validation_error", "/headers/x-file-sha256"),
		upload("a digest that is not hex", k.files(k.helperKey, k.room), fileHeaders(k.helperKey, "a.txt", strings.Repeat("z", 64), ""), 422, "validation_error", "/headers/x-file-sha256"),
		upload("a digest one character short", k.files(k.helperKey, k.room), fileHeaders(k.helperKey, "a.txt", good[:63], ""), 422, "validation_error", "/headers/x-file-sha256"),
		upload("the digest of another body", k.files(k.helperKey, k.room), fileHeaders(k.helperKey, "a.txt", hexDigest([]byte("other")), ""), 422, "validation_error", "/headers/x-file-sha256"),
		upload("a content type that is none", k.files(k.helperKey, k.room), fileHeaders(k.helperKey, "a.txt", good, "not a type"), 422, "validation_error", "/headers/content-type"),
		upload("a stranger's room", k.files(k.bobKey, k.room), fileHeaders(k.bobKey, "a.txt", good, ""), 404, "not_found"),
		upload("an unknown room", k.files(k.helperKey, nilID), ok("a.txt"), 404, "not_found"),
		upload("a room id that is no UUID", k.files(k.helperKey, "general"), ok("a.txt"), 404, "not_found"),
		upload("an agent key on the human API", k.files(k.aliceKey, k.room), ok("a.txt"), 403, "forbidden"),
		upload("a human key on the agent API", k.files(k.helperKey, k.room), fileHeaders(k.aliceKey, "a.txt", good, ""), 403, "forbidden"),
		upload("no credentials", k.files(k.helperKey, k.room), noCred, 401, "unauthorized"),
	})
	t.Run("an agent blocked in the room", func(t *testing.T) {
		expect(t, k.ts.do(t, "PATCH", "/api/v1/me/chats/"+k.room+"/participants/"+k.scout.ID, apiKey(k.aliceKey),
			map[string]any{"participant": map[string]any{"status": "blocked"}}), 200, "")
		k.ts.refused(t, "POST", k.files(k.scoutKey, k.room), fileHeaders(k.scoutKey, "a.txt", good, ""), body, 403, "execution_stopped", "")
	})
}

func TestFileSizeLimit(t *testing.T) {
	k := newFilesWorld(t, func(c *Config) { c.MaxFileBytes = 100 }, func(o *store.Options) { o.FileChunkSize = 16 })
	path := k.files(k.helperKey, k.room)
	exactly := bytes.Repeat([]byte("x"), 100)
	over := bytes.Repeat([]byte("y"), 101)
	huge := bytes.Repeat([]byte("z"), 10_000)
	t.Run("a declared length over the limit", func(t *testing.T) {
		k.ts.refused(t, "POST", path, fileHeaders(k.helperKey, "a.bin", hexDigest(over), ""), over, 413, "payload_too_large", "")
	})
	t.Run("a streamed body that passes the limit", func(t *testing.T) {
		// Several chunks are stored before the limit is reached; they go.
		k.ts.refused(t, "POST", path, fileHeaders(k.helperKey, "a.bin", hexDigest(huge), ""), bytes.NewReader(huge), 413, "payload_too_large", "")
		k.ts.refused(t, "POST", path, fileHeaders(k.helperKey, "a.bin", hexDigest(over), ""), bytes.NewReader(over), 413, "payload_too_large", "")
	})
	t.Run("exactly the limit, declared or streamed", func(t *testing.T) {
		expect(t, k.ts.do(t, "POST", path, fileHeaders(k.helperKey, "a.bin", hexDigest(exactly), ""), exactly), 201, "")
		expect(t, k.ts.do(t, "POST", path, fileHeaders(k.helperKey, "a.bin", hexDigest(exactly), ""), bytes.NewReader(exactly)), 201, "")
	})
	t.Run("JSON bodies keep their own limit", func(t *testing.T) {
		// A file route is not bound by the JSON limit (1 MiB by default), nor
		// the JSON routes by the file limit.
		long := strings.Repeat("a", 1000)
		expect(t, k.ts.do(t, "POST", "/api/v1/agent/chats/"+k.room+"/messages", apiKey(k.helperKey),
			map[string]any{"message": map[string]any{"content": long, "mentions": []any{map[string]any{"id": k.scout.ID}}}}), 201, "")
	})
	if n := k.ts.count(t, `SELECT count(*) FROM file_chunks`); n != 2*7 {
		t.Fatalf("%d chunks stored, want those of the two accepted files", n)
	}
}

func TestFileDownloadRanges(t *testing.T) {
	k := newFilesWorld(t, nil, func(o *store.Options) { o.FileChunkSize = 16 })
	data := make([]byte, 100) // seven chunks, the last of 4 bytes
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	id := k.upload(t, k.helperKey, k.room, "letters.txt", data)["id"].(string)
	empty := k.upload(t, k.helperKey, k.room, "empty.txt", nil)["id"].(string)
	for _, tc := range []struct {
		name, file, rangeHeader string
		status                  int
		contentRange            string
		first, last             int // the span expected, for 200 and 206
	}{
		{"no range", id, "", 200, "", 0, 99},
		{"the first byte", id, "bytes=0-0", 206, "bytes 0-0/100", 0, 0},
		{"the last byte as a suffix", id, "bytes=-1", 206, "bytes 99-99/100", 99, 99},
		{"the last byte as an open span", id, "bytes=99-", 206, "bytes 99-99/100", 99, 99},
		{"a suffix longer than the file", id, "bytes=-500", 206, "bytes 0-99/100", 0, 99},
		{"a suffix of exactly the file", id, "bytes=-100", 206, "bytes 0-99/100", 0, 99},
		{"an end beyond the file clamps", id, "bytes=90-1000", 206, "bytes 90-99/100", 90, 99},
		{"one whole chunk", id, "bytes=16-31", 206, "bytes 16-31/100", 16, 31},
		{"across one chunk boundary", id, "bytes=15-16", 206, "bytes 15-16/100", 15, 16},
		{"across several chunks", id, "bytes=10-70", 206, "bytes 10-70/100", 10, 70},
		{"into the short last chunk", id, "bytes=95-", 206, "bytes 95-99/100", 95, 99},
		{"an end too large for any integer", id, "bytes=3-99999999999999999999999", 206, "bytes 3-99/100", 3, 99},
		{"the unit in capitals", id, "BYTES=1-2", 206, "bytes 1-2/100", 1, 2},
		{"an open span past the end", id, "bytes=100-", 416, "bytes */100", 0, 0},
		{"a span past the end", id, "bytes=150-160", 416, "bytes */100", 0, 0},
		{"a start too large for any integer", id, "bytes=99999999999999999999999-", 416, "bytes */100", 0, 0},
		{"an empty suffix", id, "bytes=-0", 416, "bytes */100", 0, 0},
		{"several spans: the whole file", id, "bytes=0-1,5-6", 200, "", 0, 99},
		{"garbage: the whole file", id, "bytes=abc", 200, "", 0, 99},
		{"an end before the start: the whole file", id, "bytes=5-3", 200, "", 0, 99},
		{"another unit: the whole file", id, "items=0-1", 200, "", 0, 99},
		{"a bare dash: the whole file", id, "bytes=-", 200, "", 0, 99},
		{"a signed position: the whole file", id, "bytes=+1-2", 200, "", 0, 99},
		{"an empty file: the first byte", empty, "bytes=0-0", 416, "bytes */0", 0, 0},
		{"an empty file: a suffix", empty, "bytes=-5", 416, "bytes */0", 0, 0},
		{"an empty file: an open span", empty, "bytes=0-", 416, "bytes */0", 0, 0},
		{"an empty file without a range", empty, "", 200, "", 0, -1},
		{"an empty file with garbage", empty, "bytes=x", 200, "", 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.download(t, k.scoutKey, k.room, tc.file, tc.rangeHeader)
			if tc.status == 416 {
				expect(t, r, 416, "range_not_satisfiable")
			} else {
				expect(t, r, tc.status, "")
				want := data[tc.first : tc.last+1]
				if tc.file == empty {
					want = []byte{}
				}
				if !bytes.Equal(r.body, want) {
					t.Fatalf("body %q, want %q", r.body, want)
				}
				if got := r.header.Get("Content-Length"); got != strconv.Itoa(len(want)) {
					t.Errorf("Content-Length = %s, want %d", got, len(want))
				}
				if r.header.Get("Content-Disposition") == "" || r.header.Get("Content-Type") != "text/plain" {
					t.Errorf("headers %v", r.header)
				}
			}
			if got := r.header.Get("Content-Range"); got != tc.contentRange {
				t.Errorf("Content-Range = %q, want %q", got, tc.contentRange)
			}
			if got := r.header.Get("Accept-Ranges"); got != "bytes" {
				t.Errorf("Accept-Ranges = %q", got)
			}
		})
	}
}

func TestFileDownloadNotFound(t *testing.T) {
	k := newFilesWorld(t, nil)
	mine := k.upload(t, k.helperKey, k.room, "mine.txt", []byte("mine"))["id"].(string)
	elsewhere := k.upload(t, k.helperKey, k.other, "elsewhere.txt", []byte("elsewhere"))["id"].(string)
	for _, tc := range []struct {
		name, key, room, id string
	}{
		{"another room's file through this room", k.scoutKey, k.room, elsewhere},
		{"another room's file through it, by a non-participant", k.scoutKey, k.other, elsewhere},
		{"an unknown id", k.scoutKey, k.room, nilID},
		{"an id that is no UUID", k.scoutKey, k.room, "mine.txt"},
		{"a room that does not exist", k.scoutKey, nilID, mine},
		{"a person who is not in the room", k.bobKey, k.room, mine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.download(t, tc.key, tc.room, tc.id, "bytes=0-0")
			expect(t, r, 404, "not_found")
			if r.header.Get("Content-Disposition") != "" {
				t.Errorf("a refusal with Content-Disposition %q", r.header.Get("Content-Disposition"))
			}
		})
	}
	// Alice reads the other room only through helper, which is in it.
	expect(t, k.download(t, k.aliceKey, k.other, elsewhere, ""), 200, "")
}

// An 'uploading' file, as another request sees it while the body arrives.
func TestFileBeingUploadedIsNotThereYet(t *testing.T) {
	k := newFilesWorld(t, nil, func(o *store.Options) { o.FileChunkSize = 4 })
	pr, pw := io.Pipe()
	body := []byte("first part, second part")
	done := make(chan *response, 1)
	go func() {
		done <- k.ts.do(t, "POST", k.files(k.helperKey, k.room), fileHeaders(k.helperKey, "slow.txt", hexDigest(body), ""), pr)
	}()
	if _, err := pw.Write(body[:12]); err != nil {
		t.Fatal(err)
	}
	var id string
	for deadline := time.Now().Add(30 * time.Second); k.ts.count(t, `SELECT count(*) FROM file_chunks`) < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first chunks never arrived")
		}
	}
	if err := k.ts.reader.QueryRow(`SELECT id FROM files WHERE status = 'uploading'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	expect(t, k.download(t, k.scoutKey, k.room, id, ""), 404, "not_found")
	k.ts.refused(t, "POST", "/api/v1/agent/chats/"+k.room+"/messages", apiKey(k.helperKey),
		map[string]any{"message": map[string]any{"content": "here", "mentions": []any{map[string]any{"id": k.scout.ID}}, "attachment_ids": []string{id}}},
		422, "unknown_attachment", "/message/attachment_ids/0")
	pw.Write(body[12:])
	pw.Close()
	r := <-done
	expect(t, r, 201, "")
	if r.data(t)["id"] != id {
		t.Fatalf("answered %v, want %s", r.data(t)["id"], id)
	}
	expect(t, k.download(t, k.scoutKey, k.room, id, ""), 200, "")
}

func TestFileAttachmentsOnMessages(t *testing.T) {
	t.Parallel() // its own server and database
	k := newFilesWorld(t, nil)
	plan := k.upload(t, k.helperKey, k.room, "plan.md", []byte("# Plan"))
	data := k.upload(t, k.aliceKey, k.room, "data.csv", []byte("a,b\n1,2\n"))
	elsewhere := k.upload(t, k.helperKey, k.other, "elsewhere.txt", []byte("x"))
	msgPath := "/api/v1/agent/chats/" + k.room + "/messages"
	send := func(ids ...any) map[string]any {
		return map[string]any{"message": map[string]any{"content": "see attached", "mentions": []any{map[string]any{"id": k.scout.ID}}, "attachment_ids": ids}}
	}
	for _, tc := range []struct {
		name     string
		ids      []any
		code     string
		pointers []string
	}{
		{"another room's file", []any{elsewhere["id"]}, "unknown_attachment", []string{"/message/attachment_ids/0"}},
		{"an unknown id after a good one", []any{plan["id"], nilID}, "unknown_attachment", []string{"/message/attachment_ids/1"}},
		{"an id that is no UUID", []any{"plan.md"}, "unknown_attachment", []string{"/message/attachment_ids/0"}},
		{"the same file twice", []any{plan["id"], plan["id"]}, "validation_error", []string{"/message/attachment_ids/1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.ts.refused(t, "POST", msgPath, apiKey(k.helperKey), send(tc.ids...), 422, tc.code, "")
			details := errorDetails(t, r)
			var got []string
			for p := range details {
				got = append(got, p)
			}
			if !reflect.DeepEqual(got, tc.pointers) {
				t.Fatalf("details at %v, want %v", got, tc.pointers)
			}
		})
	}

	scoutRoom := newListener(t, k.ts, k.scoutKey, "chat_room:"+k.room)
	aliceRoom := newListener(t, k.ts, k.aliceKey, "chat_room:"+k.room)
	r := k.ts.do(t, "POST", msgPath, apiKey(k.helperKey), send(data["id"], plan["id"]))
	expect(t, r, 201, "")
	msgID := r.data(t)["id"].(string)
	// The same file on a second message, this time sent by a person.
	expect(t, k.ts.do(t, "POST", "/api/v1/me/chats/"+k.room+"/messages", apiKey(k.aliceKey),
		map[string]any{"message": map[string]any{"content": "again", "mentions": []any{map[string]any{"id": k.helper.ID}}, "attachment_ids": []any{plan["id"]}}}), 201, "")

	want := []any{data, plan}
	check := func(t *testing.T, where string, m map[string]any) {
		t.Helper()
		if !reflect.DeepEqual(m["attachments"], want) {
			t.Errorf("%s: attachments = %v\nwant %v", where, m["attachments"], want)
		}
	}
	find := func(t *testing.T, where string, list []any) map[string]any {
		t.Helper()
		for _, m := range list {
			if m.(map[string]any)["id"] == msgID {
				return m.(map[string]any)
			}
		}
		t.Fatalf("%s: message %s not listed in %v", where, msgID, list)
		return nil
	}
	check(t, "scout's messages", find(t, "scout's messages", k.ts.do(t, "GET", msgPath, apiKey(k.scoutKey), nil).list(t)))
	check(t, "scout's context", find(t, "scout's context", k.ts.do(t, "GET", "/api/v1/agent/chats/"+k.room+"/context", apiKey(k.scoutKey), nil).list(t)))
	check(t, "helper's context", find(t, "helper's context", k.ts.do(t, "GET", "/api/v1/agent/chats/"+k.room+"/context", apiKey(k.helperKey), nil).list(t)))
	check(t, "alice's history", find(t, "alice's history", k.ts.do(t, "GET", "/api/v1/me/chats/"+k.room+"/messages", apiKey(k.aliceKey), nil).list(t)))
	next := k.ts.do(t, "GET", msgPath+"/next", apiKey(k.scoutKey), nil)
	expect(t, next, 200, "")
	check(t, "scout's next", next.data(t))
	check(t, "the push to scout", scoutRoom.await(t, "chat_room:"+k.room, "message_created", func(p map[string]any) bool { return p["id"] == msgID }))
	check(t, "the push to alice", aliceRoom.await(t, "chat_room:"+k.room, "message_created", func(p map[string]any) bool { return p["id"] == msgID }))
	// A state change pushes the message again, attachments included.
	expect(t, k.ts.do(t, "POST", msgPath+"/"+msgID+"/processing", apiKey(k.scoutKey), nil), 200, "")
	check(t, "the update pushed to alice", aliceRoom.await(t, "chat_room:"+k.room, "message_updated", func(p map[string]any) bool { return p["id"] == msgID }))
	history := k.ts.do(t, "GET", "/api/v1/me/chats/"+k.room+"/messages", apiKey(k.aliceKey), nil).list(t)
	if again := history[0].(map[string]any); !reflect.DeepEqual(again["attachments"], []any{plan}) {
		t.Errorf("second message attachments = %v", again["attachments"])
	}
	if n := k.ts.count(t, `SELECT count(*) FROM message_attachments WHERE file_id = ?`, plan["id"]); n != 2 {
		t.Errorf("plan is on %d messages, want 2", n)
	}
}

func TestDeletingARoomDeletesItsFiles(t *testing.T) {
	k := newFilesWorld(t, nil, func(o *store.Options) { o.FileChunkSize = 4 })
	gone := k.upload(t, k.helperKey, k.room, "gone.txt", []byte("twelve bytes"))["id"].(string)
	kept := k.upload(t, k.helperKey, k.other, "kept.txt", []byte("kept"))["id"].(string)
	expect(t, k.ts.do(t, "POST", "/api/v1/agent/chats/"+k.room+"/messages", apiKey(k.helperKey),
		map[string]any{"message": map[string]any{"content": "file", "mentions": []any{map[string]any{"id": k.scout.ID}}, "attachment_ids": []any{gone}}}), 201, "")
	expect(t, k.ts.do(t, "DELETE", "/api/v1/me/chats/"+k.room, apiKey(k.aliceKey), nil), 204, "")
	for query, want := range map[string]int{
		`SELECT count(*) FROM files WHERE id = '` + gone + `'`:                                            0,
		`SELECT count(*) FROM file_chunks WHERE file_id = '` + gone + `'`:                                 0,
		`SELECT count(*) FROM message_attachments WHERE file_id = '` + gone + `'`:                         0,
		`SELECT count(*) FROM file_chunks WHERE file_id = '` + kept + `'`:                                 1,
		`SELECT count(*) FROM messages m JOIN rooms r ON r.id = m.room_id WHERE r.deleted_at IS NOT NULL`: 1,
	} {
		if n := k.ts.count(t, query); n != want {
			t.Errorf("%s = %d, want %d", query, n, want)
		}
	}
	expect(t, k.download(t, k.helperKey, k.room, gone, ""), 404, "not_found")
	expect(t, k.download(t, k.helperKey, k.other, kept, ""), 200, "")
}

// An upload that fails halfway, for whatever reason, leaves no trace: its
// 'uploading' row and the chunks already stored are removed before the
// answer, or at once when nobody is left to answer.
func TestAbandonedUploadsLeaveNoTrace(t *testing.T) {
	k := newFilesWorld(t, func(c *Config) { c.TransferTimeout = testTransferTimeout; c.MaxFileBytes = 1000 },
		func(o *store.Options) { o.FileChunkSize = 16; o.QueueSize = 8 })
	file := bytes.Repeat([]byte("abandoned upload"), 30) // 480 bytes
	const sent = 100                                     // before the upload is abandoned: six chunks stored
	rest := func(c net.Conn) { sendChunk(c, file[sent:]); sendChunk(c, nil) }
	for _, tc := range []struct {
		name   string
		sha    string
		finish func(t *testing.T, c net.Conn)
		status int // 0: no answer, the client is gone
		code   string
	}{
		{"the client goes away", hexDigest(file), func(_ *testing.T, c net.Conn) { c.Close() }, 0, ""},
		{"the client stalls", hexDigest(file), func(*testing.T, net.Conn) {}, 408, "request_timeout"},
		{"the body passes the size limit", hexDigest(file), func(_ *testing.T, c net.Conn) { sendChunk(c, file); sendChunk(c, file) }, 413, "payload_too_large"},
		{"the body does not match its digest", hexDigest([]byte("other")), func(_ *testing.T, c net.Conn) { rest(c) }, 422, "validation_error"},
		{"the write queue is full", hexDigest(file), func(t *testing.T, c net.Conn) {
			release := k.ts.fillWriteQueue(t)
			refused := k.ts.db.WriterStats().Refused
			go func() { // frees the queue once the next chunk was refused
				for deadline := time.Now().Add(closeBound); k.ts.db.WriterStats().Refused == refused && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				release()
			}()
			rest(c)
		}, 503, "service_unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := k.ts.snapshot(t)
			conn, err := net.Dial("tcp", k.ts.http.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: chatd\r\nX-API-Key: %s\r\nX-File-Name: a.bin\r\nX-File-Sha256: %s\r\nTransfer-Encoding: chunked\r\n\r\n",
				k.files(k.helperKey, k.room), k.helperKey, tc.sha)
			sendChunk(conn, file[:sent])
			for deadline := time.Now().Add(closeBound); k.ts.count(t, `SELECT count(*) FROM file_chunks`) < sent/16; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the first chunks were never stored")
				}
			}
			tc.finish(t, conn)
			if tc.status == 0 {
				for deadline := time.Now().Add(closeBound); k.ts.snapshot(t) != before; time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						k.ts.unchanged(t, before)
					}
				}
				return
			}
			_ = conn.SetReadDeadline(time.Now().Add(testTransferTimeout + closeBound))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			r := &response{status: res.StatusCode, header: res.Header}
			r.body, _ = io.ReadAll(res.Body)
			k.ts.checkResponse(t, "POST", k.files(k.helperKey, k.room), r)
			expect(t, r, tc.status, tc.code)
			k.ts.unchanged(t, before)
		})
	}
}

// sendChunk writes b as one chunk of a chunked body; no b is the last chunk.
func sendChunk(w io.Writer, b []byte) {
	fmt.Fprintf(w, "%x\r\n%s\r\n", len(b), b)
	if len(b) == 0 {
		io.WriteString(w, "\r\n")
	}
}
