package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"
	"time"
)

// A server killed in the middle of an upload leaves an 'uploading' file and
// some of its chunks; the next `chatd serve` removes them before it listens.
func TestServeDiscardsUploadsACrashLeftUnfinished(t *testing.T) {
	skipIfShort(t, "kills and restarts a server")
	db, alice := newDatabaseWithAlice(t)
	srv := startServer(t, db, "--max-file-size", "1000000")
	room := srv.createRoom(t, alice.APIKey)

	// --max-file-size is the upload's bound.
	over := bytes.Repeat([]byte("x"), 1000001)
	sum := sha256.Sum256(over)
	res, err := srv.upload(alice.APIKey, room, bytes.NewReader(over), hex.EncodeToString(sum[:]))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 413 {
		t.Fatalf("an upload over --max-file-size: %d", res.StatusCode)
	}

	pr, pw := io.Pipe()
	go func() {
		if res, err := srv.upload(alice.APIKey, room, pr, hex.EncodeToString(sum[:])); err == nil {
			res.Body.Close()
		}
	}()
	if _, err := pw.Write(over[:600_000]); err != nil { // two whole chunks and part of a third
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); countRows(t, db, "file_chunks") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the upload's first chunks were never stored")
		}
	}
	if n := countRows(t, db, "files WHERE status = 'uploading'"); n != 1 {
		t.Fatalf("%d uploading files", n)
	}
	srv.kill(t)
	pw.CloseWithError(io.ErrClosedPipe)

	srv = startServer(t, db)
	if n := countRows(t, db, "files") + countRows(t, db, "file_chunks"); n != 0 {
		t.Fatalf("%d rows of the unfinished upload are left after the restart", n)
	}
	srv.stop(t)
}
