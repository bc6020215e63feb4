package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Clients that trickle a request body, or stop reading a response, are cut
// off by a running `chatd serve` at its default --transfer-timeout (15 s),
// and a trickled upload leaves nothing in the database. The subtests run
// side by side, each against a server of its own, in about 17 s.
func TestServeCutsSlowTransfers(t *testing.T) {
	skipIfShort(t, "waits for the 15 s transfer timeout")
	t.Run("requests trickled a byte every 3 s", func(t *testing.T) {
		t.Parallel()
		checkTrickledRequestsAreCut(t, startSlowTransferServer(t))
	})
	t.Run("a download whose reader stops", func(t *testing.T) {
		t.Parallel()
		checkStalledDownloadIsCut(t, startSlowTransferServer(t, "--max-file-size", "33554432"))
	})
}

// slowTransferBound is how soon the server must have cut a slow transfer:
// twice --transfer-timeout, for a loaded machine, far below what the
// trickles would take.
const slowTransferBound = 30 * time.Second

// checkTrickledRequestsAreCut sends 30 uploads and a JSON body a byte every
// 3 s: each is answered 408 and closed, and the uploads' rows, there while
// they lasted, are gone.
func checkTrickledRequestsAreCut(t *testing.T, s *slowTransferServer) {
	const uploads = 30
	heads := []string{s.head("POST", "/api/v1/me/chats", "Content-Type: application/json\r\nContent-Length: 1000")}
	for range uploads {
		heads = append(heads, s.head("POST", "/api/v1/me/chats/"+s.room+"/files",
			"X-File-Name: slow.bin\r\nX-File-Sha256: "+strings.Repeat("0", 64)+"\r\nContent-Length: 1000"))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	for _, head := range heads {
		wg.Go(func() {
			status, code, closedAfter := s.trickle(head, 3*time.Second, slowTransferBound)
			if status != 408 || code != "request_timeout" || closedAfter < 0 {
				t.Errorf("%s: answered %d %s, connection closed after %v (-1: still open after %v)",
					strings.SplitN(head, "\r\n", 2)[0], status, code, closedAfter, slowTransferBound)
			}
			mu.Lock()
			slowest = max(slowest, closedAfter)
			mu.Unlock()
		})
	}
	// Each upload holds its 'uploading' row while it lasts. (No Fatal
	// before Wait: the trickles report on t.)
	for deadline := time.Now().Add(10 * time.Second); countRows(t, s.db, "files WHERE status = 'uploading'") != uploads; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("%d uploads under way, want %d", countRows(t, s.db, "files"), uploads)
			break
		}
	}
	wg.Wait()
	if !t.Failed() {
		t.Logf("all %d trickled requests were answered 408 and closed within %.1fs", len(heads), slowest.Seconds())
	}
	if n := countRows(t, s.db, "files") + countRows(t, s.db, "file_chunks"); n != 0 {
		t.Errorf("%d rows of the cut uploads are left", n)
	}
	if n := countRows(t, s.db, "rooms"); n != 1 {
		t.Errorf("%d rooms, want only the test's own", n)
	}
}

// checkStalledDownloadIsCut stops reading a download: the server closes its
// connection, and the client has a true prefix of the file.
func checkStalledDownloadIsCut(t *testing.T, s *slowTransferServer) {
	// Larger than the socket buffers of both ends, which would
	// otherwise take it all on the client's behalf.
	file := bytes.Repeat([]byte("a stalled download"), 32<<20/18)
	id := s.upload(t, file)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.srv.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(64 << 10)
	io.WriteString(conn, s.head("GET", "/api/v1/me/chats/"+s.room+"/files/"+id, "")+"\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("download: %v %v", res, err)
	}
	stopped, sockets := time.Now(), processSockets(t, s.srv.cmd.Process.Pid)
	for processSockets(t, s.srv.cmd.Process.Pid) >= sockets {
		if time.Since(stopped) > slowTransferBound {
			t.Fatalf("the server still held the download's connection %v after its client stopped reading", slowTransferBound)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the server closed the download's connection %.1fs after its client stopped reading", time.Since(stopped).Seconds())
	got, _ := io.ReadAll(res.Body)
	if len(got) >= len(file) || !bytes.Equal(got, file[:len(got)]) {
		t.Fatalf("got %d bytes of %d, want a true prefix of the file", len(got), len(file))
	}
}

// slowTransferServer is a running server with a person and a room of theirs.
type slowTransferServer struct {
	srv           *serverProc
	db, key, room string
}

func startSlowTransferServer(t *testing.T, flags ...string) *slowTransferServer {
	t.Helper()
	db, alice := newDatabaseWithAlice(t)
	s := &slowTransferServer{db: db, key: alice.APIKey}
	s.srv = startServer(t, s.db, flags...)
	s.room = s.srv.createRoom(t, s.key)
	return s
}

// head is a request's header block with the person's key and the extra
// header lines, without the blank line that ends it.
func (s *slowTransferServer) head(method, path, extra string) string {
	h := method + " " + path + " HTTP/1.1\r\nHost: chatd\r\nX-API-Key: " + s.key + "\r\n"
	if extra != "" {
		h += extra + "\r\n"
	}
	return h
}

// trickle sends head and then a body of spaces, one every interval, on a
// connection of its own, and reads the answer. closedAfter is how long after
// the request the server closed the connection, -1 if still open at bound.
func (s *slowTransferServer) trickle(head string, every, bound time.Duration) (status int, code string, closedAfter time.Duration) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.srv.url, "http://"))
	if err != nil {
		return 0, err.Error(), -1
	}
	defer conn.Close()
	start := time.Now()
	go func() {
		for _, err := io.WriteString(conn, head+"\r\n"); err == nil; _, err = conn.Write([]byte(" ")) {
			time.Sleep(every)
		}
	}()
	_ = conn.SetReadDeadline(start.Add(slowTransferBound))
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err.Error(), -1
	}
	var env struct{ Error struct{ Code string } }
	body, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(body, &env)
	if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) {
		return res.StatusCode, env.Error.Code, -1
	}
	return res.StatusCode, env.Error.Code, time.Since(start)
}

// upload stores file in the room and returns its id.
func (s *slowTransferServer) upload(t *testing.T, file []byte) string {
	t.Helper()
	res, err := s.srv.upload(s.key, s.room, bytes.NewReader(file), fmt.Sprintf("%x", sha256.Sum256(file)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct{ Data struct{ ID string } }
	if body, _ := io.ReadAll(res.Body); res.StatusCode != 201 || json.Unmarshal(body, &out) != nil {
		t.Fatalf("upload: %d %s", res.StatusCode, body)
	}
	return out.Data.ID
}

// processSockets counts the sockets process pid has open, as Linux lists them.
func processSockets(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Skipf("cannot see the server's sockets: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}
