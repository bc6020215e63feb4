package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"
)

func fileDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// failingReader yields its data, then fails as a dropped connection does.
type failingReader struct{ data *bytes.Reader }

var errDropped = errors.New("connection dropped")

func (f *failingReader) Read(p []byte) (int, error) {
	n, _ := f.data.Read(p)
	if n == 0 {
		return 0, errDropped
	}
	return n, nil
}

// A server that stopped mid-upload leaves an 'uploading' file and some of
// its chunks; opening the database keeps them (a CLI command may open it
// beside a running server), and the server's start discards them.
func TestDiscardUnfinishedUploads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chatd.db")
	ctx := context.Background()
	db := openTestDBAt(t, path, Options{FileChunkSize: 4})
	alice, _ := mustUser(t, db, "alice")
	room, err := db.CreateRoom(ctx, UserActor(alice), NewRoom{})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := db.UploadFile(ctx, UserActor(alice), room.ID, FileInput{Name: "kept.txt", SHA256: fileDigest([]byte("kept file"))}, bytes.NewReader([]byte("kept file")))
	if err != nil {
		t.Fatal(err)
	}
	// What the crashed process had written: the row and two chunks.
	err = db.Write(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(`INSERT INTO files (id, room_id, uploader_id, uploader_type, name, content_type, sha256, chunk_size, inserted_at)
			VALUES ('0190a000-0000-7000-8000-0000000000f1', ?, ?, 'User', 'half.bin', 'application/octet-stream', '', 4, 0)`, room.ID, alice.ID); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO file_chunks (file_id, n, data) VALUES ('0190a000-0000-7000-8000-0000000000f1', 0, ?),
			('0190a000-0000-7000-8000-0000000000f1', 1, ?)`, []byte{0, 1, 2, 3}, []byte{4, 5, 6, 7})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	db = openTestDBAt(t, path, Options{})
	if n := rawCount(t, db, `SELECT count(*) FROM files WHERE status = 'uploading'`); n != 1 {
		t.Fatalf("opening the database removed the unfinished upload (%d left); only the server's start may", n)
	}
	if n, err := db.DiscardUnfinishedUploads(ctx, time.UnixMicro(0)); err != nil || n != 0 {
		t.Fatalf("discarded %d uploads begun before it was begun, %v", n, err)
	}
	n, err := db.DiscardUnfinishedUploads(ctx, time.Now())
	if err != nil || n != 1 {
		t.Fatalf("discarded %d, %v; want 1", n, err)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM files`); n != 1 {
		t.Fatalf("%d files left, want the finished one", n)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM file_chunks WHERE file_id != ?`, kept.ID); n != 0 {
		t.Fatalf("%d chunks of the unfinished upload left", n)
	}
	if n, err := db.DiscardUnfinishedUploads(ctx, time.Now()); err != nil || n != 0 {
		t.Fatalf("second run discarded %d, %v", n, err)
	}
	var got bytes.Buffer
	if err := db.CopyFileRange(ctx, kept, 0, kept.Size-1, &got); err != nil || got.String() != "kept file" {
		t.Fatalf("the finished file reads %q, %v", got.String(), err)
	}
}

// A file is stored in chunks of the configured size, and any span reads
// back exactly, whichever chunks it crosses.
func TestFileChunksAndRanges(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, Options{FileChunkSize: 7})
	alice, _ := mustUser(t, db, "alice")
	room, _ := db.CreateRoom(ctx, UserActor(alice), NewRoom{})
	data := make([]byte, 50)
	for i := range data {
		data[i] = byte(i)
	}
	f, err := db.UploadFile(ctx, UserActor(alice), room.ID, FileInput{Name: "n.bin", SHA256: fileDigest(data)}, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if f.Size != 50 || f.ChunkSize != 7 || f.SHA256 != fileDigest(data) {
		t.Fatalf("file = %+v", f)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM file_chunks WHERE file_id = ?`, f.ID); n != 8 {
		t.Fatalf("%d chunks, want 8 (7 full and one of 1 byte)", n)
	}
	for first := int64(0); first < 50; first++ {
		for last := first; last < 50; last++ {
			var got bytes.Buffer
			if err := db.CopyFileRange(ctx, f, first, last, &got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), data[first:last+1]) {
				t.Fatalf("bytes %d-%d = %v", first, last, got.Bytes())
			}
		}
	}
}

// An upload that fails for any reason leaves nothing behind, at once: also
// when it failed because the write queue was full, which its removal then
// waits out.
func TestFailedUploadsLeaveNothing(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, Options{FileChunkSize: 4})
	alice, _ := mustUser(t, db, "alice")
	room, _ := db.CreateRoom(ctx, UserActor(alice), NewRoom{})
	data := []byte("twenty bytes of data")
	for _, tc := range []struct {
		name string
		sha  string
		body func(t *testing.T) io.Reader
		want func(error) bool
	}{
		{"digest mismatch", fileDigest([]byte("other")),
			func(*testing.T) io.Reader { return bytes.NewReader(data) },
			func(err error) bool { return ErrorCode(err) == CodeValidation }},
		{"connection dropped", fileDigest(data),
			func(*testing.T) io.Reader { return &failingReader{bytes.NewReader(data)} },
			func(err error) bool { return errors.Is(err, errDropped) }},
		{"the write queue full after two chunks", fileDigest(data),
			func(t *testing.T) io.Reader {
				return io.MultiReader(bytes.NewReader(data[:8]), &beforeRead{do: func() { fillQueueBriefly(t, db) }, r: bytes.NewReader(data[8:])})
			},
			func(err error) bool { return errors.Is(err, ErrQueueFull) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.UploadFile(ctx, UserActor(alice), room.ID, FileInput{Name: "a.txt", SHA256: tc.sha}, tc.body(t))
			if !tc.want(err) {
				t.Fatalf("err = %v", err)
			}
			if n := rawCount(t, db, `SELECT (SELECT count(*) FROM files) + (SELECT count(*) FROM file_chunks)`); n != 0 {
				t.Fatalf("%d rows left", n)
			}
		})
	}
}

// beforeRead runs do once, before the first read of r.
type beforeRead struct {
	do func()
	r  io.Reader
}

func (b *beforeRead) Read(p []byte) (int, error) {
	if b.do != nil {
		b.do()
		b.do = nil
	}
	return b.r.Read(p)
}

// fillQueueBriefly fills the writer's queue, so that the next write is
// refused, and frees it a moment later.
func fillQueueBriefly(t *testing.T, db *DB) {
	release := blockWriter(t, db)
	for db.WriteAsync(func(*Tx) error { return nil }) == nil {
	}
	freed := make(chan struct{})
	time.AfterFunc(100*time.Millisecond, func() { release(); close(freed) })
	t.Cleanup(func() { <-freed })
}
