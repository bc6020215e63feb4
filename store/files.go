package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// DefaultFileChunkSize is how many bytes of a file one file_chunks row holds.
// 256 KiB keeps each upload job short (the single writer interleaves other
// rooms' messages between two chunks of a big file), bounds what an upload
// or a download holds in memory to about one chunk, and makes a small Range
// read touch at most two rows, while a 25 MiB file is still only 100 rows.
const DefaultFileChunkSize = 256 << 10

// MaxFileNameLen bounds a file's name in bytes.
const MaxFileNameLen = 255

// File is a file stored in a room.
type File struct {
	ID          string
	RoomID      string
	Name        string
	ContentType string
	Size        int64
	SHA256      string
	ChunkSize   int64
	InsertedAt  time.Time
}

// Attachment is a file as messages and uploads show it. It carries both size
// (the shape messages always had) and bytes (the Attachment shape the SDKs
// read), with the same value.
type Attachment struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	ContentType string  `json:"content_type"`
	Size        int64   `json:"size"`
	Bytes       int64   `json:"bytes"`
	SHA256      string  `json:"sha256"`
	HasThumb    bool    `json:"has_thumb"`
	ExpiresAt   *string `json:"expires_at"` // stored files never expire
}

// Attachment is f as messages list it.
func (f *File) Attachment() Attachment {
	return Attachment{ID: f.ID, Name: f.Name, ContentType: f.ContentType, Size: f.Size, Bytes: f.Size, SHA256: f.SHA256}
}

// FileInput describes an upload as the client declared it.
type FileInput struct {
	Name        string
	ContentType string // "" for application/octet-stream
	SHA256      string // hex digest of the body the client sends
}

// Problem pointers of an upload name the request headers that carry them.
const (
	fileNamePointer        = "/headers/x-file-name"
	fileSHA256Pointer      = "/headers/x-file-sha256"
	fileContentTypePointer = "/headers/content-type"
)

func checkFileInput(in *FileInput) error {
	p := Problems{}
	switch {
	case in.Name == "":
		p.Add(fileNamePointer, "is required")
	case len(in.Name) > MaxFileNameLen:
		p.Add(fileNamePointer, "must be at most %d bytes long", MaxFileNameLen)
	case !utf8.ValidString(in.Name):
		p.Add(fileNamePointer, "must be valid UTF-8")
	case strings.TrimSpace(in.Name) != in.Name:
		p.Add(fileNamePointer, "must not start or end with white space")
	case in.Name == "." || in.Name == "..":
		p.Add(fileNamePointer, "must name a file, not a directory")
	case strings.ContainsAny(in.Name, `/\`):
		p.Add(fileNamePointer, "must not contain a path separator")
	case strings.IndexFunc(in.Name, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0:
		p.Add(fileNamePointer, "must hold printable characters only")
	}
	in.SHA256 = strings.ToLower(in.SHA256)
	if in.SHA256 == "" {
		p.Add(fileSHA256Pointer, "is required: the hex SHA-256 digest of the body")
	} else if _, err := hex.DecodeString(in.SHA256); err != nil || len(in.SHA256) != 2*sha256.Size {
		p.Add(fileSHA256Pointer, "must be 64 hexadecimal characters (the SHA-256 digest of the body)")
	}
	if in.ContentType == "" {
		in.ContentType = "application/octet-stream"
	} else if _, _, err := mime.ParseMediaType(in.ContentType); err != nil || len(in.ContentType) > 255 {
		p.Add(fileContentTypePointer, "must be a media type such as text/plain, of at most 255 bytes")
	}
	return p.Err(CodeValidation)
}

// UploadFile stores body as a file of the room, for a sender who may post in
// it. The body is read one chunk at a time and each chunk is written by its
// own write job, so memory stays at one chunk and other writes go on between
// chunks; the file is 'uploading' until a final job checks its digest and
// marks it ready. Any failure removes what was written (a crash leaves an
// 'uploading' row for DiscardUnfinishedUploads). Read errors of body are
// returned as they are (wrapped), so the caller can tell a client's fault.
func (db *DB) UploadFile(ctx context.Context, sender Actor, roomID string, in FileInput, body io.Reader) (*File, error) {
	if err := checkFileInput(&in); err != nil {
		return nil, err
	}
	f := &File{ID: newID(), RoomID: roomID, Name: in.Name, ContentType: in.ContentType, ChunkSize: db.fileChunkSize}
	err := db.writeInRoom(ctx, sender, roomID, loadPostAccess, func(tx *Tx, _ *roomAccess) error {
		f.InsertedAt = tx.Now()
		_, err := tx.Exec(`INSERT INTO files (id, room_id, uploader_id, uploader_type, name, content_type, sha256, chunk_size, inserted_at)
			VALUES (?, ?, ?, ?, ?, ?, '', ?, ?)`, f.ID, roomID, sender.ID, sender.Type, f.Name, f.ContentType, f.ChunkSize, f.InsertedAt.UnixMicro())
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := db.receiveChunks(ctx, f, body); err != nil {
		db.discardUpload(ctx, f.ID)
		return nil, err
	}
	digest := f.SHA256
	err = db.Write(ctx, func(tx *Tx) error {
		if digest != in.SHA256 {
			return Problems{fileSHA256Pointer: {"does not match the body received (its SHA-256 is " + digest + ")"}}.Err(CodeValidation)
		}
		// The sender may have left, or the room gone, while the body arrived.
		if _, err := loadPostAccess(tx, sender, roomID); err != nil {
			return err
		}
		res, err := tx.Exec(`UPDATE files SET status = 'ready', size = ?, sha256 = ? WHERE id = ? AND status = 'uploading'`, f.Size, digest, f.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return notFound("chat room")
		}
		return nil
	})
	if err != nil {
		// A failed job's writes are rolled back, so the removal is a job of
		// its own.
		db.discardUpload(ctx, f.ID)
		return nil, err
	}
	return f, nil
}

// discardUploadPatience bounds how long the removal of a failed upload waits
// for room in a full write queue. An upload often fails because the queue is
// full (a chunk's write was refused), so giving up at the first refusal would
// leave its rows to the next start; waiting a little is cheap, since the
// client is being refused anyway.
const discardUploadPatience = 10 * time.Second

// discardUpload removes a failed upload at once. The request's context may be
// over (the client went away or was cut off), and the cleanup must still run.
func (db *DB) discardUpload(ctx context.Context, fileID string) {
	ctx = context.WithoutCancel(ctx)
	giveUp := time.Now().Add(discardUploadPatience)
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		err := db.Write(ctx, func(tx *Tx) error { return deleteFiles(tx, `id = ?`, fileID) })
		if err == nil {
			return
		}
		if !errors.Is(err, ErrQueueFull) || time.Now().After(giveUp) {
			db.log.Warn("could not remove a failed upload; the next start removes it", "file", fileID, "err", err)
			return
		}
		time.Sleep(pause)
	}
}

// receiveChunks reads body into f's chunks, setting f's size and digest.
func (db *DB) receiveChunks(ctx context.Context, f *File, body io.Reader) error {
	h := sha256.New()
	buf := make([]byte, f.ChunkSize)
	for n := int64(0); ; n++ {
		got, rerr := io.ReadFull(body, buf)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return fmt.Errorf("read upload body: %w", rerr)
		}
		if got == 0 {
			break
		}
		chunk := buf[:got]
		h.Write(chunk)
		f.Size += int64(got)
		// Write returns once the chunk is committed, so buf is free again.
		err := db.Write(ctx, func(tx *Tx) error {
			var one int
			err := tx.QueryRow(`SELECT 1 FROM files WHERE id = ? AND status = 'uploading'`, f.ID).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return notFound("chat room") // the room was deleted meanwhile
			}
			if err != nil {
				return err
			}
			_, err = tx.Exec(`INSERT INTO file_chunks (file_id, n, data) VALUES (?, ?, ?)`, f.ID, n, chunk)
			return err
		})
		if err != nil {
			return err
		}
		if rerr != nil {
			break
		}
	}
	f.SHA256 = hex.EncodeToString(h.Sum(nil))
	return nil
}

// deleteFiles deletes the files matching cond (on table files) and their
// chunks.
func deleteFiles(tx *Tx, cond string, args ...any) error {
	if _, err := tx.Exec(`DELETE FROM file_chunks WHERE file_id IN (SELECT id FROM files WHERE `+cond+`)`, args...); err != nil {
		return err
	}
	_, err := tx.Exec(`DELETE FROM files WHERE `+cond, args...)
	return err
}

// DiscardUnfinishedUploads deletes the files left 'uploading' by a process
// that stopped mid-upload, of those begun before startedBefore, and returns
// how many there were. It is for the start of a server, before it takes
// uploads: a CLI command opening the database beside a running server must
// not call it, and a node of several must pass a time no upload in
// progress on another node can be from.
func (db *DB) DiscardUnfinishedUploads(ctx context.Context, startedBefore time.Time) (int, error) {
	var n int
	before := startedBefore.UnixMicro()
	err := db.Write(ctx, func(tx *Tx) error {
		if err := tx.QueryRow(`SELECT count(*) FROM files WHERE status = 'uploading' AND inserted_at < ?`, before).Scan(&n); err != nil || n == 0 {
			return err
		}
		return deleteFiles(tx, `status = 'uploading' AND inserted_at < ?`, before)
	})
	return n, err
}

const fileColumns = `id, room_id, name, content_type, size, sha256, chunk_size, inserted_at`

func scanFile(row interface{ Scan(...any) error }) (*File, error) {
	var f File
	var ins int64
	if err := row.Scan(&f.ID, &f.RoomID, &f.Name, &f.ContentType, &f.Size, &f.SHA256, &f.ChunkSize, &ins); err != nil {
		return nil, err
	}
	f.InsertedAt = fromMicros(ins)
	return &f, nil
}

// RoomFile returns a ready file of a room the actor may read. Another room's
// file, an unknown or malformed id and a room the actor cannot read are all
// ErrNotFound alike.
func (db *DB) RoomFile(ctx context.Context, actor Actor, roomID, fileID string) (*File, error) {
	var f *File
	err := db.readTx(ctx, func(q readQ) error {
		if _, err := loadAccess(q, actor, roomID); err != nil {
			return err
		}
		var err error
		f, err = readyFile(q, roomID, fileID)
		return err
	})
	return f, err
}

func readyFile(q queryer, roomID, fileID string) (*File, error) {
	if !ValidID(fileID) {
		return nil, notFound("file")
	}
	f, err := scanFile(q.QueryRow(`SELECT `+fileColumns+` FROM files WHERE id = ? AND room_id = ? AND status = 'ready' AND expired_at IS NULL`, fileID, roomID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("file")
	}
	return f, err
}

// CopyFileRange writes bytes first..last (inclusive) of f to w, reading only
// the chunks that hold them. Each chunk is read by its own short query and
// copied out before it is written: a slow client then never holds a read
// snapshot open, which would keep the WAL from being checkpointed.
func (db *DB) CopyFileRange(ctx context.Context, f *File, first, last int64, w io.Writer) error {
	if first > last {
		return nil
	}
	buf := make([]byte, 0, f.ChunkSize)
	for n := first / f.ChunkSize; n <= last/f.ChunkSize; n++ {
		var err error
		if buf, err = db.readChunk(ctx, f.ID, n, buf[:0]); err != nil {
			return err
		}
		start, end := int64(0), int64(len(buf))
		if base := n * f.ChunkSize; base < first {
			start = first - base
		}
		if base := n * f.ChunkSize; base+end-1 > last {
			end = last - base + 1
		}
		if start >= end || end > int64(len(buf)) {
			return fmt.Errorf("file %s: chunk %d holds %d bytes, short of the file's size", f.ID, n, len(buf))
		}
		if _, err := w.Write(buf[start:end]); err != nil {
			return err
		}
	}
	return nil
}

// readChunk appends chunk n of a file to buf.
func (db *DB) readChunk(ctx context.Context, fileID string, n int64, buf []byte) ([]byte, error) {
	rows, err := db.query(ctx, `SELECT data FROM file_chunks WHERE file_id = ? AND n = ?`, fileID, n)
	if err != nil {
		return buf, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return buf, err
		}
		return buf, notFound("file") // deleted with its room while being read
	}
	var raw sql.RawBytes
	if err := rows.Scan(&raw); err != nil {
		return buf, err
	}
	buf = append(buf, raw...)
	return buf, rows.Close()
}

// attachFiles loads the attachments of msgs, in the order each message
// listed them.
func attachFiles(q queryer, msgs []*Message) error {
	if len(msgs) == 0 {
		return nil
	}
	bySeq, seqs := byKey(msgs, func(m *Message) int64 { return m.Seq })
	rows, err := q.Query(`SELECT ma.message_seq, `+prefixed("f.", fileColumns)+` FROM message_attachments ma JOIN files f ON f.id = ma.file_id
		WHERE ma.message_seq IN `+inList(len(seqs))+` ORDER BY ma.message_seq, ma.position`, seqs...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var f File
		var ins int64
		if err := rows.Scan(&seq, &f.ID, &f.RoomID, &f.Name, &f.ContentType, &f.Size, &f.SHA256, &f.ChunkSize, &ins); err != nil {
			return err
		}
		bySeq[seq].Attachments = append(bySeq[seq].Attachments, f.Attachment())
	}
	return rows.Err()
}

// resolveAttachments finds the ready files of the room that ids name, in
// order, and appends a problem for each id that names none.
func resolveAttachments(tx *Tx, c *codedProblems, roomID string, ids []string) ([]*File, error) {
	files := make([]*File, 0, len(ids))
	seen := map[string]int{}
	for i, id := range ids {
		if first, dup := seen[id]; dup {
			c.add(CodeValidation, Pointer("message", "attachment_ids", i), "lists the same file as entry "+strconv.Itoa(first))
			continue
		}
		seen[id] = i
		f, err := readyFile(tx, roomID, id)
		if ErrorCode(err) == CodeNotFound {
			c.add(CodeUnknownAttachment, Pointer("message", "attachment_ids", i), "is not a file of this room: "+id)
			continue
		}
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// insertAttachments records which files msg carries.
func insertAttachments(tx *Tx, msg *Message, files []*File) error {
	for i, f := range files {
		if _, err := tx.Exec(`INSERT INTO message_attachments (message_seq, position, file_id) VALUES (?, ?, ?)`, msg.Seq, i, f.ID); err != nil {
			return err
		}
		msg.Attachments = append(msg.Attachments, f.Attachment())
	}
	return nil
}
